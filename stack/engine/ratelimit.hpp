// crescent — rate limiting of the engine's data-path warnings.
//
// A data-path event (a frame dropped for an unresolved neighbour, a full TX
// ring, an empty pool) can happen millions of times a second; each is a
// counter, and at most one log line per event kind per engine per window
// (1 s) says that it happens and what to do. The first event of a quiet
// period is reported at once (count 1); the ones that follow within the
// window are only counted, and the next event after the window reports them
// all: "TX ring full 1234 times in the last 1.0 s: ...".
//
// Cost when no line is due: one increment and one compare of the caller's
// clock (no formatting, no allocation). Threads: one limiter per engine and
// kind, used by that engine only. No DPDK, no clock of its own.
#pragma once

#include <cstdint>

#include <crescent/time.hpp>

namespace crescent::engine {

class RateLimit {
public:
    RateLimit() = default;  // a 1 s window
    explicit RateLimit(Duration window) : window_(window) {}

    // Count one event at `now`. True when a line is due: then `count()` is
    // the number of events it reports (this one included) and `span()` the
    // time they cover; the counting restarts with the next event.
    bool hit(Instant now) {
        ++pending_;
        if (now < next_) return false;
        count_ = pending_;
        span_ = started_ ? now - since_ : Duration(0);
        pending_ = 0;
        since_ = now;
        next_ = now + window_;
        started_ = true;
        return true;
    }
    uint64_t count() const { return count_; }
    Duration span() const { return span_; }
    double span_seconds() const { return double(span_.count()) / 1e9; }
    // Events counted since the last line (not yet reported).
    uint64_t suppressed() const { return pending_; }

private:
    Duration window_ = std::chrono::seconds(1);
    Instant next_ = Instant::from_nanos(INT64_MIN);  // no line before this
    Instant since_ = Instant::from_nanos(0);         // time of the last line
    bool started_ = false;                           // a line was emitted
    uint64_t pending_ = 0;                           // events since the last line
    uint64_t count_ = 0;                             // events in the line just due
    Duration span_{0};
};

} // namespace crescent::engine
