// crescent — rtnetlink control plane through libnl-route (see netlink.hpp).
// References: rtnetlink(7), RFC 3549 (Netlink as an IP services protocol),
// include/uapi/linux/{rtnetlink,neighbour,if_link}.h, the kernel's
// neigh_add() for NTF_USE.
#include "stack/ctrl/netlink.hpp"

// <net/if.h> before any <linux/...> header: linux/libc-compat.h then skips
// the definitions glibc already made.
#include <net/if.h>
#include <net/if_arp.h>
#include <arpa/inet.h>
#include <linux/if.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/object.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>

#include <crescent/log.hpp>

namespace crescent::ctrl {

namespace {

std::shared_ptr<spdlog::logger> logger() { return log::get("ctrl"); }

bool fail(std::string* error, std::string msg) {
    if (error != nullptr) *error = std::move(msg);
    return false;
}

std::optional<Ipv4Addr> ipv4_of(nl_addr* a) {
    if (a == nullptr || nl_addr_get_family(a) != AF_INET || nl_addr_get_len(a) != 4) return std::nullopt;
    uint32_t be;
    std::memcpy(&be, nl_addr_get_binary_addr(a), 4);
    return Ipv4Addr{ntohl(be)};
}

std::optional<MacAddr> mac_of(nl_addr* a) {
    if (a == nullptr || nl_addr_get_len(a) != 6) return std::nullopt;
    MacAddr m;
    std::memcpy(m.b.data(), nl_addr_get_binary_addr(a), 6);
    return m;
}

// Operationally up: RFC 2863 "up", or "unknown" with the carrier bit set
// (drivers that do not report operstate).
bool oper_up_of(rtnl_link* link) {
    uint8_t st = rtnl_link_get_operstate(link);
    return st == IF_OPER_UP || (st == IF_OPER_UNKNOWN && (rtnl_link_get_flags(link) & IFF_RUNNING) != 0);
}

// One line naming the cause, for the errors a user can act on.
std::string describe(int nlerr) {
    switch (-nlerr) {
    case NLE_PERM: return "permission denied (needs CAP_NET_ADMIN: run as root or grant the capability)";
    case NLE_NOACCESS: return "access denied (needs CAP_NET_ADMIN: run as root or grant the capability)";
    default: return nl_geterror(nlerr);
    }
}

// Socket alloc + connect to NETLINK_ROUTE; nullptr + *error.
nl_sock* connect_route_socket(std::string* error) {
    nl_sock* sk = nl_socket_alloc();
    if (sk == nullptr) {
        fail(error, "netlink: out of memory allocating a socket");
        return nullptr;
    }
    int err = nl_connect(sk, NETLINK_ROUTE);
    if (err < 0) {
        fail(error, "netlink: cannot open a NETLINK_ROUTE socket: " + describe(err));
        nl_socket_free(sk);
        return nullptr;
    }
    return sk;
}

} // namespace

// ---- NeighbourResolver ---------------------------------------------------------

std::unique_ptr<NeighbourResolver> NeighbourResolver::open(int ifindex, std::string* error) {
    nl_sock* sk = connect_route_socket(error);
    if (sk == nullptr) return nullptr;
    return std::unique_ptr<NeighbourResolver>(new NeighbourResolver(sk, ifindex));
}

NeighbourResolver::~NeighbourResolver() { nl_socket_free(sk_); }

ResolveResult NeighbourResolver::request(Ipv4Addr ip, std::string* error) {
    rtnl_neigh* n = rtnl_neigh_alloc();
    if (n == nullptr) {
        fail(error, "netlink: out of memory building a neighbour request");
        return ResolveResult::Failed;
    }
    uint32_t be = htonl(ip.v);
    nl_addr* dst = nl_addr_build(AF_INET, &be, 4);
    int err = dst == nullptr ? -NLE_NOMEM : rtnl_neigh_set_dst(n, dst);
    if (dst != nullptr) nl_addr_put(dst);
    if (err >= 0) {
        rtnl_neigh_set_ifindex(n, ifindex_);
        // NUD_NONE (not libnl's default NUD_PERMANENT): with NTF_USE the kernel
        // ignores the state, but a "permanent" request would create the entry
        // exempt from garbage collection.
        rtnl_neigh_set_state(n, NUD_NONE);
        rtnl_neigh_set_flags(n, NTF_USE);
        err = rtnl_neigh_add(sk_, n, NLM_F_CREATE); // waits for the ACK
    }
    rtnl_neigh_put(n);
    if (err >= 0) return ResolveResult::Requested;
    fail(error, "netlink: asking the kernel to resolve " + to_string(ip) + " on ifindex " + std::to_string(ifindex_) +
                    ": " + describe(err));
    return (err == -NLE_PERM || err == -NLE_NOACCESS) ? ResolveResult::NoPermission : ResolveResult::Failed;
}

// ---- Netlink -------------------------------------------------------------------

// Route messages libnl-route 3.7 (Debian 12) mis-parses, found by
// tests/fuzz/fuzz_netlink; each is refused before libnl sees it:
//   * parse_multipath (lib/route/route_obj.c) walks RTA_MULTIPATH with
//     `while (tlen >= 8 && tlen >= rtnh_len) { alloc a next hop;
//     tlen -= RTNH_ALIGN(rtnh_len); }`: an rtnexthop with rtnh_len 0 makes it
//     loop forever, allocating, and one whose aligned length exceeds what is
//     left wraps the size_t and walks past the attribute;
//   * rtnl_route_parse and parse_multipath build the RTA_VIA address with
//     nl_addr_build(.., nla_len - sizeof(rtvia)) without a length check: an
//     RTA_VIA shorter than its 2-byte family is a memcpy of negative size.
// The kernel only builds next hops that pass its rtnh_ok() (8 <= rtnh_len <=
// remaining, 4-byte multiples) and RTA_VIA with a family and an address, but a
// CAP_NET_ADMIN process can send our sockets anything.
namespace {
bool via_ok(const rtattr* a) { return (a->rta_type & NLA_TYPE_MASK) != RTA_VIA || RTA_PAYLOAD(a) >= sizeof(rtvia); }
} // namespace

bool Netlink::route_well_formed(const nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWROUTE && h->nlmsg_type != RTM_DELROUTE && h->nlmsg_type != RTM_GETROUTE) return true;
    if (h->nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) return true; // libnl refuses it itself
    int left = int(h->nlmsg_len - NLMSG_LENGTH(sizeof(rtmsg)));
    for (const rtattr* a = RTM_RTA(static_cast<const rtmsg*>(NLMSG_DATA(h))); RTA_OK(a, left); a = RTA_NEXT(a, left)) {
        if (!via_ok(a)) return false;
        if ((a->rta_type & NLA_TYPE_MASK) != RTA_MULTIPATH) continue;
        size_t tlen = RTA_PAYLOAD(a);
        const auto* p = static_cast<const uint8_t*>(RTA_DATA(a));
        while (tlen >= sizeof(rtnexthop)) {
            rtnexthop nh;
            std::memcpy(&nh, p, sizeof nh);
            if (tlen < nh.rtnh_len) break; // where libnl stops too
            const size_t step = size_t(RTNH_ALIGN(nh.rtnh_len));
            if (nh.rtnh_len < sizeof(rtnexthop) || step > tlen) return false;
            int nh_left = int(nh.rtnh_len - sizeof(rtnexthop)); // the next hop's own attributes
            for (auto* na = reinterpret_cast<const rtattr*>(p + sizeof(rtnexthop)); RTA_OK(na, nh_left);
                 na = RTA_NEXT(na, nh_left))
                if (!via_ok(na)) return false;
            tlen -= step;
            p += step;
        }
    }
    return true;
}

