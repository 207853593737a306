// crescent — the control plane from the kernel over rtnetlink (Luna §7.3),
// through libnl-3 / libnl-route-3.
//
// For one interface of the current network namespace, `Netlink`:
//   * at open: reads the link (ifindex, MAC, MTU, IFF_UP, operstate), its IPv4
//     addresses, dumps the IPv4 neighbour table and the IPv4 routes of the
//     main table (rtnetlink(7): RTM_GETLINK/GETADDR/GETNEIGH/GETROUTE);
//   * subscribes to RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_NEIGH and
//     RTNLGRP_IPV4_ROUTE on a non-blocking socket (subscribed BEFORE the dump,
//     so no change between the dump and the subscription is lost; replaying an
//     update the dump already saw is harmless);
//   * process(): drains that socket (bounded per call), applies each update to
//     its master tables and, if anything changed, publishes a new immutable
//     Snapshot through `rcu()` for the engines. If the kernel dropped
//     notifications (ENOBUFS: the socket overflowed), it dumps everything again.
//
// Missing neighbours: `request_resolution(ip)` sends RTM_NEWNEIGH with NTF_USE
// (and NLM_F_CREATE): the kernel creates the entry if needed and starts ARP
// itself; the RTM_NEWNEIGH notification then carries the MAC. crescent never
// sends or answers ARP on a kernel-owned interface. The kernel requires
// CAP_NET_ADMIN for this; without it the request fails with NoPermission.
//
// Threads: a Netlink object belongs to one thread (the engine or control loop
// whose epoll holds fd()); other engines read its snapshots through
// `rcu().register_reader()`, and may each own a NeighbourResolver to ask for
// resolution themselves.
//
// Use:
//   owner (setup)   auto nl = ctrl::Netlink::open("eth0", &err);   // nullptr: print err, exit
//                   epoll_ctl(ep, EPOLL_CTL_ADD, nl->fd(), {EPOLLIN});
//   owner (EPOLLIN) ProcessResult r = nl->process();
//                   (r.neighbours lists FAILED / removed entries: PendingQueue::fail)
//   engine (setup)  auto reader = *nl->rcu().register_reader();
//                   auto resolver = NeighbourResolver::open(nl->ifindex(), &err);
//   engine (burst)  const Snapshot& s = reader.read();
//                   NextHop h = s.next_hop(dst);
//                   Unresolved: if (pending.hold(h.neighbour, pkt, now, drop) == Held::AskKernel)
//                                   resolver->request(h.neighbour);
//   engine (loop)   if (s.generation() != seen) pending.resolve_from(lookup over s, send);
//                   pending.expire(now, drop); reader.quiescent();
// Devices without a kernel netdev use StaticConfig::snapshot() in an
// Rcu<Snapshot> of their own instead (static_config.hpp).
//
// Known limit: the kernel confirms a neighbour only from its own traffic, so
// an entry crescent alone uses goes STALE (still used, see neigh_usable); if
// the peer changes its MAC without announcing it (gratuitous ARP, arp_notify)
// the kernel — and thus crescent — keeps the old MAC until the kernel
// re-resolves the entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "stack/ctrl/rcu.hpp"
#include "stack/ctrl/snapshot.hpp"
#include "stack/ctrl/types.hpp"

struct nl_sock;
struct nl_object;
struct nl_msg;
struct nlmsghdr;

namespace crescent::ctrl {

enum class ResolveResult : uint8_t {
    Requested,     // the kernel accepted the request; watch for RTM_NEWNEIGH
    NoPermission,  // EPERM: the process lacks CAP_NET_ADMIN
    Failed,        // any other error (the message says which)
};

// Asks the kernel to resolve IPv4 neighbours on one interface. Owns its own
// netlink socket; one per thread that asks.
class NeighbourResolver {
public:
    static std::unique_ptr<NeighbourResolver> open(int ifindex, std::string* error);
    ~NeighbourResolver();
    NeighbourResolver(const NeighbourResolver&) = delete;
    NeighbourResolver& operator=(const NeighbourResolver&) = delete;

