// Unit tests for stack/ctrl: text forms, LPM and next-hop resolution over a
// Snapshot, the pending queue, static configuration, and the RCU publisher
// (with threads).
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "stack/ctrl/pending.hpp"
#include "stack/ctrl/rcu.hpp"
#include "stack/ctrl/snapshot.hpp"
#include "stack/ctrl/static_config.hpp"
#include "stack/ctrl/types.hpp"

using namespace crescent;
using namespace crescent::ctrl;

namespace {

Ipv4Addr ip(const char* s) {
    auto a = parse_ipv4(s);
    REQUIRE(a);
    return *a;
}
MacAddr mac(const char* s) {
    auto m = parse_mac(s);
    REQUIRE(m);
    return *m;
}
Route route(const char* prefix, const char* gw = "0.0.0.0", uint32_t metric = 0, int oif = 2) {
    auto p = parse_ipv4_with_len(prefix);
    REQUIRE(p);
    Route r;
    r.dst = p->subnet();
    r.gateway = ip(gw);
    r.metric = metric;
    r.oif = oif;
    return r;
}
InterfaceInfo iface(int ifindex = 2) {
    InterfaceInfo i;
    i.name = "eth0";
    i.ifindex = ifindex;
    i.mac = mac("02:00:00:00:00:01");
    i.mtu = 1500;
    i.admin_up = i.oper_up = true;
    i.addrs.push_back(InterfaceAddr{ip("10.1.2.1"), 24});
    return i;
}
Instant at_ms(int64_t ms) { return Instant::from_nanos(ms * 1'000'000); }

} // namespace

// ---- text forms --------------------------------------------------------------------

TEST_CASE("ctrl: IPv4 and MAC text forms", "[ctrl]") {
    CHECK(parse_ipv4("10.0.0.1")->v == 0x0a000001u);
    CHECK(parse_ipv4("255.255.255.255")->v == 0xffffffffu);
    CHECK(parse_ipv4("0.0.0.0")->v == 0u);
    for (const char* bad : {"", "10.0.0", "10.0.0.1.2", "256.0.0.1", "10.0.0.-1", "10..0.1", "a.b.c.d", "10.0.0.1 ",
                            " 10.0.0.1", "10.0.0.1/24", "1000.0.0.1", "+1.0.0.1"})
        CHECK_FALSE(parse_ipv4(bad));
    CHECK(to_string(ip("192.168.7.254")) == "192.168.7.254");

    auto ia = parse_ipv4_with_len("10.1.2.3/24");
    REQUIRE(ia);
    CHECK(ia->addr == ip("10.1.2.3"));
    CHECK(ia->prefix_len == 24);
    CHECK(to_string(ia->subnet()) == "10.1.2.0/24");
    for (const char* bad : {"10.1.2.3", "10.1.2.3/", "10.1.2.3/33", "10.1.2.3/-1", "10.1.2.3/2a", "/24"})
        CHECK_FALSE(parse_ipv4_with_len(bad));

    CHECK(parse_mac("02:00:0a:0B:ff:1")->b == std::array<uint8_t, 6>{2, 0, 0x0a, 0x0b, 0xff, 1});
    CHECK(parse_mac("02-00-00-00-00-02"));
    CHECK(to_string(mac("2:0:0:0:0:ab")) == "02:00:00:00:00:ab");
    for (const char* bad : {"", "02:00:00:00:00", "02:00:00:00:00:00:00", "02:00:00:00:00:100", "02:00:00:00:00:0g",
                            "02:00-00:00:00:00", "02::00:00:00:00", "02:00:00:00:00:00:"})
        CHECK_FALSE(parse_mac(bad));
}

TEST_CASE("ctrl: NUD bits map to neighbour states", "[ctrl]") {
    CHECK(neigh_state_from_nud(0x02) == NeighState::Reachable);
    CHECK(neigh_state_from_nud(0x01) == NeighState::Incomplete);
    CHECK(neigh_state_from_nud(0x04) == NeighState::Stale);
    CHECK(neigh_state_from_nud(0x20) == NeighState::Failed);
    CHECK(neigh_state_from_nud(0x80) == NeighState::Permanent);
    CHECK(neigh_state_from_nud(0) == NeighState::None);
    CHECK(neigh_usable(NeighState::Stale));
    CHECK(neigh_usable(NeighState::Probe));
    CHECK_FALSE(neigh_usable(NeighState::Incomplete));
    CHECK_FALSE(neigh_usable(NeighState::Failed));
    CHECK_FALSE(neigh_usable(NeighState::None));
}

