// crescent — per-core hashed timing wheel (see timer_wheel.hpp).
#include "stack/engine/timer_wheel.hpp"

#include <algorithm>
#include <cassert>

namespace crescent::engine {

TimerWheel::TimerWheel(Instant start, Duration tick, uint32_t slots)
    : start_(start), tick_(tick), mask_(slots - 1), heads_(slots, kNil) {
    assert(slots != 0 && (slots & (slots - 1)) == 0);
    assert(tick.count() > 0);
}

void TimerWheel::link(uint32_t idx, uint32_t slot) {
    Node& n = nodes_[idx];
    n.slot = slot;
    n.prev = kNil;
    n.next = heads_[slot];
    if (n.next != kNil) nodes_[n.next].prev = idx;
    heads_[slot] = idx;
}

void TimerWheel::unlink(uint32_t idx) {
    Node& n = nodes_[idx];
    if (n.prev != kNil) nodes_[n.prev].next = n.next;
    else heads_[n.slot] = n.next;
    if (n.next != kNil) nodes_[n.next].prev = n.prev;
    n.prev = n.next = kNil;
}

void TimerWheel::release(uint32_t idx) {
    Node& n = nodes_[idx];
    n.slot = kNil;
    n.fn = nullptr;
    ++n.gen;
    if (n.gen == 0) n.gen = 1;
    free_.push_back(idx);
    if (--live_ == 0) floor_ = Instant::never();
}

TimerWheel::Id TimerWheel::add(Instant deadline, std::function<void()> fn) {
    uint32_t idx;
    if (!free_.empty()) {
        idx = free_.back();
        free_.pop_back();
    } else {
        idx = uint32_t(nodes_.size());
        nodes_.emplace_back();
    }
    Node& n = nodes_[idx];
    if (deadline < start_) deadline = start_;
    n.deadline = deadline;
    n.fn = std::move(fn);
    // A deadline already in the past goes to the current slot: the next advance runs it.
    uint64_t t = std::max(tick_of(deadline), cur_tick_);
    link(idx, uint32_t(t & mask_));
    ++live_;
    if (deadline < floor_) floor_ = deadline;
    if (min_valid_ && deadline < min_cache_) min_cache_ = deadline;
    return (uint64_t(n.gen) << 32) | idx;
}

bool TimerWheel::cancel(Id id) {
    uint32_t idx = uint32_t(id);
    uint32_t gen = uint32_t(id >> 32);
    if (id == kNoTimer || idx >= nodes_.size()) return false;
    Node& n = nodes_[idx];
    if (n.gen != gen || n.slot == kNil) return false;
    if (n.deadline == min_cache_) min_valid_ = false;
    unlink(idx);
    release(idx);
    return true;
}

size_t TimerWheel::advance(Instant now) {
    if (now < start_ || live_ == 0) {
        if (now >= start_) cur_tick_ = std::max(cur_tick_, tick_of(now));
        return 0;
    }
    // Nothing can be due yet (the common case of a busy-polling loop): one
    // comparison. The ticks skipped are visited by the advance that gets past
    // the floor (at most one revolution, as after any gap).
    if (now < floor_) return 0;
    uint64_t target = tick_of(now);
    // Visit the slots of ticks cur_tick_..target (at most one revolution).
    uint64_t first = cur_tick_;
    uint64_t count = target - first + 1;
    if (target < first) count = 1, first = target;
    if (count > uint64_t(mask_) + 1) count = uint64_t(mask_) + 1;
    // What stays pending after this walk lies beyond `target`'s tick, except
    // the walked ticks' own deadlines later than `now`: the new floor.
    Instant floor = tick_start(target + 1);
    due_.clear();
    for (uint64_t k = 0; k < count; ++k) {
        uint32_t slot = uint32_t((first + k) & mask_);
        for (uint32_t i = heads_[slot]; i != kNil;) {
            uint32_t next = nodes_[i].next;
            const Instant d = nodes_[i].deadline;
            if (d <= now) {
                unlink(i);
                nodes_[i].slot = kNil - 1;  // detached, not free yet
                due_.push_back(i);
            } else if (d < floor) {
                floor = d;
            }
            i = next;
        }
    }
    cur_tick_ = target;
    floor_ = floor;  // before the callbacks: what they add lowers it
    std::sort(due_.begin(), due_.end(),
              [this](uint32_t a, uint32_t b) { return nodes_[a].deadline < nodes_[b].deadline; });
    if (!due_.empty()) min_valid_ = false;
    // Move the callbacks out first: a callback may add timers and grow nodes_.
    run_.clear();
    for (uint32_t i : due_) {
        run_.push_back(std::move(nodes_[i].fn));
        release(i);
    }
    size_t ran = run_.size();
    // Callbacks may re-enter add()/cancel() but not advance().
    std::vector<std::function<void()>> fns;
    fns.swap(run_);
    for (auto& f : fns)
        if (f) f();
    fns.clear();
    run_.swap(fns);  // keep the capacity
    return ran;
}

Instant TimerWheel::next_deadline() const {
    if (live_ == 0) return Instant::never();
    if (min_valid_) return min_cache_;
    ++scans_;
    Instant m = Instant::never();
    for (const Node& n : nodes_)
        if (n.slot != kNil && n.slot != kNil - 1 && n.deadline < m) m = n.deadline;
    min_cache_ = m;
    min_valid_ = true;
    return m;
}

} // namespace crescent::engine
