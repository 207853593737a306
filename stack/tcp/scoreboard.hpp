// crescent — the sender's SACK scoreboard (RFC 2018, RFC 6675 §4 and §5).
//
// Kept as a small sorted vector of disjoint SACKed ranges above snd.una. The
// TCB runs loss recovery with it: Update() on each ACK, IsLost(), SetPipe()
// and NextSeg() exactly as RFC 6675 defines them (sequence-space ranges, with
// SMSS-sized segments for the counting rules).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "stack/tcp/range_set.hpp"
#include "stack/wire/wire.hpp"

namespace crescent::tcp {

using wire::SackBlock;
using wire::SeqNum;

inline constexpr uint32_t kDupThresh = 3;
inline constexpr uint32_t kMaxScoreboardRanges = SeqRangeSet::kMaxRanges; // bound on state per connection

class SackScoreboard {
public:
    struct Update {
        uint32_t newly_sacked = 0;  // bytes that became SACKed with this ACK
        bool dsack = false;         // first block was a D-SACK (RFC 2883): below snd.una or inside another block
        uint32_t ignored = 0;       // blocks outside (snd.una, snd.nxt] or over the range bound
    };
    // RFC 2883 §4: whether an ACK's first SACK block reports a duplicate (it
    // lies below the cumulative ACK, or inside the second block).
    static bool first_is_dsack(SeqNum ack, std::span<const SackBlock> blocks);
    // Record the SACK blocks of one ACK. Blocks not inside [snd_una, snd_nxt] are ignored.
    Update update(SeqNum snd_una, SeqNum snd_nxt, std::span<const SackBlock> blocks);
    // Cumulative ACK moved to snd_una: drop everything below it.
    void advance(SeqNum snd_una);

    bool is_sacked(SeqNum seq) const;
    // RFC 6675 §4 IsLost(SeqNum): true when DupThresh discontiguous SACKed
    // SMSS-segments, or more than (DupThresh - 1) * SMSS bytes, lie above seq.
    // `dupthresh` is kDupThresh unless the path showed reordering (the TCB's
    // dup_thresh(), RFC 6675 §2 allows a DupThresh that adapts).
    bool is_lost(SeqNum seq, uint32_t smss, uint32_t dupthresh = kDupThresh) const;
    // RFC 6675 §4 SetPipe(): bytes the sender believes are in the network.
    uint32_t pipe(SeqNum snd_una, SeqNum snd_nxt, SeqNum high_rxt, uint32_t smss,
                  uint32_t dupthresh = kDupThresh) const;
    // RFC 6675 §4 NextSeg() rule 1: the first un-SACKed, lost sequence range
    // at or above max(snd_una, high_rxt) and below the highest SACKed byte,
    // clipped to `smss` bytes and to the next SACKed range. Rule 3 (un-SACKed
    // but not lost) is left to the caller, which knows whether cwnd allows it.
    struct Range { SeqNum start; uint32_t len; };
    std::optional<Range> next_lost(SeqNum snd_una, SeqNum high_rxt, uint32_t smss,
                                   uint32_t dupthresh = kDupThresh) const;
    // Rule 3 helper: first un-SACKed range at or above max(snd_una, high_rxt) below the highest SACKed byte.
    std::optional<Range> next_unsacked(SeqNum snd_una, SeqNum high_rxt, uint32_t smss) const;

    bool empty() const { return ranges_.empty(); }
    SeqNum highest_sacked() const;  // right edge of the highest block; valid iff !empty()
    uint32_t sacked_bytes() const;
    size_t range_count() const { return ranges_.size(); }
    void clear() { ranges_.clear(); }

private:
    SeqRangeSet ranges_; // sorted, disjoint, non-adjacent
};

} // namespace crescent::tcp