// ---- LPM ---------------------------------------------------------------------------

TEST_CASE("ctrl: longest prefix match", "[ctrl][lpm]") {
    std::vector<Route> routes = {
        route("0.0.0.0/0", "10.1.2.254"),
        route("10.0.0.0/8", "10.1.2.8"),
        route("10.1.0.0/16", "10.1.2.16"),
        route("10.1.2.0/24"),                    // connected
        route("10.1.2.77/32", "10.1.2.32"),      // host route
        route("172.16.0.0/12", "10.1.2.12"),
    };
    Snapshot s(iface(), routes, {}, true, 1);

    auto gw_for = [&](const char* dst) {
        const Route* r = s.lookup_route(ip(dst));
        REQUIRE(r != nullptr);
        return to_string(r->gateway) + "/" + std::to_string(r->dst.len);
    };
    CHECK(gw_for("8.8.8.8") == "10.1.2.254/0");     // default route
    CHECK(gw_for("10.200.0.1") == "10.1.2.8/8");
    CHECK(gw_for("10.1.9.9") == "10.1.2.16/16");
    CHECK(gw_for("10.1.2.5") == "0.0.0.0/24");      // directly connected
    CHECK(gw_for("10.1.2.77") == "10.1.2.32/32");   // /32 beats /24
    CHECK(gw_for("10.1.2.78") == "0.0.0.0/24");
    CHECK(gw_for("172.31.255.255") == "10.1.2.12/12");
    CHECK(gw_for("172.32.0.0") == "10.1.2.254/0");  // just outside /12
    CHECK(gw_for("9.255.255.255") == "10.1.2.254/0");
    CHECK(gw_for("11.0.0.0") == "10.1.2.254/0");

    // Routes come out sorted: longest prefix first.
    auto rs = s.routes();
    for (size_t i = 1; i < rs.size(); ++i) CHECK(rs[i - 1].dst.len >= rs[i].dst.len);

    // Without a default route nothing matches outside the prefixes.
    routes.erase(routes.begin());
    Snapshot s2(iface(), routes, {}, true, 2);
    CHECK(s2.lookup_route(ip("8.8.8.8")) == nullptr);
    CHECK(s2.next_hop(ip("8.8.8.8")).status == NextHopStatus::NoRoute);

    Snapshot empty(iface(), {}, {}, true, 3);
    CHECK(empty.lookup_route(ip("10.1.2.3")) == nullptr);
}

TEST_CASE("ctrl: equal prefixes: the lowest metric wins", "[ctrl][lpm]") {
    // Inserted worst first, to show order does not matter.
    std::vector<Route> routes = {route("0.0.0.0/0", "10.1.2.3", 600), route("0.0.0.0/0", "10.1.2.1", 100),
                                 route("0.0.0.0/0", "10.1.2.2", 300), route("10.9.0.0/16", "10.1.2.9", 1000)};
    Snapshot s(iface(), routes, {}, true, 1);
    CHECK(s.lookup_route(ip("1.2.3.4"))->gateway == ip("10.1.2.1"));
    // A longer prefix beats a lower metric.
    CHECK(s.lookup_route(ip("10.9.1.1"))->gateway == ip("10.1.2.9"));

    routes.erase(routes.begin() + 1); // the metric-100 default goes away
    Snapshot s2(iface(), routes, {}, true, 2);
    CHECK(s2.lookup_route(ip("1.2.3.4"))->gateway == ip("10.1.2.2"));
}

