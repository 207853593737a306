// crescent — the sans-IO TCP control block. See tcb.hpp for the RFC list.
//
// Layout (this file, and tcb_open.cpp, tcb_ack.cpp, tcb_output.cpp,
// tcb_timers.cpp beside it):
//   1. names, helpers
//   2. construction; opening: connect / accept_syn / accept_cookie, the
//      negotiated options, RFC 9293 §3.10.7.3 SYN-SENT (tcb_open.cpp)
//   3. on_segment: the fast-path predicate and the fast path
//   4. the slow path: RFC 9293 §3.10.7.4 (synchronized states)
//   5. ACK processing: RTT (RFC 6298 / 7323), SACK, recovery (RFC 6675 / 6582), ECN
//      (tcb_ack.cpp)
//   6. receiving data: reassembly, delayed ACK, FIN
//   7. output: segmentation, SWS avoidance, Nagle, recovery transmissions
//      (tcb_output.cpp)
//   8. timers: RTO, persist, delayed ACK, keepalive, TIME-WAIT, FIN-WAIT-2
//      (tcb_timers.cpp)
//   9. application calls
#include "stack/tcp/tcb.hpp"
#include "stack/tcp/tcb_detail.hpp"

#include <algorithm>
#include <cassert>

namespace crescent::tcp {

using namespace wire::tcp_flags;
using std::chrono::duration_cast;
using namespace detail;

std::string_view state_name(State s) {
    switch (s) {
    case State::Closed: return "CLOSED";
    case State::Listen: return "LISTEN";
    case State::SynSent: return "SYN-SENT";
    case State::SynReceived: return "SYN-RECEIVED";
    case State::Established: return "ESTABLISHED";
    case State::FinWait1: return "FIN-WAIT-1";
    case State::FinWait2: return "FIN-WAIT-2";
    case State::CloseWait: return "CLOSE-WAIT";
    case State::Closing: return "CLOSING";
    case State::LastAck: return "LAST-ACK";
    case State::TimeWait: return "TIME-WAIT";
    }
    return "?";
}

std::string_view close_reason_name(CloseReason r) {
    switch (r) {
    case CloseReason::None: return "none";
    case CloseReason::Normal: return "normal";
    case CloseReason::ResetByPeer: return "reset by peer";
    case CloseReason::Refused: return "refused";
    case CloseReason::ConnectTimeout: return "connect timeout";
    case CloseReason::RetransmitTimeout: return "retransmission timeout";
    case CloseReason::KeepaliveTimeout: return "keepalive timeout";
    case CloseReason::FinWait2Timeout: return "FIN-WAIT-2 timeout";
    case CloseReason::AbortedLocally: return "aborted locally";
    }
    return "?";
}

bool reset_for(const TcpRepr& in, size_t payload_len, TcpRepr* out) {
    if (in.has(RST)) return false;
    *out = TcpRepr{};
    out->src_port = in.dst_port;
    out->dst_port = in.src_port;
    if (in.has(ACK)) {
        // <SEQ=SEG.ACK><CTL=RST>
        out->seq = in.ack;
        out->flags = RST;
    } else {
        // <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>
        out->seq = SeqNum(0);
        out->ack = in.seq + in.seg_len(payload_len);
        out->flags = RST | ACK;
    }
    return true;
}

// ============================================================================
// 2. construction (opening: tcb_open.cpp)

Tcb::Tcb(const Config& cfg, ConnId id, Endpoints ep)
    : cfg_(cfg), id_(id), ep_(ep), cc_(cfg.cc, cfg.mss, Instant::zero(), cfg.abc_limit), rto_(cfg.initial_rto),
      reasm_(cfg.reassembly) {
    sq_.resize(16);
    reasm_out_.reserve(16);
}

Tcb::~Tcb() = default;

bool Tcb::wants_ecn() const {
    switch (cfg_.ecn) {
    case EcnMode::Off: return false;
    case EcnMode::CcDefault: return cc_.wants_ecn();
    case EcnMode::On: return true;
    }
    return false;
}

void Tcb::push_event(EventKind k, Actions& out, CloseReason r, uint32_t bytes) {
    out.events.push_back(Event{id_, k, r, bytes, 0});
}

// ============================================================================
// 3. on_segment and the fast path

// The one predicate in front of the slow path (Caladan style): ESTABLISHED,
// the expected sequence number, only ACK (+PSH), the ACK inside
// [snd.una, snd.max], a window that is open (it may have moved: a peer's
// SWS-avoiding receiver advertises a right edge that stays put while RCV.NXT
// advances, so in request/response traffic nearly every segment carries a
// different window), no out-of-order / SACK / recovery state, no ECN marks,
// PAWS trivially passed, the data fits the window.
bool Tcb::fast_path_ok(const TcpRepr& seg, size_t len) const {
    return state_ == State::Established && (seg.flags & ~PSH) == ACK && seg.seq == rcv_.nxt &&
           seg.ack - snd_.una >= 0 && seg.ack - snd_.max <= 0 && seg.window != 0 &&
           !in_recovery_ && dupacks_ == 0 && reasm_.empty() && sb_.empty() && seg.opts.sack_count == 0 &&
           (!ts_ok_ || (seg.opts.ts && int32_t(seg.opts.ts->tsval - ts_recent_) >= 0)) &&
           len <= uint32_t(rcv_.adv - rcv_.nxt) && !app_closed_ && !ce_pending_ && snd_.wnd != 0 &&
           // a pure duplicate ACK with data outstanding is loss-detection work
           (len > 0 || seg.ack != snd_.una || snd_.max == snd_.una);
}

void Tcb::on_segment(const TcpRepr& seg, uint8_t ip_ecn, Slice payload, Instant now, Actions& out) {
    ++st_.segs_in;
    if (fast_path_ok(seg, payload.size()) && (ip_ecn & kEcnCe) != kEcnCe) [[likely]] {
        fast_path(seg, std::move(payload), now, out);
        return;
    }
    segment_slow(seg, ip_ecn, std::move(payload), now, out);
}

void Tcb::fast_path(const TcpRepr& seg, Slice payload, Instant now, Actions& out) {
    ++st_.fast_path;
    last_rx_ = now;
    keepalive_probes_ = 0;
    probes_unanswered_ = 0;
    if (ts_ok_ && seg.seq - last_ack_sent_ <= 0) { // RFC 7323 §4.3
        ts_recent_ = seg.opts.ts->tsval;
        ts_recent_age_ = now;
    }
    bool advanced = seg.ack != snd_.una;
    // The window: ack_advanced() applies it (RFC 9293 §3.10.7.4 fifth);
    // otherwise it may still have moved (the same ACK, new data). Moved means
    // its right edge did: the same value from a later ACK than SND.WL2 moves
    // it too (snd_wnd_end()).
    const bool window_moved = seg.ack + (uint32_t(seg.window) << snd_.wscale) != snd_wnd_end();
    if (advanced) ack_advanced(seg, now, out);
    else if (window_moved) update_window(seg);
    if (!advanced && tlp_.active) [[unlikely]] tlp_on_dupack(seg.ack, !payload.empty() || window_moved);
    if (!payload.empty()) {
        uint32_t n = uint32_t(payload.size());
        rcv_.nxt += n;
        rcv_.unread += n;
        st_.bytes_in += n;
        out.readable.push_back(Readable{id_, std::move(payload)});
        ack_received_data(seg.has(PSH), false, now, out);
    }
    if (advanced || ack_now_ || window_moved) output(now, out);
    update_deadline();
}

// ============================================================================
// 4. the slow path

void Tcb::segment_slow(const TcpRepr& seg, uint8_t ip_ecn, Slice payload, Instant now, Actions& out) {
    switch (state_) {
    case State::Closed: {
        // RFC 9293 §3.10.7.1: all data discarded; a RST answers anything but a RST.
        TcpRepr r;
        if (reset_for(seg, payload.size(), &r)) {
            OutSegment o;
            o.conn = id_;
            o.src = ep_.local_ip;
            o.dst = ep_.remote_ip;
            o.repr = r;
            out.segments.push_back(o);
            ++st_.segs_out;
        }
        break;
    }
    case State::Listen:
        // Listening is the Host's job (backlog, cookies); a lone Tcb never listens.
        ++st_.drop_not_acceptable;
        break;
    case State::SynSent:
        syn_sent_arrives(seg, ip_ecn, std::move(payload), now, out);
        break;
    case State::SynReceived:
    case State::Established:
    case State::FinWait1:
    case State::FinWait2:
    case State::CloseWait:
    case State::Closing:
    case State::LastAck:
    case State::TimeWait:
        synchronized_arrives(seg, ip_ecn, std::move(payload), now, out);
        break;
    }
    update_deadline();
}

// RFC 7323 §5.3 R1 rejects a TSval older than TS.Recent. Like Linux
// (TCP_PAWS_WINDOW), allow one tick of the peer's clock — and, once the
// clock's rate is known, a millisecond of it: a data segment that a
// retransmission with a newer TSval overtook is data, not an old duplicate
// from a wrapped sequence space (what PAWS guards against, on a scale of
// MSLs, not milliseconds). The rate is the peer's TSval advance over our
// clock since the handshake: a ms clock (Linux) gets 1 tick, a us clock
// (crescent, Linux's usec option) 1000.
uint32_t Tcb::paws_window() const {
    const int64_t ns = (ts_recent_age_ - ts_first_at_).count();
    if (ns < 50'000'000) return 1;  // too short a time to tell the rate
    const uint64_t ticks = uint32_t(ts_recent_ - ts_first_);
    return uint32_t(std::clamp<uint64_t>(ticks * 1'000'000 / uint64_t(ns), 1, 1'000'000));
}

// RFC 7323 §5.3 R1, with the allowances above and Linux's for a duplicate
// ACK (tcp_disordered_ack()): a pure ACK at RCV.NXT that acknowledges nothing
// new and moves no window, its TSval within an RTO of TS.Recent, is an ACK
// that a later one overtook — its SACK blocks are news, not a replay.
bool Tcb::paws_rejects(const TcpRepr& seg, uint32_t len, Instant now) const {
    const int32_t older = int32_t(ts_recent_ - seg.opts.ts->tsval);
    const uint32_t per_ms = paws_window();
    if (older <= int32_t(per_ms) || now - ts_recent_age_ >= kPawsIdle) return false;
    if (len == 0 && (seg.flags & ~PSH) == ACK && seg.seq == rcv_.nxt && seg.ack == snd_.una &&
        (uint32_t(seg.window) << snd_.wscale) == snd_.wnd) {
        const uint64_t rto_ms = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(rto_).count()) + 1;
        if (uint64_t(older) <= rto_ms * per_ms) return false;
    }
    return true;
}