    // RTM_NEWNEIGH + NTF_USE for `ip` on the interface. One round trip to the
    // kernel (the request is handled inside sendmsg, so the ACK is already
    // queued when it returns). *error gets one line on failure.
    ResolveResult request(Ipv4Addr ip, std::string* error = nullptr);
    int ifindex() const { return ifindex_; }

private:
    NeighbourResolver(nl_sock* sk, int ifindex) : sk_(sk), ifindex_(ifindex) {}
    nl_sock* sk_;
    int ifindex_;
};

// A change to the interface's neighbour table seen by process().
struct NeighbourEvent {
    Neighbour neighbour;   // state after the change
    bool removed = false;  // RTM_DELNEIGH (the entry is gone)
};

struct ProcessResult {
    size_t messages = 0;       // notifications read (all interfaces)
    size_t applied = 0;        // of them, changes to this interface's tables
    bool published = false;    // a new snapshot was published
    bool resynced = false;     // notifications were lost and the tables re-dumped
    int error = 0;             // a libnl error that stopped the drain (0: none); see error_text
    std::string error_text;
    std::vector<NeighbourEvent> neighbours; // this interface's neighbour changes, in order
};

class Netlink {
public:
    struct Counters {
        uint64_t messages = 0;      // notifications read
        uint64_t ignored = 0;       // for other interfaces / families / tables
        uint64_t applied = 0;
        uint64_t published = 0;     // snapshots published (the initial one excluded)
        uint64_t resyncs = 0;       // full re-dumps after ENOBUFS
        uint64_t errors = 0;        // receive / parse errors
    };

    // Opens the control plane for interface `ifname` in the caller's network
    // namespace. nullptr + *error (one line naming the cause) when the
    // interface does not exist, is not Ethernet, or netlink is unusable.
    static std::unique_ptr<Netlink> open(std::string_view ifname, std::string* error);
    ~Netlink();
    Netlink(const Netlink&) = delete;
    Netlink& operator=(const Netlink&) = delete;

    // The notification socket (non-blocking): add it to epoll for EPOLLIN and
    // call process() when it is readable.
    int fd() const;
    // Drains up to `max_datagrams` datagrams (bounded work per call; the fd
    // stays readable if more remain) and publishes a new snapshot if anything
    // of this interface changed. Never blocks.
    ProcessResult process(size_t max_datagrams = 256);

    // Snapshots for the engines (readers) and for the owner (current()).
    Rcu<Snapshot>& rcu() { return rcu_; }
    const Snapshot& snapshot() const { return rcu_.current(); }

    // Receive buffer of the notification socket (SO_RCVBUF; 4 MiB by
    // default, the kernel clamps it). Smaller means ENOBUFS and re-dumps
    // sooner under bursts; tests use a tiny one to force that path.
    bool set_notify_buffer(int bytes);

    // See NeighbourResolver::request.
    ResolveResult request_resolution(Ipv4Addr ip, std::string* error = nullptr);

    int ifindex() const { return ifindex_; }
    const std::string& ifname() const { return ifname_; }
    const Counters& counters() const { return counters_; }

private:
    // tests/fuzz/fuzz_netlink.cpp: builds a Netlink without sockets and feeds
    // it raw rtnetlink messages through on_message() / apply().
    friend struct NetlinkTestAccess;

    // Route identity in the kernel's main table: (dst, len, tos, priority).
    using RouteKey = std::tuple<uint32_t, uint8_t, uint8_t, uint32_t>;

    Netlink(std::string ifname, int ifindex, nl_sock* sync, nl_sock* events,
            std::unique_ptr<NeighbourResolver> resolver, std::unique_ptr<const Snapshot> empty);

    bool dump(std::string* error);          // (re)reads everything into the master tables
    void apply(nl_object* obj, bool from_dump);
    void apply_link(nl_object* obj, bool removed);
    void apply_addr(nl_object* obj, bool removed);
    void apply_neigh(nl_object* obj, bool removed);
    void apply_route(nl_object* obj, bool removed);
    std::unique_ptr<const Snapshot> build(); // from the master tables, with the next generation

    static int on_message(nl_msg* msg, void* arg);
    // False for a route message libnl-route would mis-parse (RTA_MULTIPATH
    // next hops or RTA_VIA, see netlink.cpp); on_message refuses it
    // (counters().errors).
    static bool route_well_formed(const nlmsghdr* h);

    std::string ifname_;
    int ifindex_;
    nl_sock* sync_;    // requests and dumps (blocking, with ACKs)
    nl_sock* events_;  // multicast notifications (non-blocking)
    std::unique_ptr<NeighbourResolver> resolver_;

    // Master tables (owner thread only); snapshots are built from them.
    InterfaceInfo iface_;
    std::unordered_map<uint32_t, Neighbour> neighbours_;
    std::map<RouteKey, Route> routes_;
    uint64_t generation_ = 0;

    // State of the current process() call.
    bool dirty_ = false;
    ProcessResult* result_ = nullptr;

    Counters counters_;
    Rcu<Snapshot> rcu_;
};

} // namespace crescent::ctrl
