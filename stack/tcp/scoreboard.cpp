// crescent — the sender's SACK scoreboard.
//
// RFC 2018 (SACK blocks), RFC 2883 §4 (recognising a D-SACK: the first block
// below the cumulative ACK or covered by the second block), RFC 6675 §4
// (Update, IsLost, SetPipe, NextSeg).
//
// Conventions: `high_rxt` is one past the highest octet retransmitted in the
// current recovery (snd.una when nothing was retransmitted), so "S2 > HighRxt"
// of RFC 6675 rule (1.a) reads S2 >= high_rxt here. All ranges are half-open.
//
// IsLost() is evaluated per hole: for any un-SACKed octet, the SACKed bytes and
// ranges above it are those of the ranges above its hole, so IsLost is
// constant over a hole and non-increasing with the sequence number. SetPipe()
// therefore sums whole holes instead of walking octets.
#include "stack/tcp/scoreboard.hpp"

#include <algorithm>

namespace crescent::tcp {

bool SackScoreboard::first_is_dsack(SeqNum ack, std::span<const SackBlock> blocks) {
    if (blocks.empty()) return false;
    const SackBlock& b = blocks[0];
    bool below = b.left < ack;
    bool inside_second =
        blocks.size() > 1 && blocks[1].left <= b.left && b.right <= blocks[1].right && blocks[1].left < blocks[1].right;
    return b.left < b.right && (below || inside_second);
}

SackScoreboard::Update SackScoreboard::update(SeqNum snd_una, SeqNum snd_nxt, std::span<const SackBlock> blocks) {
    Update u;
    for (size_t i = 0; i < blocks.size(); i++) {
        const SackBlock& b = blocks[i];
        if (i == 0 && first_is_dsack(snd_una, blocks)) {
            u.dsack = true;  // it adds nothing to the scoreboard
            continue;
        }
        // RFC 6675 §4 / RFC 2018 §3: only blocks inside [snd.una, snd.nxt] are meaningful.
        if (!(b.left < b.right) || b.left < snd_una || b.right > snd_nxt) {
            u.ignored++;
            continue;
        }
        uint32_t added = 0;
        if (!ranges_.add(b.left, b.right, &added)) { // a new range would exceed the bound
            u.ignored++;
            continue;
        }
        u.newly_sacked += added;
    }
    return u;
}

void SackScoreboard::advance(SeqNum snd_una) { ranges_.trim_below(snd_una); }

bool SackScoreboard::is_sacked(SeqNum seq) const { return ranges_.contains(seq); }

bool SackScoreboard::is_lost(SeqNum seq, uint32_t smss, uint32_t dupthresh) const {
    // RFC 6675 §4 IsLost(SeqNum): DupThresh discontiguous SACKed sequences
    // above SeqNum, or more than (DupThresh - 1) * SMSS SACKed bytes above it.
    uint32_t discontiguous = 0;
    uint64_t bytes = 0;
    const auto ranges = ranges_.ranges();
    for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
        if (it->right <= seq + 1) break; // nothing of this range (or below) is above seq
        SeqNum from = seq_max(it->left, seq + 1);
        bytes += uint32_t(it->right - from);
        discontiguous++;
        if (discontiguous >= dupthresh || bytes > uint64_t(dupthresh - 1) * smss) return true;
    }
    return false;
}

uint32_t SackScoreboard::pipe(SeqNum snd_una, SeqNum snd_nxt, SeqNum high_rxt, uint32_t smss,
                              uint32_t dupthresh) const {
    // RFC 6675 §4 SetPipe(): for each octet in [HighACK, HighData) not SACKed,
    // (a) +1 unless IsLost(octet), (b) +1 if the octet was retransmitted.
    uint64_t pipe = 0;
    auto hole = [&](SeqNum a, SeqNum b) {
        if (!(a < b)) return;
        if (!is_lost(a, smss, dupthresh)) pipe += uint32_t(b - a);
        if (a < high_rxt) pipe += uint32_t(seq_min(b, high_rxt) - a);
    };
    SeqNum cur = snd_una;
    for (const SackBlock& r : ranges_.ranges()) {
        if (r.right <= cur) continue;
        if (snd_nxt <= r.left) break;
        hole(cur, r.left);
        cur = seq_max(cur, r.right);
    }
    hole(cur, snd_nxt);
    return uint32_t(std::min<uint64_t>(pipe, UINT32_MAX));
}

std::optional<SackScoreboard::Range> SackScoreboard::next_unsacked(SeqNum snd_una, SeqNum high_rxt, uint32_t smss) const {
    // RFC 6675 §4 NextSeg() rule (3): the smallest un-SACKed S3 with
    // (1.a) S3 >= high_rxt (not yet retransmitted) and (1.b) S3 below the highest SACKed octet.
    if (ranges_.empty() || smss == 0) return std::nullopt;
    SeqNum s = seq_max(snd_una, high_rxt);
    for (const SackBlock& r : ranges_.ranges()) {
        if (r.right <= s) continue;
        if (s < r.left) return Range{s, std::min(smss, uint32_t(r.left - s))};
        s = r.right; // s is inside this range: skip it
    }
    return std::nullopt; // at or above the highest SACKed octet
}

std::optional<SackScoreboard::Range> SackScoreboard::next_lost(SeqNum snd_una, SeqNum high_rxt, uint32_t smss,
                                                             uint32_t dupthresh) const {
    // RFC 6675 §4 NextSeg() rule (1): as rule (3), plus (1.c) IsLost(S2).
    // IsLost is non-increasing in the sequence number, so if the first
    // candidate is not lost, no later one is.
    auto r = next_unsacked(snd_una, high_rxt, smss);
    if (r && !is_lost(r->start, smss, dupthresh)) return std::nullopt;
    return r;
}

SeqNum SackScoreboard::highest_sacked() const { return ranges_.empty() ? SeqNum() : ranges_.ranges().back().right; }

uint32_t SackScoreboard::sacked_bytes() const { return ranges_.bytes(); }

} // namespace crescent::tcp
