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
// In a recovery the same timer judges the hole at snd.una by what was sent
// after it (RACK's own rule). A hole never sent again in this recovery (at
// or above HighRxt: a hole above the first, which snd.una reached as the
// first was repaired) is judged as outside one: everything SACKed above it
// was sent later. Without this, a path that once reordered (DupThresh
// raised) left such a hole to the RTO whenever the window was too small for
// NextSeg's rule 3 to send it. A retransmission at snd.una is judged by
// what was sent after it: the recovery logs its retransmissions (start, end,
// when, snd.max then), and the latest one that carried snd.una's byte is lost
// once new data sent after it is SACKed, a later retransmission is SACKed,
// or a later one is passed by the cumulative ACK — also when snd.una got
// there by the repair of an earlier hole, or landed inside a retransmission
// whose first part arrived. It goes again whole: sent now with SACK blocks
// (the peer's data has a hole), its first segment holds 12 bytes less than
// it did, and the rest follows in a second one, which the log keeps in turn.
// A retransmission with nothing sent after it (the only hole) has no later
// delivery to be judged by, and the receiver ACKs a segment that fills a
// hole at once: with no answer within answer_wait() it is sent
// once more — a probe, as the tail loss probe is outside a recovery (RFC
// 8985 §7 sends none in one) — and the RTO (5 ms here) is left the second
// loss of the same segment.
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

// RACK's timer has what it needs: SACK, an RTT, and no RTO back-off under way.
bool Tcb::rack_timer_usable() const { return cfg_.rack && sack_ok_ && have_rtt_ && backoff_ == 0; }

// After an ACK was taken: SACKed data above the hole at snd.una that has
// not made it lost arms the timer, once per hole.
void Tcb::arm_reo_timer(Instant now) {
    if (!rack_timer_usable() || sb_.empty()) {
        reo_at_ = Instant::never();
        return;
    }
    if (in_recovery_ && !rack_una_original() && !rack_una_rxt_lost()) {
        // snd.una's retransmission, judged by nothing yet: its probe.
        const RackSent* r = rack_una_rxt();
        reo_at_ = r && rack_.probed != snd_.una ? r->at + answer_wait() : Instant::never();
        return;
    }
    const Instant at = now + reo_wnd();
    if (!reo_at_.is_never() && rack_.una == snd_.una) {  // already running for this hole (or its probe)
        reo_at_ = std::min(reo_at_, at);
        return;
    }
    rack_.una = snd_.una;
    reo_at_ = at;
}

void Tcb::on_reo_timeout(Instant now, Actions& out) {
    reo_at_ = Instant::never();
    if (sb_.empty() || snd_.max == snd_.una) return;
    if (in_recovery_) {
        const bool original = rack_una_original();
        const RackSent* r = rack_una_rxt();
        if (snd_.una == rack_.una && (original || rack_una_rxt_lost())) {
            ++st_.rack_losses;
            // A lost retransmission goes again whole: sent now with SACK
            // blocks, its first segment may be shorter than it was.
            const uint32_t n = original ? emit_data(snd_.una, snd_.mss, true, now, out)
                                        : rack_resend_una(r->end, now, out);
            if (n == 0) return;
            ++st_.retrans_sack;
            if (original) high_rxt_ = snd_.una + n;  // NextSeg goes on above it
        } else if (r && rack_.probed != snd_.una && now - r->at >= answer_wait()) {
            if (rack_resend_una(r->end, now, out) == 0) return;
            ++st_.tlp_probes;
            ++st_.retrans_probe;
            rack_.probed = snd_.una;
        }
        arm_reo_timer(now);  // the probe of what was just sent
        return;
    }
    if (snd_.una != rack_.una) return;
    if (!may_start_recovery()) return;
    ++st_.rack_losses;
    fast_retransmit(now, out);
}

// [snd.una, end) once more, in as many segments as the options leave room
// for (a retransmission of snd.una: at most one MSS, usually one segment).
uint32_t Tcb::rack_resend_una(SeqNum end, Instant now, Actions& out) {
    uint32_t sent = 0;
    for (SeqNum seq = snd_.una; end - seq > 0 && sent < 2 * snd_.mss;) {
        const uint32_t n = emit_data(seq, std::min<uint32_t>(uint32_t(end - seq), snd_.mss), true, now, out);
        if (n == 0) break;
        sent += n;
        seq = seq + n;
    }
    return sent;
}

// emit_data() sent [seq, end) again during a recovery: logged, and when it
// is snd.una's, its probe is due unless something answers first.
void Tcb::rack_note_retransmit(SeqNum seq, SeqNum end, Instant now) {
    if (rack_.sent_n == Rack::kSent) {
        std::copy(rack_.sent.begin() + 1, rack_.sent.end(), rack_.sent.begin());
        --rack_.sent_n;
    }
    rack_.sent[rack_.sent_n++] = RackSent{seq, end, snd_.max, now};
    if (seq == snd_.una && reo_at_.is_never() && rack_.probed != snd_.una && rack_timer_usable())
        reo_at_ = now + answer_wait();
}

// The cumulative ACK moved in a recovery: the retransmissions it passed
// leave the log, the latest send time among them kept.
void Tcb::rack_on_ack() {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < rack_.sent_n; ++i) {
        const RackSent& r = rack_.sent[i];
        if (r.end - snd_.una <= 0) {
            if (!rack_.acked_at || r.at > *rack_.acked_at) rack_.acked_at = r.at;
        } else {
            rack_.sent[kept++] = r;
        }
    }
    rack_.sent_n = kept;
}

// The latest retransmission in this recovery that carried the byte at
// snd.una, if the log still holds it.
const Tcb::RackSent* Tcb::rack_una_rxt() const {
    for (uint32_t i = rack_.sent_n; i-- > 0;) {
        const RackSent& r = rack_.sent[i];
        if (r.start - snd_.una <= 0 && r.end - snd_.una > 0) return &r;
    }
    return nullptr;
}

// In a recovery: the segment at snd.una has not been sent again in it (it
// lies at or above HighRxt), is not SACKed, and data above it is.
bool Tcb::rack_una_original() const {
    return snd_.una - high_rxt_ >= 0 && !sb_.is_sacked(snd_.una) && sb_.highest_sacked() - snd_.una > 0;
}

// snd.una's last retransmission is still missing while something sent after
// it has been delivered: new data SACKed (above what snd.max was then), a
// later retransmission SACKed, or one the cumulative ACK passed.
bool Tcb::rack_una_rxt_lost() const {
    const RackSent* r = rack_una_rxt();
    if (!r || sb_.is_sacked(snd_.una)) return false;
    if (sb_.highest_sacked() - r->max > 0) return true;
    if (rack_.acked_at && *rack_.acked_at > r->at) return true;
    for (const RackSent* later = r + 1; later < rack_.sent.data() + rack_.sent_n; ++later)
        if (later->start - snd_.una > 0 && sb_.is_sacked(later->start)) return true;
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
    rack_.sent_n = 0;
    rack_.acked_at.reset();
    rack_.probed.reset();
}

} // namespace crescent::tcp
