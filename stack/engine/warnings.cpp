// crescent — the engine's rate-limited data-path warnings (EngineImpl::warn,
// ratelimit.hpp): at most one line per kind per second, saying how often the
// event happened since the last line and what to do about it. Every message
// has its entry in docs/troubleshooting.md ("Data-path warnings").
#include "stack/engine/engine_impl.hpp"

#include <crescent/log.hpp>

namespace crescent::engine {

// The rate-limited warning of a data-path event (EngineImpl::warn), due now:
// how often it happened since the last line and what to do about it.
void EngineImpl::warn_line(Warn k) {
    const RateLimit& r = warn_[size_t(k)];
    const uint64_t n = r.count();
    const double s = r.span_seconds();
    auto lg = log::core(p_.core);
    switch (k) {
    case Warn::NeighPending:
        lg->warn("neighbour unresolved: {} frame(s) dropped in the last {:.1f} s waiting for ARP; check that the "
                 "peer or gateway is up and on the link, or give its MAC with --neighbour IP=MAC", n, s);
        break;
    case Warn::NeighFailed:
        lg->warn("neighbour unreachable: {} frame(s) dropped in the last {:.1f} s (ARP got no answer); check the "
                 "peer address, the --gateway and the link, or give the MAC with --neighbour IP=MAC", n, s);
        break;
    case Warn::TxRingFull:
        lg->warn("TX ring full {} times in the last {:.1f} s: the device is slower than the engine; the batch "
                 "waits for the next iteration (lower --burst or the offered load, check the link speed)", n, s);
        break;
    case Warn::TxOverflow:
        lg->warn("TX queue overflow: {} frame(s) dropped in the last {:.1f} s because the device stayed full; "
                 "the engine sends faster than the link drains (reduce the load or the burst, check the link)", n, s);
        break;
    case Warn::TxNoMbuf:
        lg->warn("TX pool empty {} times in the last {:.1f} s: no mbuf to build a frame (the segment is retried "
                 "by TCP); frames are held by a full TX ring or the ARP queue, see the TX ring and neighbour "
                 "warnings", n, s);
        break;
    case Warn::RxNoMemory:
        if (p_.cfg.max_memory != 0)
            lg->warn("engine memory cap of {} MiB reached: {} received segment(s) dropped in the last {:.1f} s; "
                     "raise --max-memory-mb, lower --snd-buf/--rcv-buf, or have the application consume "
                     "received data (and release its Slices) sooner", p_.cfg.max_memory >> 20, n, s);
        else
            lg->warn("zbuf arena empty: {} received segment(s) dropped in the last {:.1f} s; raise --arena-mb, or "
                     "have the application consume received data (and release its Slices) sooner", n, s);
        break;
    case Warn::Count:
        break;
    }
}

} // namespace crescent::engine
