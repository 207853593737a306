// crescent — the established segment's frame (Ethernet + IPv4 + TCP with the
// timestamp option alone) in straight-line code, both ways.
//
// The general parsers and emitters (ethernet.cpp, ipv4.cpp, tcp.cpp) walk
// layers and plan options for every possible header; an established
// connection sends and receives one layout nearly always, as Linux's header
// prediction (tcp_rcv_established) and its tcp_options_write() fast case
// assume. Same checks, same results: what is not exactly that layout, or
// fails a check, goes to the general path, which names the drop.
#include <cassert>
#include <cstring>

#include "stack/wire/wire.hpp"

namespace crescent::wire {
namespace {

inline constexpr uint32_t kNopNopTs = 0x0101080a;  // NOP NOP kind 8 length 10
inline constexpr uint8_t kVerIhl5 = 0x45;
inline constexpr uint8_t kDataOffsetTs = kTsTcpHeaderLen / 4 << 4;
inline constexpr size_t kIp = kEthHeaderLen;
inline constexpr size_t kTcp = kEthHeaderLen + kIpv4HeaderLen;

inline void put16(std::byte* p, uint16_t v)
{
    v = __builtin_bswap16(v);
    std::memcpy(p, &v, sizeof v);
}

inline void put32(std::byte* p, uint32_t v)
{
    v = __builtin_bswap32(v);
    std::memcpy(p, &v, sizeof v);
}

inline uint16_t get16(const std::byte* p)
{
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return __builtin_bswap16(v);
}

inline uint32_t get32(const std::byte* p)
{
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return __builtin_bswap32(v);
}

bool martian_source(uint32_t src, uint32_t dst)  // as ipv4.cpp's
{
    const uint32_t top = src >> 24;
    return top == 0 || top == 127 || top >= 224 || src == dst;
}

} // namespace

void emit_ts_frame(std::byte* p, const MacAddr& dst, const MacAddr& src, const Ipv4Repr& ip, const TcpRepr& r,
                   std::span<const Bytes> payload, bool ip_csum, CsumMode mode)
{
    assert(ts_frame_fits(r));
    std::memcpy(p, dst.b.data(), 6);
    std::memcpy(p + 6, src.b.data(), 6);
    put16(p + 12, kEtherTypeIpv4);

    // IPv4 (emit_ipv4): the checksum from the words as they are stored.
    const uint16_t w0 = uint16_t(kVerIhl5 << 8 | uint8_t(ip.dscp << 2 | (ip.ecn & 0x03)));
    const uint16_t total = uint16_t(kIpv4HeaderLen + ip.payload_len);
    const uint16_t frag = ip.dont_fragment ? 0x4000 : 0;
    const uint16_t ttl_proto = uint16_t(ip.ttl << 8 | ip.protocol);
    std::byte* iph = p + kIp;
    put16(iph, w0);
    put16(iph + 2, total);
    put16(iph + 4, ip.ident);
    put16(iph + 6, frag);
    put16(iph + 8, ttl_proto);
    put32(iph + 12, ip.src.v);
    put32(iph + 16, ip.dst.v);
    uint16_t ip_sum = 0;
    if (ip_csum)
        ip_sum = csum_fold(uint32_t(w0) + total + ip.ident + frag + ttl_proto + (ip.src.v >> 16) +
                           (ip.src.v & 0xffffu) + (ip.dst.v >> 16) + (ip.dst.v & 0xffffu));
    put16(iph + 10, ip_sum);

    // TCP (emit_tcp with options {ts}).
    std::byte* th = p + kTcp;
    put16(th, r.src_port);
    put16(th + 2, r.dst_port);
    put32(th + 4, r.seq.raw());
    put32(th + 8, r.ack.raw());
    th[12] = std::byte(kDataOffsetTs);
    th[13] = std::byte(r.flags);
    put16(th + 14, r.window);
    put16(th + 16, 0);
    put16(th + 18, r.urgent);
    put32(th + 20, kNopNopTs);
    put32(th + 24, r.opts.ts->tsval);
    put32(th + 28, r.opts.ts->tsecr);
    tcp_fill_checksum(MutBytes(th, kTsFrameHeaderLen - kTcp), ip, payload, mode);
}

bool parse_ts_frame(Bytes frame, Offload off, Frame* out)
{
    if (frame.size() < kTsFrameHeaderLen)
        return false;
    const std::byte* p = frame.data();
    const std::byte* iph = p + kIp;
    const std::byte* th = p + kTcp;
    if (get16(p + 12) != kEtherTypeIpv4 || uint8_t(iph[0]) != kVerIhl5 || uint8_t(iph[9]) != kIpProtoTcp)
        return false;
    const uint16_t total = get16(iph + 2);
    if (total < kIpv4HeaderLen + kTsTcpHeaderLen || total > frame.size() - kIp)
        return false;
    const uint16_t frag = get16(iph + 6);
    if (frag & 0x3fff)  // MF or an offset: the general path drops it as a fragment
        return false;
    if (uint8_t(th[12]) >> 4 != kDataOffsetTs >> 4 || get32(th + 20) != kNopNopTs)
        return false;
    const uint32_t src = get32(iph + 12), dst = get32(iph + 16);
    if (martian_source(src, dst))
        return false;
    if (!off.rx_ip_csum_ok && ipv4_header_csum(iph) != 0)
        return false;
    const uint16_t seg_len = uint16_t(total - kIpv4HeaderLen);
    if (!off.rx_l4_csum_ok &&
        csum_fold(csum_partial(Bytes(th, seg_len), pseudo_header_sum(Ipv4Addr{src}, Ipv4Addr{dst}, kIpProtoTcp,
                                                                     seg_len))) != 0)
        return false;

    std::memcpy(out->eth.dst.b.data(), p, 6);
    std::memcpy(out->eth.src.b.data(), p + 6, 6);
    out->eth.ethertype = kEtherTypeIpv4;
    out->eth.vlan_tci.reset();

    Ipv4Repr& ip = out->ip;
    const uint8_t tos = uint8_t(iph[1]);
    ip.dscp = tos >> 2;
    ip.ecn = tos & 0x03;
    ip.ident = get16(iph + 4);
    ip.dont_fragment = (frag & 0x4000) != 0;
    ip.ttl = uint8_t(iph[8]);
    ip.protocol = kIpProtoTcp;
    ip.src.v = src;
    ip.dst.v = dst;
    ip.payload_len = seg_len;

    TcpRepr& t = out->tcp;
    t.src_port = get16(th);
    t.dst_port = get16(th + 2);
    t.seq = SeqNum(get32(th + 4));
    t.ack = SeqNum(get32(th + 8));
    t.flags = uint8_t(th[13]);
    t.window = get16(th + 14);
    t.urgent = get16(th + 18);
    TcpOptions& o = t.opts;
    o.mss.reset();
    o.wscale.reset();
    o.sack_permitted = false;
    o.sack_count = 0;
    o.ts = Timestamps{get32(th + 24), get32(th + 28)};

    out->payload_off = kTsFrameHeaderLen;
    out->payload_len = seg_len - kTsTcpHeaderLen;
    return true;
}

} // namespace crescent::wire
