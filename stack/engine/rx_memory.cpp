// crescent — received payloads under memory pressure (EngineConfig::max_memory,
// an empty arena): which segments may still take memory (rx_copy_allowed() in
// engine_impl.hpp asks rx_in_order()), and what TCP still gets of a segment
// whose payload could not be stored (rx_header_only()).
#include "stack/engine/engine_impl.hpp"

#include <optional>

namespace crescent::engine {

bool EngineImpl::rx_in_order(const wire::Frame& f) const {
    const std::optional<tcp::ConnId> id = host_.lookup(f.ip.src, f.tcp.src_port, f.tcp.dst_port);
    const tcp::Tcb* t = id ? host_.find(*id) : nullptr;
    return t && f.tcp.seq == t->rcv_nxt();
}

void EngineImpl::rx_header_only(const wire::Frame& f, Instant now) {
    if (!f.tcp.has(wire::tcp_flags::ACK) || f.tcp.has(wire::tcp_flags::SYN)) return;
    wire::TcpRepr h = f.tcp;
    h.flags &= uint8_t(~wire::tcp_flags::FIN);
    host_.on_segment(f.ip.src, f.ip.dst, f.ip.ecn, h, Slice(), now, act_);
    if (!act_.empty()) {
        process(act_, now);
        act_.clear();
    }
}

} // namespace crescent::engine