std::unique_ptr<Netlink> Netlink::open(std::string_view ifname, std::string* error) {
    if (ifname.empty() || ifname.size() >= IFNAMSIZ) {
        fail(error, "netlink: bad interface name '" + std::string(ifname) + "' (1 to " + std::to_string(IFNAMSIZ - 1) +
                        " characters)");
        return nullptr;
    }
    const std::string name(ifname);
    nl_sock* sync = connect_route_socket(error);
    if (sync == nullptr) return nullptr;
    // Dumps (libnl caches filled from this socket) get the same guard as the
    // notifications (on_message): a route message libnl mis-parses is skipped.
    nl_socket_modify_cb(sync, NL_CB_MSG_IN, NL_CB_CUSTOM,
                        [](nl_msg* m, void*) { return route_well_formed(nlmsg_hdr(m)) ? int(NL_OK) : int(NL_SKIP); },
                        nullptr);

    rtnl_link* link = nullptr;
    int err = rtnl_link_get_kernel(sync, 0, name.c_str(), &link);
    if (err < 0 || link == nullptr) {
        if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV || err == -NLE_INVAL)
            fail(error, "netlink: no interface named '" + name +
                            "' in this network namespace (check `ip link`, or run inside the right namespace)");
        else
            fail(error, "netlink: reading interface '" + name + "': " + describe(err));
        nl_socket_free(sync);
        return nullptr;
    }
    const int ifindex = rtnl_link_get_ifindex(link);
    const unsigned arptype = rtnl_link_get_arptype(link);
    rtnl_link_put(link);
    if (arptype != ARPHRD_ETHER) {
        fail(error, "netlink: interface '" + name + "' is not an Ethernet device (ARPHRD type " +
                        std::to_string(arptype) + "); crescent needs Ethernet framing");
        nl_socket_free(sync);
        return nullptr;
    }

    nl_sock* events = connect_route_socket(error);
    if (events == nullptr) {
        nl_socket_free(sync);
        return nullptr;
    }
    auto resolver = NeighbourResolver::open(ifindex, error);
    if (resolver == nullptr) {
        nl_socket_free(events);
        nl_socket_free(sync);
        return nullptr;
    }
    auto placeholder = std::make_unique<const Snapshot>(InterfaceInfo{}, std::vector<Route>{},
                                                        std::span<const Neighbour>{}, true, 0);
    std::unique_ptr<Netlink> self(
        new Netlink(name, ifindex, sync, events, std::move(resolver), std::move(placeholder)));

    // Subscribe first, dump second (see the header).
    nl_socket_disable_seq_check(events);
    nl_socket_modify_cb(events, NL_CB_VALID, NL_CB_CUSTOM, &Netlink::on_message, self.get());
    err = nl_socket_add_memberships(events, RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_NEIGH, RTNLGRP_IPV4_ROUTE, 0);
    if (err >= 0) err = nl_socket_set_nonblocking(events);
    if (err < 0) {
        fail(error, "netlink: subscribing to link/address/neighbour/route notifications: " + describe(err));
        return nullptr;
    }
    // A larger receive buffer makes ENOBUFS (and the full re-dump it causes)
    // rare under bursts of neighbour changes. Best effort.
    (void)nl_socket_set_buffer_size(events, 4 << 20, 0);

    if (!self->dump(error)) return nullptr;
    self->rcu_.publish(self->build());

    const Snapshot& s = self->snapshot();
    std::string addrs;
    for (const InterfaceAddr& a : s.iface().addrs) addrs += " " + to_string(a.addr) + "/" + std::to_string(a.prefix_len);
    logger()->info("{}: ifindex {} mac {} mtu {} {} addrs{}; {} routes, {} neighbours", name, ifindex,
                   to_string(s.iface().mac), s.iface().mtu, s.iface().oper_up ? "up" : "down",
                   addrs.empty() ? " (none)" : addrs, s.routes().size(), s.neighbour_count());
    return self;
}

