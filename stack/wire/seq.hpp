// crescent — wrap-aware TCP sequence numbers (RFC 9293 §3.4, RFC 1982 arithmetic).
#pragma once

#include <cstdint>

namespace crescent::wire {

// A 32-bit sequence number. Comparison is modulo 2^32: a < b iff b is "after" a
// by less than 2^31. Differences are signed.
class SeqNum {
public:
    constexpr SeqNum() = default;
    constexpr explicit SeqNum(uint32_t v) : v_(v) {}
    constexpr uint32_t raw() const { return v_; }

    constexpr SeqNum operator+(uint32_t n) const { return SeqNum(v_ + n); }
    constexpr SeqNum operator-(uint32_t n) const { return SeqNum(v_ - n); }
    constexpr SeqNum& operator+=(uint32_t n) { v_ += n; return *this; }
    // Signed distance this - o.
    constexpr int32_t operator-(SeqNum o) const { return int32_t(v_ - o.v_); }

    constexpr bool operator==(const SeqNum&) const = default;
    constexpr bool operator<(SeqNum o) const { return int32_t(v_ - o.v_) < 0; }
    constexpr bool operator<=(SeqNum o) const { return int32_t(v_ - o.v_) <= 0; }
    constexpr bool operator>(SeqNum o) const { return int32_t(v_ - o.v_) > 0; }
    constexpr bool operator>=(SeqNum o) const { return int32_t(v_ - o.v_) >= 0; }

private:
    uint32_t v_ = 0;
};

constexpr SeqNum seq_max(SeqNum a, SeqNum b) { return a < b ? b : a; }
constexpr SeqNum seq_min(SeqNum a, SeqNum b) { return a < b ? a : b; }
// lo <= s < hi, modulo 2^32.
constexpr bool seq_in(SeqNum s, SeqNum lo, SeqNum hi) { return uint32_t(s - lo) < uint32_t(hi - lo); }

} // namespace crescent::wire
