// crescent — the sans-IO TCP control block's ACK processing: RTT (RFC 6298 /
// 7323), SACK, recovery (RFC 6675 / 6582), ECN (tcb.cpp holds the rest;
// tcb.hpp the RFC list).
#include "stack/tcp/tcb.hpp"
#include "stack/tcp/tcb_detail.hpp"

#include <algorithm>
#include <cassert>

namespace crescent::tcp {

using namespace wire::tcp_flags;
using namespace detail;

// ============================================================================
// 5. ACK processing

// Returns false when the segment must be dropped.
bool Tcb::process_ack(const TcpRepr& seg, uint32_t payload_len, Instant now, Actions& out) {
    if (seg.has(ECE) && ecn_ok_) ++st_.ecn_ece_received;
    uint32_t newly_sacked = 0;
    bool dsack = false;
    if (sack_ok_ && seg.opts.sack_count > 0) dsack = process_sack(seg, &newly_sacked);

    if (seg.ack - snd_.una > 0) {
        ack_advanced(seg, now, out);
        // RFC 6675 §5: an ACK that SACKs new data is a duplicate ACK for loss
        // detection "regardless of its status as a cumulative acknowledgment"
        // — a receiver that holds its ACKs reports the segment after a hole
        // in the same ACK that covers the ones before it.
        if (newly_sacked > 0 && !in_recovery_ && snd_.max != snd_.una) {
            ++dupacks_;
            detect_loss(now, out);
        }
        return true;
    }
    // SEG.ACK =< SND.UNA: a duplicate (or old) ACK; maybe update the window.
    uint32_t old_wnd = snd_.wnd;
    update_window(seg);
    if (tlp_.active) tlp_on_dupack(seg.ack, payload_len > 0 || newly_sacked > 0 || snd_.wnd != old_wnd);
    // RFC 5681 §2 DUPLICATE ACKNOWLEDGMENT: no data, no SYN or FIN, the window
    // unchanged. RFC 6675 §2 redefines it for SACK: any ACK that SACKs octets
    // not SACKed before — also one that carries data, as every ACK does when
    // both ends send (an echo, pipelined RPCs): else their SACKs never start
    // a recovery and each loss waits for the RTO. An ACK whose only news is a
    // D-SACK reports a segment that arrived twice, not one that went missing
    // (RFC 2883 §4; Linux counts SACKed segments, which a D-SACK does not
    // add to): counted, it made every spurious retransmission the cause of
    // the next — a tail-loss probe's D-SACK, at early retransmit's threshold
    // of one, retransmitted the next flight's first segment, whose D-SACK
    // did the same (memif 64 B at iodepth 16: half the bytes sent were
    // retransmissions, every recovery undone; BENCHMARKS.md, session 39).
    bool dup = seg.ack == snd_.una && !seg.has(SYN) && snd_.max - snd_.una > 0 &&
               (newly_sacked > 0 || (payload_len == 0 && !dsack && !seg.has(FIN) && snd_.wnd == old_wnd));
    if (!dup) return true;
    ++dupacks_;
    ++st_.dupacks;
    if (in_recovery_) {
        return true; // NewReno: inflation via dupacks_ in usable_window(); SACK: pipe
    }
    detect_loss(now, out);
    return true;
}

// A duplicate ACK outside recovery: enough of them, or enough SACKed above
// snd.una, start a fast recovery with the first unacknowledged segment.
void Tcb::detect_loss(Instant now, Actions& out) {
    const uint32_t dupthresh = dup_thresh();
    bool loss = dupacks_ >= dupthresh || (sack_ok_ && sb_.is_lost(snd_.una, snd_.mss, dupthresh));
    // A new recovery only once the last one's data is acknowledged: RFC 6582
    // §3.2 step 2 wants the cumulative ACK past `recover` (without SACK, the
    // dupacks of a go-back-N after an RTO look like a new loss); RFC 6675 §5.1
    // allows it at `recover` itself, because the scoreboard tells a new hole
    // from an old one. The difference is every message of a request/response
    // exchange whose previous message needed a recovery: its flight starts
    // exactly at `recover`.
    if (loss && may_start_recovery()) fast_retransmit(now, out);
}

bool Tcb::may_start_recovery() const {
    const bool past_recover = sack_ok_ ? snd_.una - recover_ >= 0 : snd_.una - recover_ > 0;
    return past_recover || st_.fast_recoveries == 0;
}

// A fast recovery begins with the first unacknowledged segment sent again.
void Tcb::fast_retransmit(Instant now, Actions& out) {
    enter_recovery(now);
    uint32_t n = emit_data(snd_.una, snd_.mss, true, now, out);
    if (n > 0 || (fin_sent_ && snd_.una == data_end())) {
        ++st_.retrans_fast;
        high_rxt_ = snd_.una + n;
    }
    arm_rto(now);
}

bool Tcb::process_sack(const TcpRepr& seg, uint32_t* newly_sacked) {
    const size_t n = std::min<size_t>(seg.opts.sack_count, wire::kMaxSackBlocks);
    const auto blocks = std::span<const SackBlock>(seg.opts.sack.data(), n);
    const SeqNum ack = seg.ack - snd_.una > 0 ? seg.ack : snd_.una;
    check_sack_reordering(ack, blocks);  // against the scoreboard before these blocks
    auto u = sb_.update(ack, snd_.max, blocks);
    *newly_sacked = u.newly_sacked;
    if (u.dsack) {
        rack_on_dsack();
        undo_on_dsack(seg.opts.sack[0]);
        if (tlp_.active) tlp_on_dsack(seg.opts.sack[0]);
    }
    return u.dsack;
}

void Tcb::update_window(const TcpRepr& seg) {
    // RFC 9293 §3.10.7.4 fifth: SND.WL1 < SEG.SEQ or (SND.WL1 = SEG.SEQ and SND.WL2 =< SEG.ACK).
    if (snd_.wl1 - seg.seq < 0 || (snd_.wl1 == seg.seq && snd_.wl2 - seg.ack <= 0)) {
        uint32_t w = uint32_t(seg.window) << snd_.wscale;
        if (w == 0 && snd_.wnd != 0) ++st_.zero_window_events;
        snd_.wnd = w;
        snd_.max_wnd = std::max(snd_.max_wnd, w);
        snd_.wl1 = seg.seq;
        snd_.wl2 = seg.ack;
        if (w != 0) {
            persist_at_ = Instant::never();
            persist_backoff_ = 0;
        }
    }
}

void Tcb::enter_recovery(Instant now) {
    undo_begin(false);
    in_recovery_ = true;
    tlp_.active = false;  // the recovery's response covers what a probe found
    pto_at_ = reo_at_ = Instant::never();
    rack_on_recovery();
    recover_ = snd_.max;
    high_rxt_ = snd_.una;
    ++st_.fast_recoveries;
    // RFC 5681 eq. (4) / RFC 6675 §5 step 4.2 halve FlightSize — all that is
    // unacknowledged — not the pipe: with most of the flight SACKed the pipe
    // is near zero, and a window of 2 SMSS would follow every single loss.
    cc_.on_loss(uint32_t(snd_.max - snd_.una), now);
    rtt_timing_ = false; // Karn
}

void Tcb::rtt_sample(Duration r) {
    if (r.count() <= 0) r = Duration(1000); // clock granularity: at least 1 µs
    ++st_.rtt_samples;
    if (min_rtt_.count() == 0 || r < min_rtt_) min_rtt_ = r;
    if (!have_rtt_) {
        // RFC 6298 §2.2
        srtt_ = r;
        rttvar_ = r / 2;
        have_rtt_ = true;
    } else {
        // RFC 6298 §2.3 (alpha 1/8, beta 1/4)
        Duration diff = srtt_ > r ? srtt_ - r : r - srtt_;
        rttvar_ = (rttvar_ * 3 + diff) / 4;
        srtt_ = (srtt_ * 7 + r) / 8;
    }
    Duration var4 = std::max<Duration>(Duration(1000), rttvar_ * 4); // G = 1 µs
    rto_ = std::clamp<Duration>(srtt_ + var4, cfg_.min_rto, cfg_.max_rto);
}

// SND.UNA < SEG.ACK =< SND.MAX: new data acknowledged.
void Tcb::ack_advanced(const TcpRepr& seg, Instant now, Actions& out) {
    uint32_t flight_before = in_flight();
    uint32_t acked = uint32_t(seg.ack - snd_.una);
    // RTT: timestamps (RFC 7323 §4) or one timed segment (RFC 6298 §3, Karn).
    std::optional<Duration> sample;
    if (ts_ok_ && seg.opts.ts && seg.opts.ts->tsecr != 0 && backoff_ == 0) { // after an RTO the echo may predate the retransmission
        sample = std::chrono::microseconds(int32_t(ts_now(now) - seg.opts.ts->tsecr));
        if (sample->count() < 0) sample.reset();
        rtt_timing_ = false;
    } else if (rtt_timing_ && seg.ack - rtt_seq_ >= 0) {
        sample = now - rtt_start_;
        rtt_timing_ = false;
    }
    if (sample) {
        rtt_sample(*sample);
        // A lone segment's ACK: the peer could hold it (no second segment to
        // answer at once), so the sample tells how long it does.
        if (flight_before <= snd_.mss && state_ == State::Established) ack_delay_sample(*sample);
    }

    const SeqNum old_una = snd_.una;
    if (sack_ok_ && !sb_.empty()) {
        // The hole at snd.una filled while later data was SACKed: by the
        // original, unless it was sent again (then it is ambiguous).
        if (!rxt_.overflowed() && !rxt_.contains(old_una)) note_reordering(old_una, sb_.highest_sacked());
        sb_.advance(seg.ack);
    }
    drop_acked(seg.ack, out);
    snd_.una = seg.ack;
    if (snd_.nxt - snd_.una < 0) {
        snd_.nxt = snd_.una;
        cur_valid_ = false;
    }
    backoff_ = 0;
    update_window(seg);

    bool ece = ecn_ok_ && seg.has(ECE);
    if (in_recovery_) {
        rack_on_ack();
        if (seg.ack - recover_ >= 0) {
            // RFC 6582 §3.2 step 6 / RFC 6675 §5: full ACK ends recovery.
            in_recovery_ = false;
            dupacks_ = 0;
            cc_.on_recovery_exit(now);
        } else if (!sack_ok_) {
            // RFC 6582 §3.2 step 5: partial ACK — retransmit the first
            // unacknowledged segment; deflation is implicit (dupacks_ reset).
            dupacks_ = 0;
            uint32_t n = emit_data(snd_.una, snd_.mss, true, now, out);
            if (n > 0) ++st_.retrans_fast;
        }
    } else {
        dupacks_ = 0;
        AckSample s;
        s.acked = acked;
        s.in_flight = flight_before;
        s.rtt = sample;
        s.ece = ece;
        s.app_limited = flight_before + snd_.mss < cc_.cwnd() && data_end() == snd_.nxt;
        s.now = now;
        cc_.on_ack(s);
    }
    // Something was sent again (its ranges trimmed here), or an open episode
    // that this ACK's timestamp may still prove spurious. One that only a
    // D-SACK can prove now (process_sack()) costs an ACK nothing.
    if (!rxt_.empty() || (undo_.cc && undo_.eifel)) undo_on_ack(seg);
    // ECN reaction (RFC 3168 §6.1.2: once per window; DCTCP: the CC rate-limits).
    if (ece && !in_recovery_) {
        bool dctcp = cc_.algo() == CcAlgo::Dctcp;
        if (dctcp || snd_.una - ecn_recover_ > 0) {
            cc_.on_ecn(flight_before, now);
            undo_.cc.reset();  // an undo would take back this response too
            ecn_recover_ = snd_.max;
            ecn_cwr_due_ = true;
        }
    }
    if (tlp_.active) tlp_on_ack(seg.ack, flight_before, now);
    // RFC 6298 §5.2 / §5.3; RFC 8985 §7.2 (a probe before the RTO).
    if (snd_.una == snd_.max) {
        rto_at_ = pto_at_ = Instant::never();
    } else {
        rto_at_ = now + rto_;
        schedule_probe(now);
    }
}

// Drop the send-queue slices that `ack` covers; SYN and FIN take sequence
// space but no queue bytes.
void Tcb::drop_acked(SeqNum ack, Actions& out) {
    int32_t d = ack - sq_seq_;
    if (d <= 0) return;
    uint32_t n = std::min<uint32_t>(uint32_t(d), snd_queued_);
    if (n == 0) return;
    uint32_t left = n;
    uint32_t popped = 0;
    uint32_t trimmed_head = 0;
    while (left > 0) {
        Slice& s = sq_at(0);
        if (s.size() <= left) {
            left -= uint32_t(s.size());
            s.reset();
            sq_head_ = (sq_head_ + 1) & (uint32_t(sq_.size()) - 1);
            --sq_count_;
            ++popped;
        } else {
            s.remove_prefix(left);
            trimmed_head = left;
            left = 0;
        }
    }
    sq_seq_ += n;
    snd_queued_ -= n;
    if (cur_valid_) {
        if (cur_idx_ < popped) {
            cur_valid_ = false;
        } else {
            cur_idx_ -= popped;
            if (cur_idx_ == 0) {
                if (cur_off_ < trimmed_head) cur_valid_ = false;
                else cur_off_ -= trimmed_head;
            }
        }
    }
    push_event(EventKind::Acked, out, CloseReason::None, n);
    if (want_writable_ && send_space() > 0) {
        want_writable_ = false;
        push_event(EventKind::Writable, out);
    }
}

} // namespace crescent::tcp