Netlink::Netlink(std::string ifname, int ifindex, nl_sock* sync, nl_sock* events,
                 std::unique_ptr<NeighbourResolver> resolver, std::unique_ptr<const Snapshot> empty)
    : ifname_(std::move(ifname)), ifindex_(ifindex), sync_(sync), events_(events), resolver_(std::move(resolver)),
      rcu_(std::move(empty)) {}

Netlink::~Netlink() {
    nl_socket_free(events_);
    nl_socket_free(sync_);
}

int Netlink::fd() const { return nl_socket_get_fd(events_); }

bool Netlink::set_notify_buffer(int bytes) { return nl_socket_set_buffer_size(events_, bytes, 0) >= 0; }

ResolveResult Netlink::request_resolution(Ipv4Addr ip, std::string* error) { return resolver_->request(ip, error); }

bool Netlink::dump(std::string* error) {
    // A dump the kernel interrupted (NLM_F_DUMP_INTR: the table changed while
    // it was read) is retried; the notifications carry the change anyway.
    constexpr int kAttempts = 4;
    int err = 0;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
        iface_.addrs.clear();
        neighbours_.clear();
        routes_.clear();

        rtnl_link* link = nullptr;
        err = rtnl_link_get_kernel(sync_, ifindex_, nullptr, &link);
        if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) {
            logger()->warn("{}: interface ifindex {} is gone", ifname_, ifindex_);
            iface_.admin_up = iface_.oper_up = false;
            return true;
        }
        if (err < 0) break;
        apply(OBJ_CAST(link), true);
        rtnl_link_put(link);

        nl_cache* addrs = nullptr;
        nl_cache* neighs = nullptr;
        nl_cache* routes = nullptr;
        err = rtnl_addr_alloc_cache(sync_, &addrs);
        if (err >= 0) err = rtnl_neigh_alloc_cache(sync_, &neighs);
        if (err >= 0) err = rtnl_route_alloc_cache(sync_, AF_INET, 0, &routes);
        if (err >= 0) {
            auto each = [](nl_object* obj, void* arg) { static_cast<Netlink*>(arg)->apply(obj, true); };
            nl_cache_foreach(addrs, each, this);
            nl_cache_foreach(neighs, each, this);
            nl_cache_foreach(routes, each, this);
        }
        if (addrs != nullptr) nl_cache_free(addrs);
        if (neighs != nullptr) nl_cache_free(neighs);
        if (routes != nullptr) nl_cache_free(routes);
        if (err != -NLE_DUMP_INTR) break;
    }
    if (err < 0) return fail(error, "netlink: reading the tables of '" + ifname_ + "': " + describe(err));
    dirty_ = true;
    return true;
}

