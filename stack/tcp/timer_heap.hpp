// crescent — the Host's connection timers: an indexed binary min-heap of
// connection slots keyed by each one's next deadline.
//
// One entry per slot at most, moved in place when its deadline changes
// (decrease- or increase-key: a sift of at most log2(connections) levels) and
// removed when the slot has none. A deadline that moves on nearly every
// segment — the RTO restarted by each ACK, a 10 µs ACK hold cancelled by the
// reply that carries the ACK — therefore leaves no stale entries behind: a
// lazy heap (push on every earlier deadline, skip stale entries when they
// come due) held hundreds of them per busy connection and popped one per
// cancelled hold.
#pragma once

#include <cstdint>
#include <vector>

#include <crescent/time.hpp>

namespace crescent::tcp {

class TimerHeap {
public:
    // Slot `slot`'s deadline becomes `at`; Instant::never() removes it.
    void set(uint32_t slot, Instant at) {
        if (slot >= pos_.size()) {
            if (at.is_never()) return;
            pos_.resize(slot + 1, kNone);
        }
        const uint32_t k = pos_[slot];
        if (at.is_never()) {
            if (k != kNone) erase(k);
            return;
        }
        const int64_t t = at.nanos();
        if (k == kNone) {
            h_.push_back(Entry{t, slot});
            pos_[slot] = uint32_t(h_.size() - 1);
            sift_up(h_.size() - 1);
        } else if (t != h_[k].at) {
            const bool earlier = t < h_[k].at;
            h_[k].at = t;
            if (earlier) sift_up(k);
            else sift_down(k);
        }
    }
    bool empty() const { return h_.empty(); }
    size_t size() const { return h_.size(); }
    // The earliest deadline (never when empty) and its slot.
    Instant top_at() const { return h_.empty() ? Instant::never() : Instant::from_nanos(h_.front().at); }
    uint32_t top_slot() const { return h_.front().slot; }
    // Slot `slot`'s deadline (never when it has none).
    Instant at(uint32_t slot) const {
        return slot < pos_.size() && pos_[slot] != kNone ? Instant::from_nanos(h_[pos_[slot]].at) : Instant::never();
    }

private:
    static constexpr uint32_t kNone = UINT32_MAX;
    struct Entry {
        int64_t at;
        uint32_t slot;
    };

    void place(size_t k, Entry e) {
        h_[k] = e;
        pos_[e.slot] = uint32_t(k);
    }
    void sift_up(size_t k) {
        const Entry e = h_[k];
        while (k > 0) {
            const size_t parent = (k - 1) / 2;
            if (h_[parent].at <= e.at) break;
            place(k, h_[parent]);
            k = parent;
        }
        place(k, e);
    }
    void sift_down(size_t k) {
        const Entry e = h_[k];
        const size_t n = h_.size();
        for (;;) {
            size_t c = 2 * k + 1;
            if (c >= n) break;
            if (c + 1 < n && h_[c + 1].at < h_[c].at) ++c;
            if (e.at <= h_[c].at) break;
            place(k, h_[c]);
            k = c;
        }
        place(k, e);
    }
    void erase(uint32_t k) {
        pos_[h_[k].slot] = kNone;
        const Entry last = h_.back();
        h_.pop_back();
        if (k == h_.size()) return;  // it was the last entry
        place(k, last);
        if (k > 0 && h_[(k - 1) / 2].at > last.at) sift_up(k);
        else sift_down(k);
    }

    std::vector<Entry> h_;        // binary min-heap on `at`
    std::vector<uint32_t> pos_;   // slot -> index in h_, or kNone
};

} // namespace crescent::tcp