TEST_CASE("ctrl: LPM agrees with a brute-force scan on random tables", "[ctrl][lpm]") {
    std::mt19937 rng(1234);
    for (int round = 0; round < 20; ++round) {
        std::vector<Route> routes;
        for (int i = 0; i < 200; ++i) {
            Route r;
            uint8_t len = uint8_t(rng() % 33);
            r.dst = Ipv4Prefix::make(Ipv4Addr{uint32_t(rng()) & 0x0fffffffu}, len); // 0.x-15.x: overlaps happen
            r.gateway = Ipv4Addr{uint32_t(i + 1)};
            r.metric = rng() % 4;
            routes.push_back(r);
        }
        Snapshot s(iface(), routes, {}, true, 1);
        for (int q = 0; q < 2000; ++q) {
            Ipv4Addr dst{uint32_t(rng()) & 0x0fffffffu};
            if (q % 2 == 0) { // aim at a route's prefix to hit long matches
                const Route& t = routes[rng() % routes.size()];
                dst = Ipv4Addr{t.dst.addr.v | (uint32_t(rng()) & ~t.dst.mask())};
            }
            const Route* best = nullptr;
            for (const Route& r : routes) {
                if (!r.dst.contains(dst)) continue;
                if (best == nullptr || r.dst.len > best->dst.len ||
                    (r.dst.len == best->dst.len && r.metric < best->metric))
                    best = &r;
            }
            const Route* got = s.lookup_route(dst);
            REQUIRE((got == nullptr) == (best == nullptr));
            if (best != nullptr) {
                REQUIRE(got->dst == best->dst);
                REQUIRE(got->metric == best->metric);
            }
        }
    }
}

// ---- next hop and neighbours -----------------------------------------------------------

TEST_CASE("ctrl: next hop through gateway or direct, by neighbour state", "[ctrl][nexthop]") {
    std::vector<Route> routes = {route("0.0.0.0/0", "10.1.2.254"), route("10.1.2.0/24")};
    std::vector<Neighbour> neighbours = {
        {ip("10.1.2.254"), mac("02:00:00:00:00:fe"), NeighState::Reachable},
        {ip("10.1.2.5"), mac("02:00:00:00:00:05"), NeighState::Stale},
        {ip("10.1.2.6"), {}, NeighState::Incomplete},
        {ip("10.1.2.7"), mac("02:00:00:00:00:07"), NeighState::Failed},
        {ip("10.1.2.8"), mac("02:00:00:00:00:08"), NeighState::Permanent},
    };
    Snapshot s(iface(), routes, neighbours, true, 1);
    CHECK(s.neighbour_count() == 5);

    NextHop nh = s.next_hop(ip("93.184.216.34"));
    CHECK(nh.status == NextHopStatus::Resolved);
    CHECK(nh.neighbour == ip("10.1.2.254"));
    CHECK(nh.mac == mac("02:00:00:00:00:fe"));
    CHECK(nh.source == ip("10.1.2.1"));
    REQUIRE(nh.route != nullptr);
    CHECK(nh.route->dst.len == 0);

    nh = s.next_hop(ip("10.1.2.5"));
    CHECK(nh.status == NextHopStatus::Resolved); // stale still carries a usable MAC
    CHECK(nh.neighbour == ip("10.1.2.5"));
    CHECK(nh.mac == mac("02:00:00:00:00:05"));

    CHECK(s.next_hop(ip("10.1.2.6")).status == NextHopStatus::Unresolved); // incomplete
    nh = s.next_hop(ip("10.1.2.7"));
    CHECK(nh.status == NextHopStatus::Unresolved); // failed: ask again
    CHECK(nh.neighbour == ip("10.1.2.7"));
    CHECK(s.next_hop(ip("10.1.2.8")).mac == mac("02:00:00:00:00:08"));
    nh = s.next_hop(ip("10.1.2.99")); // missing
    CHECK(nh.status == NextHopStatus::Unresolved);
    CHECK(nh.neighbour == ip("10.1.2.99"));

    CHECK(s.find_neighbour(ip("10.1.2.6"))->state == NeighState::Incomplete);
    CHECK(s.find_neighbour(ip("10.1.2.9")) == nullptr);
}

TEST_CASE("ctrl: reject routes, other interfaces, link down, prefsrc", "[ctrl][nexthop]") {
    Route blackhole = route("10.66.0.0/16");
    blackhole.type = RouteType::Reject;
    blackhole.oif = 0;
    Route other = route("10.77.0.0/16", "192.168.0.1", 0, /*oif=*/9);
    Route with_src = route("10.88.0.0/16", "10.1.2.254");
    with_src.prefsrc = ip("10.1.2.200");
    std::vector<Route> routes = {route("0.0.0.0/0", "10.1.2.254"), route("10.1.2.0/24"), blackhole, other, with_src};
    std::vector<Neighbour> neighbours = {{ip("10.1.2.254"), mac("02:00:00:00:00:fe"), NeighState::Reachable}};

    Snapshot s(iface(), routes, neighbours, true, 1);
    CHECK(s.next_hop(ip("10.66.1.1")).status == NextHopStatus::Rejected);
    CHECK(s.next_hop(ip("10.77.1.1")).status == NextHopStatus::OtherInterface);
    CHECK(s.next_hop(ip("10.88.1.1")).source == ip("10.1.2.200"));

    InterfaceInfo down = iface();
    down.oper_up = false;
    Snapshot d(down, routes, neighbours, true, 2);
    CHECK(d.next_hop(ip("1.1.1.1")).status == NextHopStatus::LinkDown);
}

