// crescent sim — frame serialisation through the wire layer (see frame.hpp).
#include "tests/sim/frame.hpp"

namespace crescent::sim {

wire::MacAddr mac_of(wire::Ipv4Addr ip) {
    return wire::MacAddr{{0x02, 0x00, uint8_t(ip.v >> 24), uint8_t(ip.v >> 16), uint8_t(ip.v >> 8), uint8_t(ip.v)}};
}

Bytes build_frame(wire::Ipv4Addr src, wire::Ipv4Addr dst, uint8_t ip_ecn, const wire::TcpRepr& tcp,
                  std::span<const wire::Bytes> payload) {
    wire::EthRepr eth;
    eth.src = mac_of(src);
    eth.dst = mac_of(dst);
    eth.ethertype = wire::kEtherTypeIpv4;
    size_t payload_len = 0;
    for (auto p : payload) payload_len += p.size();
    const size_t eth_len = wire::eth_header_len(eth);
    const size_t tcp_len = wire::tcp_header_len(tcp);
    wire::Ipv4Repr ip;
    ip.src = src;
    ip.dst = dst;
    ip.ecn = ip_ecn;
    ip.payload_len = uint16_t(tcp_len + payload_len);
    Bytes f(eth_len + wire::kIpv4HeaderLen + tcp_len + payload_len);
    wire::MutBytes all(f);
    wire::emit_eth(eth, all.first(eth_len));
    wire::emit_ipv4(ip, all.subspan(eth_len, wire::kIpv4HeaderLen));
    wire::emit_tcp(tcp, ip, all.subspan(eth_len + wire::kIpv4HeaderLen, tcp_len), payload, wire::CsumMode::Full);
    size_t off = eth_len + wire::kIpv4HeaderLen + tcp_len;
    for (auto p : payload) {
        std::copy(p.begin(), p.end(), f.begin() + ptrdiff_t(off));
        off += p.size();
    }
    return f;
}

} // namespace crescent::sim
