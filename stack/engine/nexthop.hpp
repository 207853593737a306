// crescent — next-hop resolution as the engine sees it.
//
// The engine asks, for every outgoing segment, which Ethernet address the
// frame goes to. The answer comes from the control plane (stack/ctrl: netlink
// routes and neighbours, kernel-resolved) or from a static table for devices
// with no kernel netdev (net_ring, memif, pcap). crescent never sends ARP.
#pragma once

#include <cstdint>
#include <vector>

#include <crescent/time.hpp>

#include "stack/wire/wire.hpp"

namespace crescent::engine {

enum class Resolve : uint8_t {
    Ok,        // *mac is the next hop's address
    Pending,   // resolution is under way (the kernel was asked); try again later
    Failed,    // resolution timed out / the neighbour is unreachable
    NoRoute,   // no route covers the destination
};

// `a` is the directed broadcast address of the subnet `addr`/`prefix_len`
// (host bits all ones; /31 and /32 have none, RFC 3021).
inline bool subnet_broadcast(wire::Ipv4Addr a, wire::Ipv4Addr addr, uint8_t prefix_len) {
    if (prefix_len == 0 || prefix_len > 30) return false;
    const uint32_t mask = ~uint32_t{0} << (32 - prefix_len);
    return (a.v & mask) == (addr.v & mask) && (a.v | mask) == ~uint32_t{0};
}

class NextHop {
public:
    virtual ~NextHop() = default;
    // `a` is the broadcast address of one of our subnets: no host may use it
    // as a source (RFC 1812 §5.3.7); the engine drops SYNs from it. Not the
    // per-segment path: asked for SYNs only.
    virtual bool directed_broadcast(wire::Ipv4Addr a) { (void)a; return false; }
    // Data path: no syscalls, no locks (a read of a per-engine or RCU table).
    virtual Resolve resolve(wire::Ipv4Addr dst, Instant now, wire::MacAddr* mac) = 0;
    // The MTU the route to `dst` sets (a route's mtu metric), 0 when it sets
    // none and the interface's applies. Asked when a connection opens.
    virtual uint32_t path_mtu(wire::Ipv4Addr dst) { (void)dst; return 0; }
    // Once per loop iteration: the engine holds no reference into the tables
    // (an RCU quiescent point).
    virtual void quiescent() {}
    // Around a sleep: the engine reads nothing while offline.
    virtual void offline() {}
    virtual void online() {}
};

// Static neighbours (and an optional default gateway) from options.
class StaticNextHop final : public NextHop {
public:
    struct Entry {
        wire::Ipv4Addr ip;
        wire::MacAddr mac;
    };
    // `prefix_len`: the local subnet; destinations outside it go to `gateway`
    // (when set), which must itself be a listed neighbour.
    StaticNextHop(wire::Ipv4Addr local, uint8_t prefix_len, std::vector<Entry> neighbours,
                  wire::Ipv4Addr gateway = {})
        : local_(local), prefix_len_(prefix_len), gateway_(gateway), neigh_(std::move(neighbours)) {}

    Resolve resolve(wire::Ipv4Addr dst, Instant, wire::MacAddr* mac) override {
        wire::Ipv4Addr hop = dst;
        uint32_t mask = prefix_len_ == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len_);
        if ((dst.v & mask) != (local_.v & mask)) {
            if (gateway_.v == 0) return Resolve::NoRoute;
            hop = gateway_;
        }
        for (const Entry& e : neigh_)
            if (e.ip == hop) {
                *mac = e.mac;
                return Resolve::Ok;
            }
        return Resolve::Failed;
    }
    bool directed_broadcast(wire::Ipv4Addr a) override { return subnet_broadcast(a, local_, prefix_len_); }

private:
    wire::Ipv4Addr local_;
    uint8_t prefix_len_;
    wire::Ipv4Addr gateway_;
    std::vector<Entry> neigh_;
};

} // namespace crescent::engine