TEST_CASE("ctrl: neighbour hash finds every entry of a large table", "[ctrl]") {
    std::vector<Neighbour> ns;
    for (uint32_t i = 0; i < 5000; ++i) {
        MacAddr m{};
        m.b = {2, 0, uint8_t(i >> 24), uint8_t(i >> 16), uint8_t(i >> 8), uint8_t(i)};
        ns.push_back({Ipv4Addr{0x0a000000u + i * 7}, m, NeighState::Reachable});
    }
    Snapshot s(iface(), {}, ns, true, 1);
    CHECK(s.neighbour_count() == ns.size());
    for (const Neighbour& n : ns) {
        const Neighbour* f = s.find_neighbour(n.ip);
        REQUIRE(f != nullptr);
        REQUIRE(f->mac == n.mac);
    }
    for (uint32_t i = 0; i < 5000; ++i)
        if (i % 7 != 0) REQUIRE(s.find_neighbour(Ipv4Addr{0x0a000000u + i}) == nullptr);
    CHECK(s.neighbours().size() == ns.size());
}

// ---- pending queue -----------------------------------------------------------------

namespace {
struct Pkt {
    int id;
};
struct Sink {
    std::vector<std::pair<int, MacAddr>> sent;
    std::vector<std::pair<int, PendingDrop>> dropped;
    auto send() {
        return [this](Pkt&& p, const MacAddr& m) { sent.emplace_back(p.id, m); };
    }
    auto drop() {
        return [this](Pkt&& p, PendingDrop r) { dropped.emplace_back(p.id, r); };
    }
};
} // namespace

TEST_CASE("ctrl: pending queue asks once, bounds per destination, flushes in order", "[ctrl][pending]") {
    PendingQueue<Pkt> q(PendingLimits{3, 8, std::chrono::seconds(1)});
    Sink sink;
    const Ipv4Addr a = ip("10.1.2.5"), b = ip("10.1.2.6");

    CHECK(q.hold(a, Pkt{1}, at_ms(0), sink.drop()) == Held::AskKernel);
    CHECK(q.hold(a, Pkt{2}, at_ms(1), sink.drop()) == Held::Queued);
    CHECK(q.hold(b, Pkt{10}, at_ms(2), sink.drop()) == Held::AskKernel);
    CHECK(q.hold(a, Pkt{3}, at_ms(3), sink.drop()) == Held::Queued);
    CHECK(sink.dropped.empty());
    // Full: the oldest is dropped (as the kernel's unres_qlen does).
    CHECK(q.hold(a, Pkt{4}, at_ms(4), sink.drop()) == Held::Queued);
    REQUIRE(sink.dropped.size() == 1);
    CHECK(sink.dropped[0] == std::make_pair(1, PendingDrop::QueueFull));
    CHECK(q.held(a) == 3);
    CHECK(q.held() == 4);
    CHECK(q.destinations() == 2);

    CHECK(q.resolve(a, mac("02:00:00:00:00:05"), sink.send()) == 3);
    REQUIRE(sink.sent.size() == 3);
    CHECK(sink.sent[0].first == 2);
    CHECK(sink.sent[1].first == 3);
    CHECK(sink.sent[2].first == 4);
    CHECK(sink.sent[0].second == mac("02:00:00:00:00:05"));
    CHECK(q.held(a) == 0);
    CHECK(q.destinations() == 1);
    // Resolving again (or something never held) sends nothing.
    CHECK(q.resolve(a, mac("02:00:00:00:00:05"), sink.send()) == 0);
    CHECK(q.resolve(ip("10.9.9.9"), mac("02:00:00:00:00:05"), sink.send()) == 0);
    // A new packet to `a` starts a new resolution.
    CHECK(q.hold(a, Pkt{5}, at_ms(5), sink.drop()) == Held::AskKernel);

    CHECK(q.counters().held == 6);
    CHECK(q.counters().sent == 3);
    CHECK(q.counters().dropped[size_t(PendingDrop::QueueFull)] == 1);
}