bool Tcb::check_seq_acceptable(const TcpRepr& seg, uint32_t len) const {
    // RFC 9293 §3.10.7.4 first: the four cases, against the window we advertised.
    int32_t w = rcv_.adv - rcv_.nxt;
    uint32_t wnd = w > 0 ? uint32_t(w) : 0;
    // RCV.WND = 0: "no segments will be acceptable, but special allowance
    // should be made to accept valid ACKs, URGs, and RSTs" — a segment at
    // RCV.NXT passes for its control fields, and the seventh step drops its
    // text (as Linux's tcp_sequence() does). Without this, a peer that
    // piggybacks its ACKs on data while our window is closed could never
    // drain our send queue, and an echo-style app that only reads once it
    // can write would deadlock both ends. A pure ACK below RCV.NXT is still
    // refused here, but its ACK is taken all the same (zero_window_ack()).
    if (wnd == 0) return seg.seq == rcv_.nxt;
    // A segment of no length may also sit at the right edge itself: a peer
    // that filled our window has SND.NXT there, and its ACKs carry it (our
    // ack_seq() does the same). RFC 9293's test ends one short of the edge;
    // Linux (tcp_sequence()) and FreeBSD take it, and refusing it threw
    // away the ACKs of a peer whose data ahead of a hole filled the window.
    if (len == 0) return seq_in(seg.seq, rcv_.nxt, rcv_.nxt + wnd + 1);
    return seq_in(seg.seq, rcv_.nxt, rcv_.nxt + wnd) || seq_in(seg.seq + (len - 1), rcv_.nxt, rcv_.nxt + wnd);
}