int Netlink::on_message(nl_msg* msg, void* arg) {
    auto* self = static_cast<Netlink*>(arg);
    ++self->counters_.messages;
    if (self->result_ != nullptr) ++self->result_->messages;
    if (!route_well_formed(nlmsg_hdr(msg))) {
        ++self->counters_.errors;
        return NL_OK;
    }
    int err = nl_msg_parse(msg, [](nl_object* obj, void* a) { static_cast<Netlink*>(a)->apply(obj, false); }, self);
    if (err < 0 && err != -NLE_MSGTYPE_NOSUPPORT) ++self->counters_.errors;
    return NL_OK;
}

void Netlink::apply(nl_object* obj, bool from_dump) {
    const std::string_view type = nl_object_get_type(obj);
    const int msgtype = from_dump ? 0 : nl_object_get_msgtype(obj);
    const size_t before = counters_.applied;
    if (type == "route/link")
        apply_link(obj, msgtype == RTM_DELLINK);
    else if (type == "route/addr")
        apply_addr(obj, msgtype == RTM_DELADDR);
    else if (type == "route/neigh")
        apply_neigh(obj, msgtype == RTM_DELNEIGH);
    else if (type == "route/route")
        apply_route(obj, msgtype == RTM_DELROUTE);
    else
        ++counters_.ignored;
    if (result_ != nullptr) result_->applied += counters_.applied - before;
}

void Netlink::apply_link(nl_object* obj, bool removed) {
    auto* link = reinterpret_cast<rtnl_link*>(obj);
    if (rtnl_link_get_ifindex(link) != ifindex_) {
        ++counters_.ignored;
        return;
    }
    InterfaceInfo next = iface_;
    if (removed) {
        logger()->warn("{}: interface deleted", ifname_);
        next.admin_up = next.oper_up = false;
    } else {
        next.name = ifname_;
        next.ifindex = ifindex_;
        if (auto mac = mac_of(rtnl_link_get_addr(link))) next.mac = *mac;
        if (unsigned mtu = rtnl_link_get_mtu(link); mtu != 0) next.mtu = mtu;
        next.admin_up = (rtnl_link_get_flags(link) & IFF_UP) != 0;
        next.oper_up = oper_up_of(link);
    }
    if (next == iface_) return;
    if (next.mac != iface_.mac && iface_.ifindex != 0)
        logger()->info("{}: MAC changed {} -> {}", ifname_, to_string(iface_.mac), to_string(next.mac));
    iface_ = std::move(next);
    ++counters_.applied;
    dirty_ = true;
}

