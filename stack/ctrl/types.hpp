// crescent — control-plane value types: prefixes, routes, neighbours, interface facts.
//
// These mirror what the kernel reports over rtnetlink (RFC 3549; rtnetlink(7))
// for one interface, in host-order values built on `wire::Ipv4Addr` /
// `wire::MacAddr`. They carry no libnl or DPDK types, so the data path and the
// unit tests can use them without either.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stack/wire/wire.hpp"

namespace crescent::ctrl {

using wire::Ipv4Addr;
using wire::MacAddr;

// An IPv4 prefix. Invariant: len <= 32 and the host bits of `addr` are zero
// (`make` masks them).
struct Ipv4Prefix {
    Ipv4Addr addr;
    uint8_t len = 0;

    static constexpr uint32_t mask_of(uint8_t len) { return len == 0 ? 0 : ~uint32_t(0) << (32 - len); }
    static constexpr Ipv4Prefix make(Ipv4Addr a, uint8_t len) {
        return Ipv4Prefix{Ipv4Addr{a.v & mask_of(len)}, len};
    }
    constexpr uint32_t mask() const { return mask_of(len); }
    constexpr bool contains(Ipv4Addr a) const { return (a.v & mask()) == addr.v; }
    constexpr bool operator==(const Ipv4Prefix&) const = default;
};

// Neighbour (ARP) entry states, as the kernel's NUD_* bits (include/net/neighbour.h).
enum class NeighState : uint8_t {
    None,        // NUD_NONE: just created, nothing sent yet
    Incomplete,  // NUD_INCOMPLETE: ARP request sent, no answer yet
    Reachable,   // NUD_REACHABLE
    Stale,       // NUD_STALE: MAC known, reachability not confirmed recently
    Delay,       // NUD_DELAY
    Probe,       // NUD_PROBE
    Failed,      // NUD_FAILED: resolution gave up
    Noarp,       // NUD_NOARP: no resolution needed on this link
    Permanent,   // NUD_PERMANENT: static entry
};
std::string_view neigh_state_name(NeighState s);
// Whether an entry in this state carries a MAC that may be used to send.
// Stale/Delay/Probe are usable (the kernel itself keeps sending to them while
// it re-confirms); None/Incomplete/Failed are not.
constexpr bool neigh_usable(NeighState s) {
    switch (s) {
    case NeighState::Reachable:
    case NeighState::Stale:
    case NeighState::Delay:
    case NeighState::Probe:
    case NeighState::Noarp:
    case NeighState::Permanent:
        return true;
    case NeighState::None:
    case NeighState::Incomplete:
    case NeighState::Failed:
        return false;
    }
    return false;
}
// From the kernel's NUD_* bit mask (several bits may be set; the "best" wins).
NeighState neigh_state_from_nud(uint16_t nud);

struct Neighbour {
    Ipv4Addr ip;
    MacAddr mac;            // meaningful iff neigh_usable(state)
    NeighState state = NeighState::None;
    bool operator==(const Neighbour&) const = default;
};

enum class RouteType : uint8_t {
    Unicast,   // RTN_UNICAST: forward (via gateway or directly connected)
    Reject,    // RTN_BLACKHOLE / RTN_UNREACHABLE / RTN_PROHIBIT: nothing is sent
};

// A route of the main table. The kernel's identity of an IPv4 route is
// (table, dst/len, tos, priority); crescent keeps only the main table.
struct Route {
    Ipv4Prefix dst;
    Ipv4Addr gateway;        // 0.0.0.0: directly connected (the destination is the neighbour)
    uint32_t metric = 0;     // RTA_PRIORITY: lower wins among equal prefixes
    uint8_t tos = 0;
    RouteType type = RouteType::Unicast;
    int oif = 0;             // output interface index (0 for reject routes / static config)
    Ipv4Addr prefsrc;        // RTA_PREFSRC, 0.0.0.0 if absent
    uint32_t mtu = 0;        // RTAX_MTU ("ip route ... mtu N"): the path's MTU, 0 if the route sets none
    bool has_gateway() const { return gateway.v != 0; }
    bool operator==(const Route&) const = default;
};

struct InterfaceAddr {
    Ipv4Addr addr;
    uint8_t prefix_len = 0;
    Ipv4Prefix subnet() const { return Ipv4Prefix::make(addr, prefix_len); }
    bool operator==(const InterfaceAddr&) const = default;
};

// Facts about the one interface crescent serves.
struct InterfaceInfo {
    std::string name;
    int ifindex = 0;                     // 0 for static configuration (no kernel netdev)
    MacAddr mac;
    uint32_t mtu = 1500;
    bool admin_up = false;               // IFF_UP
    bool oper_up = false;                // operstate UP (or UNKNOWN with IFF_RUNNING, as for tun/veth w/o carrier info)
    std::vector<InterfaceAddr> addrs;    // IPv4 only, in the order the kernel reported them
    bool operator==(const InterfaceInfo&) const = default;
};

// ---- text forms (configuration, logs, tests) -----------------------------------

// Dotted quad, exactly four decimal octets 0..255, no leading '+'/spaces.
std::optional<Ipv4Addr> parse_ipv4(std::string_view s);
// "a.b.c.d/len" with len 0..32 (host bits allowed: an interface address).
std::optional<InterfaceAddr> parse_ipv4_with_len(std::string_view s);
// Six hex octets separated by ':' (or '-'), one or two digits each.
std::optional<MacAddr> parse_mac(std::string_view s);
std::string to_string(Ipv4Addr a);
std::string to_string(const MacAddr& m);
std::string to_string(const Ipv4Prefix& p);

} // namespace crescent::ctrl
