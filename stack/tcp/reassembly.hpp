// crescent — zero-copy out-of-order reassembly queue (RFC 9293 §3.10.7.4 "seventh",
// RFC 2018 §4 for the SACK blocks a receiver reports).
//
// Segments that arrive beyond rcv.nxt are kept as zbuf slices (no copy), sorted
// and non-overlapping. Memory is bounded by a segment count and a byte budget;
// a segment that does not fit is refused (and the sender retransmits it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <crescent/zbuf.hpp>
#include "stack/wire/wire.hpp"

namespace crescent::tcp {

using wire::SackBlock;
using wire::SeqNum;

struct ReassemblyLimits {
    uint32_t max_segments = 1024;  // a 1 MiB window of segments of 1 KiB or more
    uint32_t max_bytes = 4u << 20;
};

class Reassembly {
public:
    explicit Reassembly(ReassemblyLimits lim = {});

    enum class Insert : uint8_t { Queued, Duplicate, NoRoom };
    // Queue `payload` that starts at `seq` (> rcv_nxt; trims what is below
    // rcv_nxt or already queued). `fin` marks a FIN right after the payload.
    Insert insert(SeqNum seq, Slice payload, bool fin, SeqNum rcv_nxt);

    // Move the segments that now start at *rcv_nxt into `out`, advancing
    // *rcv_nxt past them. Returns true if a queued FIN became in-order (then
    // *rcv_nxt does not include the FIN; the caller consumes it).
    bool pop_in_order(SeqNum* rcv_nxt, std::vector<Slice>* out);

    // Up to out.size() SACK blocks: the block holding the most recently
    // received segment first, then the other blocks most-recent-first
    // (RFC 2018 §4). Returns the number written.
    size_t sack_blocks(std::span<SackBlock> out) const;

    // Inline: the receive fast path asks on every segment.
    bool empty() const { return segs_.empty() && !has_fin_; }
    uint32_t segments() const { return uint32_t(segs_.size()); }
    uint32_t bytes() const { return bytes_; }
    void clear();

    // The sequence number of a queued FIN (the byte after the last data), if any.
    std::optional<SeqNum> fin_seq() const;

private:
    struct Seg {
        SeqNum seq;
        Slice data;       // non-empty
        uint64_t arrival; // insertion counter, for SACK block recency
        SeqNum end() const { return seq + uint32_t(data.size()); }
    };
    size_t first_ending_after(SeqNum s) const;
    // Visits the gaps of [seq, end) that no queued segment covers, in order,
    // starting at index j (first_ending_after(seq)): fn(j, gap_start, gap_end)
    // returns how many segments it inserted at index j (0 or 1), so the walk
    // stays in step with the vector.
    template <class Fn>
    void for_each_gap(SeqNum seq, SeqNum end, size_t j, Fn&& fn);

    std::vector<Seg> segs_; // sorted by seq, non-overlapping, all above the last rcv_nxt seen
    ReassemblyLimits lim_;
    uint32_t bytes_ = 0;    // sum of segs_[i].data.size()
    uint64_t counter_ = 0;
    bool has_fin_ = false;  // a FIN was received at fin_seq_
    SeqNum fin_seq_;
};

} // namespace crescent::tcp