bool Tcb::zero_window_ack(const TcpRepr& seg, uint32_t len) const {
    if (rcv_.adv - rcv_.nxt > 0 || len != 0 || !seg.has(ACK) || seg.has(SYN) || seg.has(FIN) || seg.has(RST))
        return false;
    // Below RCV.NXT by no more than a buffer's worth (what the peer can have
    // sent since its SND.UNA), and acknowledging something new we did send.
    return seg.seq - rcv_.nxt < 0 && rcv_.nxt - seg.seq <= int32_t(cfg_.rcv_buf) && seg.ack - snd_.una > 0 &&
           seg.ack - snd_.max <= 0;
}

bool Tcb::challenge_ack(Instant now, Actions& out) {
    // RFC 5961 §7: rate-limit challenge ACKs.
    if (now - chack_window_start_ >= cfg_.challenge_ack_interval) {
        chack_window_start_ = now;
        chack_count_ = 0;
    }
    if (chack_count_ >= cfg_.challenge_ack_limit) {
        ++st_.challenge_acks_suppressed;
        return false;
    }
    ++chack_count_;
    ++st_.challenge_acks;
    send_ack(now, out);
    return true;
}

void Tcb::answer_unacceptable(const TcpRepr& seg, uint32_t seg_len, Instant now, Actions& out) {
    if (oow_.allow(seg, seg_len, rcv_.nxt, now, cfg_.oow_ack_interval))
        send_ack(now, out);
    else
        ++st_.oow_acks_suppressed;
}