TEST_CASE("ctrl: pending queue gives up at the deadline", "[ctrl][pending]") {
    PendingQueue<Pkt> q(PendingLimits{4, 8, std::chrono::milliseconds(100)});
    Sink sink;
    const Ipv4Addr a = ip("10.1.2.5"), b = ip("10.1.2.6");
    CHECK(q.next_deadline().is_never());
    q.hold(a, Pkt{1}, at_ms(0), sink.drop());
    q.hold(a, Pkt{2}, at_ms(50), sink.drop()); // does not extend a's deadline
    q.hold(b, Pkt{3}, at_ms(60), sink.drop());
    CHECK(q.next_deadline() == at_ms(100));

    CHECK(q.expire(at_ms(99), sink.drop()) == 0);
    CHECK(sink.dropped.empty());
    CHECK(q.expire(at_ms(100), sink.drop()) == 2);
    REQUIRE(sink.dropped.size() == 2);
    CHECK(sink.dropped[0] == std::make_pair(1, PendingDrop::Timeout));
    CHECK(sink.dropped[1] == std::make_pair(2, PendingDrop::Timeout));
    CHECK(q.held(a) == 0);
    CHECK(q.held(b) == 1);
    CHECK(q.next_deadline() == at_ms(160));
    CHECK(q.expire(at_ms(1000), sink.drop()) == 1);
    CHECK(q.empty());
    CHECK(q.counters().dropped[size_t(PendingDrop::Timeout)] == 3);
}

TEST_CASE("ctrl: pending queue bounds destinations, fails, resolves from a snapshot", "[ctrl][pending]") {
    PendingQueue<Pkt> q(PendingLimits{2, 2, std::chrono::seconds(3)});
    Sink sink;
    CHECK(q.hold(ip("10.1.2.5"), Pkt{1}, at_ms(0), sink.drop()) == Held::AskKernel);
    CHECK(q.hold(ip("10.1.2.6"), Pkt{2}, at_ms(0), sink.drop()) == Held::AskKernel);
    CHECK(q.hold(ip("10.1.2.7"), Pkt{3}, at_ms(0), sink.drop()) == Held::Dropped);
    REQUIRE(sink.dropped.size() == 1);
    CHECK(sink.dropped[0] == std::make_pair(3, PendingDrop::TooManyDestinations));

    CHECK(q.fail(ip("10.1.2.6"), sink.drop()) == 1);
    CHECK(sink.dropped.back() == std::make_pair(2, PendingDrop::Failed));
    CHECK(q.fail(ip("10.1.2.6"), sink.drop()) == 0);

    // The neighbour appears in a new snapshot: resolve_from sends the packet.
    std::vector<Neighbour> ns = {{ip("10.1.2.5"), mac("02:00:00:00:00:05"), NeighState::Reachable}};
    Snapshot s(iface(), {route("10.1.2.0/24")}, ns, true, 2);
    auto lookup = [&](Ipv4Addr nh) -> std::optional<MacAddr> {
        const Neighbour* n = s.find_neighbour(nh);
        if (n == nullptr || !neigh_usable(n->state)) return std::nullopt;
        return n->mac;
    };
    q.hold(ip("10.1.2.9"), Pkt{4}, at_ms(1), sink.drop());
    CHECK(q.resolve_from(lookup, sink.send()) == 1);
    REQUIRE(sink.sent.size() == 1);
    CHECK(sink.sent[0] == std::make_pair(1, mac("02:00:00:00:00:05")));
    CHECK(q.held() == 1); // 10.1.2.9 still waits
}

TEST_CASE("ctrl: pending queue holds move-only packets", "[ctrl][pending]") {
    PendingQueue<std::unique_ptr<int>> q(PendingLimits{1, 1, std::chrono::seconds(1)});
    int dropped = 0, sent = 0;
    auto drop = [&](std::unique_ptr<int>&& p, PendingDrop) { dropped += *p; };
    q.hold(ip("10.0.0.1"), std::make_unique<int>(1), at_ms(0), drop);
    q.hold(ip("10.0.0.1"), std::make_unique<int>(2), at_ms(0), drop);
    CHECK(dropped == 1);
    q.resolve(ip("10.0.0.1"), MacAddr{}, [&](std::unique_ptr<int>&& p, const MacAddr&) { sent += *p; });
    CHECK(sent == 2);
}

