// libFuzzer target for the rtnetlink message handlers of stack/ctrl/netlink.cpp:
// raw netlink datagrams (RTM_NEW/DEL LINK, ADDR, NEIGH, ROUTE, or anything
// else) parsed by libnl-route's nl_msg_parse() exactly as Netlink::process()
// does, applied to a Netlink's master tables (apply_link / apply_addr /
// apply_neigh / apply_route), then a Snapshot published as after every
// process() call. The Netlink has no sockets (NetlinkTestAccess, a friend of
// Netlink, builds it for interface index 2). Input layout, repeated to the end:
//
//   1 byte        bit 0: apply as a dump (apply(obj, true): a DEL is not a delete)
//                 else as a notification through Netlink::on_message()
//   2 bytes       datagram length n, little-endian (clamped to what is left)
//   n bytes       the datagram: netlink messages walked with nlmsg_ok/nlmsg_next
//                 as nl_recvmsgs() does; NOOP/ERROR/DONE/OVERRUN are not
//                 handed to the handlers (libnl consumes them itself)
//
// Invariants after every datagram (abort on violation): the snapshot has the
// generation of the last publish; it holds exactly the master tables'
// neighbours (find_neighbour returns each one unchanged) and routes, sorted by
// prefix length descending; every route's own network looks up a route at
// least as specific that contains it; next_hop() of every route network,
// gateway and neighbour is consistent (Resolved only with a usable neighbour
// of that MAC, Unresolved names an address, Rejected only through a reject
// route); the interface is ours (ifindex 0 or 2) and its addresses are
// unique; every neighbour event belongs to this datagram's applied changes.
// LeakSanitizer checks that libnl objects are released.
// Built with -fsanitize=fuzzer,address,undefined (tests/fuzz/meson.build); run
// by tools/run-fuzz and tools/fuzz on the seeds in tests/fuzz/corpus/netlink/
// (tests/fuzz/gen_corpus_netlink.py writes them).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/object.h>

#include <crescent/log.hpp>

#include "stack/ctrl/netlink.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace crescent::ctrl {

struct NetlinkTestAccess {
    static constexpr int kIfindex = 2;

    static std::unique_ptr<Netlink> make() {
        auto placeholder = std::make_unique<const Snapshot>(InterfaceInfo{}, std::vector<Route>{},
                                                            std::span<const Neighbour>{}, true, 0);
        return std::unique_ptr<Netlink>(
            new Netlink("fuzz0", kIfindex, nullptr, nullptr, nullptr, std::move(placeholder)));
    }

    // One datagram, as process() handles one nl_recvmsgs_default() call.
    static ProcessResult feed(Netlink& nl, const uint8_t* data, size_t len, bool as_dump) {
        ProcessResult result;
        nl.result_ = as_dump ? nullptr : &result;
        nl.dirty_ = false;
        // netlink messages are 4-byte aligned in the kernel's buffer.
        std::vector<uint32_t> buf((len + 3) / 4);
        if (len != 0) std::memcpy(buf.data(), data, len);
        auto* hdr = reinterpret_cast<nlmsghdr*>(buf.data());
        int remaining = int(len);
        for (; nlmsg_ok(hdr, remaining); hdr = nlmsg_next(hdr, &remaining)) {
            if (hdr->nlmsg_type < NLMSG_MIN_TYPE) continue;
            // Netlink subscribes to no RTNLGRP_*NETCONF group, so the kernel
            // never sends it netconf messages; libnl's netconf parser prints
            // a line to stderr for each bad family, which would flood the log.
            if (hdr->nlmsg_type >= RTM_NEWNETCONF && hdr->nlmsg_type <= RTM_GETNETCONF) continue;
            nl_msg* msg = nlmsg_convert(hdr);
            if (msg == nullptr) continue;
            nlmsg_set_proto(msg, NETLINK_ROUTE);
            if (as_dump) {
                // Netlink::dump() gets its objects from libnl's caches; the
                // same guard as on_message keeps libnl's route parsing bugs out.
                if (!Netlink::route_well_formed(hdr)) {
                    nlmsg_free(msg);
                    continue;
                }
                (void)nl_msg_parse(msg, [](nl_object* obj, void* a) { static_cast<Netlink*>(a)->apply(obj, true); },
                                   &nl);
            } else {
                (void)Netlink::on_message(msg, &nl);
            }
            nlmsg_free(msg);
        }
        nl.result_ = nullptr;
        if (nl.dirty_) {
            nl.rcu_.publish(nl.build());
            ++nl.counters_.published;
            result.published = true;
            nl.dirty_ = false;
        }
        return result;
    }

