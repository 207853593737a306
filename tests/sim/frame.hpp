// crescent sim — serialising segments to Ethernet/IPv4/TCP bytes with the
// wire layer (wire::emit_*), so the simulated wire carries real frames that
// the receiving side parses back with wire::parse_frame (checksums included).
#pragma once

#include <span>

#include "stack/wire/wire.hpp"
#include "tests/sim/link.hpp"

namespace crescent::sim {

// MAC addresses of the two simulated hosts are derived from their IPs.
wire::MacAddr mac_of(wire::Ipv4Addr ip);

// Ethernet + IPv4 (20 bytes, no options) + TCP (options) + payload, with the
// IPv4 header checksum and the full TCP checksum filled in.
Bytes build_frame(wire::Ipv4Addr src, wire::Ipv4Addr dst, uint8_t ip_ecn, const wire::TcpRepr& tcp,
                  std::span<const wire::Bytes> payload);

} // namespace crescent::sim
