// crescent — the sans-IO TCP control block: a lost tail found without the
// retransmission timeout (tcb.cpp holds the rest; tcb.hpp the RFC list).
//
//   RFC 8985 §7  Tail Loss Probe: when the ACKs stop with data outstanding and
//                no loss recovery under way, send one segment — the next new
//                one, or the last one sent again — after a probe timeout (PTO)
//                of about two round trips. The ACK it draws carries the SACK
//                blocks that start a fast recovery for whatever else is
//                missing, or acknowledges the tail the probe repaired. §7.4: a
//                probe that repaired a loss costs the window what a fast
//                recovery would; one the receiver reports duplicate (D-SACK),
//                or whose original and probe are both acknowledged by a plain
//                duplicate ACK, costs nothing.
//   RFC 5827     Early Retransmit (in dup_thresh(), tcb_undo.cpp): with fewer
//                than four segments outstanding and nothing new to send,
//                oseg - 1 duplicate ACKs (or SACKed segments) mark the hole lost.
//
// A request/response connection always has a tail: each message is one. The
// RTO (5 ms floor here, 200 ms in Linux) is hundreds of round trips in a
// datacenter; the probe makes a lost last segment of a message cost ~2 RTT
// plus, when it was alone in flight, the peer's delayed-ACK allowance.
//
// The delayed-ACK allowance (WCDelAckT) is learned per connection. RFC 8985
// recommends 200 ms for a receiver not known; that is the RTO again for the
// tail of an RPC, which is usually alone in flight (the message's earlier
// segments already acknowledged). An RPC peer answers a request with its
// response, so the ACK of the last segment comes after the peer's service
// time, not its delayed-ACK timer. Every RTT sample taken when one segment
// was in flight measures that: the sample less min_RTT is how long this peer
// held the ACK. The allowance follows those delays — up at once to a longer
// one, down by 1/8 of the difference per shorter one — and is
// tlp_max_ack_delay (also its ceiling) until the first. A probe of a lone
// segment that proves spurious (the original arrived) doubles it — at least
// to tlp_min_pto, at most to the ceiling: the peer may hold its ACKs longer
// than the samples showed (the sample of the original's ACK may echo the
// probe's timestamp and miss the delay), or the original's ACK was lost,
// which at 1 % loss happens to one lone segment in fifty. Going back to the
// ceiling on each, as this did first, made every later lone tail wait ~2 ms
// for its probe until samples brought the allowance down 1/8 at a time. Linux's
// tcp_schedule_loss_probe() adds TCP_RTO_MIN (200 ms) for a lone segment;
// QUIC's max_ack_delay is the same allowance, announced by the peer rather
// than measured.
//
// Timers: the PTO has its own deadline (pto_at_), earlier than the RTO's
// (rto_at_); a probe re-arms the RTO from the moment it goes (§7.3), so the
// RTO only fires when the probe too drew nothing. Linux's tcp_schedule_loss_probe(),
// tcp_send_loss_probe() and tcp_process_tlp_ack() are the same design.
//
// Three departures from §7, all for a tail lost more than once:
// - A probe that draws no ACK at all is followed by a second one, twice the
//   PTO later, when the RTO is further off (tlp_max_probes; 1 is the RFC).
//   A receiver sends one ACK for a whole train (ack_hold_segments): when it
//   is lost, the probe draws the only other, and with the probe lost too the
//   RTO — 5 ms here, hundreds of round trips — was the rest of the message's
//   latency (28 of 31 RTOs in the simulator's 64 KiB request/response at 2 %
//   loss). The RTO would send one segment as well, and collapse cwnd; a
//   second probe found spurious costs nothing.
// - A fast recovery left with nothing to judge — no SACK block above
//   snd.una, everything sent — is probed like any tail. RFC 8985 sends no
//   probe in a recovery because its SACK blocks drive the repair; once the
//   cumulative ACK has passed every SACKed block and the ACK for the rest is
//   lost, there are none, and nothing but the RTO was left. Such a probe's
//   repair takes nothing more from the window: the recovery made its one
//   response already.
// - A new flight ends an episode that waits at ACK == TLP.end_seq for a
//   D-SACK (tlp_settle()), so that the flight can have a probe of its own.
//   In request/response traffic nothing more is sent until the next message,
//   whose ACK alone would settle the episode; with that ACK lost, the RTO.
#include "stack/tcp/tcb.hpp"
#include "stack/tcp/tcb_detail.hpp"

