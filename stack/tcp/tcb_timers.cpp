// crescent — the sans-IO TCP control block's timers: RTO, persist, delayed
// ACK, keepalive, TIME-WAIT, FIN-WAIT-2 (tcb.cpp holds the rest; tcb.hpp the
// RFC list).
#include "stack/tcp/tcb.hpp"
#include "stack/tcp/tcb_detail.hpp"

#include <algorithm>
#include <cassert>

namespace crescent::tcp {

using namespace wire::tcp_flags;
using namespace detail;

// ============================================================================
// 8. timers

void Tcb::arm_rto(Instant now) { rto_at_ = now + rto_; }

void Tcb::on_rto(Instant now, Actions& out) {
    rto_at_ = pto_at_ = reo_at_ = Instant::never();
    tlp_.active = false;
    ++st_.rto_events;
    if (state_ == State::SynSent || state_ == State::SynReceived) {
        if (backoff_ >= (state_ == State::SynReceived ? cfg_.synack_retries : cfg_.syn_retries)) {
            to_closed(CloseReason::ConnectTimeout, out);
            return;
        }
        ++backoff_;
        rto_ = std::min<Duration>(rto_ * 2, cfg_.max_rto);  // RFC 6298 §5.5
        ++st_.retrans_timeout;
        rtt_timing_ = false;                                  // Karn
        send_syn(state_ == State::SynReceived, now, out);
        return;
    }
    if (snd_.max == snd_.una) return;  // nothing outstanding
    // The peer closed its window on data in flight (it dropped what lay past
    // its new edge): the retransmission below is in effect a window probe,
    // and a peer that keeps answering it is alive, however long its window
    // stays shut (RFC 1122 §4.2.2.17; Linux's tcp_retransmit_timer() makes
    // the same exception). It is timed out only once it stops answering.
    const bool probing = snd_.wnd == 0;
    if (backoff_ == 0) rto_first_ = now;
    if (probing ? probes_unanswered_ >= cfg_.max_retries
                : backoff_ >= cfg_.max_retries && now - rto_first_ >= cfg_.retransmit_give_up) {
        send_rst(ack_seq(), out);
        to_closed(CloseReason::RetransmitTimeout, out);
        return;
    }
    if (backoff_ == 0) {
        undo_begin(true);  // one episode for a run of timeouts
        // A timeout with DupThresh segments SACKed: the raised threshold hid a
        // loss (Linux's tcp_enter_loss() lowers tp->reordering the same way).
        if (sack_ok_ && sb_.sacked_bytes() >= kDupThresh * snd_.mss) reordering_ = kDupThresh;
    }
    ++backoff_;
    // Repeated timeouts with full-sized segments out: the path may drop what
    // is larger than its MTU without telling us (Config::blackhole_timeouts).
    // Not while probing a closed window: those timeouts are the peer's.
    if (cfg_.blackhole_timeouts != 0 && backoff_ % cfg_.blackhole_timeouts == 0 && !probing &&
        snd_.mss > kBlackholeMss && uint32_t(snd_.max - snd_.una) > kBlackholeMss) {
        snd_.mss = std::max(kBlackholeMss, snd_.mss / 2);
        cc_.set_mss(snd_.mss);
        ++st_.mss_blackhole;
    }
    rto_ = std::min<Duration>(rto_ * 2, cfg_.max_rto);      // RFC 6298 §5.5
    cc_.on_rto(uint32_t(snd_.max - snd_.una), now);          // RFC 5681 §3.1 eq. 4, cwnd = 1 MSS
    in_recovery_ = false;
    dupacks_ = 0;
    recover_ = snd_.max;                                     // RFC 6582 §3.2 step 1 after an RTO
    sb_.clear();                                             // RFC 2018 §8: SACK info may be reneged
    high_rxt_ = snd_.una;
    rtt_timing_ = false;
    snd_.nxt = snd_.una;                                     // go back N
    cur_valid_ = false;
    uint32_t n = emit_data(snd_.una, snd_.mss, true, now, out);  // RFC 6298 §5.4
    if (n > 0) ++st_.retrans_timeout;
    if (probing) ++probes_unanswered_;
    rto_at_ = now + rto_;                                    // RFC 6298 §5.6
}

void Tcb::on_persist(Instant now, Actions& out) {
    persist_at_ = Instant::never();
    if (!can_send_data() || data_end() - snd_.nxt <= 0 || snd_.max != snd_.una) return;
    if (const int32_t room = snd_wnd_end() - snd_.nxt; room > 0) {
        // SWS override timeout (RFC 9293 §3.8.6.2.1): send what fits.
        emit_data(snd_.nxt, std::min(uint32_t(room), snd_.mss), false, now, out);
        return;
    }
    // A peer that answers nothing for max_retries probes is gone (RFC 1122
    // §4.2.2.17 keeps probing only while the peer acknowledges them).
    if (probes_unanswered_ >= cfg_.max_retries) {
        send_rst(ack_seq(), out);
        to_closed(CloseReason::RetransmitTimeout, out);
        return;
    }
    // Zero-window probe: <SEQ=SND.UNA-1><CTL=ACK> is outside the peer's window
    // and elicits an ACK carrying its current window (as Linux probes).
    ++probes_unanswered_;
    ++st_.zero_window_probes;
    send_control(ACK, snd_.una - 1, now, out);
    ++persist_backoff_;
    Duration d = std::min<Duration>(rto_ * (uint64_t(1) << std::min<uint32_t>(persist_backoff_, 16)), cfg_.max_persist);
    persist_at_ = now + d;
}

void Tcb::on_timer(Instant now, Actions& out) {
    if (state_ == State::Closed) return;
    if (state_at_ <= now) {
        state_at_ = Instant::never();
        if (state_ == State::TimeWait) {
            to_closed(CloseReason::Normal, out);  // the app already had its Closed event
            return;
        }
        if (state_ == State::FinWait2) {
            to_closed(CloseReason::FinWait2Timeout, out);
            return;
        }
    }
    if (pto_at_ <= now) on_probe(now, out);  // re-arms the RTO
    if (reo_at_ <= now) on_reo_timeout(now, out);
    if (rto_at_ <= now) {
        on_rto(now, out);
        if (state_ == State::Closed) return;
    }
    if (persist_at_ <= now) on_persist(now, out);
    if (delack_at_ <= now) {
        delack_at_ = Instant::never();
        ++st_.delayed_acks;
        ack_now_ = true;
    }
    if (keepalive_at_ <= now) {
        keepalive_at_ = Instant::never();
        bool ka_state = state_ == State::Established || state_ == State::CloseWait || state_ == State::FinWait2;
        if (cfg_.keepalive.enabled && ka_state) {
            if (now - last_rx_ < cfg_.keepalive.idle && keepalive_probes_ == 0) {
                keepalive_at_ = last_rx_ + cfg_.keepalive.idle;
            } else if (keepalive_probes_ >= cfg_.keepalive.count) {
                send_rst(ack_seq(), out);
                to_closed(CloseReason::KeepaliveTimeout, out);
                return;
            } else if (snd_.max == snd_.una) {
                // RFC 1122 §4.2.3.6: <SEQ=SND.NXT-1> with no data.
                ++keepalive_probes_;
                ++st_.keepalive_probes;
                send_control(ACK, snd_.una - 1, now, out);
                keepalive_at_ = now + cfg_.keepalive.interval;
            } else {
                keepalive_at_ = now + cfg_.keepalive.idle;  // retransmissions cover liveness
            }
        }
    }
    output(now, out);
    update_deadline();
}

} // namespace crescent::tcp