// RFC 9293 §3.10.7.4 "Otherwise" (SYN-RECEIVED and every later state).
void Tcb::synchronized_arrives(const TcpRepr& seg, uint8_t ip_ecn, Slice payload, Instant now, Actions& out) {
    uint32_t len = uint32_t(payload.size());
    uint32_t seg_len = seg.seg_len(len);

    // A retransmitted SYN in SYN-RECEIVED means our SYN-ACK was lost: answer
    // it at once rather than after the RTO (as Linux does). Karn: no timing.
    if (state_ == State::SynReceived && seg.has(SYN) && !seg.has(ACK) && !seg.has(RST) && seg.seq == rcv_.irs) {
        ++st_.retrans_timeout;
        send_syn(true, now, out);
        rtt_timing_ = false;
        return;
    }

    // RFC 7323 §5.3 R1: PAWS before the sequence check (not for RST, R1 note).
    if (ts_ok_ && seg.opts.ts && !seg.has(RST) && paws_rejects(seg, len, now)) {
        ++st_.drop_paws;
        // An old duplicate is still reported as one (RFC 2883; Linux's
        // tcp_send_dupack()): the peer's undo needs to hear of it.
        if (len > 0 && seg.seq - rcv_.nxt < 0) {
            const SeqNum end = seg.seq + len - rcv_.nxt > 0 ? rcv_.nxt : seg.seq + len;
            note_duplicate(seg.seq, end);
        }
        answer_unacceptable(seg, seg_len, now, out);
        return;
    }

    // first: check the sequence number.
    if (!check_seq_acceptable(seg, seg_len)) {
        ++st_.drop_not_acceptable;
        // Data wholly below RCV.NXT: a spurious retransmission to report.
        if (len > 0 && seg.seq + len - rcv_.nxt <= 0) note_duplicate(seg.seq, seg.seq + len);
        if (!seg.has(RST)) {
            // <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>; in TIME-WAIT a retransmitted
            // FIN also restarts the 2 MSL timer (RFC 9293 §3.10.7.4 eighth).
            if (state_ == State::TimeWait && seg.has(FIN)) state_at_ = now + cfg_.time_wait;
            // RCV.WND = 0: "special allowance should be made to accept valid
            // ACKs". A pure ACK below RCV.NXT (the peer's SEQ = its SND.UNA,
            // sent before our ACK reached it) still acknowledges our data:
            // taken, so our answer carries a SEQ the peer accepts. Refusing
            // it too, two ends whose windows closed on data in flight both
            // ways answer each other's ACKs for ever (session 37).
            if (zero_window_ack(seg, len)) process_ack(seg, 0, now, out);
            answer_unacceptable(seg, seg_len, now, out);
        }
        return;
    }
    last_rx_ = now;
    keepalive_probes_ = 0;
    probes_unanswered_ = 0;

    // second: check the RST bit (RFC 5961 §3.2).
    if (seg.has(RST)) {
        if (seg.seq != rcv_.nxt) {
            // In the window but not exact: challenge ACK.
            challenge_ack(now, out);
            return;
        }
        switch (state_) {
        case State::SynReceived:
            // Passive open: back to LISTEN — for us, the Host drops the embryo.
            // Active (simultaneous) open: connection refused.
            to_closed(CloseReason::Refused, out);
            return;
        case State::Established:
        case State::FinWait1:
        case State::FinWait2:
        case State::CloseWait:
            to_closed(CloseReason::ResetByPeer, out);
            return;
        case State::Closing:
        case State::LastAck:
            to_closed(CloseReason::ResetByPeer, out);
            return;
        case State::TimeWait:
            // RFC 1337 TIME-WAIT assassination: ignore RSTs in TIME-WAIT.
            ++st_.drop_rst_invalid;
            return;
        case State::Closed:
        case State::Listen:
        case State::SynSent:
            return; // not reached
        }
    }

    // third: security/compartment — nothing to check (obsolete IP option, as above).

    // fourth: check the SYN bit. RFC 5961 §4.2: any SYN in a synchronized
    // state gets a challenge ACK and is dropped.
    if (seg.has(SYN)) {
        challenge_ack(now, out);
        return;
    }

    // fifth: check the ACK field.
    if (!seg.has(ACK)) {
        ++st_.drop_no_ack;
        return;
    }
    // RFC 5961 §5.2 ACK validity: (SND.UNA - MAX.SND.WND) =< SEG.ACK =< SND.NXT.
    if (seg.ack - snd_.max > 0) {
        ++st_.drop_bad_ack;
        answer_unacceptable(seg, seg_len, now, out);
        return;
    }
    if (seg.ack - (snd_.una - std::max<uint32_t>(snd_.max_wnd, 1)) < 0) {
        ++st_.drop_bad_ack;
        challenge_ack(now, out);
        return;
    }
    if (state_ == State::SynReceived) {
        // SND.UNA < SEG.ACK =< SND.NXT: ESTABLISHED, take the window.
        if (seg.ack - snd_.una > 0) {
            state_ = fin_queued_ ? State::FinWait1 : State::Established;
            snd_.wnd = uint32_t(seg.window) << snd_.wscale;
            snd_.max_wnd = std::max(snd_.max_wnd, snd_.wnd);
            snd_.wl1 = seg.seq;
            snd_.wl2 = seg.ack;
            push_event(EventKind::Connected, out);
            if (cfg_.keepalive.enabled) keepalive_at_ = now + cfg_.keepalive.idle;
        } else {
            // <SEQ=SEG.ACK><CTL=RST>
            send_rst(seg.ack, out);
            return;
        }
    }
    // RFC 7323 §4.3: TS.Recent from a segment that is in order up to Last.ACK.sent.
    if (ts_ok_ && seg.opts.ts && seg.seq - last_ack_sent_ <= 0 &&
        int32_t(seg.opts.ts->tsval - ts_recent_) >= 0) {
        ts_recent_ = seg.opts.ts->tsval;
        ts_recent_age_ = now;
    }
    if (!process_ack(seg, len, now, out)) return;
    arm_reo_timer(now);

    // Our FIN acknowledged?
    bool fin_acked = fin_sent_ && snd_.una == data_end() + 1;
    switch (state_) {
    case State::FinWait1:
        if (fin_acked) {
            state_ = State::FinWait2;
            if (app_closed_ && cfg_.fin_wait2_timeout.count() > 0) state_at_ = now + cfg_.fin_wait2_timeout;
        }
        break;
    case State::Closing:
        if (fin_acked) enter_time_wait(now, out);
        break;
    case State::LastAck:
        if (fin_acked) {
            to_closed(CloseReason::Normal, out);
            return;
        }
        break;
    case State::TimeWait:
        // Only a retransmitted FIN can arrive here: handled below (eighth).
        break;
    case State::Established:
    case State::FinWait2:
    case State::CloseWait:
    case State::SynReceived:
    case State::Closed:
    case State::Listen:
    case State::SynSent:
        break;
    }

    // sixth: URG — urgent data is not supported; the pointer is ignored (RFC 6093).

    // ECN receive side (RFC 3168 §6.1.3 / RFC 8257 §3.2).
    if (ecn_ok_) {
        bool ce = (ip_ecn & kEcnCe) == kEcnCe;
        if (ce) ++st_.ecn_ce_received;
        if (cc_.algo() == CcAlgo::Dctcp) {
            if (ce != ce_pending_) {
                // State change: ACK what came before with the old ECE value.
                if (delack_segs_ > 0) send_ack(now, out);
                ce_pending_ = ce;
            }
        } else {
            if (ce) ce_pending_ = true;
            if (seg.has(CWR)) ce_pending_ = ce;
        }
    }

    // seventh: process the segment text.
    bool fin = seg.has(FIN);
    switch (state_) {
    case State::Established:
    case State::FinWait1:
    case State::FinWait2:
        if (len > 0) {
            if (app_closed_) {
                // Data after close(): nobody will read it (RFC 1122 §4.2.2.13).
                ++st_.drop_after_close;
                send_rst(ack_seq(), out);
                to_closed(CloseReason::AbortedLocally, out);
                return;
            }
            receive_data(seg, seg.seq, std::move(payload), now, out);
        }
        break;
    case State::CloseWait:
    case State::Closing:
    case State::LastAck:
    case State::TimeWait:
        // The peer already sent its FIN: ignore any text.
        fin = false;
        break;
    case State::SynReceived:
    case State::Closed:
    case State::Listen:
    case State::SynSent:
        break;
    }
    if (state_ == State::Closed) return;

    // eighth: check the FIN bit.
    if (seg.has(FIN)) {
        switch (state_) {
        case State::TimeWait:
            // A retransmitted FIN: acknowledge it and restart the 2 MSL timeout.
            state_at_ = now + cfg_.time_wait;
            send_ack(now, out);
            break;
        case State::CloseWait:
        case State::Closing:
        case State::LastAck:
            break; // remain in the state
        case State::Established:
        case State::FinWait1:
        case State::FinWait2:
        case State::SynReceived:
            if (fin) {
                SeqNum fin_seq = seg.seq + len;
                if (fin_seq == rcv_.nxt && !fin_received_) {
                    on_fin_received(now, out);
                } else if (fin_seq - rcv_.nxt > 0) {
                    // FIN beyond a hole: keep it with the reassembly queue.
                    if (len == 0) reasm_.insert(fin_seq, Slice(), true, rcv_.nxt);
                    ack_now_ = true;
                }
            }
            break;
        case State::Closed:
        case State::Listen:
        case State::SynSent:
            break;
        }
    }
    output(now, out);
}