#include <algorithm>

namespace crescent::tcp {

// RFC 8985 §7.2: the conditions for scheduling a probe, an episode's first.
bool Tcb::probe_allowed() const { return !tlp_.active && probe_conditions(); }

// The same but the open episode: what a later probe of it also needs. A
// recovery may still be open (snd.una short of `recover`) with nothing left
// in it to judge: no SACK block above snd.una, everything sent. Its ACKs
// stopping is a tail like any other, and RFC 8985 §7 leaves it to the RTO
// only because a recovery usually has SACK blocks to work from.
bool Tcb::probe_conditions() const {
    return cfg_.tlp && sack_ok_ && have_rtt_ && backoff_ == 0 && sb_.empty() && snd_.nxt == snd_.max &&
           snd_.max != snd_.una && snd_.wnd != 0 && can_send_data();
}

// RFC 8985 §7.2: PTO = 2 * SRTT, plus the peer's delayed-ACK allowance when a
// single segment is in flight (nothing else can make the receiver ACK at once):
// the learned delay and a quarter more, once there is one.
Duration Tcb::probe_timeout() const {
    Duration pto = srtt_ * 2;
    if (uint32_t(snd_.max - snd_.una) <= snd_.mss)
        pto += ack_delay_ ? std::min(*ack_delay_ + *ack_delay_ / 4, cfg_.tlp_max_ack_delay) : cfg_.tlp_max_ack_delay;
    return std::max(pto, cfg_.tlp_min_pto);
}

// How long an answer the peer sends at once may take: 2 SRTT, at least
// tlp_min_pto. A retransmission at snd.una waits this long before its probe
// (a receiver ACKs a hole-filling segment at once, RFC 5681 §4.2); a D-SACK
// follows the ACK it belongs with within it.
Duration Tcb::answer_wait() const { return std::max(srtt_ * 2, cfg_.tlp_min_pto); }

// An RTT sample of a lone segment: the peer held its ACK for `rtt` - min_RTT.
void Tcb::ack_delay_sample(Duration rtt) {
    const Duration d = std::clamp(rtt - min_rtt_, Duration::zero(), cfg_.tlp_max_ack_delay);
    if (!ack_delay_ || d > *ack_delay_) ack_delay_ = d;
    else *ack_delay_ -= (*ack_delay_ - d) / 8;
}

// After new data went out, or an ACK moved snd.una with data still outstanding.
void Tcb::schedule_probe(Instant now) {
    if (!probe_allowed()) {
        pto_at_ = Instant::never();
        return;
    }
    // An RTO due sooner sends the probe instead (§7.2: the TLP goes at the RTO's time).
    pto_at_ = std::min(now + probe_timeout(), rto_at_);
}

// The highest-sequence segment sent so far: as much below snd.max as one
// segment carries now (a FIN already sent rides along again). Rule 4 of
// NextSeg() and the probe send it; both are about the last byte, which a
// segment that SACK blocks shorten would otherwise leave out.
SackScoreboard::Range Tcb::last_segment() const {
    const SeqNum data_hi = snd_.max - data_end() > 0 ? data_end() : snd_.max;
    const uint32_t len = std::min<uint32_t>(uint32_t(data_hi - snd_.una), segment_room());
    return {data_hi - len, len};
}

// RFC 8985 §7.3: the PTO expired. With an episode open, it is the timer of
// a later probe, which only runs while nothing at all has been heard since
// the last one (every ACK stops it: tlp_on_dupack(), schedule_probe()).
void Tcb::on_probe(Instant now, Actions& out) {
    pto_at_ = Instant::never();
    const bool again = tlp_.active;
    if ((again && tlp_.probes >= cfg_.tlp_max_probes) || !probe_conditions())
        return;  // recovery began, or all of it was acknowledged
    // New data when the peer's window takes it (cwnd aside: the probe is what
    // makes the ACK clock run again), else the last segment again.
    SeqNum start = snd_.nxt;
    uint32_t n = 0;
    bool retrans = false;
    const int32_t rroom = snd_wnd_end() - snd_.nxt;
    if (data_end() - snd_.nxt > 0 && rroom > 0)
        n = emit_data(snd_.nxt, std::min<uint32_t>(uint32_t(rroom), snd_.mss), false, now, out);
    if (n == 0) {
        const SackScoreboard::Range tail = last_segment();
        start = tail.start;
        n = emit_data(tail.start, tail.len, true, now, out);
        retrans = true;
    }
    if (n == 0) return;
    ++st_.tlp_probes;
    if (retrans) ++st_.retrans_probe;
    tlp_.active = true;  // one episode per flight, until it ends (§7.4)
    tlp_.probes = again ? tlp_.probes + 1 : 1;
    tlp_.retrans = retrans;
    if (!again) {
        tlp_.lone = uint32_t(snd_.max - snd_.una) <= snd_.mss;
        tlp_.in_recovery = in_recovery_;
    }
    tlp_.start = start;
    tlp_.end = snd_.max;
    rto_at_ = now + rto_;
    // The next probe, when the RTO is further off than twice this PTO: the
    // RTO collapses cwnd and its 5 ms floor is hundreds of round trips, while
    // a probe found spurious costs nothing (§7.4).
    if (tlp_.probes < cfg_.tlp_max_probes) {
        const Instant next = now + probe_timeout() * 2;
        if (next < rto_at_) pto_at_ = next;
    }
}

// RFC 8985 §7.4.2, on an ACK that advanced snd.una (`flight` bytes were
// outstanding before it). A D-SACK of the probe (tlp_on_dsack()) has
// already ended an episode that repaired nothing.
void Tcb::tlp_on_ack(SeqNum ack, uint32_t flight, Instant now) {
    if (ack - tlp_.end < 0) return;  // the probe is not acknowledged yet
    if (!tlp_.retrans) {
        tlp_.active = false;  // new data: nothing to judge
        return;
    }
    // ACK == TLP.end_seq: the original or the probe; a D-SACK or a duplicate
    // ACK for the other may follow. Past it without either: the probe was
    // the only copy that arrived — a loss, repaired.
    if (ack == tlp_.end) {
        tlp_.end_acked_at = now;
        tlp_.flight = flight;
        return;
    }
    tlp_repaired(flight, now);
}

// The probe was the only copy that arrived: the window pays what a fast
// recovery's would, unless a recovery already made that response.
void Tcb::tlp_repaired(uint32_t flight, Instant now) {
    tlp_.active = false;
    ++st_.tlp_recoveries;
    if (tlp_.in_recovery) return;  // the recovery's response covers it (one per window)
    cc_.on_loss(flight, now);
    cc_.on_recovery_exit(now);
    undo_.cc.reset();  // an undo would take back this response too
}

// A new flight went out while the episode waits at ACK == TLP.end_seq for a
// D-SACK: request/response traffic sends nothing past the probe until the
// next message, and the ACK that would settle the episode is that message's
// own — while it is open the new flight could have no probe, and its one
// ACK lost would cost the RTO. The episode ends now: a repaired loss when the
// D-SACK has had a probe timeout to arrive (it follows the original's ACK
// by no more than the gap between the original and the probe), else unjudged.
void Tcb::tlp_settle(Instant now) {
    if (!tlp_.active || !tlp_.retrans || snd_.una != tlp_.end) return;
    if (now - tlp_.end_acked_at >= answer_wait()) tlp_repaired(tlp_.flight, now);
    else tlp_.active = false;
}

// A probe found spurious: when it was of a lone segment, the allowance may
// be shorter than this peer's ACK delay, or the original's ACK was lost; it
// doubles (see the top of this file).
void Tcb::tlp_spurious() {
    tlp_.active = false;
    if (tlp_.lone)
        ack_delay_ = ack_delay_ ? std::min(std::max(*ack_delay_ * 2, cfg_.tlp_min_pto), cfg_.tlp_max_ack_delay)
                                : cfg_.tlp_max_ack_delay;
}

// A D-SACK arrived while a probe's episode is open.
void Tcb::tlp_on_dsack(const SackBlock& b) {
    if (tlp_.retrans && b.left - tlp_.end < 0 && b.right - tlp_.start > 0) tlp_spurious();
}

// A duplicate ACK (snd.una did not move) while a probe's episode is open: one
// at TLP.end_seq that reports nothing new was the second copy's — the original
// and the probe both arrived (a receiver that sends no D-SACK).
// Any ACK also stops the timer of a later probe: the peer is heard from.
void Tcb::tlp_on_dupack(SeqNum ack, bool reports_new) {
    pto_at_ = Instant::never();
    if (ack == tlp_.end && !reports_new) tlp_spurious();
}

} // namespace crescent::tcp