// ---- static configuration ------------------------------------------------------------

TEST_CASE("ctrl: static configuration builds a snapshot", "[ctrl][static]") {
    std::string err;
    auto cfg = parse_static_config(
        "ip=10.0.0.1/24, mac=02:00:00:00:00:01, gw=10.0.0.254, neigh=10.0.0.2=02:00:00:00:00:02,"
        "neigh=10.0.0.254=02:00:00:00:00:fe, mtu=9000, name=memif0",
        &err);
    INFO(err);
    REQUIRE(cfg);
    CHECK(cfg->addr->addr == ip("10.0.0.1"));
    CHECK(cfg->addr->prefix_len == 24);
    CHECK(*cfg->mac == mac("02:00:00:00:00:01"));
    CHECK(cfg->mtu == 9000);
    CHECK(cfg->neighbours.size() == 2);

    auto s = cfg->snapshot(7);
    CHECK(s->generation() == 7);
    CHECK_FALSE(s->can_resolve());
    CHECK(s->iface().name == "memif0");
    CHECK(s->iface().mtu == 9000);
    CHECK(s->iface().mac == mac("02:00:00:00:00:01"));

    NextHop nh = s->next_hop(ip("10.0.0.2"));
    CHECK(nh.status == NextHopStatus::Resolved);
    CHECK(nh.mac == mac("02:00:00:00:00:02"));
    CHECK(nh.source == ip("10.0.0.1"));
    nh = s->next_hop(ip("192.0.2.1")); // off-subnet: via the gateway
    CHECK(nh.status == NextHopStatus::Resolved);
    CHECK(nh.neighbour == ip("10.0.0.254"));
    CHECK(nh.mac == mac("02:00:00:00:00:fe"));
    CHECK(s->next_hop(ip("10.0.0.3")).status == NextHopStatus::Unresolved);

    // Without a gateway, off-subnet destinations have no route.
    auto nogw = parse_static_config("ip=10.0.0.1/24,mac=02:00:00:00:00:01", &err);
    REQUIRE(nogw);
    CHECK(nogw->snapshot()->next_hop(ip("192.0.2.1")).status == NextHopStatus::NoRoute);

    // One option at a time (as a command line would).
    StaticConfig c;
    REQUIRE(apply_static_option(c, "ip", "192.168.1.10/16", &err));
    REQUIRE(apply_static_option(c, "mac", "0a:0b:0c:0d:0e:0f", &err));
    REQUIRE(apply_static_option(c, "neigh", "192.168.200.1=0a:00:00:00:00:01", &err));
    CHECK(validate_static_config(c, &err));
}