// ============================================================================
// 6. receiving data

void Tcb::deliver(Slice payload, Actions& out) {
    uint32_t n = uint32_t(payload.size());
    if (n == 0) return;
    rcv_.nxt += n;
    rcv_.unread += n;
    st_.bytes_in += n;
    out.readable.push_back(Readable{id_, std::move(payload)});
}

// RFC 9293 §3.10.7.4 seventh, with trimming to [RCV.NXT, advertised edge).
void Tcb::receive_data(const TcpRepr& seg, SeqNum seq, Slice payload, Instant now, Actions& out) {
    // Trim what is below RCV.NXT (a retransmission overlapping delivered data).
    if (seg.has(SYN)) seq += 1;
    int32_t below = rcv_.nxt - seq;
    if (below > 0) {
        const uint32_t dup = std::min<uint32_t>(uint32_t(below), uint32_t(payload.size()));
        note_duplicate(seq, seq + dup);
        if (uint32_t(below) >= payload.size()) {
            ack_now_ = true; // pure duplicate: tell the sender
            return;
        }
        payload.remove_prefix(uint32_t(below));
        seq = rcv_.nxt;
    }
    // Trim what is beyond the advertised window.
    int32_t room = rcv_.adv - seq;
    if (room <= 0) {
        ++st_.drop_no_room;
        ack_now_ = true;
        return;
    }
    bool fin = seg.has(FIN);
    if (payload.size() > uint32_t(room)) {
        payload.remove_suffix(payload.size() - uint32_t(room));
        fin = false;  // the FIN lies beyond the window
    }

    if (seq != rcv_.nxt) {
        // Out of order: queue (zero-copy) and ACK at once with SACK blocks
        // (RFC 5681 §4.2: immediate ACK for out-of-order data).
        const SeqNum end = seq + uint32_t(payload.size());
        auto r = reasm_.insert(seq, std::move(payload), fin, rcv_.nxt);
        switch (r) {
        case Reassembly::Insert::Queued: ++st_.ooo_segments; break;
        case Reassembly::Insert::Duplicate:
            if (end - seq > 0) note_duplicate(seq, end);
            break;
        case Reassembly::Insert::NoRoom: ++st_.drop_no_room; break;
        }
        ack_now_ = true;
        return;
    }
    bool had_hole = !reasm_.empty();
    deliver(std::move(payload), out);
    if (had_hole) {
        // Filling a hole: deliver what became in order, ACK at once (RFC 5681 §4.2).
        reasm_out_.clear();
        bool fin_popped = reasm_.pop_in_order(&rcv_.nxt, &reasm_out_);
        for (Slice& s : reasm_out_) {
            uint32_t n = uint32_t(s.size());
            rcv_.unread += n;
            st_.bytes_in += n;
            if (n > 0) out.readable.push_back(Readable{id_, std::move(s)});
        }
        reasm_out_.clear();
        if (fin_popped && !fin_received_) on_fin_received(now, out);
        ack_now_ = true;
        return;
    }
    ack_received_data(seg.has(PSH), false, now, out);
}

