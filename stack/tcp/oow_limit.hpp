// crescent — the rate limit on answers to unacceptable segments.
//
// RFC 9293 answers every unacceptable segment with <SEQ=SND.NXT><ACK=RCV.NXT>.
// When both ends refuse what the other sends — each thinks the other's SEQ
// is stale, or one ACKs data the other never sent — every answer draws an
// answer, and the two ends trade ACKs at line rate for as long as the state
// lasts (an "ACK loop"). Linux breaks such loops by answering a pure
// segment at most once per tcp_invalid_ratelimit (500 ms) per connection,
// tcp_oow_rate_limited(); crescent does the same:
//
//  - a segment carrying data (or a FIN) is always answered: it is not part
//    of a loop, and its sender needs the duplicate ACK (RFC 5681 §3.2, RFC
//    2883);
//  - a zero-window or keep-alive probe, a pure segment at exactly RCV.NXT-1
//    (RFC 9293 §3.8.4, as crescent and Linux probe), is always answered: its
//    answer is what the prober waits for, and probes come on a backed-off
//    timer, never as answers, so they cannot loop;
//  - any other pure segment (or a SYN) is answered only if no such answer
//    was sent within the interval.
//
// Suppressing such an answer loses nothing: a pure ACK never needs one to
// make progress (its sender retransmits data that needs acknowledging, and
// data is always answered).
#pragma once

#include <cstdint>

#include <crescent/time.hpp>

#include "stack/wire/wire.hpp"

namespace crescent::tcp {

class OowLimiter {
public:
    // Whether to answer `seg` (seg_len its SEG.LEN: payload plus SYN and FIN)
    // that was refused at `now`; true also starts the interval again.
    bool allow(const wire::TcpRepr& seg, uint32_t seg_len, wire::SeqNum rcv_nxt, Instant now, Duration interval) {
        if (seg_len > 0 && !seg.has(wire::tcp_flags::SYN)) return true;
        if (seg_len == 0 && seg.seq == rcv_nxt - 1) return true;
        if (!last_.is_never() && now - last_ >= Duration(0) && now - last_ < interval) return false;
        last_ = now;
        return true;
    }

private:
    Instant last_ = Instant::never();
};

} // namespace crescent::tcp
