// crescent — a small set of sequence ranges: the SACK scoreboard's SACKed
// ranges (scoreboard.hpp), and the sender's record of what it retransmitted
// (tcb_undo.cpp: added when sent again, removed when a D-SACK reports them
// duplicate, trimmed at the cumulative ACK).
//
// Sorted, disjoint, adjacent ranges merged, at most kMaxRanges of them: an
// add() that would need more is refused and marks the set overflowed (it
// then no longer knows exactly what it holds; the retransmission record's
// callers treat it as "maybe anything").
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "stack/wire/wire.hpp"

namespace crescent::tcp {

class SeqRangeSet {
public:
    static constexpr size_t kMaxRanges = 64;

    // Adds [left, right); *added (if given) gets how many of its bytes were
    // not in the set yet. False when refused for the bound.
    bool add(wire::SeqNum left, wire::SeqNum right, uint32_t* added = nullptr) {
        if (added) *added = 0;
        if (!(left < right)) return true;
        const wire::SeqNum l0 = left, r0 = right;
        auto first = std::partition_point(r_.begin(), r_.end(), [&](const wire::SackBlock& b) { return b.right < left; });
        auto last = first;
        uint32_t covered = 0;
        while (last != r_.end() && last->left <= right) {
            // Overlap of [l0, r0) with *last, counted once per range.
            const wire::SeqNum ol = wire::seq_max(last->left, l0), orr = wire::seq_min(last->right, r0);
            if (ol < orr) covered += uint32_t(orr - ol);
            left = wire::seq_min(left, last->left);
            right = wire::seq_max(right, last->right);
            ++last;
        }
        if (first == last) {
            if (r_.size() >= kMaxRanges) {
                overflow_ = true;
                return false;
            }
            r_.insert(first, wire::SackBlock{left, right});
        } else {
            *first = wire::SackBlock{left, right};
            r_.erase(first + 1, last);
        }
        if (added) *added = uint32_t(r0 - l0) - covered;
        return true;
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

    std::span<const wire::SackBlock> ranges() const { return r_; }
    bool empty() const { return r_.empty(); }
    size_t size() const { return r_.size(); }
    uint32_t bytes() const {
        uint32_t n = 0;
        for (const wire::SackBlock& b : r_) n += uint32_t(b.right - b.left);
        return n;
    }
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