// Delayed ACK (RFC 1122 §4.2.3.2, RFC 5681 §4.2): every
// `delayed_ack_segments`-th segment, else within the delayed-ACK timeout.
//
// With ack_hold on, a segment without PSH is held like a count-triggered
// one (ACKed when no more follow within ack_hold), not delayed: the sender
// had more to send at once (it pushes a message's last segment), so a
// segment that arrives alone and unpushed means it is stopped — by its
// window, or after an ACK of ours that was lost, its tail-loss probe
// sending the next new segment — and waits for this ACK. The delayed-ACK
// timer is for a pushed segment, whose answer usually carries the ACK.
void Tcb::ack_received_data(bool pushed, bool force_now, Instant now, Actions& /*out*/) {
    ++delack_segs_;
    if (force_now || delack_segs_ >= cfg_.delayed_ack_segments || (!pushed && cfg_.ack_hold.count() > 0)) {
        if (!force_now && cfg_.ack_hold.count() > 0) {
            hold_ack(now);
        } else {
            ack_now_ = true;
        }
    } else if (delack_at_.is_never()) {
        delack_at_ = now + cfg_.delayed_ack;
    }
}

// Config::ack_hold. Each segment of the train re-arms the hold, so a
// message whose frames arrive a few microseconds apart (the sender's device
// or kernel pushing them one by one) is acknowledged once, by the reply or
// after the train, not every ack_hold. The hold ends at the next flush()
// when ack_hold_segments are unacknowledged or the peer has used half the
// window we last gave it, so a sender that needs the ACK to go on has half
// its window left meanwhile; a sender that stops short waits ack_hold.
void Tcb::hold_ack(Instant now) {
    delack_at_ = now + cfg_.ack_hold;
    const auto unacked = uint32_t(rcv_.nxt - last_ack_sent_);
    const auto given = uint32_t(rcv_.adv - last_ack_sent_);
    if (delack_segs_ >= cfg_.ack_hold_segments || 2 * uint64_t(unacked) >= given) ack_at_flush_ = true;
}

