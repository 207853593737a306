// crescent — IPv4 header parse/emit (RFC 791 §3.1, RFC 2474 DSCP, RFC 3168 ECN).
//
// Input checks follow the order of Linux's ip_rcv_core(): version and IHL,
// header present, header checksum, total length against the buffer (so
// Ethernet padding past the total length is excluded); then, for TCP, the
// martian-source check Linux makes at routing (ip_route_input_slow). Options are skipped,
// not interpreted. Fragments are dropped: the stack does no reassembly (the
// peers negotiate an MSS that fits the MTU and set DF).
#include <cassert>

#include "stack/wire/bytes.hpp"
#include "stack/wire/ipv4_rules.hpp"
#include "stack/wire/wire.hpp"

namespace crescent::wire {
using namespace detail;

Drop parse_ipv4(Bytes packet, bool checksum_verified, Ipv4Repr* out, size_t* payload_off)
{
    if (packet.size() < kIpv4HeaderLen)
        return Drop::IpTruncated;
    const uint8_t ver_ihl = ld8(packet, 0);
    if (ver_ihl >> 4 != 4)
        return Drop::IpBadVersion;
    const size_t header_len = size_t(ver_ihl & 0x0f) * 4;
    if (header_len < kIpv4HeaderLen)
        return Drop::IpBadIhl;
    if (packet.size() < header_len)
        return Drop::IpTruncated;
    if (!checksum_verified) {
        const uint16_t c = header_len == kIpv4HeaderLen ? ipv4_header_csum(packet.data())
                                                        : csum_fold(csum_partial(packet.first(header_len)));
        if (c != 0)
            return Drop::IpBadChecksum;
    }
    const uint16_t total_len = ld16(packet, 2);
    if (total_len < header_len || total_len > packet.size())
        return Drop::IpBadTotalLength;
    const uint16_t frag = ld16(packet, 6);
    if ((frag & kFlagMf) || (frag & kFragOffsetMask))
        return Drop::IpFragment;

    const uint8_t tos = ld8(packet, 1);
    out->dscp = tos >> 2;
    out->ecn = tos & 0x03;
    out->ident = ld16(packet, 4);
    out->dont_fragment = (frag & kFlagDf) != 0;
    out->ttl = ld8(packet, 8);
    out->protocol = ld8(packet, 9);
    out->src.v = ld32(packet, 12);
    out->dst.v = ld32(packet, 16);
    out->payload_len = uint16_t(total_len - header_len);
    *payload_off = header_len;
    if (out->protocol != kIpProtoTcp)
        return Drop::IpNotTcp;
    return martian_source(out->src, out->dst) ? Drop::IpBadSource : Drop::None;
}

void emit_ipv4(const Ipv4Repr& r, MutBytes out, bool fill_checksum)
{
    assert(r.payload_len <= 0xffff - kIpv4HeaderLen);
    st8(out, 0, 0x45); // version 4, IHL 5: crescent never sends IP options
    st8(out, 1, uint8_t(r.dscp << 2 | (r.ecn & 0x03)));
    st16(out, 2, uint16_t(kIpv4HeaderLen + r.payload_len));
    st16(out, 4, r.ident);
    st16(out, 6, r.dont_fragment ? kFlagDf : 0);
    st8(out, 8, r.ttl);
    st8(out, 9, r.protocol);
    st16(out, 10, 0);
    st32(out, 12, r.src.v);
    st32(out, 16, r.dst.v);
    if (fill_checksum)
        st16(out, 10, ipv4_header_csum(out.data()));
}

} // namespace crescent::wire
