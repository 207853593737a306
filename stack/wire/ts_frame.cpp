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

#include "stack/wire/bytes.hpp"
#include "stack/wire/ipv4_rules.hpp"
#include "stack/wire/wire.hpp"

namespace crescent::wire {
using namespace detail;

namespace {

inline constexpr uint32_t kNopNopTs = 0x0101080a;  // NOP NOP kind 8 length 10
inline constexpr uint8_t kVerIhl5 = 0x45;
inline constexpr uint8_t kDataOffsetTs = kTsTcpHeaderLen / 4 << 4;
inline constexpr size_t kIp = kEthHeaderLen;
inline constexpr size_t kTcp = kEthHeaderLen + kIpv4HeaderLen;

} // namespace

void emit_ts_frame(std::byte* p, const MacAddr& dst, const MacAddr& src, const Ipv4Repr& ip, const TcpRepr& r,
                   std::span<const Bytes> payload, bool ip_csum, CsumMode mode)
{
    assert(ts_frame_fits(r));
    const MutBytes f(p, kTsFrameHeaderLen);
    std::memcpy(p, dst.b.data(), 6);
    std::memcpy(p + 6, src.b.data(), 6);
    st16(f, 12, kEtherTypeIpv4);

    // IPv4 (emit_ipv4): the checksum from the words as they are stored.
    const uint16_t w0 = uint16_t(kVerIhl5 << 8 | uint8_t(ip.dscp << 2 | (ip.ecn & 0x03)));
    const uint16_t total = uint16_t(kIpv4HeaderLen + ip.payload_len);
    const uint16_t frag = ip.dont_fragment ? kFlagDf : 0;
    const uint16_t ttl_proto = uint16_t(ip.ttl << 8 | ip.protocol);
    st16(f, kIp, w0);
    st16(f, kIp + 2, total);
    st16(f, kIp + 4, ip.ident);
    st16(f, kIp + 6, frag);
    st16(f, kIp + 8, ttl_proto);
    st32(f, kIp + 12, ip.src.v);
    st32(f, kIp + 16, ip.dst.v);
    uint16_t ip_sum = 0;
    if (ip_csum)
        ip_sum = csum_fold(uint32_t(w0) + total + ip.ident + frag + ttl_proto + (ip.src.v >> 16) +
                           (ip.src.v & 0xffffu) + (ip.dst.v >> 16) + (ip.dst.v & 0xffffu));
    st16(f, kIp + 10, ip_sum);

    // TCP (emit_tcp with options {ts}).
    st16(f, kTcp, r.src_port);
    st16(f, kTcp + 2, r.dst_port);
    st32(f, kTcp + 4, r.seq.raw());
    st32(f, kTcp + 8, r.ack.raw());
    st8(f, kTcp + 12, kDataOffsetTs);
    st8(f, kTcp + 13, r.flags);
    st16(f, kTcp + 14, r.window);
    st16(f, kTcp + 16, 0);
    st16(f, kTcp + 18, r.urgent);
    st32(f, kTcp + 20, kNopNopTs);
    st32(f, kTcp + 24, r.opts.ts->tsval);
    st32(f, kTcp + 28, r.opts.ts->tsecr);
    tcp_fill_checksum(f.subspan(kTcp), ip, payload, mode);
}

bool parse_ts_frame(Bytes frame, Offload off, Frame* out)
{
    if (frame.size() < kTsFrameHeaderLen)
        return false;
    if (ld16(frame, 12) != kEtherTypeIpv4 || ld8(frame, kIp) != kVerIhl5 || ld8(frame, kIp + 9) != kIpProtoTcp)
        return false;
    const uint16_t total = ld16(frame, kIp + 2);
    if (total < kIpv4HeaderLen + kTsTcpHeaderLen || total > frame.size() - kIp)
        return false;
    const uint16_t frag = ld16(frame, kIp + 6);
    if (frag & (kFlagMf | kFragOffsetMask))  // the general path drops it as a fragment
        return false;
    if (ld8(frame, kTcp + 12) >> 4 != kDataOffsetTs >> 4 || ld32(frame, kTcp + 20) != kNopNopTs)
        return false;
    const Ipv4Addr src{ld32(frame, kIp + 12)}, dst{ld32(frame, kIp + 16)};
    if (martian_source(src, dst))
        return false;
    if (!off.rx_ip_csum_ok && ipv4_header_csum(frame.data() + kIp) != 0)
        return false;
    const uint16_t seg_len = uint16_t(total - kIpv4HeaderLen);
    if (!off.rx_l4_csum_ok &&
        csum_fold(csum_partial(frame.subspan(kTcp, seg_len), pseudo_header_sum(src, dst, kIpProtoTcp, seg_len))) != 0)
        return false;

    std::memcpy(out->eth.dst.b.data(), frame.data(), 6);
    std::memcpy(out->eth.src.b.data(), frame.data() + 6, 6);
    out->eth.ethertype = kEtherTypeIpv4;
    out->eth.vlan_tci.reset();

    Ipv4Repr& ip = out->ip;
    const uint8_t tos = ld8(frame, kIp + 1);
    ip.dscp = tos >> 2;
    ip.ecn = tos & 0x03;
    ip.ident = ld16(frame, kIp + 4);
    ip.dont_fragment = (frag & kFlagDf) != 0;
    ip.ttl = ld8(frame, kIp + 8);
    ip.protocol = kIpProtoTcp;
    ip.src = src;
    ip.dst = dst;
    ip.payload_len = seg_len;

    TcpRepr& t = out->tcp;
    t.src_port = ld16(frame, kTcp);
    t.dst_port = ld16(frame, kTcp + 2);
    t.seq = SeqNum(ld32(frame, kTcp + 4));
    t.ack = SeqNum(ld32(frame, kTcp + 8));
    t.flags = ld8(frame, kTcp + 13);
    t.window = ld16(frame, kTcp + 14);
    t.urgent = ld16(frame, kTcp + 18);
    TcpOptions& o = t.opts;
    o.mss.reset();
    o.wscale.reset();
    o.sack_permitted = false;
    o.sack_count = 0;
    o.ts = Timestamps{ld32(frame, kTcp + 24), ld32(frame, kTcp + 28)};

    out->payload_off = kTsFrameHeaderLen;
    out->payload_len = seg_len - kTsTcpHeaderLen;
    return true;
}

} // namespace crescent::wire
