// crescent — monotonic time as values.
//
// The sans-IO layers (stack/wire, stack/tcp) never read a clock: every entry
// point takes `Instant now`. The engine derives Instants from the TSC; tests
// advance a virtual clock.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>

namespace crescent {

using Duration = std::chrono::nanoseconds;
using namespace std::chrono_literals;

// A point on a monotonic clock with an arbitrary epoch, in nanoseconds.
class Instant {
public:
    constexpr Instant() = default;
    static constexpr Instant from_nanos(int64_t ns) { return Instant(ns); }
    static constexpr Instant zero() { return Instant(0); }
    // Far future: "no deadline".
    static constexpr Instant never() { return Instant(INT64_MAX); }

    constexpr int64_t nanos() const { return ns_; }
    constexpr Duration since_epoch() const { return Duration(ns_); }
    constexpr bool is_never() const { return ns_ == INT64_MAX; }

    constexpr Instant operator+(Duration d) const { return is_never() ? *this : Instant(ns_ + d.count()); }
    constexpr Instant operator-(Duration d) const { return Instant(ns_ - d.count()); }
    constexpr Duration operator-(Instant o) const { return Duration(ns_ - o.ns_); }
    constexpr Instant& operator+=(Duration d) { return *this = *this + d; }
    constexpr auto operator<=>(const Instant&) const = default;

private:
    constexpr explicit Instant(int64_t ns) : ns_(ns) {}
    int64_t ns_ = 0;
};

constexpr Instant min(Instant a, Instant b) { return a < b ? a : b; }

} // namespace crescent
