// crescent — a small set of sequence ranges, for the sender's record of what
// it retransmitted (tcb_undo.cpp): ranges are added when sent again, removed
// when a D-SACK reports them duplicate, trimmed at the cumulative ACK.
//
// Sorted, disjoint, adjacent ranges merged, at most kMaxRanges of them: an
// add() that would need more marks the set overflowed (it then no longer
// knows exactly what it holds; callers treat it as "maybe anything").
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "stack/wire/wire.hpp"

namespace crescent::tcp {

class SeqRangeSet {
public:
    static constexpr size_t kMaxRanges = 64;

    void add(wire::SeqNum left, wire::SeqNum right) {
        if (!(left < right)) return;
        auto first = std::partition_point(r_.begin(), r_.end(), [&](const wire::SackBlock& b) { return b.right < left; });
        auto last = first;
        while (last != r_.end() && last->left <= right) {
            left = wire::seq_min(left, last->left);
            right = wire::seq_max(right, last->right);
            ++last;
        }
        if (first == last) {
            if (r_.size() >= kMaxRanges) {
                overflow_ = true;
                return;
            }
            r_.insert(first, wire::SackBlock{left, right});
        } else {
            *first = wire::SackBlock{left, right};
            r_.erase(first + 1, last);
        }
    }

    // Removes [left, right); returns how many bytes of it were in the set.
    // In place: at most one range splits in two (past kMaxRanges its upper
    // part is forgotten and the set marked overflowed).
    uint32_t remove(wire::SeqNum left, wire::SeqNum right) {
        uint32_t removed = 0;
        for (size_t i = 0; i < r_.size();) {
            wire::SackBlock& b = r_[i];
            const wire::SeqNum ol = wire::seq_max(b.left, left), orr = wire::seq_min(b.right, right);
            if (!(ol < orr)) {
                ++i;
                continue;
            }
            removed += uint32_t(orr - ol);
            const bool below = b.left < ol, above = orr < b.right;
            if (below && above) {
                const wire::SackBlock upper{orr, b.right};
                b.right = ol;
                if (r_.size() < kMaxRanges) r_.insert(r_.begin() + ptrdiff_t(i) + 1, upper);
                else overflow_ = true;
                i += 2;
            } else if (below) {
                b.right = ol;
                ++i;
            } else if (above) {
                b.left = orr;
                ++i;
            } else {
                r_.erase(r_.begin() + ptrdiff_t(i));
            }
        }
        return removed;
    }

    void trim_below(wire::SeqNum seq) {
        auto it = std::partition_point(r_.begin(), r_.end(), [&](const wire::SackBlock& b) { return b.right <= seq; });
        r_.erase(r_.begin(), it);
        if (!r_.empty() && r_.front().left < seq) r_.front().left = seq;
    }

    bool contains(wire::SeqNum seq) const {
        for (const wire::SackBlock& b : r_)
            if (wire::seq_in(seq, b.left, b.right)) return true;
        return false;
    }

    bool empty() const { return r_.empty(); }
    bool overflowed() const { return overflow_; }
    void clear() {
        r_.clear();
        overflow_ = false;
    }

private:
    std::vector<wire::SackBlock> r_;
    bool overflow_ = false;
};

} // namespace crescent::tcp