void Netlink::apply_addr(nl_object* obj, bool removed) {
    auto* a = reinterpret_cast<rtnl_addr*>(obj);
    if (rtnl_addr_get_family(a) != AF_INET || rtnl_addr_get_ifindex(a) != ifindex_) {
        ++counters_.ignored;
        return;
    }
    auto local = ipv4_of(rtnl_addr_get_local(a));
    if (!local) {
        ++counters_.ignored;
        return;
    }
    // ifa_prefixlen is a byte: a length over 32 is no IPv4 prefix (and would
    // shift by a negative count in Ipv4Prefix::mask_of; found by fuzz_netlink).
    const int prefix_len = rtnl_addr_get_prefixlen(a);
    if (prefix_len < 0 || prefix_len > 32) {
        ++counters_.errors;
        return;
    }
    InterfaceAddr ia{*local, uint8_t(prefix_len)};
    auto& v = iface_.addrs;
    auto it = std::find(v.begin(), v.end(), ia);
    if (removed) {
        if (it == v.end()) return;
        v.erase(it);
    } else {
        if (it != v.end()) return;
        v.push_back(ia);
    }
    ++counters_.applied;
    dirty_ = true;
}

void Netlink::apply_neigh(nl_object* obj, bool removed) {
    auto* n = reinterpret_cast<rtnl_neigh*>(obj);
    if (rtnl_neigh_get_family(n) != AF_INET || rtnl_neigh_get_ifindex(n) != ifindex_) {
        ++counters_.ignored;
        return;
    }
    auto ip = ipv4_of(rtnl_neigh_get_dst(n));
    if (!ip) {
        ++counters_.ignored;
        return;
    }
    const int nud = rtnl_neigh_get_state(n);
    Neighbour nb{*ip, {}, neigh_state_from_nud(nud < 0 ? 0 : uint16_t(nud))};
    if (auto mac = mac_of(rtnl_neigh_get_lladdr(n))) nb.mac = *mac;

    if (removed) {
        if (neighbours_.erase(ip->v) == 0) return;
    } else {
        auto [it, inserted] = neighbours_.try_emplace(ip->v, nb);
        if (!inserted) {
            if (it->second == nb) return;
            it->second = nb;
        }
    }
    ++counters_.applied;
    dirty_ = true;
    if (result_ != nullptr) result_->neighbours.push_back(NeighbourEvent{nb, removed});
}

void Netlink::apply_route(nl_object* obj, bool removed) {
    auto* r = reinterpret_cast<rtnl_route*>(obj);
    if (rtnl_route_get_family(r) != AF_INET || rtnl_route_get_table(r) != RT_TABLE_MAIN) {
        ++counters_.ignored;
        return;
    }
    Route route;
    switch (rtnl_route_get_type(r)) {
    case RTN_UNICAST: route.type = RouteType::Unicast; break;
    case RTN_BLACKHOLE:
    case RTN_UNREACHABLE:
    case RTN_PROHIBIT: route.type = RouteType::Reject; break;
    default: ++counters_.ignored; return; // local, broadcast, multicast, ... (not in main)
    }
    nl_addr* dst = rtnl_route_get_dst(r);
    // rtm_dst_len is a byte: over 32 is no IPv4 prefix (fuzz_netlink found the
    // negative shift in Ipv4Prefix::mask_of it caused).
    const unsigned dst_len = dst == nullptr ? 0 : nl_addr_get_prefixlen(dst);
    if (dst_len > 32) {
        ++counters_.errors;
        return;
    }
    const uint8_t len = uint8_t(dst_len);
    Ipv4Addr dst_addr{};
    if (dst != nullptr && nl_addr_get_len(dst) != 0) {
        auto a = ipv4_of(dst);
        if (!a) {
            ++counters_.ignored;
            return;
        }
        dst_addr = *a;
    }
    route.dst = Ipv4Prefix::make(dst_addr, len);
    route.metric = rtnl_route_get_priority(r);
    route.tos = rtnl_route_get_tos(r);
    if (auto src = ipv4_of(rtnl_route_get_pref_src(r))) route.prefsrc = *src;
    // The route's MTU ("ip route ... mtu N"): what connections to it take their MSS from.
    if (uint32_t mtu = 0; rtnl_route_get_metric(r, RTAX_MTU, &mtu) == 0) route.mtu = mtu;

    if (route.type == RouteType::Unicast) {
        // Multipath: take the first next hop through our interface, else the
        // first one (the route then leaves elsewhere: OtherInterface).
        rtnl_nexthop* chosen = nullptr;
        for (int i = 0, n = rtnl_route_get_nnexthops(r); i < n; ++i) {
            rtnl_nexthop* nh = rtnl_route_nexthop_n(r, i);
            if (chosen == nullptr) chosen = nh;
            if (rtnl_route_nh_get_ifindex(nh) == ifindex_) {
                chosen = nh;
                break;
            }
        }
        if (chosen == nullptr) { // e.g. a route through a nexthop object (RTA_NH_ID)
            ++counters_.ignored;
            return;
        }
        route.oif = rtnl_route_nh_get_ifindex(chosen);
        if (auto gw = ipv4_of(rtnl_route_nh_get_gateway(chosen))) route.gateway = *gw;
    }

    const RouteKey key{route.dst.addr.v, route.dst.len, route.tos, route.metric};
    if (removed) {
        if (routes_.erase(key) == 0) return;
    } else {
        auto [it, inserted] = routes_.try_emplace(key, route);
        if (!inserted) {
            if (it->second == route) return;
            it->second = route;
        }
    }
    ++counters_.applied;
    dirty_ = true;
}

