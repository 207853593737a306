// crescent — the sans-IO TCP control block: reordering, and undoing a
// congestion response that proves spurious (tcb.cpp holds the rest; tcb.hpp
// the RFC list).
//
//   RFC 6675 §2 / RFC 4653   a DupThresh that follows the reordering the path showed
//   RFC 2883 §4, RFC 3708    D-SACK: the receiver had a retransmitted range already
//   RFC 3522                 Eifel detection: the ACKs that end a recovery (or the
//                            first after an RTO) echo a TSval older than the first
//                            retransmission, so the originals arrived
//   RFC 4015                 Eifel response: cwnd and ssthresh as before; after a
//                            spurious RTO, go on with new data instead of back N
//
// Linux's tcp_input.c has the same design (tp->reordering, tcp_time_to_recover(),
// undo_marker / undo_retrans). Where it flags each skb, the TCB keeps ranges:
// rxt_ (what was sent again, above snd.una) and Undo::pending (an episode's
// retransmissions not yet reported duplicate).
#include "stack/tcp/tcb.hpp"
#include "stack/tcp/tcb_detail.hpp"

#include <algorithm>

namespace crescent::tcp {

// Duplicate ACKs (without SACK) or SACKed segments above a hole that mean
// the hole is lost: RFC 5681's 3 until the path reordered more than that.
// With fewer segments in flight than the reordering degree, half of them
// is enough (Linux's tcp_time_to_recover()); else a loss would wait for
// the RTO whenever the window is small.
uint32_t Tcb::dup_thresh() const {
    if (reordering_ <= kDupThresh) {
        // RFC 5827 early retransmit: fewer than four segments outstanding
        // and none that may go yet (nothing unsent, or no room in the peer's
        // window) can never bring three duplicates; oseg - 1 will do.
        if (cfg_.early_retransmit && snd_.mss &&
            (data_end() - snd_.nxt <= 0 || snd_wnd_end() - snd_.nxt < int32_t(snd_.mss))) {
            const uint32_t oseg = (uint32_t(snd_.max - snd_.una) + snd_.mss - 1) / snd_.mss;
            if (oseg >= 2 && oseg < 4) return oseg - 1;
        }
        return kDupThresh;
    }
    const uint32_t flight = snd_.mss ? uint32_t(snd_.max - snd_.una) / snd_.mss : 0;
    if (flight > reordering_) return reordering_;
    return std::max(kDupThresh, flight / 2);
}

// The original at `late` arrived after data up to `fack` had: the path
// reorders by that many segments (Linux's tcp_check_sack_reordering()).
void Tcb::note_reordering(SeqNum late, SeqNum fack) {
    if (!(late < fack) || snd_.mss == 0) return;
    ++st_.reorder_events;
    const uint32_t degree = (uint32_t(fack - late) + snd_.mss - 1) / snd_.mss;
    reordering_ = std::max(reordering_, std::min(degree, std::max(cfg_.max_reordering, kDupThresh)));
}

// Before the scoreboard takes an ACK's SACK blocks: a block that starts in
// a hole below the highest SACKed byte, in a range never sent again, is an
// original that other data overtook.
void Tcb::check_sack_reordering(SeqNum ack, std::span<const SackBlock> blocks) {
    if (sb_.empty() || rxt_.overflowed()) return;
    const SeqNum fack = sb_.highest_sacked();
    for (size_t i = SackScoreboard::first_is_dsack(ack, blocks) ? 1 : 0; i < blocks.size(); ++i) {
        const SackBlock& b = blocks[i];
        if (!(b.left < b.right) || b.left < ack || !(b.left < fack)) continue;
        if (sb_.is_sacked(b.left) || rxt_.contains(b.left)) continue;
        note_reordering(b.left, fack);
    }
}

// A congestion response begins (before cc_ reacts): remember what to return to.
void Tcb::undo_begin(bool rto) {
    if (!cfg_.undo) return;
    undo_.cc = cc_;
    undo_.pending.clear();
    undo_.marker = snd_.una;
    undo_.fack = sb_.empty() ? snd_.una : sb_.highest_sacked();
    undo_.tsval = 0;
    undo_.retransmitted = false;
    undo_.eifel = ts_ok_;
    undo_.rto = rto;
}

// emit_data() sent [seq, end) again.
void Tcb::undo_note_retransmit(SeqNum seq, SeqNum end, Instant now) {
    rxt_.add(seq, end);
    if (!undo_.cc) return;
    if (!undo_.retransmitted) {
        undo_.retransmitted = true;
        undo_.tsval = ts_now(now);  // the TSval that segment carries (fill_ack_fields)
    }
    undo_.pending.add(seq, end);
}

// A D-SACK reported [b.left, b.right) received twice.
void Tcb::undo_on_dsack(const SackBlock& b) {
    if (!undo_.cc || !undo_.retransmitted) return;
    if (undo_.pending.remove(b.left, b.right) == 0) return;  // not this episode's, or reported before
    if (!undo_.rto) note_reordering(b.left, undo_.fack);      // the original came, after later data
    if (undo_.pending.empty() && !undo_.pending.overflowed()) undo_apply();
}

// An ACK advanced snd.una (ack_advanced(), after its recovery bookkeeping).
void Tcb::undo_on_ack(const TcpRepr& seg) {
    rxt_.trim_below(snd_.una);
    if (!undo_.cc || !undo_.retransmitted || !undo_.eifel) return;
    // RFC 3522 §2: the receiver echoes the TSval of the segment that moved its
    // left edge. At or after the first retransmission's: that one repaired it.
    if (!(seg.opts.ts && seg.opts.ts->tsecr != 0) || int32_t(seg.opts.ts->tsecr - undo_.tsval) >= 0) {
        undo_.eifel = false;
        return;
    }
    if (undo_.rto) {
        // The first ACK after the timeout was for an original: the RTO was
        // spurious (a delay, not a loss). RFC 4015 §5: keep sending new data.
        undo_apply();
        if (snd_.nxt - snd_.max < 0) {
            snd_.nxt = snd_.max;
            cur_valid_ = false;
        }
        return;
    }
    // Every ACK of the recovery, this last one included, came from originals.
    if (!in_recovery_) {
        note_reordering(undo_.marker, undo_.fack);
        undo_apply();
    }
}

void Tcb::undo_apply() {
    if (undo_.cc->cwnd() >= cc_.cwnd()) cc_ = *undo_.cc;
    ++(undo_.rto ? st_.undo_rtos : st_.undo_recoveries);
    undo_.cc.reset();
    undo_.pending.clear();
    if (in_recovery_) {
        in_recovery_ = false;
        dupacks_ = 0;
        high_rxt_ = snd_.una;
    }
    // RFC 6582's guard (no new recovery before snd.una passes `recover`)
    // protects the window of a real loss; this one was not.
    recover_ = snd_.una - 1;
}

} // namespace crescent::tcp
