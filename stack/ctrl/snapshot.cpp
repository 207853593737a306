// crescent — immutable control-plane snapshot: LPM route lookup, neighbour hash,
// next-hop resolution.
#include "stack/ctrl/snapshot.hpp"

#include <algorithm>
#include <bit>

namespace crescent::ctrl {

std::string_view next_hop_status_name(NextHopStatus s) {
    switch (s) {
    case NextHopStatus::Resolved: return "resolved";
    case NextHopStatus::Unresolved: return "unresolved";
    case NextHopStatus::NoRoute: return "no route";
    case NextHopStatus::Rejected: return "rejected by route";
    case NextHopStatus::OtherInterface: return "route via another interface";
    case NextHopStatus::LinkDown: return "link down";
    }
    return "?";
}

namespace {
// Fibonacci hashing of the address; the top bits index the table (>> slot_shift_).
inline uint32_t hash_ip(Ipv4Addr a) { return a.v * 0x9E3779B1u; }
} // namespace

Snapshot::Snapshot(InterfaceInfo iface, std::vector<Route> routes, std::span<const Neighbour> neighbours,
                   bool can_resolve, uint64_t generation)
    : iface_(std::move(iface)), routes_(std::move(routes)), can_resolve_(can_resolve), generation_(generation) {
    for (Route& r : routes_) r.dst = Ipv4Prefix::make(r.dst.addr, r.dst.len); // enforce the invariant
    std::sort(routes_.begin(), routes_.end(), [](const Route& a, const Route& b) {
        if (a.dst.len != b.dst.len) return a.dst.len > b.dst.len;
        if (a.dst.addr.v != b.dst.addr.v) return a.dst.addr.v < b.dst.addr.v;
        if (a.metric != b.metric) return a.metric < b.metric;
        return a.tos < b.tos;
    });
    for (uint32_t i = 0; i < routes_.size(); ++i) {
        if (groups_.empty() || groups_.back().len != routes_[i].dst.len)
            groups_.push_back(Group{routes_[i].dst.len, i, i});
        groups_.back().end = i + 1;
    }

    // Load factor <= 1/2 keeps probe sequences short; at least 8 slots.
    size_t cap = std::bit_ceil(std::max<size_t>(8, neighbours.size() * 2));
    slots_.resize(cap);
    slot_mask_ = uint32_t(cap - 1);
    slot_shift_ = uint8_t(32 - std::countr_zero(cap));
    for (const Neighbour& n : neighbours) {
        uint32_t i = hash_ip(n.ip) >> slot_shift_;
        while (slots_[i].used && slots_[i].n.ip != n.ip) i = (i + 1) & slot_mask_;
        if (!slots_[i].used) ++neighbour_count_;
        slots_[i] = Slot{n, true}; // a duplicate address: the last one wins
    }
}

const Route* Snapshot::lookup_route(Ipv4Addr dst) const {
    // One binary search per distinct prefix length (at most 33), longest first.
    // Within a group the routes are sorted by (network, metric), so the first
    // route of the equal range is the one with the lowest metric.
    for (const Group& g : groups_) {
        uint32_t net = dst.v & Ipv4Prefix::mask_of(g.len);
        auto first = routes_.begin() + g.begin, last = routes_.begin() + g.end;
        auto it = std::lower_bound(first, last, net, [](const Route& r, uint32_t key) { return r.dst.addr.v < key; });
        if (it != last && it->dst.addr.v == net) return &*it;
    }
    return nullptr;
}

const Neighbour* Snapshot::find_neighbour(Ipv4Addr ip) const {
    uint32_t i = hash_ip(ip) >> slot_shift_;
    while (slots_[i].used) {
        if (slots_[i].n.ip == ip) return &slots_[i].n;
        i = (i + 1) & slot_mask_;
    }
    return nullptr;
}

std::vector<Neighbour> Snapshot::neighbours() const {
    std::vector<Neighbour> out;
    out.reserve(neighbour_count_);
    for (const Slot& s : slots_)
        if (s.used) out.push_back(s.n);
    return out;
}

Ipv4Addr Snapshot::source_for(const Route& r, Ipv4Addr dst) const {
    if (r.prefsrc.v != 0) return r.prefsrc;
    Ipv4Addr hop = r.has_gateway() ? r.gateway : dst;
    for (const InterfaceAddr& a : iface_.addrs)
        if (a.subnet().contains(hop)) return a.addr;
    return iface_.addrs.empty() ? Ipv4Addr{} : iface_.addrs.front().addr;
}

NextHop Snapshot::next_hop(Ipv4Addr dst) const {
    NextHop nh;
    const Route* r = lookup_route(dst);
    if (r == nullptr) return nh; // NoRoute
    nh.route = r;
    if (r->type == RouteType::Reject) {
        nh.status = NextHopStatus::Rejected;
        return nh;
    }
    if (r->oif != 0 && iface_.ifindex != 0 && r->oif != iface_.ifindex) {
        nh.status = NextHopStatus::OtherInterface;
        return nh;
    }
    if (!iface_.admin_up || !iface_.oper_up) {
        nh.status = NextHopStatus::LinkDown;
        return nh;
    }
    nh.neighbour = r->has_gateway() ? r->gateway : dst;
    nh.source = source_for(*r, dst);
    const Neighbour* n = find_neighbour(nh.neighbour);
    if (n != nullptr && neigh_usable(n->state)) {
        nh.status = NextHopStatus::Resolved;
        nh.mac = n->mac;
    } else {
        nh.status = NextHopStatus::Unresolved;
    }
    return nh;
}

} // namespace crescent::ctrl
