// crescent — next hops from the kernel's tables (stack/ctrl, Luna §7.3).
//
// Each engine reads the control plane's current immutable Snapshot through
// its own RCU reader (one pointer load per lookup, a quiescent point per loop
// iteration) and asks the kernel to resolve a missing neighbour with its own
// netlink socket (RTM_NEWNEIGH + NTF_USE; at most once per `retry` per
// address — the slow path). The answer arrives as a new snapshot published by
// the Netlink owner (engine 0, from its epoll), and the engine's held frames
// go out on a later iteration. A one-entry cache keyed by the snapshot
// generation keeps the per-segment cost at a compare when the destination
// does not change (the common case: one peer per burst).
#pragma once

#include <memory>
#include <optional>
#include <unordered_map>

#include "stack/ctrl/netlink.hpp"
#include "stack/ctrl/rcu.hpp"
#include "stack/ctrl/snapshot.hpp"
#include "stack/engine/nexthop.hpp"

namespace crescent::engine {

class CtrlNextHop final : public NextHop {
public:
    // `resolver` may be null (static configuration: a missing neighbour is final).
    CtrlNextHop(ctrl::Rcu<ctrl::Snapshot>::Reader reader, std::unique_ptr<ctrl::NeighbourResolver> resolver,
                Duration retry = std::chrono::milliseconds(500))
        : reader_(std::move(reader)), resolver_(std::move(resolver)), retry_(retry) {}

    Resolve resolve(wire::Ipv4Addr dst, Instant now, wire::MacAddr* mac) override {
        const ctrl::Snapshot& s = reader_.read();
        if (cache_valid_ && cache_gen_ == s.generation() && cache_dst_ == dst) {
            *mac = cache_mac_;
            return Resolve::Ok;
        }
        ctrl::NextHop nh = s.next_hop(dst);
        switch (nh.status) {
        case ctrl::NextHopStatus::Resolved:
            *mac = nh.mac;
            cache_valid_ = true;
            cache_gen_ = s.generation();
            cache_dst_ = dst;
            cache_mac_ = nh.mac;
            return Resolve::Ok;
        case ctrl::NextHopStatus::Unresolved: {
            if (!s.can_resolve() || !resolver_) return Resolve::Failed;
            if (const ctrl::Neighbour* n = s.find_neighbour(nh.neighbour);
                n && n->state == ctrl::NeighState::Failed) {
                // The kernel gave up; ask again now and then (the peer may come back).
                if (!ask(nh.neighbour, now)) return Resolve::Failed;
                return Resolve::Pending;
            }
            ask(nh.neighbour, now);
            return Resolve::Pending;
        }
        case ctrl::NextHopStatus::NoRoute:
        case ctrl::NextHopStatus::Rejected:
        case ctrl::NextHopStatus::OtherInterface:
        case ctrl::NextHopStatus::LinkDown:
            return Resolve::NoRoute;
        }
        return Resolve::NoRoute;
    }
    uint32_t path_mtu(wire::Ipv4Addr dst) override {
        const ctrl::Route* r = reader_.read().lookup_route(dst);
        return r != nullptr ? r->mtu : 0;
    }
    bool directed_broadcast(wire::Ipv4Addr a) override {
        for (const ctrl::InterfaceAddr& ia : reader_.read().iface().addrs)
            if (subnet_broadcast(a, ia.addr, ia.prefix_len)) return true;
        return false;
    }
    void quiescent() override { reader_.quiescent(); }
    void offline() override { reader_.offline(); }
    void online() override { reader_.online(); }

    uint64_t requests() const { return requests_; }

private:
    // Returns true when a request was sent now.
    bool ask(wire::Ipv4Addr ip, Instant now) {
        auto it = asked_.find(ip.v);
        if (it != asked_.end() && now - it->second < retry_) return false;
        if (asked_.size() > 4096) asked_.clear();  // bounded
        asked_[ip.v] = now;
        ++requests_;
        resolver_->request(ip);
        return true;
    }

    ctrl::Rcu<ctrl::Snapshot>::Reader reader_;
    std::unique_ptr<ctrl::NeighbourResolver> resolver_;
    Duration retry_;
    std::unordered_map<uint32_t, Instant> asked_;
    uint64_t requests_ = 0;
    bool cache_valid_ = false;
    uint64_t cache_gen_ = 0;
    wire::Ipv4Addr cache_dst_;
    wire::MacAddr cache_mac_;
};

} // namespace crescent::engine
