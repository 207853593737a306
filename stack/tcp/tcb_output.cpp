// crescent — the sans-IO TCP control block's output: ACK fields, control
// segments, segmentation, SWS avoidance, Nagle, recovery transmissions
// (tcb.cpp holds the rest; tcb.hpp the RFC list).
#include "stack/tcp/tcb.hpp"
#include "stack/tcp/tcb_detail.hpp"

#include <algorithm>
#include <cassert>

namespace crescent::tcp {

using namespace wire::tcp_flags;
using namespace detail;

// ============================================================================
// 7. output

// The window field for a non-SYN segment. RFC 9293 §3.8.6.2.2 receiver SWS
// avoidance: the right edge only moves by at least min(RCV.BUFF/2, MSS); it
// never moves left (§3.8.6.2.2 "shrinking the window" is discouraged).
uint16_t Tcb::advertise_window() {
    uint32_t free = rcv_window_bytes();
    SeqNum edge = rcv_.nxt + free;
    uint32_t step = std::min<uint32_t>(cfg_.rcv_buf / 2, cfg_.mss);
    if (edge - rcv_.adv >= int32_t(step) || rcv_.adv - rcv_.nxt < 0) {
        // Round down to the scale granularity so the edge we record is exact.
        uint32_t w = std::min<uint32_t>(free, uint32_t(0xffff) << rcv_.wscale);
        w = (w >> rcv_.wscale) << rcv_.wscale;
        if (rcv_.nxt + w - rcv_.adv > 0) rcv_.adv = rcv_.nxt + w;
    }
    const uint16_t field = window_field();
    if (field == 0) ++st_.zero_window_sent;
    return field;
}

// Congestion window usable for new transmissions (bytes beyond what is in flight).
uint32_t Tcb::usable_window() const {
    uint64_t cwnd = cc_.cwnd();
    if (in_recovery_ && !sack_ok_) cwnd += uint64_t(dupacks_) * snd_.mss;  // RFC 5681 §3.2 step 4 inflation
    else if (!in_recovery_ && dupacks_ > 0 && dupacks_ < dup_thresh())
        cwnd += uint64_t(dupacks_) * snd_.mss;  // RFC 3042 limited transmit (RFC 4653 §3.1 past 2 when reordering)
    uint32_t flight = in_flight();
    return cwnd > flight ? uint32_t(std::min<uint64_t>(cwnd - flight, UINT32_MAX)) : 0;
}

void Tcb::fill_options(TcpRepr& r, bool syn, Instant now) const {
    if (syn) {
        r.opts.mss = cfg_.mss;
        if (!r.has(ACK)) {
            // Our SYN offers everything configured.
            if (cfg_.window_scale) r.opts.wscale = rcv_.wscale;
            r.opts.sack_permitted = cfg_.sack;
            if (cfg_.timestamps) r.opts.ts = wire::Timestamps{ts_now(now), 0};
        } else {
            // A SYN-ACK answers only what the peer offered (RFC 7323 §2.2, §3.2; RFC 2018 §2).
            if (ws_ok_) r.opts.wscale = rcv_.wscale;
            r.opts.sack_permitted = sack_ok_;
            if (ts_ok_) r.opts.ts = wire::Timestamps{ts_now(now), ts_recent_};
        }
        return;
    }
    if (ts_ok_) r.opts.ts = wire::Timestamps{ts_now(now), ts_recent_};
}

// The payload the next segment can carry: one MSS less the SACK blocks
// fill_ack_fields() will put in it (at most: adjacent ranges may merge).
uint32_t Tcb::segment_room() const {
    if (!sack_ok_ || (!dsack_due_ && reasm_.empty())) return snd_.mss;
    const uint32_t blocks = std::min<uint32_t>(ts_ok_ ? 3 : 4, (dsack_due_ ? 1 : 0) + reasm_.segments());
    const uint32_t opt = blocks ? 4 + 8 * blocks : 0;
    return snd_.mss > opt ? snd_.mss - opt : 1;
}

// Everything an ACK carries: ACK number, window, timestamps, SACK blocks, ECE.
void Tcb::fill_ack_fields(TcpRepr& r, Instant now) {
    r.flags |= ACK;
    r.ack = rcv_.nxt;
    r.window = advertise_window();
    fill_options(r, false, now);
    if (sack_ok_ && (dsack_due_ || !reasm_.empty())) {
        const size_t max_blocks = ts_ok_ ? 3 : 4; // 40 bytes of options
        size_t n = 0;
        if (dsack_due_) {  // RFC 2883 §4: the duplicate first, then the usual blocks
            r.opts.sack[n++] = dsack_;
            dsack_due_ = false;
            ++st_.dsacks_sent;
        }
        n += reasm_.sack_blocks(std::span<SackBlock>(r.opts.sack.data() + n, max_blocks - n));
        r.opts.sack_count = uint8_t(n);
    }
    if (ecn_ok_ && ce_pending_) r.flags |= ECE;
    last_ack_sent_ = rcv_.nxt;
    delack_segs_ = 0;
    delack_at_ = Instant::never();
    ack_now_ = false;
    ack_at_flush_ = false;
    window_update_due_ = false;
}

void Tcb::send_syn(bool with_ack, Instant now, Actions& out) {
    TcpRepr& r = append_segment(out.segments, id_, ep_, snd_.iss, SYN).repr;
    if (with_ack) {
        r.flags |= ACK;
        r.ack = rcv_.nxt;
        if (ecn_ok_) r.flags |= ECE;  // RFC 3168 §6.1.1 ECN-setup SYN-ACK
    } else if (wants_ecn()) {
        r.flags |= ECE | CWR;         // ECN-setup SYN
    }
    // The window in a SYN is never scaled (RFC 7323 §2.2).
    r.window = uint16_t(std::min<uint32_t>(rcv_window_bytes(), 0xffff));
    if (with_ack) rcv_.adv = rcv_.nxt + r.window;
    fill_options(r, true, now);
    snd_.nxt = snd_.iss + 1;
    snd_.max = snd_.iss + 1;
    if (backoff_ == 0) {
        rtt_timing_ = true;
        rtt_seq_ = snd_.iss + 1;
        rtt_start_ = now;
    }
    rto_at_ = now + rto_;
    ++st_.segs_out;
}

void Tcb::send_control(uint8_t flags, SeqNum seq, Instant now, Actions& out) {
    // In place: no copy of the view array.
    OutSegment& o = append_segment(out.segments, id_, ep_, seq, flags);
    if (flags & ACK) fill_ack_fields(o.repr, now);
    ++st_.segs_out;
}

// <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>
void Tcb::send_ack(Instant now, Actions& out) {
    if (!synchronized(state_)) return;
    send_control(ACK, ack_seq(), now, out);
}

void Tcb::note_duplicate(SeqNum left, SeqNum right) {
    if (!sack_ok_) return;
    // The first duplicate since the last ACK is the one reported (RFC 2883
    // §4: one D-SACK block per ACK).
    if (!dsack_due_) dsack_ = SackBlock{left, right};
    dsack_due_ = true;
    ack_now_ = true;
}

SeqNum Tcb::ack_seq() const {
    // <SEQ=SND.NXT>, with SND.MAX standing in for SND.NXT (an RTO rewinds
    // SND.NXT) — unless that lies beyond the peer's window, which happens
    // when the peer dropped data we sent and its window has since closed:
    // a receiver with RCV.WND = 0 only accepts SEQ = RCV.NXT, so an ACK at
    // SND.MAX would be discarded with the acknowledgment it carries. The
    // right edge is always acceptable (Linux: tcp_acceptable_seq()).
    const SeqNum edge = snd_wnd_end();
    return snd_.max - edge > 0 ? edge : snd_.max;
}

void Tcb::send_rst(SeqNum seq, Actions& out) {
    append_segment(out.segments, id_, ep_, seq, RST);
    ++st_.segs_out;
}

bool Tcb::locate(SeqNum seq, uint32_t* idx, uint32_t* off) {
    if (cur_valid_ && seq == cur_seq_) {
        *idx = cur_idx_;
        *off = cur_off_;
        return true;
    }
    int32_t d = seq - sq_seq_;
    if (d < 0 || uint32_t(d) > snd_queued_) return false;
    uint32_t left = uint32_t(d);
    uint32_t i = 0;
    while (i < sq_count_ && left >= sq_at(i).size()) {
        left -= uint32_t(sq_at(i).size());
        ++i;
    }
    *idx = i;
    *off = left;
    return true;
}

// One segment starting at `seq` with up to `max_len` payload bytes (fewer when
// the SMSS, SACK option room, queued data or kMaxTxViews limit it). A FIN rides
// on the segment that reaches the end of the queued data after shutdown_write().
// Returns the sequence space used (payload + FIN); 0 when nothing was emitted.
uint32_t Tcb::emit_data(SeqNum seq, uint32_t max_len, bool retransmit, Instant now, Actions& out) {
    int32_t avail = data_end() - seq;
    if (avail < 0) return 0;
    if (avail > 0) {
        // Past SND.MAX the bytes are new: they fit the peer's window like any.
        // A retransmission from SND.UNA asks for a whole MSS (Linux's
        // tcp_retransmit_skb() trims to the window's end as well).
        const SeqNum edge = snd_wnd_end();
        const int32_t room = (snd_.max - edge > 0 ? snd_.max : edge) - seq;
        max_len = room > 0 ? std::min(max_len, uint32_t(room)) : 0;
    }
    if (avail == 0 ? !fin_queued_ : max_len == 0) return 0;

    OutSegment& o = append_segment(out.segments, id_, ep_, seq, 0);
    TcpRepr& r = o.repr;
    fill_ack_fields(r, now);
    uint32_t opt_extra = r.opts.sack_count ? 4 + 8u * r.opts.sack_count : 0;
    uint32_t cap = snd_.mss > opt_extra ? snd_.mss - opt_extra : 1;
    // TSO: whole segments of `cap` bytes each (the options repeat in every one).
    uint32_t limit = cfg_.tso_max > cap ? cfg_.tso_max / cap * cap : cap;
    uint32_t want = std::min({max_len, limit, uint32_t(avail)});
    uint32_t n = 0;
    if (want > 0) {
        uint32_t idx = 0, off = 0;
        bool found = locate(seq, &idx, &off);
        assert(found);
        (void)found;
        const uint8_t max_views = uint8_t(std::clamp<size_t>(cfg_.max_tx_views, 1, kMaxTxViews));
        while (n < want && o.view_count < max_views && idx < sq_count_) {
            const Slice& s = sq_at(idx);
            uint32_t take = std::min<uint32_t>(uint32_t(s.size()) - off, want - n);
            o.views[o.view_count++] = TxView{s.data() + off, take};
            n += take;
            off += take;
            if (off == s.size()) {
                ++idx;
                off = 0;
            }
        }
        if (seq == snd_.nxt) {
            cur_idx_ = idx;
            cur_off_ = off;
            cur_seq_ = seq + n;
            cur_valid_ = true;
        }
    }
    if (n > cap) o.tso_segsz = uint16_t(cap);
    bool fin = fin_queued_ && seq + n == data_end();
    if (fin) r.flags |= FIN;
    if (n > 0 && seq + n == data_end()) r.flags |= PSH;
    if (ecn_ok_ && n > 0 && !retransmit) {
        o.ip_ecn = kEcnEct0;  // RFC 3168 §6.1.5: never ECT on retransmissions
        if (ecn_cwr_due_) {
            r.flags |= CWR;
            ecn_cwr_due_ = false;
        }
    }
    ++st_.segs_out;
    st_.bytes_out += n;
    SeqNum end = seq + n + (fin ? 1 : 0);
    if (retransmit || seq - snd_.max < 0) {
        st_.bytes_retransmitted += n;
        if (end - seq > 0) undo_note_retransmit(seq, end, now);
        if (in_recovery_) rack_note_retransmit(seq, end, now);
        if (rtt_timing_ && seq - rtt_seq_ < 0) rtt_timing_ = false; // Karn
    } else if (!rtt_timing_ && n > 0) {
        rtt_timing_ = true;
        rtt_seq_ = end;
        rtt_start_ = now;
    }
    if (seq == snd_.nxt) snd_.nxt = end;
    if (end - snd_.max > 0) snd_.max = end;
    if (fin) fin_sent_ = true;
    if (rto_at_.is_never()) rto_at_ = now + rto_;
    persist_at_ = Instant::never();
    return n + (fin ? 1 : 0);
}

// RFC 6675 §5 (C): while cwnd - pipe >= SMSS, send what NextSeg() names.
void Tcb::output_recovery(Instant now, Actions& out) {
    if (high_rxt_ - snd_.una < 0) high_rxt_ = snd_.una;
    // Rules 1 and 3 retransmit a range the scoreboard names; false when
    // nothing could be sent (the loop ends).
    auto retransmit = [&](SackScoreboard::Range rg) {
        uint32_t n = emit_data(rg.start, rg.len, true, now, out);
        if (n == 0) return false;
        high_rxt_ = rg.start + n;
        ++st_.retrans_sack;
        return true;
    };
    for (int guard = 0; guard < 64; ++guard) {
        const uint32_t dupthresh = dup_thresh();
        uint32_t pipe = sb_.pipe(snd_.una, snd_.max, high_rxt_, snd_.mss, dupthresh);
        if (cc_.cwnd() < pipe + snd_.mss) break;
        // NextSeg rule 1: lost and un-SACKed.
        if (auto rg = sb_.next_lost(snd_.una, high_rxt_, snd_.mss, dupthresh)) {
            if (!retransmit(*rg)) break;
            continue;
        }
        // Rule 2: new data within the peer's window.
        int32_t unsent = data_end() - snd_.nxt;
        int32_t rroom = snd_wnd_end() - snd_.nxt;
        if (unsent > 0 && rroom > 0 && snd_.nxt == snd_.max) {
            uint32_t n = emit_data(snd_.nxt, std::min<uint32_t>(uint32_t(rroom), snd_.mss), false, now, out);
            if (n == 0) break;
            continue;
        }
        // Rule 3: un-SACKed, not yet deemed lost.
        if (auto rg = sb_.next_unsacked(snd_.una, high_rxt_, snd_.mss)) {
            if (!retransmit(*rg)) break;
            continue;
        }
        // Rule 4: one rescue retransmission per window — the last segment,
        // when the tail of the window was lost and nothing after it can
        // bring the SACKs that would mark it (else only the RTO would).
        // HighRxt is not updated.
        if (snd_.max - snd_.una > 0 && (!rescue_valid_ || snd_.una - rescue_rxt_ > 0) &&
            !sb_.is_sacked(snd_.max - 1)) {
            const SackScoreboard::Range tail = last_segment();
            uint32_t n = emit_data(tail.start, tail.len, true, now, out);
            if (n == 0) break;
            rescue_rxt_ = recover_;
            rescue_valid_ = true;
            ++st_.retrans_rescue;
        }
        break;
    }
}

void Tcb::output(Instant now, Actions& out) {
    if (can_send_data()) {
        const SeqNum max_before = snd_.max;
        if (in_recovery_ && sack_ok_) output_recovery(now, out);
        for (;;) {
            int32_t unsent = data_end() - snd_.nxt;
            bool fin_due = fin_queued_ && snd_.nxt == data_end();
            if (unsent <= 0 && !fin_due) break;
            int32_t rroom = snd_wnd_end() - snd_.nxt;
            uint32_t room = std::min<uint32_t>(rroom > 0 ? uint32_t(rroom) : 0, usable_window());
            if (unsent <= 0) {
                // Only the FIN is left: it takes no window, but respects cwnd
                // and is not sent while data is being recovered.
                emit_data(snd_.nxt, 0, snd_.nxt - snd_.max < 0, now, out);
                break;
            }
            uint32_t len = std::min<uint32_t>({uint32_t(unsent), seg_max(), room});
            if (len == 0) break;
            // TSO: a sub-MSS tail that is not the end of the data waits for
            // the next round, where SWS avoidance and Nagle judge it alone.
            if (len > snd_.mss && len < uint32_t(unsent)) len -= len % snd_.mss;
            // Sender SWS avoidance (RFC 9293 §3.8.6.2.1) and Nagle (§3.7.4).
            bool retrans = snd_.nxt - snd_.max < 0;
            bool full = len >= snd_.mss;
            bool all = len == uint32_t(unsent);
            bool idle = snd_.nxt == snd_.una;
            bool half_wnd = snd_.max_wnd > 0 && len >= snd_.max_wnd / 2;
            if (!(full || retrans || half_wnd || (all && (!cfg_.nagle || idle)))) break;
            if (emit_data(snd_.nxt, len, retrans, now, out) == 0) break;
        }
        if (snd_.max != max_before) {  // RFC 8985 §7.2: new data went out
            if (tlp_.active) [[unlikely]] tlp_settle(now);
            schedule_probe(now);
        }
        // Persist timer (RFC 9293 §3.8.6.1): data waits, nothing in flight to
        // bring a window update — probe (or force out a small segment) later.
        if (data_end() - snd_.nxt > 0 && snd_.max == snd_.una && persist_at_.is_never() && rto_at_.is_never()) {
            Duration d = std::min<Duration>(rto_ * (uint64_t(1) << std::min<uint32_t>(persist_backoff_, 16)),
                                            cfg_.max_persist);
            persist_at_ = now + d;
        }
    }
    if (ack_now_ || window_update_due_) send_ack(now, out);
}

} // namespace crescent::tcp
