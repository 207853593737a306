// crescent — what is left of a connection in TIME-WAIT.
//
// RFC 9293 §3.10.7.4 lists what a TIME-WAIT connection still does for its
// 2*MSL: acknowledge a retransmitted FIN and restart the timer ("eighth"),
// answer an unacceptable segment with an ACK ("first"), ignore a RST (RFC
// 1337 "TIME-WAIT assassination"), challenge a SYN (RFC 5961 §4; the Host
// first offers it to RFC 6191 reuse), and drop old duplicates by PAWS (RFC
// 7323 §5). None of that needs the send queue, the reassembly queue, the
// scoreboard or the congestion state, so the Host swaps the Tcb (about 1 KiB
// plus its queues) for this record once the Tcb enters TIME-WAIT, as Linux
// keeps a tcp_timewait_sock instead of the full socket.
#pragma once

#include <cstdint>

#include <crescent/time.hpp>

#include "stack/tcp/tcb.hpp"

namespace crescent::tcp {

class TimeWait {
public:
    // The remains of `t`, which is in TIME-WAIT.
    explicit TimeWait(const Tcb& t);

    // A segment for this 4-tuple (one the Host did not take as a new
    // incarnation). Emits at most one ACK into `out`.
    void on_segment(const TcpRepr& seg, uint32_t payload_len, Instant now, Actions& out);

    // 2*MSL after the last FIN: the 4-tuple may be used again.
    Instant expires() const { return expires_; }
    // The RFC 6191 reuse test reads these.
    SeqNum rcv_nxt() const { return rcv_nxt_; }
    const Endpoints& endpoints() const { return ep_; }

private:
    void send_ack(Instant now, Actions& out) const;
    // send_ack() for a refused segment, under the ACK-loop limit (oow_limit.hpp).
    void answer_unacceptable(const TcpRepr& seg, uint32_t seg_len, Instant now, Actions& out);

    ConnId id_;
    Endpoints ep_;
    SeqNum snd_nxt_;          // SEQ of our ACKs (everything we sent is acknowledged)
    SeqNum rcv_nxt_;          // after the peer's FIN
    Duration time_wait_;      // 2*MSL
    Duration oow_interval_;
    OowLimiter oow_;
    Instant expires_;
    Instant ts_recent_age_;
    uint32_t ts_recent_ = 0;
    uint32_t ts_offset_ = 0;  // our TSval clock goes on as the Tcb's did (Tcb::ts_clock)
    uint16_t window_ = 0;     // the window field of our ACKs (already scaled down)
    bool ts_ok_ = false;
};

} // namespace crescent::tcp