void Tcb::on_fin_received(Instant now, Actions& out) {
    fin_received_ = true;
    rcv_.nxt += 1;
    ack_now_ = true;
    push_event(EventKind::PeerFin, out);
    switch (state_) {
    case State::SynReceived:
    case State::Established:
        state_ = State::CloseWait;
        break;
    case State::FinWait1:
        // Our FIN is not acknowledged yet (else we would be in FIN-WAIT-2): simultaneous close.
        state_ = State::Closing;
        break;
    case State::FinWait2:
        enter_time_wait(now, out);
        break;
    case State::CloseWait:
    case State::Closing:
    case State::LastAck:
    case State::TimeWait:
    case State::Closed:
    case State::Listen:
    case State::SynSent:
        break;
    }
}

void Tcb::enter_time_wait(Instant now, Actions& out) {
    state_ = State::TimeWait;
    rto_at_ = pto_at_ = reo_at_ = persist_at_ = keepalive_at_ = Instant::never();
    state_at_ = now + cfg_.time_wait;
    // Everything we sent is acknowledged: nothing left in the queue.
    if (!closed_reported_) {
        closed_reported_ = true;
        close_reason_ = CloseReason::Normal;
        push_event(EventKind::Closed, out, CloseReason::Normal);
    }
}

void Tcb::to_closed(CloseReason why, Actions& out) {
    state_ = State::Closed;
    rto_at_ = pto_at_ = reo_at_ = persist_at_ = delack_at_ = keepalive_at_ = state_at_ = Instant::never();
    ack_now_ = false;
    ack_at_flush_ = false;
    window_update_due_ = false;
    for (uint32_t i = 0; i < sq_count_; ++i) sq_at(i).reset();
    sq_count_ = 0;
    sq_head_ = 0;
    snd_queued_ = 0;
    cur_valid_ = false;
    reasm_.clear();
    sb_.clear();
    rxt_.clear();
    undo_.cc.reset();
    undo_.pending.clear();
    if (!closed_reported_) {
        closed_reported_ = true;
        close_reason_ = why;
        push_event(EventKind::Closed, out, why);
    }
    update_deadline();
}

// ============================================================================
// 9. application calls

SendResult Tcb::send(Slice& data) {
    switch (state_) {
    case State::SynSent:
    case State::SynReceived:
    case State::Established:
    case State::CloseWait:
        break;
    case State::Closed:
    case State::Listen:
    case State::FinWait1:
    case State::FinWait2:
    case State::Closing:
    case State::LastAck:
    case State::TimeWait:
        return SendResult::InvalidState;
    }
    if (fin_queued_) return SendResult::InvalidState;
    if (data.empty()) return SendResult::Ok;
    if (data.size() > send_space()) {
        want_writable_ = true;
        return SendResult::WouldBlock;
    }
    snd_queued_ += uint32_t(data.size());
    // Bytes that continue the tail slice in the same obj (an RPC encoder's
    // successive messages in one header block) widen it instead of taking an
    // entry: a pipelined burst is one TX view and one queue entry to drop
    // when acknowledged, not one per message.
    if (sq_count_ != 0) {
        Slice& tail = sq_at(sq_count_ - 1);
        if (tail.buf().data() == data.buf().data() && tail.offset() + tail.size() == data.offset()) {
            // The cursor past the tail's last byte now points into the tail.
            if (cur_valid_ && cur_idx_ == sq_count_) {
                cur_idx_ = sq_count_ - 1;
                cur_off_ = uint32_t(tail.size());
            }
            tail.set_size(tail.size() + data.size());
            // Its reference goes as a move into the queue would take it (the
            // caller sees the same moved-from slice either way).
            Slice merged = std::move(data);
            return SendResult::Ok;
        }
    }
    if (sq_count_ == sq_.size()) {
        std::vector<Slice> bigger(sq_.size() * 2);
        for (uint32_t i = 0; i < sq_count_; ++i) bigger[i] = std::move(sq_at(i));
        sq_.swap(bigger);
        sq_head_ = 0;
    }
    sq_at(sq_count_) = std::move(data);
    ++sq_count_;
    return SendResult::Ok;
}