    static void check(const Netlink& nl, const ProcessResult& r, size_t applied_before) {
        constexpr const char* prog = "fuzz_netlink";
        const Snapshot& s = nl.snapshot();
        if (s.generation() != nl.generation_) fuzz::fail(prog, "snapshot generation is not the last published");
        if (r.applied != nl.counters_.applied - applied_before && r.messages != 0)
            fuzz::fail(prog, "ProcessResult::applied differs from the counter");
        if (r.neighbours.size() > r.applied) fuzz::fail(prog, "more neighbour events than applied changes");
        if (r.applied != 0 && !r.published) fuzz::fail(prog, "changes applied but nothing published");

        const InterfaceInfo& ifc = s.iface();
        if (ifc.ifindex != 0 && ifc.ifindex != kIfindex) fuzz::fail(prog, "snapshot of another interface");
        for (size_t i = 0; i < ifc.addrs.size(); ++i)
            for (size_t j = i + 1; j < ifc.addrs.size(); ++j)
                if (ifc.addrs[i] == ifc.addrs[j]) fuzz::fail(prog, "duplicate interface address");

        if (s.neighbour_count() != nl.neighbours_.size()) fuzz::fail(prog, "snapshot neighbour count");
        if (s.neighbours().size() != nl.neighbours_.size()) fuzz::fail(prog, "snapshot neighbours() size");
        for (const auto& [ip, n] : nl.neighbours_) {
            if (n.ip.v != ip) fuzz::fail(prog, "neighbour keyed by another address");
            const Neighbour* f = s.find_neighbour(n.ip);
            if (f == nullptr || !(*f == n)) fuzz::fail(prog, "snapshot lost or changed a neighbour");
        }

        const auto routes = s.routes();
        if (routes.size() != nl.routes_.size()) fuzz::fail(prog, "snapshot route count");
        for (size_t i = 1; i < routes.size(); ++i)
            if (routes[i].dst.len > routes[i - 1].dst.len) fuzz::fail(prog, "routes not sorted by prefix length");
        std::vector<Ipv4Addr> probes;
        for (const Route& rt : routes) {
            if (rt.dst.addr.v != (rt.dst.addr.v & rt.dst.mask()) || rt.dst.len > 32)
                fuzz::fail(prog, "route network has host bits or a bad length");
            const Route* m = s.lookup_route(rt.dst.addr);
            if (m == nullptr || m->dst.len < rt.dst.len || !m->dst.contains(rt.dst.addr))
                fuzz::fail(prog, "a route's own network does not match a route as specific");
            probes.push_back(rt.dst.addr);
            probes.push_back(rt.gateway);
        }
        for (const auto& [ip, n] : nl.neighbours_) probes.push_back(n.ip);
        for (Ipv4Addr dst : probes) {
            const NextHop h = s.next_hop(dst);
            switch (h.status) {
            case NextHopStatus::Resolved: {
                const Neighbour* n = s.find_neighbour(h.neighbour);
                if (n == nullptr || !neigh_usable(n->state) || !(n->mac == h.mac) || h.route == nullptr)
                    fuzz::fail(prog, "Resolved without a usable neighbour of that MAC");
                break;
            }
            case NextHopStatus::Unresolved:
                if (h.route == nullptr) fuzz::fail(prog, "Unresolved without a route");
                break;
            case NextHopStatus::Rejected:
                if (h.route == nullptr || h.route->type != RouteType::Reject)
                    fuzz::fail(prog, "Rejected without a reject route");
                break;
            case NextHopStatus::NoRoute:
            case NextHopStatus::OtherInterface:
            case NextHopStatus::LinkDown:
                break;
            }
        }
    }
};

} // namespace crescent::ctrl

using crescent::ctrl::NetlinkTestAccess;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // apply_link logs interface removals and MAC changes: not per input.
    if (!crescent::log::set_level("off")) crescent::log::set_level("critical");
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto nl = NetlinkTestAccess::make();
    size_t off = 0;
    for (int datagrams = 0; off < size && datagrams < 64; ++datagrams) {
        const bool as_dump = (data[off] & 1) != 0;
        ++off;
        size_t n = 0;
        if (off + 2 <= size) n = size_t(data[off]) | size_t(data[off + 1]) << 8;
        off = std::min(off + 2, size);
        n = std::min(n, size - off);
        const size_t applied_before = nl->counters().applied;
        const auto r = NetlinkTestAccess::feed(*nl, data + off, n, as_dump);
        NetlinkTestAccess::check(*nl, r, applied_before);
        off += n;
    }
    return 0;
}
