// crescent — zero-copy out-of-order reassembly queue.
//
// RFC 9293 §3.10.7.4 ("seventh, process the segment text": segments beyond
// rcv.nxt are held until the gap fills), RFC 2018 §4 (the order of the SACK
// blocks a receiver reports), RFC 9293 §3.10.7.4 "eighth" for a FIN that
// arrives out of order (held, consumed when the data before it is in).
//
// Bytes are never copied: an arriving payload slice is trimmed in place
// (remove_prefix / remove_suffix) when it fills one gap, or split into new
// references (`Slice::sub`) when it fills several. Data already queued wins
// over newly arrived copies of the same bytes.
#include "stack/tcp/reassembly.hpp"

#include <algorithm>

namespace crescent::tcp {

Reassembly::Reassembly(ReassemblyLimits lim) : lim_(lim) {}

// Index of the first queued segment whose end is after `s` (ends are sorted
// because segments are sorted and disjoint).
size_t Reassembly::first_ending_after(SeqNum s) const {
    auto it = std::partition_point(segs_.begin(), segs_.end(), [s](const Seg& g) { return g.end() <= s; });
    return size_t(it - segs_.begin());
}

template <class Fn>
void Reassembly::for_each_gap(SeqNum seq, SeqNum end, size_t j, Fn&& fn) {
    for (SeqNum cur = seq; cur < end;) {
        if (j < segs_.size() && segs_[j].seq <= cur) {
            cur = segs_[j++].end();
            continue;
        }
        SeqNum gap_end = (j < segs_.size() && segs_[j].seq < end) ? segs_[j].seq : end;
        j += fn(j, cur, gap_end);
        cur = gap_end;
    }
}

Reassembly::Insert Reassembly::insert(SeqNum seq, Slice payload, bool fin, SeqNum rcv_nxt) {
    counter_++;
    SeqNum end = seq + uint32_t(payload.size());

    // Nothing is kept beyond a FIN already received (RFC 9293 §3.10.7.4
    // "eighth": the FIN ends the sequence space). A second, different FIN is
    // ignored; the data before it still counts.
    if (has_fin_) {
        if (fin && end != fin_seq_) fin = false;
        if (seq >= fin_seq_) return Insert::Duplicate;
        if (end > fin_seq_) {
            payload.remove_suffix(size_t(end - fin_seq_));
            end = fin_seq_;
        }
    }
    // Trim what is already in order (below rcv.nxt).
    if (seq < rcv_nxt) {
        if (end <= rcv_nxt) return Insert::Duplicate;
        payload.remove_prefix(size_t(rcv_nxt - seq));
        seq = rcv_nxt;
    }
    // A FIN inside data already queued beyond it is inconsistent: ignore the FIN.
    if (fin && !has_fin_ && !segs_.empty() && segs_.back().end() > end) fin = false;

    // Pass 1: the gaps this payload fills, to check the limits before touching anything.
    const size_t first = first_ending_after(seq);
    uint32_t pieces = 0, new_bytes = 0;
    for_each_gap(seq, end, first, [&](size_t, SeqNum gap, SeqNum gap_end) {
        pieces++;
        new_bytes += uint32_t(gap_end - gap);
        return size_t(0);
    });
    const bool new_fin = fin && !has_fin_;
    if (pieces == 0) {
        if (new_fin) {
            has_fin_ = true;
            fin_seq_ = end;
            return Insert::Queued;
        }
        // RFC 2018 §4: the block holding the segment that triggered this ACK
        // goes first; a duplicate makes its block the most recent.
        if (first < segs_.size() && segs_[first].seq <= seq) segs_[first].arrival = counter_;
        return Insert::Duplicate;
    }
    if (segs_.size() + pieces > lim_.max_segments || bytes_ + new_bytes > lim_.max_bytes)
        return Insert::NoRoom;

    // Pass 2: insert the pieces. One gap: the payload slice itself, trimmed in
    // place (no new reference); several: a new reference per gap.
    for_each_gap(seq, end, first, [&](size_t j, SeqNum gap, SeqNum gap_end) {
        Slice piece;
        if (pieces == 1) {
            payload.remove_prefix(size_t(gap - seq));
            payload.remove_suffix(size_t(end - gap_end));
            piece = std::move(payload);
        } else {
            piece = payload.sub(size_t(gap - seq), uint32_t(gap_end - gap));
        }
        segs_.insert(segs_.begin() + ptrdiff_t(j), Seg{gap, std::move(piece), counter_});
        return size_t(1);
    });
    bytes_ += new_bytes;
    if (new_fin) {
        has_fin_ = true;
        fin_seq_ = end;
    }
    return Insert::Queued;
}

bool Reassembly::pop_in_order(SeqNum* rcv_nxt, std::vector<Slice>* out) {
    size_t n = 0;
    for (; n < segs_.size(); n++) {
        Seg& g = segs_[n];
        if (g.seq > *rcv_nxt) break;
        bytes_ -= uint32_t(g.data.size());
        SeqNum end = g.end();
        if (end <= *rcv_nxt) continue; // already delivered by in-order data that overlapped it
        g.data.remove_prefix(size_t(*rcv_nxt - g.seq));
        *rcv_nxt = end;
        out->push_back(std::move(g.data));
    }
    segs_.erase(segs_.begin(), segs_.begin() + ptrdiff_t(n));
    if (has_fin_ && *rcv_nxt == fin_seq_) {
        has_fin_ = false;
        return true;
    }
    return false;
}

size_t Reassembly::sack_blocks(std::span<SackBlock> out) const {
    // Blocks are maximal runs of contiguous segments; a block's recency is the
    // latest arrival among its segments (arrivals are unique). Pick blocks by
    // decreasing recency, without allocating: out.size() is at most 4.
    size_t written = 0;
    uint64_t below = UINT64_MAX;
    while (written < out.size()) {
        uint64_t best = 0;
        SackBlock best_block{};
        bool found = false;
        for (size_t i = 0; i < segs_.size();) {
            SackBlock b{segs_[i].seq, segs_[i].end()};
            uint64_t recent = segs_[i].arrival;
            for (i++; i < segs_.size() && segs_[i].seq == b.right; i++) {
                b.right = segs_[i].end();
                recent = std::max(recent, segs_[i].arrival);
            }
            if (recent < below && (!found || recent > best)) {
                best = recent;
                best_block = b;
                found = true;
            }
        }
        if (!found) break;
        out[written++] = best_block;
        below = best;
    }
    return written;
}

std::optional<SeqNum> Reassembly::fin_seq() const {
    if (has_fin_) return fin_seq_;
    return std::nullopt;
}

void Reassembly::clear() {
    segs_.clear();
    bytes_ = 0;
    has_fin_ = false;
}

} // namespace crescent::tcp