void Tcb::flush(Instant now, Actions& out) {
    if (state_ == State::Closed) return;
    // close() in FIN-WAIT-2 (no `now` there): start the orphan timeout here.
    if (app_closed_ && state_ == State::FinWait2 && state_at_.is_never() && cfg_.fin_wait2_timeout.count() > 0)
        state_at_ = now + cfg_.fin_wait2_timeout;
    if (ack_at_flush_) {
        ack_at_flush_ = false;
        ack_now_ = true;
    }
    output(now, out);
    update_deadline();
}

void Tcb::consume(uint32_t bytes) {
    rcv_.unread -= std::min(bytes, rcv_.unread);
    if (!synchronized(state_) || fin_received_) return;
    // Receiver SWS avoidance (RFC 9293 §3.8.6.2.2): tell the peer once the
    // window can open by min(RCV.BUFF/2, MSS) and what it knows is small.
    int32_t known = rcv_.adv - rcv_.nxt;
    uint32_t step = std::min<uint32_t>(cfg_.rcv_buf / 2, cfg_.mss);
    SeqNum edge = rcv_.nxt + rcv_window_bytes();
    if (edge - rcv_.adv >= int32_t(step) && known < int32_t(cfg_.rcv_buf / 2)) window_update_due_ = true;
}

void Tcb::shutdown_write() {
    if (fin_queued_) return;
    switch (state_) {
    case State::SynSent:
    case State::SynReceived:
        fin_queued_ = true;  // sent after ESTABLISHED (RFC 9293 §3.10.4)
        break;
    case State::Established:
        fin_queued_ = true;
        state_ = State::FinWait1;
        break;
    case State::CloseWait:
        fin_queued_ = true;
        state_ = State::LastAck;
        break;
    case State::Closed:
    case State::Listen:
    case State::FinWait1:
    case State::FinWait2:
    case State::Closing:
    case State::LastAck:
    case State::TimeWait:
        break;
    }
}

void Tcb::close() {
    app_closed_ = true;
    shutdown_write();
}

void Tcb::abort(Instant now, Actions& out) {
    (void)now;
    switch (state_) {
    case State::SynReceived:
    case State::Established:
    case State::FinWait1:
    case State::FinWait2:
    case State::CloseWait:
        send_rst(ack_seq(), out);  // <SEQ=SND.NXT><CTL=RST>, inside the peer's window
        break;
    case State::Closed:
        return;
    case State::Listen:
    case State::SynSent:
    case State::Closing:
    case State::LastAck:
    case State::TimeWait:
        break;
    }
    to_closed(CloseReason::AbortedLocally, out);
}

Stats Tcb::stats() const {
    Stats s = st_;
    s.state = state_;
    s.close_reason = close_reason_;
    s.snd_una = snd_.una.raw();
    s.snd_nxt = snd_.nxt.raw();
    s.snd_wnd = snd_.wnd;
    s.iss = snd_.iss.raw();
    s.rcv_nxt = rcv_.nxt.raw();
    int32_t w = rcv_.adv - rcv_.nxt;
    s.rcv_wnd = w > 0 ? uint32_t(w) : 0;
    s.irs = rcv_.irs.raw();
    s.snd_mss = snd_.mss;
    s.snd_wscale = snd_.wscale;
    s.rcv_wscale = rcv_.wscale;
    s.sack_ok = sack_ok_;
    s.ts_ok = ts_ok_;
    s.ecn_ok = ecn_ok_;
    s.cwnd = cc_.cwnd();
    s.ssthresh = cc_.ssthresh();
    s.bytes_in_flight = in_flight();
    s.srtt = srtt_;
    s.ack_delay = ack_delay_.value_or(cfg_.tlp_max_ack_delay);
    s.rttvar = rttvar_;
    s.rto = rto_;
    s.backoff = backoff_;
    s.reordering = reordering_;
    return s;
}

} // namespace crescent::tcp
