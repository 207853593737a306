// crescent — Conn::send_now(): a reply that leaves from inside the callback
// (EngineConfig::reply_at_once).
//
// The loop normally sends what the handlers queued once the RX burst is done:
// after the callback has returned, the timers have run and pump() has asked
// every touched connection for its segments. For the burst's last frame that
// batching gains nothing more (no frame is left to batch with), and the wait
// is the round trip's own time: on memif at 64 B iodepth 1 the RPC layer's
// unwinding (the request released, the decoder looking for a next message),
// the timers and the pump lie between the reply's send() and its frame
// (BENCHMARKS.md, session 18).
//
// So an application that knows its exchange is complete — the RPC server
// after the reply to the last request of a delivery, the RPC client after the
// call its last reply's continuation made — calls Conn::send_now(): while the
// burst's last frame is handled, the Host is flushed, the segments built and
// the TX queue handed to the device before the call returns. Everything
// queued goes (the replies to a pipelined burst's earlier requests too, and
// the other connections' output of the burst), so a frame is never split and
// the end of the iteration usually finds nothing left to send; the segment
// carries the ACK of the data just delivered, so no ACK is owed after it.
// Earlier frames of the burst are EngineConfig::burst_flush_after's.
#include "stack/engine/engine_impl.hpp"

namespace crescent::engine {

bool EngineImpl::conn_send_now(uint32_t index, uint32_t gen) {
    if (!at_last_frame_ || !state_of(index, gen)) return false;
    const Instant now = loop_now_;
    phases_.end(Phase::App);  // the handlers up to here
    // Every connection's output goes, not only this one's: at the burst's last
    // frame the rest of the burst has been handled, so what the others queued
    // (replies, held ACKs) would leave with the next TX burst anyway — now it
    // shares this one instead of making a second (a system call on AF_XDP).
    host_.flush(now, now_act_);
    need_flush_ = false;  // the Host has nothing left: the loop's pump need not ask it again
    // Only the segments go now: an event a flush raises (none in practice)
    // waits for the pump with the application's other output, so that no
    // handler runs inside a call still on the application's stack.
    const bool any = !now_act_.segments.empty();
    for (const tcp::OutSegment& s : now_act_.segments) transmit(s, now);
    app_act_.events.insert(app_act_.events.end(), now_act_.events.begin(), now_act_.events.end());
    now_act_.clear();
    phases_.end(Phase::Output);
    if (!any) return false;  // nothing the windows allowed: it waits for an ACK as usual
    flush_tx();
    phases_.end(Phase::Flush);
    phases_.output_left();
    ++st_.tx_sent_now;
    return true;
}

} // namespace crescent::engine
