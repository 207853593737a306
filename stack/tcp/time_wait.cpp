// crescent — TIME-WAIT remains (see time_wait.hpp).
#include "stack/tcp/time_wait.hpp"

namespace crescent::tcp {

using namespace wire::tcp_flags;

TimeWait::TimeWait(const Tcb& t)
    : id_(t.id_), ep_(t.ep_), snd_nxt_(t.ack_seq()), rcv_nxt_(t.rcv_.nxt), time_wait_(t.cfg_.time_wait), oow_interval_(t.cfg_.oow_ack_interval),
      expires_(t.state_at_), ts_recent_age_(t.ts_recent_age_), ts_recent_(t.ts_recent_),
      ts_offset_(t.ts_offset_), window_(t.window_field()), ts_ok_(t.ts_ok_) {}

void TimeWait::on_segment(const TcpRepr& seg, uint32_t payload_len, Instant now, Actions& out) {
    // RFC 1337: a RST must not end TIME-WAIT early.
    if (seg.has(RST)) return;
    // RFC 7323 §5.3 R1: an old duplicate by its timestamp: ACK and drop.
    const uint32_t seg_len = seg.seg_len(payload_len);
    if (ts_ok_ && seg.opts.ts && int32_t(seg.opts.ts->tsval - ts_recent_) < 0 && now - ts_recent_age_ < kPawsIdle) {
        answer_unacceptable(seg, seg_len, now, out);
        return;
    }
    // RFC 5961 §4.2: a SYN the Host did not take as a new incarnation (RFC
    // 6191) gets a challenge ACK.
    if (seg.has(SYN)) {
        answer_unacceptable(seg, seg_len, now, out);
        return;
    }
    // RFC 9293 §3.10.7.4 eighth: the peer's FIN again (our ACK of it was
    // lost): acknowledge it and restart the 2 MSL timeout.
    if (seg.has(FIN) && seg.seq + seg_len == rcv_nxt_) {
        expires_ = now + time_wait_;
        if (ts_ok_ && seg.opts.ts) {
            ts_recent_ = seg.opts.ts->tsval;
            ts_recent_age_ = now;
        }
        send_ack(now, out);
        return;
    }
    if (!seg.has(ACK)) return;  // fifth: no ACK bit, drop
    // first: anything else that is not an empty segment at RCV.NXT is
    // unacceptable here (nothing more can be received): <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>.
    if (seg_len > 0 || seg.seq != rcv_nxt_) answer_unacceptable(seg, seg_len, now, out);
}

void TimeWait::answer_unacceptable(const TcpRepr& seg, uint32_t seg_len, Instant now, Actions& out) {
    if (oow_.allow(seg, seg_len, rcv_nxt_, now, oow_interval_)) send_ack(now, out);
}

void TimeWait::send_ack(Instant now, Actions& out) const {
    OutSegment& o = append_segment(out.segments, id_, ep_, snd_nxt_, ACK);
    o.repr.ack = rcv_nxt_;
    o.repr.window = window_;
    if (ts_ok_) o.repr.opts.ts = wire::Timestamps{Tcb::ts_clock(now, ts_offset_), ts_recent_};
}

} // namespace crescent::tcp
