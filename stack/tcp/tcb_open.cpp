// crescent — opening a connection: the active open (connect), the passive
// open from a SYN (accept_syn) or from a valid SYN cookie (accept_cookie), the
// options negotiated from the peer's SYN, and RFC 9293 §3.10.7.3's SYN-SENT
// arrivals. Part of the Tcb (see tcb.cpp for the layout of the others).
#include "stack/tcp/tcb.hpp"
#include "stack/tcp/tcb_detail.hpp"

#include <algorithm>
#include <cassert>

namespace crescent::tcp {

using namespace wire::tcp_flags;
using namespace detail;

namespace {

constexpr uint32_t kTsOptLen = 12;   // NOP NOP TS(10)
constexpr uint16_t kDefaultMss = 536; // RFC 9293 §3.7.1

uint8_t rcv_wscale_for(uint32_t buf) {
    uint8_t s = 0;
    while (s < 14 && (buf >> s) > 0xffff) ++s;
    return s;
}

} // namespace

// The send sequence space of a new connection (RFC 9293 §3.4): SND.UNA =
// SND.NXT = ISS, the first data byte at ISS + 1, and the points that compare
// against SND.UNA before anything has happened (RFC 6582's recover, the ECN
// reaction point) at the ISS too, so that the first loss or ECE of the
// connection counts whatever half of the sequence space the ISS fell in.
// The TSval offset is derived from the ISS: one per connection, so that TSval
// tells nothing of the host's clock.
void Tcb::start_sequence(SeqNum iss) {
    snd_.iss = iss;
    snd_.una = iss;
    snd_.nxt = iss;
    snd_.max = iss;
    recover_ = iss;
    ecn_recover_ = iss;
    sq_seq_ = iss + 1;
    ts_offset_ = iss.raw() * 2654435761u;
}

void Tcb::connect(SeqNum iss, Instant now, Actions& out) {
    assert(state_ == State::Closed);
    start_sequence(iss);
    rcv_.wscale = cfg_.window_scale ? rcv_wscale_for(cfg_.rcv_buf) : 0;
    last_rx_ = now;
    state_ = State::SynSent;
    send_syn(false, now, out);
    update_deadline();
}

// Negotiation from the peer's SYN (or SYN-ACK): RFC 9293 §3.7.1 MSS,
// RFC 7323 §2.2 / §3.2 window scale and timestamps, RFC 2018 §2 SACK-permitted,
// RFC 3168 §6.1.1 ECN setup.
void Tcb::negotiate(const TcpRepr& syn, uint8_t /*ip_ecn*/) {
    uint16_t peer_mss = syn.opts.mss.value_or(kDefaultMss);
    if (peer_mss < 64) peer_mss = 64; // refuse absurd MSS (resource exhaustion, CVE-2019-11477 spirit)
    uint32_t mss = std::min<uint32_t>(peer_mss, cfg_.mss);
    ws_ok_ = cfg_.window_scale && syn.opts.wscale.has_value();
    if (ws_ok_) {
        snd_.wscale = std::min<uint8_t>(*syn.opts.wscale, 14); // RFC 7323 §2.3
        rcv_.wscale = rcv_wscale_for(cfg_.rcv_buf);
    } else {
        snd_.wscale = 0;
        rcv_.wscale = 0;
    }
    sack_ok_ = cfg_.sack && syn.opts.sack_permitted;
    ts_ok_ = cfg_.timestamps && syn.opts.ts.has_value();
    if (ts_ok_) {
        ts_recent_ = syn.opts.ts->tsval;
        mss -= kTsOptLen; // RFC 7323 §3.2 / RFC 6691: options come out of the payload
    }
    snd_.mss = mss;
    cc_.set_mss(mss);
}

void Tcb::accept_syn(const TcpRepr& syn, uint8_t ip_ecn, SeqNum iss, Instant now, Actions& out) {
    assert(state_ == State::Closed);
    // RFC 9293 §3.10.7.2 third: RCV.NXT = SEG.SEQ+1, IRS = SEG.SEQ, ISS chosen,
    // send <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK>, SND.NXT = ISS+1, SND.UNA = ISS.
    rcv_.irs = syn.seq;
    rcv_.nxt = syn.seq + 1;
    rcv_.adv = rcv_.nxt;
    start_sequence(iss);
    negotiate(syn, ip_ecn);
    // RFC 3168 §6.1.1: a SYN with ECE and CWR asks for ECN.
    ecn_ok_ = wants_ecn() && syn.has(ECE) && syn.has(CWR);
    // The SYN's window is never scaled (RFC 7323 §2.2).
    snd_.wnd = syn.window;
    snd_.max_wnd = snd_.wnd;
    snd_.wl1 = syn.seq;
    snd_.wl2 = iss;
    last_ack_sent_ = rcv_.nxt;
    ts_start(now);
    last_rx_ = now;
    state_ = State::SynReceived;
    send_syn(true, now, out);
    update_deadline();
}

void Tcb::accept_cookie(const CookieParams& p, const TcpRepr& ack, Instant now, Actions& out) {
    assert(state_ == State::Closed);
    rcv_.irs = p.irs;
    rcv_.nxt = p.irs + 1;
    rcv_.adv = rcv_.nxt + std::min<uint32_t>(cfg_.rcv_buf, 0xffff);  // what the cookie SYN-ACK offered
    start_sequence(p.iss);
    snd_.una = p.iss + 1;  // the cookie's SYN-ACK is acknowledged by `ack`
    snd_.nxt = p.iss + 1;
    snd_.max = p.iss + 1;
    // What the cookie kept of the SYN's options goes through the same
    // negotiation as a SYN (the timestamps only if the ACK still carries
    // them: its TSval is the one to echo).
    TcpRepr syn;
    syn.opts.mss = p.peer_mss;
    syn.opts.wscale = p.peer_wscale;
    syn.opts.sack_permitted = p.sack_ok;
    if (p.ts_ok) syn.opts.ts = ack.opts.ts;
    negotiate(syn, 0);
    ecn_ok_ = wants_ecn() && p.ecn_ok;
    snd_.wnd = uint32_t(ack.window) << snd_.wscale;
    snd_.max_wnd = snd_.wnd;
    snd_.wl1 = ack.seq;
    snd_.wl2 = ack.ack;
    last_ack_sent_ = rcv_.nxt;
    ts_start(now);
    last_rx_ = now;
    state_ = State::Established;
    push_event(EventKind::Connected, out);
    if (cfg_.keepalive.enabled) keepalive_at_ = now + cfg_.keepalive.idle;
    update_deadline();
}

// RFC 9293 §3.10.7.3 "If the state is SYN-SENT".
void Tcb::syn_sent_arrives(const TcpRepr& seg, uint8_t ip_ecn, Slice payload, Instant now, Actions& out) {
    // first: check the ACK bit.
    bool ack_ok = false;
    if (seg.has(ACK)) {
        // 1. SEG.ACK =< ISS or SEG.ACK > SND.NXT: <SEQ=SEG.ACK><CTL=RST> (unless RST), drop.
        if (seg.ack - snd_.iss <= 0 || seg.ack - snd_.max > 0) {
            if (!seg.has(RST)) send_rst(seg.ack, out);
            ++st_.drop_bad_ack;
            return;
        }
        // 2. SND.UNA < SEG.ACK =< SND.NXT: acceptable.
        ack_ok = true;
    }
    // second: check the RST bit (RFC 5961 §3: only with an acceptable ACK).
    if (seg.has(RST)) {
        if (ack_ok) {
            to_closed(CloseReason::Refused, out);
        } else {
            ++st_.drop_rst_invalid;
        }
        return;
    }
    // third: security — nothing to check: RFC 9293 dropped RFC 793's
    // security/compartment check (the IP security option of RFC 1108 is obsolete).
    // fourth: check the SYN bit.
    if (!seg.has(SYN)) {
        // fifth: neither SYN nor RST: drop.
        ++st_.drop_not_acceptable;
        return;
    }
    last_rx_ = now;
    rcv_.irs = seg.seq;
    rcv_.nxt = seg.seq + 1;
    rcv_.adv = rcv_.nxt + std::min<uint32_t>(rcv_window_bytes(), 0xffff);  // our SYN's (unscaled) window
    negotiate(seg, ip_ecn);
    // RFC 3168 §6.1.1: a SYN-ACK with ECE (and not CWR) accepts our ECN setup SYN.
    ecn_ok_ = wants_ecn() && seg.has(ECE) && !seg.has(CWR);
    if (ts_ok_) ts_start(now);
    last_ack_sent_ = rcv_.nxt;
    if (ack_ok) {
        // Our SYN is acknowledged: ESTABLISHED, <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>.
        snd_.una = seg.ack;
        if (rtt_timing_ && seg.ack - rtt_seq_ >= 0) {
            rtt_timing_ = false;
            if (!(ts_ok_ && seg.opts.ts && seg.opts.ts->tsecr != 0)) rtt_sample(now - rtt_start_);
        }
        if (ts_ok_ && seg.opts.ts && seg.opts.ts->tsecr != 0 && backoff_ == 0)
            rtt_sample(std::chrono::microseconds(ts_now(now) - seg.opts.ts->tsecr));
        backoff_ = 0;
        rto_at_ = Instant::never();
        snd_.wnd = seg.window;  // a SYN's window is never scaled (RFC 7323 §2.2)
        snd_.max_wnd = snd_.wnd;
        snd_.wl1 = seg.seq;
        snd_.wl2 = seg.ack;
        state_ = State::Established;
        push_event(EventKind::Connected, out);
        if (cfg_.keepalive.enabled) keepalive_at_ = now + cfg_.keepalive.idle;
        ack_now_ = true;
        if (fin_queued_) state_ = State::FinWait1;  // shutdown_write() during the handshake
        // Data or FIN on the SYN-ACK (sixth / seventh / eighth steps).
        uint32_t len = uint32_t(payload.size());
        if (len > 0) receive_data(seg, seg.seq, std::move(payload), now, out);
        if (seg.has(FIN) && seg.seq + 1 + len == rcv_.nxt) on_fin_received(now, out);
        output(now, out);
    } else {
        // Simultaneous open: SYN-RECEIVED, <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK>.
        snd_.wnd = seg.window; // unscaled in a SYN
        snd_.max_wnd = snd_.wnd;
        snd_.wl1 = seg.seq;
        snd_.wl2 = snd_.iss;   // the window counts from our SYN, as for a passive open
        state_ = State::SynReceived;
        rto_ = cfg_.initial_rto;
        backoff_ = 0;
        send_syn(true, now, out);
    }
}

} // namespace crescent::tcp
