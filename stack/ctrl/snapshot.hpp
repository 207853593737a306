// crescent — an immutable view of the control plane for one interface, and
// next-hop resolution over it.
//
// A Snapshot is built once (by the netlink owner, or from static configuration)
// and never changes afterwards; engines read it without locks, per burst, through
// `ctrl::Rcu<Snapshot>` (rcu.hpp). Lookups do not allocate.
//
// Routing follows the kernel's IPv4 FIB for the main table: the longest
// matching prefix wins (RFC 1812 §5.2.4.3); among routes with the same prefix
// the lowest metric (RTA_PRIORITY) wins. The next hop is the route's gateway,
// or the destination itself for a directly connected route; its MAC comes from
// the neighbour table (RFC 826 ARP, run by the kernel — never by crescent).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "stack/ctrl/types.hpp"

namespace crescent::ctrl {

enum class NextHopStatus : uint8_t {
    Resolved,        // `mac` is the next hop's MAC: send now
    Unresolved,      // route found, neighbour missing / incomplete / failed: ask the
                     // kernel to resolve `neighbour` (if `can_resolve`) and hold the packet
    NoRoute,         // no route matches the destination
    Rejected,        // a blackhole / unreachable / prohibit route matches
    OtherInterface,  // the best route leaves through another interface
    LinkDown,        // the interface is administratively or operationally down
};
std::string_view next_hop_status_name(NextHopStatus s);

struct NextHop {
    NextHopStatus status = NextHopStatus::NoRoute;
    Ipv4Addr neighbour;          // gateway or destination (valid from Resolved/Unresolved)
    MacAddr mac;                 // valid iff Resolved
    Ipv4Addr source;             // preferred source address for this destination (0 if none)
    const Route* route = nullptr; // the matching route (lives as long as the snapshot)
};

class Snapshot {
public:
    // `can_resolve`: a kernel is there to resolve missing neighbours (netlink);
    // false for static configuration, where a missing neighbour is final.
    Snapshot(InterfaceInfo iface, std::vector<Route> routes, std::span<const Neighbour> neighbours,
             bool can_resolve, uint64_t generation);

    Snapshot(const Snapshot&) = delete;
    Snapshot& operator=(const Snapshot&) = delete;

    const InterfaceInfo& iface() const { return iface_; }
    bool can_resolve() const { return can_resolve_; }
    // Increases with every snapshot the owner publishes (engines compare it to
    // notice a change, e.g. to retry their pending packets).
    uint64_t generation() const { return generation_; }

    // Longest-prefix match; nullptr when nothing matches.
    const Route* lookup_route(Ipv4Addr dst) const;
    const Neighbour* find_neighbour(Ipv4Addr ip) const;
    NextHop next_hop(Ipv4Addr dst) const;

    // Routes in lookup order: prefix length descending, then network, then metric.
    std::span<const Route> routes() const { return routes_; }
    size_t neighbour_count() const { return neighbour_count_; }
    // Every neighbour (unordered); for logs and tests.
    std::vector<Neighbour> neighbours() const;

private:
    struct Group {          // routes_[begin, end) all have prefix length `len`
        uint8_t len;
        uint32_t begin, end;
    };
    struct Slot {
        Neighbour n;
        bool used = false;
    };

    Ipv4Addr source_for(const Route& r, Ipv4Addr dst) const;

    InterfaceInfo iface_;
    std::vector<Route> routes_;   // sorted as routes() says
    std::vector<Group> groups_;   // one per distinct prefix length, longest first
    // Open-addressing hash table (linear probing), power-of-two size with load
    // <= 1/2; built once, never modified, so there are no tombstones.
    std::vector<Slot> slots_;
    uint32_t slot_mask_ = 0;      // slots_.size() - 1
    uint8_t slot_shift_ = 32;     // 32 - log2(slots_.size())
    size_t neighbour_count_ = 0;
    bool can_resolve_ = false;
    uint64_t generation_ = 0;
};

} // namespace crescent::ctrl