std::unique_ptr<const Snapshot> Netlink::build() {
    std::vector<Route> routes;
    routes.reserve(routes_.size());
    for (const auto& [key, r] : routes_) routes.push_back(r);
    std::vector<Neighbour> neighbours;
    neighbours.reserve(neighbours_.size());
    for (const auto& [ip, n] : neighbours_) neighbours.push_back(n);
    return std::make_unique<const Snapshot>(iface_, std::move(routes), neighbours, /*can_resolve=*/true,
                                            ++generation_);
}

ProcessResult Netlink::process(size_t max_datagrams) {
    ProcessResult result;
    result_ = &result;
    dirty_ = false;
    for (size_t i = 0; i < max_datagrams; ++i) {
        int err = nl_recvmsgs_default(events_);
        if (err >= 0) continue;
        if (err == -NLE_AGAIN) break;
        if (err == -NLE_NOMEM) {
            // ENOBUFS: the kernel dropped notifications. What is still queued
            // predates the loss, so discard it, then dump everything again
            // (later notifications queue behind the dump and are applied on
            // the next call).
            nl_cb* discard = nl_cb_alloc(NL_CB_DEFAULT);
            if (discard != nullptr) {
                auto skip = [](nl_msg*, void*) { return int(NL_SKIP); };
                nl_cb_set(discard, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, [](nl_msg*, void*) { return int(NL_OK); }, nullptr);
                nl_cb_set(discard, NL_CB_VALID, NL_CB_CUSTOM, skip, nullptr);
                for (size_t j = 0; j < 4 * max_datagrams; ++j) {
                    int e = nl_recvmsgs(events_, discard);
                    if (e == -NLE_AGAIN) break;
                }
                nl_cb_put(discard);
            }
            ++counters_.resyncs;
            result.resynced = true;
            std::string error;
            ProcessResult* saved = result_;
            result_ = nullptr; // a dump is not a list of changes
            if (!dump(&error)) {
                ++counters_.errors;
                result.error = -NLE_FAILURE;
                result.error_text = error;
                result_ = saved;
                break;
            }
            result_ = saved;
            logger()->warn("{}: netlink notifications were lost (ENOBUFS); tables re-read", ifname_);
            for (const auto& [ip, n] : neighbours_) result.neighbours.push_back(NeighbourEvent{n, false});
            continue;
        }
        ++counters_.errors;
        result.error = err;
        result.error_text = "netlink: receiving notifications on '" + ifname_ + "': " + describe(err);
        break;
    }
    result_ = nullptr;
    if (dirty_) {
        rcu_.publish(build());
        ++counters_.published;
        result.published = true;
        dirty_ = false;
    }
    return result;
}

} // namespace crescent::ctrl