TEST_CASE("ctrl: static configuration rejects bad input with a clear message", "[ctrl][static]") {
    struct Case {
        const char* spec;
        const char* message_part;
    };
    const Case cases[] = {
        {"mac=02:00:00:00:00:01", "ip= is required"},
        {"ip=10.0.0.1/24", "mac= is required"},
        {"ip=10.0.0.1,mac=02:00:00:00:00:01", "bad ip '10.0.0.1'"},
        {"ip=10.0.0.300/24,mac=02:00:00:00:00:01", "bad ip '10.0.0.300/24'"},
        {"ip=10.0.0.1/33,mac=02:00:00:00:00:01", "bad ip"},
        {"ip=10.0.0.1/0,mac=02:00:00:00:00:01", "prefix length 0"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:01", "bad mac '02:00:00:00:01'"},
        {"ip=10.0.0.1/24,mac=01:00:5e:00:00:01", "must be unicast"},
        {"ip=10.0.0.1/24,mac=00:00:00:00:00:00", "must be unicast"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,gw=10.0.1.1", "gw 10.0.1.1 is not on 10.0.0.0/24"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,gw=10.0.0.1", "own address"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,gw=banana", "bad gw 'banana'"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,neigh=10.0.0.2", "is not IP=MAC"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,neigh=10.0.0.2=zz:00:00:00:00:02", "bad MAC 'zz:00:00:00:00:02'"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,neigh=10.0.0.256=02:00:00:00:00:02", "bad IPv4 address '10.0.0.256'"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,neigh=10.9.0.2=02:00:00:00:00:02", "is not on 10.0.0.0/24"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,neigh=10.0.0.2=02:00:00:00:00:02,neigh=10.0.0.2=02:00:00:00:00:03",
         "given twice"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,neigh=10.0.0.2=ff:ff:ff:ff:ff:ff", "must be unicast"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,mtu=67", "bad mtu '67'"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,mtu=9k", "bad mtu"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,speed=10", "unknown option 'speed'"},
        {"ip=10.0.0.1/24,mac=02:00:00:00:00:01,verbose", "is not key=value"},
        {"ip=10.0.0.1/24,ip=10.0.0.2/24,mac=02:00:00:00:00:01", "ip= given twice"},
    };
    for (const Case& c : cases) {
        std::string err;
        auto cfg = parse_static_config(c.spec, &err);
        INFO("spec: " << c.spec << "\nerror: " << err);
        CHECK_FALSE(cfg);
        CHECK(err.find(c.message_part) != std::string::npos);
        CHECK(err.find('\n') == std::string::npos); // one line
    }
}

// ---- RCU ---------------------------------------------------------------------------

namespace {
// A snapshot stand-in that notices use after free: every field equals `gen`
// while alive; the destructor poisons them.
struct Probe {
    static inline std::atomic<int> live{0};
    static constexpr uint64_t kAlive = 0xA11CE5A11CE5ull;
    uint64_t magic = kAlive;
    std::array<uint64_t, 8> vals{};
    explicit Probe(uint64_t gen) {
        vals.fill(gen);
        live.fetch_add(1);
    }
    ~Probe() {
        magic = 0xDEAD;
        vals.fill(~uint64_t(0));
        live.fetch_sub(1);
    }
};
} // namespace

TEST_CASE("ctrl: rcu keeps a snapshot while a reader may hold it", "[ctrl][rcu]") {
    Probe::live = 0;
    {
        Rcu<Probe> rcu(std::make_unique<Probe>(0));
        auto r1 = rcu.register_reader();
        auto r2 = rcu.register_reader();
        REQUIRE(r1);
        REQUIRE(r2);

        const Probe& held = r1->read();
        CHECK(held.vals[0] == 0);
        rcu.publish(std::make_unique<Probe>(1));
        CHECK(rcu.retired_count() == 1);  // r1 and r2 have not passed a quiescent point
        CHECK(held.magic == Probe::kAlive); // still valid
        CHECK(r2->read().vals[0] == 1);   // new readers see the new one

        r1->quiescent();
        CHECK(rcu.reclaim() == 0);        // r2 still pending
        r2->quiescent();
        CHECK(rcu.reclaim() == 1);
        CHECK(rcu.retired_count() == 0);
        CHECK(Probe::live == 1);

        // An offline reader does not hold reclamation back.
        r2->offline();
        rcu.publish(std::make_unique<Probe>(2));
        CHECK(rcu.retired_count() == 1); // r1 is online and pending
        r1->quiescent();
        rcu.publish(std::make_unique<Probe>(3)); // frees 1 and (r1 saw epoch 2) not 2
        CHECK(rcu.retired_count() == 1);
        r1->quiescent();
        CHECK(rcu.reclaim() == 1);
        r2->online();
        CHECK(r2->read().vals[0] == 3);

        // Unregistering (destroying the reader) releases its slot.
        r1.reset();
        rcu.publish(std::make_unique<Probe>(4));
        CHECK(rcu.retired_count() == 1); // r2 online
        r2.reset();
        CHECK(rcu.reclaim() == 1);
        CHECK(Probe::live == 1);
    }
    CHECK(Probe::live == 0); // the destructor frees current + retired
}

TEST_CASE("ctrl: rcu reader slots are bounded and reusable", "[ctrl][rcu]") {
    Rcu<Probe> rcu(std::make_unique<Probe>(0));
    std::vector<Rcu<Probe>::Reader> readers;
    for (size_t i = 0; i < Rcu<Probe>::kMaxReaders; ++i) {
        auto r = rcu.register_reader();
        REQUIRE(r);
        readers.push_back(std::move(*r));
    }
    CHECK_FALSE(rcu.register_reader());
    readers.pop_back();
    CHECK(rcu.register_reader());
}

TEST_CASE("ctrl: rcu under concurrent readers and a publishing writer", "[ctrl][rcu][threads]") {
    Probe::live = 0;
    constexpr int kReaders = 3;
    constexpr uint64_t kPublishes = 20000;
    std::atomic<bool> done{false};
    std::atomic<uint64_t> reads{0}, bad{0};
    {
        Rcu<Probe> rcu(std::make_unique<Probe>(0));
        std::vector<std::thread> threads;
        for (int t = 0; t < kReaders; ++t) {
            auto reg = rcu.register_reader();
            REQUIRE(reg);
            threads.emplace_back([&, r = std::move(*reg), t]() mutable {
                uint64_t last = 0, n = 0;
                while (!done.load(std::memory_order_acquire)) {
                    // One "burst": several lookups on one snapshot.
                    const Probe& p = r.read();
                    uint64_t gen = p.vals[0];
                    for (int k = 0; k < 16; ++k)
                        if (p.magic != Probe::kAlive || p.vals[size_t(k % 8)] != gen) bad.fetch_add(1);
                    if (gen < last) bad.fetch_add(1); // snapshots never go back
                    last = gen;
                    ++n;
                    r.quiescent();
                    // One reader sometimes goes offline, as an idle engine would.
                    if (t == 0 && n % 64 == 0) {
                        r.offline();
                        std::this_thread::yield();
                        r.online();
                    }
                }
                reads.fetch_add(n);
            });
        }
        size_t peak_retired = 0;
        for (uint64_t g = 1; g <= kPublishes; ++g) {
            rcu.publish(std::make_unique<Probe>(g));
            peak_retired = std::max(peak_retired, rcu.retired_count());
            if (g % 256 == 0) std::this_thread::yield();
        }
        done.store(true, std::memory_order_release);
        for (auto& th : threads) th.join();
        // The readers are gone (their slots released on thread exit), so everything retired can go.
        rcu.reclaim();
        CHECK(rcu.retired_count() == 0);
        CHECK(rcu.freed_count() == kPublishes);
        CHECK(Probe::live == 1);
        INFO("reads " << reads.load() << ", peak retired " << peak_retired);
        CHECK(reads.load() > 0);
    }
    CHECK(bad.load() == 0);
    CHECK(Probe::live == 0);
}

TEST_CASE("ctrl: engines read consistent snapshots while the owner republishes", "[ctrl][rcu][threads]") {
    // Every snapshot routes 0/0 via gateway 10.0.0.(g % 200 + 1) and holds that
    // gateway's neighbour with MAC ...:(g % 200 + 1): a reader that ever saw a
    // route from one snapshot and a neighbour from another would notice.
    auto make = [](uint64_t g) {
        uint8_t last = uint8_t(g % 200 + 1);
        InterfaceInfo i = iface();
        i.addrs = {InterfaceAddr{Ipv4Addr{0x0a000000u | 250}, 24}};
        std::vector<Route> routes = {route("10.0.0.0/24"), route("0.0.0.0/0", "0.0.0.0")};
        routes[1].gateway = Ipv4Addr{0x0a000000u | last};
        std::vector<Neighbour> ns = {{routes[1].gateway, MacAddr{{2, 0, 0, 0, 0, last}}, NeighState::Reachable}};
        return std::make_unique<const Snapshot>(std::move(i), std::move(routes), ns, true, g);
    };
    Rcu<Snapshot> rcu(make(0));
    std::atomic<bool> done{false};
    std::atomic<uint64_t> bad{0}, lookups{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
        auto reg = rcu.register_reader();
        REQUIRE(reg);
        threads.emplace_back([&, r = std::move(*reg)]() mutable {
            uint64_t n = 0;
            while (!done.load(std::memory_order_acquire)) {
                const Snapshot& s = r.read();
                for (int k = 0; k < 8; ++k) {
                    NextHop nh = s.next_hop(Ipv4Addr{0x08080808u + uint32_t(k)});
                    if (nh.status != NextHopStatus::Resolved || nh.mac.b[5] != uint8_t(nh.neighbour.v & 0xff) ||
                        uint8_t(nh.neighbour.v & 0xff) != uint8_t(s.generation() % 200 + 1))
                        bad.fetch_add(1);
                    ++n;
                }
                r.quiescent();
            }
            lookups.fetch_add(n);
        });
    }
    for (uint64_t g = 1; g <= 5000; ++g) rcu.publish(make(g));
    done.store(true, std::memory_order_release);
    for (auto& th : threads) th.join();
    rcu.reclaim();
    CHECK(rcu.retired_count() == 0);
    CHECK(bad.load() == 0);
    CHECK(lookups.load() > 0);
}
