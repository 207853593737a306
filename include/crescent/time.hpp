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

// A span of time in nanoseconds (signed: a difference of two Instants may be
// negative). Write literals with the std::chrono suffixes (10ms, 200us).
using Duration = std::chrono::nanoseconds;
using namespace std::chrono_literals;

// A point on a monotonic clock with an arbitrary epoch, in nanoseconds.
class Instant {
public:
    constexpr Instant() = default;
    // The Instant `ns` nanoseconds after the clock's epoch (inverse of nanos()).
    static constexpr Instant from_nanos(int64_t ns) { return Instant(ns); }
    // The clock's epoch itself; where virtual clocks in tests start.
    static constexpr Instant zero() { return Instant(0); }
    // Far future: "no deadline".
    static constexpr Instant never() { return Instant(INT64_MAX); }

    // Nanoseconds since the epoch; INT64_MAX for never().
    constexpr int64_t nanos() const { return ns_; }
    // nanos() as a Duration.
    constexpr Duration since_epoch() const { return Duration(ns_); }
    // True for never(): the value that stands for "no deadline".
    constexpr bool is_never() const { return ns_ == INT64_MAX; }

    // `d` later; never() stays never() (a deadline pushed back stays absent).
    constexpr Instant operator+(Duration d) const { return is_never() ? *this : Instant(ns_ + d.count()); }
    // `d` earlier (no saturation: do not apply to never()).
    constexpr Instant operator-(Duration d) const { return Instant(ns_ - d.count()); }
    // The time from `o` to this Instant (negative when `o` is later).
    constexpr Duration operator-(Instant o) const { return Duration(ns_ - o.ns_); }
    // *this = *this + d (never() stays never()).
    constexpr Instant& operator+=(Duration d) { return *this = *this + d; }
    // Chronological order; never() is later than every other Instant.
    constexpr auto operator<=>(const Instant&) const = default;

private:
    constexpr explicit Instant(int64_t ns) : ns_(ns) {}
    int64_t ns_ = 0;
};

// The earlier of two Instants (the nearer of two deadlines).
constexpr Instant min(Instant a, Instant b) { return a < b ? a : b; }

} // namespace crescent
