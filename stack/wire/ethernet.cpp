// crescent — Ethernet II framing with an optional IEEE 802.1Q tag.
//
// Only a single C-tag (TPID 0x8100) is understood; the frame check sequence is
// never part of the buffers a NIC hands up.
#include <cstring>

#include "stack/wire/bytes.hpp"
#include "stack/wire/wire.hpp"

namespace crescent::wire {
using namespace detail;

namespace {
inline constexpr size_t kVlanTagLen = 4;
}

size_t eth_header_len(const EthRepr& r)
{
    return kEthHeaderLen + (r.vlan_tci ? kVlanTagLen : 0);
}

Drop parse_eth(Bytes frame, EthRepr* out, size_t* payload_off)
{
    if (frame.size() < kEthHeaderLen)
        return Drop::EthTruncated;
    uint16_t type = ld16(frame, 12);
    size_t off = kEthHeaderLen;
    out->vlan_tci.reset();
    if (type == kEtherTypeVlan) {
        if (frame.size() < kEthHeaderLen + kVlanTagLen)
            return Drop::EthTruncated;
        out->vlan_tci = ld16(frame, 14);
        type = ld16(frame, 16);
        off += kVlanTagLen;
    }
    std::memcpy(out->dst.b.data(), frame.data(), 6);
    std::memcpy(out->src.b.data(), frame.data() + 6, 6);
    out->ethertype = type;
    *payload_off = off;
    return type == kEtherTypeIpv4 ? Drop::None : Drop::EthNotIpv4;
}

void emit_eth(const EthRepr& r, MutBytes out)
{
    for (size_t i = 0; i < 6; ++i) {
        st8(out, i, r.dst.b[i]);
        st8(out, 6 + i, r.src.b[i]);
    }
    if (r.vlan_tci) {
        st16(out, 12, kEtherTypeVlan);
        st16(out, 14, *r.vlan_tci);
        st16(out, 16, r.ethertype);
    } else {
        st16(out, 12, r.ethertype);
    }
}

} // namespace crescent::wire
