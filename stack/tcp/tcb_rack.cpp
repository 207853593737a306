// crescent — the sans-IO TCP control block: a hole at snd.una found lost by
// time, RACK's reordering window (tcb.cpp holds the rest; tcb.hpp the RFC list).
//
//   RFC 8985 §6  RACK: a segment is lost once a segment sent after it has
//                been delivered and a reordering window (min_RTT / 4, raised
//                by D-SACKs, at most SRTT) has passed since.
//
// What is here is the part of RACK the first hole needs. RFC 6675 counts
// instead: a hole is lost with DupThresh segments SACKed above it, and
// DupThresh follows the reordering the path showed (dup_thresh()). The last
// segments of a message, or a flight of two or three, never have that many
// above them — on a path that once reordered, every such loss waited for the
// RTO (the sim's 64 KiB exchanges: about half of their timeouts). Here SACKed
// data above snd.una that does not yet make the hole lost starts a timer of
// the reordering window; when it fires with snd.una where it was, the hole is
// lost and a fast recovery starts. The SACK's arrival stands in for RACK's
// "delivered after it": every byte SACKed above snd.una was sent after it, or
// with it, unless snd.una's segment was itself retransmitted — and then the
// RFC 6582 guard below (no recovery before snd.una passes `recover`) keeps
// the timer from sending it a third time.
//
// In a recovery the same timer judges snd.una's retransmission by what was
// sent after it (RACK's own rule, for the retransmissions only): once a
// later retransmission — of another hole — is SACKed while snd.una's is
// not, snd.una's is lost when the window has passed, and is sent again.
// A lost retransmission with nothing sent after it (the only hole) is
// still the RTO's, as are holes above the first.
#include "stack/tcp/tcb.hpp"
#include "stack/tcp/tcb_detail.hpp"

#include <algorithm>

namespace crescent::tcp {

// RFC 8985 §6.2 step 4 (RACK_update_reo_wnd): zero while the path has shown
// no reordering and DupThresh segments are SACKed (RFC 6675 decides then),
// else min_RTT / 4 times the D-SACK multiplier, at most SRTT.
Duration Tcb::reo_wnd() const {
    if (st_.reorder_events == 0 && sb_.sacked_bytes() >= kDupThresh * snd_.mss) return Duration(0);
    const Duration base = min_rtt_.count() > 0 ? min_rtt_ : srtt_;
    return std::min<Duration>(base / 4 * rack_.mult, srtt_);
}

// After an ACK was taken: SACKed data above the hole at snd.una that has
// not made it lost arms the timer, once per hole.
void Tcb::arm_reo_timer(Instant now) {
    if (!cfg_.rack || !sack_ok_ || sb_.empty() || !have_rtt_ || backoff_ > 0 ||
        (in_recovery_ && !rack_una_rxt_lost())) {
        reo_at_ = Instant::never();
        return;
    }
    if (!reo_at_.is_never() && rack_.una == snd_.una) return;  // already running for this hole
    rack_.una = snd_.una;
    reo_at_ = now + reo_wnd();
}

void Tcb::on_reo_timeout(Instant now, Actions& out) {
    reo_at_ = Instant::never();
    if (sb_.empty() || snd_.una != rack_.una || snd_.max == snd_.una) return;
    if (in_recovery_) {
        if (!rack_una_rxt_lost()) return;
        ++st_.rack_losses;
        if (emit_data(snd_.una, snd_.mss, true, now, out) > 0) ++st_.retrans_sack;  // notes it: later ones start over
        return;
    }
    if (!may_start_recovery()) return;
    ++st_.rack_losses;
    fast_retransmit(now, out);
}

// emit_data() sent [seq, ...) again during a recovery.
void Tcb::rack_note_retransmit(SeqNum seq) {
    if (seq == snd_.una) {
        rack_.una_rxt = seq;
        rack_.later_n = 0;
    } else if (rack_.una_rxt && rack_.later_n < Rack::kLater) {
        rack_.later[rack_.later_n++] = seq;
    }
}

// snd.una's last retransmission is still missing while one sent after it
// has been SACKed.
bool Tcb::rack_una_rxt_lost() const {
    if (rack_.una_rxt != snd_.una || sb_.is_sacked(snd_.una)) return false;
    for (uint32_t i = 0; i < rack_.later_n; ++i)
        if (rack_.later[i] - snd_.una > 0 && sb_.is_sacked(rack_.later[i])) return true;
    return false;
}

// RFC 8985 §6.2 step 4: a D-SACK in a round trip that has had none widens
// the window by another min_RTT / 4, for the next 16 recoveries.
void Tcb::rack_on_dsack() {
    if (rack_.dsack_round_valid && snd_.una - rack_.dsack_round < 0) return;
    rack_.dsack_round = snd_.max;
    rack_.dsack_round_valid = true;
    rack_.mult = std::min<uint32_t>(rack_.mult + 1, 255);
    rack_.persist = 16;
}

// A recovery begins: the widened window lasts 16 of them.
void Tcb::rack_on_recovery() {
    if (rack_.persist > 0 && --rack_.persist == 0) rack_.mult = 1;
    rack_.una_rxt.reset();
    rack_.later_n = 0;
}

} // namespace crescent::tcp
