// crescent — a per-core hashed timing wheel (Varghese & Lauck, scheme 6).
//
// Driven by the engine's TSC-derived Instant: `advance(now)` runs every timer
// whose deadline is <= now, in deadline order within a tick. Slots are
// `tick` wide; a timer further away than one revolution stays in its slot and
// is skipped until its revolution comes (the deadline is compared exactly).
// Nodes live in a slab with a free list and are linked into their slot, so
// add and cancel are O(1) and the steady state does not allocate (beyond
// std::function's own storage for large captures).
//
// A busy loop calls advance() on every poll, so a poll with nothing due must
// not depend on how many timers are pending: advance() compares `now` with a
// lower bound of the earliest deadline (`floor_`: lowered by add(), left alone
// by cancel(), raised by the slot walk to the next tick boundary or to an
// undue deadline of the ticks it walked). Cancelling the earliest timer then
// costs nothing; the polls after it walk one slot per tick until the next
// deadline — not a scan of every timer on every poll, as keeping the exact
// minimum would cost when the earliest of many per-connection timers is
// cancelled over and over. next_deadline() is exact (a cached scan), for a
// loop about to sleep.
//
// Threads: one wheel per engine core; not thread-safe. No DPDK, no clock.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <crescent/time.hpp>

namespace crescent::engine {

class TimerWheel {
public:
    using Id = uint64_t;  // (generation << 32) | slab index; 0 is never a valid id
    static constexpr Id kNoTimer = 0;

    // `slots` must be a power of two; `tick` > 0.
    explicit TimerWheel(Instant start, Duration tick = std::chrono::microseconds(16), uint32_t slots = 4096);

    Id add(Instant deadline, std::function<void()> fn);
    // True when the timer was pending (it will not run).
    bool cancel(Id id);
    // Run every timer with deadline <= now; returns how many ran. Callbacks may
    // add or cancel timers (a timer added for <= now runs in a later advance).
    size_t advance(Instant now);

    size_t pending() const { return live_; }
    // Whether advance(now) could run anything: false while `now` is below the
    // floor (always, with no timer pending). The busy loop's test, inline, so
    // that a poll with nothing due makes no call.
    bool may_be_due(Instant now) const { return now >= floor_; }
    // Earliest deadline among pending timers (Instant::never() if none); O(1)
    // when cached, otherwise a scan of the occupied nodes (after the earliest
    // was cancelled or ran). advance() does not need it.
    Instant next_deadline() const;
    // How many times next_deadline() scanned the nodes (tests: advance() never does).
    uint64_t scans() const { return scans_; }

private:
    static constexpr uint32_t kNil = UINT32_MAX;
    struct Node {
        Instant deadline;
        std::function<void()> fn;
        uint32_t gen = 1;
        uint32_t prev = kNil, next = kNil;
        uint32_t slot = kNil;   // kNil when free
    };
    uint64_t tick_of(Instant t) const { return uint64_t((t - start_).count()) / uint64_t(tick_.count()); }
    Instant tick_start(uint64_t tick) const { return start_ + tick_ * int64_t(tick); }
    void link(uint32_t idx, uint32_t slot);
    void unlink(uint32_t idx);
    void release(uint32_t idx);

    Instant start_;
    Duration tick_;
    uint32_t mask_;
    uint64_t cur_tick_ = 0;            // every tick < cur_tick_ has been processed
    std::vector<uint32_t> heads_;      // slot -> first node (kNil when empty)
    std::vector<Node> nodes_;
    std::vector<uint32_t> free_;
    size_t live_ = 0;
    Instant floor_ = Instant::never();  // <= every pending deadline (advance's test)
    mutable Instant min_cache_ = Instant::never();
    mutable bool min_valid_ = true;
    mutable uint64_t scans_ = 0;
    std::vector<uint32_t> due_;        // scratch for advance()
    std::vector<std::function<void()>> run_;  // scratch for advance()
};

} // namespace crescent::engine
