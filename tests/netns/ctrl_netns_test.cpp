// netns integration test for stack/ctrl: the netlink control plane against a
// real kernel, inside namespaces this test creates and always deletes.
//
//   ns A (crescent side)            ns G (gateway / peer)           ns R (remote)
//   A0 10.81.0.1/24  <-- veth -->   G0 10.81.0.2/24
//                                   G1 10.82.0.1/24  <-- veth -->   R0 10.82.0.2/24
//   route 10.82.0.0/24 via 10.81.0.2                                default via 10.82.0.1
//
// The test thread enters ns A (setns) and runs ctrl::Netlink there. Every wait
// polls the netlink fd with a timeout. Needs root; otherwise prints
// "SKIP: needs root" and exits 77 (meson's skip code).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "stack/ctrl/netlink.hpp"
#include "stack/ctrl/pending.hpp"
#include "tests/support/skip.hpp"

using namespace crescent;
using namespace crescent::ctrl;
using Clock = std::chrono::steady_clock;

namespace {

// Runs a shell command; returns its exit status and output.
std::pair<int, std::string> sh(const std::string& cmd) {
    std::string out;
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (p == nullptr) return {-1, "popen failed"};
    char buf[512];
    while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
    int st = pclose(p);
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

void must(const std::string& cmd) {
    auto [rc, out] = sh(cmd);
    if (rc != 0) throw std::runtime_error("command failed (" + std::to_string(rc) + "): " + cmd + "\n" + out);
}

Ipv4Addr ip(const char* s) { return *parse_ipv4(s); }
MacAddr mac(const char* s) { return *parse_mac(s); }

// Names of one test bed; unique per process and per bed.
struct Names {
    std::string p, a, g, r, a0, g0, g1, r0;
    explicit Names(int serial) {
        p = "cc" + std::to_string(getpid() % 1000000) + std::string(1, char('a' + serial % 26));
        a = p + "-A";
        g = p + "-G";
        r = p + "-R";
        a0 = p + "a0"; // <= 15 characters
        g0 = p + "g0";
        g1 = p + "g1";
        r0 = p + "r0";
    }
};

// Deletes the namespaces (and with them the veths) when it goes out of scope,
// also when the bed's set-up threw half-way.
struct Teardown {
    const Names& n;
    ~Teardown() {
        for (const std::string& ns : {n.a, n.g, n.r}) sh("ip netns del " + ns);
    }
};

constexpr const char* kMacA = "02:cc:00:00:00:01";
constexpr const char* kMacG0 = "02:cc:00:00:00:02";
constexpr const char* kMacG1 = "02:cc:00:00:01:01";
constexpr const char* kMacR = "02:cc:00:00:01:02";

struct Bed {
    Names n;
    Teardown teardown{n};

    explicit Bed(int serial) : n(serial) {
        for (const std::string& ns : {n.a, n.g, n.r}) {
            sh("ip netns del " + ns); // a leftover from a crashed run
            must("ip netns add " + ns);
            must("ip -n " + ns + " link set lo up");
        }
        must("ip link add " + n.a0 + " type veth peer name " + n.g0);
        must("ip link set " + n.a0 + " netns " + n.a);
        must("ip link set " + n.g0 + " netns " + n.g);
        must("ip link add " + n.g1 + " type veth peer name " + n.r0);
        must("ip link set " + n.g1 + " netns " + n.g);
        must("ip link set " + n.r0 + " netns " + n.r);
        must("ip -n " + n.a + " link set " + n.a0 + " address " + kMacA + " mtu 1400");
        must("ip -n " + n.g + " link set " + n.g0 + " address " + kMacG0);
        must("ip -n " + n.g + " link set " + n.g1 + " address " + kMacG1);
        must("ip -n " + n.r + " link set " + n.r0 + " address " + kMacR);
        must("ip -n " + n.a + " addr add 10.81.0.1/24 dev " + n.a0);
        must("ip -n " + n.g + " addr add 10.81.0.2/24 dev " + n.g0);
        must("ip -n " + n.g + " addr add 10.82.0.1/24 dev " + n.g1);
        must("ip -n " + n.r + " addr add 10.82.0.2/24 dev " + n.r0);
        must("ip -n " + n.a + " link set " + n.a0 + " up");
        must("ip -n " + n.g + " link set " + n.g0 + " up");
        must("ip -n " + n.g + " link set " + n.g1 + " up");
        must("ip -n " + n.r + " link set " + n.r0 + " up");
        must("ip netns exec " + n.g + " sysctl -qw net.ipv4.ip_forward=1");
        must("ip -n " + n.a + " route add 10.82.0.0/24 via 10.81.0.2");
        must("ip -n " + n.r + " route add default via 10.82.0.1");
        // Fail unanswered ARP quickly (one probe, 200 ms) so the FAILED case is short.
        must("ip netns exec " + n.a + " sysctl -qw net.ipv4.neigh." + n.a0 + ".mcast_solicit=1");
        must("ip netns exec " + n.a + " sysctl -qw net.ipv4.neigh." + n.a0 + ".retrans_time_ms=200");
    }
};

// Moves the calling thread into a named namespace; back on destruction.
class InNetns {
public:
    explicit InNetns(const std::string& ns) {
        orig_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
        if (orig_ < 0 || fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
            if (fd >= 0) ::close(fd);
            throw std::runtime_error("cannot enter network namespace " + ns);
        }
        ::close(fd);
    }
    ~InNetns() {
        if (setns(orig_, CLONE_NEWNET) != 0) std::perror("setns back");
        ::close(orig_);
    }
    InNetns(const InNetns&) = delete;
    InNetns& operator=(const InNetns&) = delete;

private:
    int orig_ = -1;
};

// Polls the netlink fd and processes until `done(snapshot)` or the timeout.
// Collects the neighbour events seen on the way.
bool wait_for(Netlink& nl, const std::function<bool(const Snapshot&)>& done,
              std::chrono::milliseconds timeout = std::chrono::milliseconds(5000),
              std::vector<NeighbourEvent>* events = nullptr) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        ProcessResult r = nl.process();
        if (r.error != 0) FAIL("process(): " << r.error_text);
        if (events != nullptr) events->insert(events->end(), r.neighbours.begin(), r.neighbours.end());
        if (done(nl.snapshot())) return true;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        pollfd pfd{nl.fd(), POLLIN, 0};
        ::poll(&pfd, 1, int(std::min<int64_t>(left.count(), 100)));
    }
}

std::unique_ptr<Netlink> open_or_fail(const std::string& ifname) {
    std::string err;
    auto nl = Netlink::open(ifname, &err);
    INFO(err);
    REQUIRE(nl != nullptr);
    return nl;
}

void require_requested(Netlink& nl, Ipv4Addr a) {
    std::string err;
    ResolveResult r = nl.request_resolution(a, &err);
    INFO(err);
    REQUIRE(r == ResolveResult::Requested);
}

int g_serial = 0;

} // namespace

TEST_CASE("netns ctrl: interface facts, errors, link/address/MTU updates", "[netns][ctrl]") {
    Bed bed(g_serial++);
    InNetns in(bed.n.a);

    std::string err;
    CHECK(Netlink::open("nosuch0", &err) == nullptr);
    CHECK(err.find("no interface named 'nosuch0'") != std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
    CHECK(Netlink::open("lo", &err) == nullptr);
    CHECK(err.find("not an Ethernet device") != std::string::npos);
    CHECK(Netlink::open("a-name-much-too-long-for-linux", &err) == nullptr);
    CHECK(err.find("bad interface name") != std::string::npos);

    auto nl = open_or_fail(bed.n.a0);
    const Snapshot& s = nl->snapshot();
    CHECK(s.iface().ifindex == int(if_nametoindex(bed.n.a0.c_str())));
    CHECK(s.iface().mac == mac(kMacA));
    CHECK(s.iface().mtu == 1400);
    CHECK(s.iface().admin_up);
    REQUIRE(s.iface().addrs.size() == 1);
    CHECK(s.iface().addrs[0] == InterfaceAddr{ip("10.81.0.1"), 24});
    CHECK(s.can_resolve());
    // Connected route + the route through the gateway, both through A0.
    const Route* conn = s.lookup_route(ip("10.81.0.77"));
    REQUIRE(conn != nullptr);
    CHECK(conn->dst.len == 24);
    CHECK_FALSE(conn->has_gateway());
    CHECK(conn->oif == s.iface().ifindex);
    const Route* via = s.lookup_route(ip("10.82.0.2"));
    REQUIRE(via != nullptr);
    CHECK(via->gateway == ip("10.81.0.2"));
    CHECK(s.lookup_route(ip("8.8.8.8")) == nullptr);
    // veth reports operstate UP once both ends are up (may lag the dump).
    CHECK(wait_for(*nl, [](const Snapshot& x) { return x.iface().oper_up; }));

    must("ip link set " + bed.n.a0 + " mtu 1300");
    CHECK(wait_for(*nl, [](const Snapshot& x) { return x.iface().mtu == 1300; }));

    must("ip addr add 10.81.5.1/16 dev " + bed.n.a0);
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        return x.iface().addrs.size() == 2 && x.iface().addrs[1] == InterfaceAddr{ip("10.81.5.1"), 16};
    }));
    must("ip addr del 10.81.5.1/16 dev " + bed.n.a0);
    CHECK(wait_for(*nl, [](const Snapshot& x) { return x.iface().addrs.size() == 1; }));

    must("ip link set " + bed.n.a0 + " address 02:cc:00:00:00:99");
    CHECK(wait_for(*nl, [](const Snapshot& x) { return x.iface().mac == mac("02:cc:00:00:00:99"); }));

    must("ip link set " + bed.n.a0 + " down");
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        return !x.iface().admin_up && x.next_hop(ip("10.81.0.2")).status == NextHopStatus::LinkDown;
    }));
    must("ip link set " + bed.n.a0 + " up");
    CHECK(wait_for(*nl, [](const Snapshot& x) { return x.iface().admin_up && x.iface().oper_up; }));

    // Notifications for other interfaces (lo) are read but do not change the snapshot.
    uint64_t gen = nl->snapshot().generation();
    must("ip link set lo mtu 60000");
    wait_for(*nl, [](const Snapshot&) { return false; }, std::chrono::milliseconds(300));
    CHECK(nl->snapshot().generation() == gen);
    CHECK(nl->counters().ignored > 0);
}

TEST_CASE("netns ctrl: neighbour learned from the kernel after ping", "[netns][ctrl]") {
    Bed bed(g_serial++);
    InNetns in(bed.n.a);
    auto nl = open_or_fail(bed.n.a0);
    CHECK(nl->snapshot().find_neighbour(ip("10.81.0.2")) == nullptr);
    CHECK(nl->snapshot().next_hop(ip("10.81.0.2")).status == NextHopStatus::Unresolved);

    must("ping -c 1 -W 2 10.81.0.2"); // the kernel ARPs; we only watch
    std::vector<NeighbourEvent> events;
    CHECK(wait_for(
        *nl,
        [](const Snapshot& x) {
            const Neighbour* n = x.find_neighbour(ip("10.81.0.2"));
            return n != nullptr && neigh_usable(n->state) && n->mac == mac(kMacG0);
        },
        std::chrono::milliseconds(5000), &events));
    const Neighbour* n = nl->snapshot().find_neighbour(ip("10.81.0.2"));
    REQUIRE(n != nullptr);
    CHECK(n->state != NeighState::Permanent); // learned, not static
    bool saw = false;
    for (const NeighbourEvent& e : events) saw |= e.neighbour.ip == ip("10.81.0.2") && e.neighbour.mac == mac(kMacG0);
    CHECK(saw);
    NextHop nh = nl->snapshot().next_hop(ip("10.81.0.2"));
    CHECK(nh.status == NextHopStatus::Resolved);
    CHECK(nh.mac == mac(kMacG0));
    CHECK(nh.source == ip("10.81.0.1"));

    // A neighbour removed in the kernel disappears from the snapshot.
    must("ip neigh del 10.81.0.2 dev " + bed.n.a0);
    CHECK(wait_for(*nl, [](const Snapshot& x) { return x.find_neighbour(ip("10.81.0.2")) == nullptr; }));
}

TEST_CASE("netns ctrl: NTF_USE resolution, pending packets, peer MAC change", "[netns][ctrl]") {
    Bed bed(g_serial++);
    InNetns in(bed.n.a);
    auto nl = open_or_fail(bed.n.a0);

    // A packet for the peer: no neighbour yet, so hold it and ask the kernel.
    PendingQueue<int> pending(PendingLimits{4, 8, std::chrono::seconds(3)});
    std::vector<std::pair<int, MacAddr>> sent;
    std::vector<std::pair<int, PendingDrop>> dropped;
    auto send = [&](int&& p, const MacAddr& m) { sent.emplace_back(p, m); };
    auto drop = [&](int&& p, PendingDrop r) { dropped.emplace_back(p, r); };
    const Instant t0 = Instant::zero();

    NextHop nh = nl->snapshot().next_hop(ip("10.81.0.2"));
    REQUIRE(nh.status == NextHopStatus::Unresolved);
    REQUIRE(pending.hold(nh.neighbour, 1, t0, drop) == Held::AskKernel);
    REQUIRE(pending.hold(nh.neighbour, 2, t0, drop) == Held::Queued);
    require_requested(*nl, nh.neighbour);

    CHECK(wait_for(*nl, [](const Snapshot& x) {
        return x.next_hop(ip("10.81.0.2")).status == NextHopStatus::Resolved;
    }));
    const Snapshot& s = nl->snapshot();
    auto lookup = [&](Ipv4Addr a) -> std::optional<MacAddr> {
        NextHop h = s.next_hop(a);
        if (h.status != NextHopStatus::Resolved) return std::nullopt;
        return h.mac;
    };
    CHECK(pending.resolve_from(lookup, send) == 2);
    REQUIRE(sent.size() == 2);
    CHECK(sent[0] == std::make_pair(1, mac(kMacG0)));
    CHECK(sent[1] == std::make_pair(2, mac(kMacG0)));
    CHECK(dropped.empty());

    // The peer changes its MAC and announces it (arp_notify: gratuitous ARP);
    // the kernel updates the entry and the change arrives through process().
    must("ip netns exec " + bed.n.g + " sysctl -qw net.ipv4.conf." + bed.n.g0 + ".arp_notify=1");
    must("ip -n " + bed.n.g + " link set " + bed.n.g0 + " address 02:cc:00:00:00:22");
    std::vector<NeighbourEvent> events;
    CHECK(wait_for(
        *nl,
        [](const Snapshot& x) {
            const Neighbour* n = x.find_neighbour(ip("10.81.0.2"));
            return n != nullptr && neigh_usable(n->state) && n->mac == mac("02:cc:00:00:00:22");
        },
        std::chrono::milliseconds(5000), &events));
    bool saw = false;
    for (const NeighbourEvent& e : events) saw |= e.neighbour.mac == mac("02:cc:00:00:00:22");
    CHECK(saw);

    // Nobody answers for 10.81.0.99: the kernel marks it FAILED, the held
    // packet is dropped with a reason.
    nh = nl->snapshot().next_hop(ip("10.81.0.99"));
    REQUIRE(nh.status == NextHopStatus::Unresolved);
    REQUIRE(pending.hold(nh.neighbour, 3, t0, drop) == Held::AskKernel);
    require_requested(*nl, nh.neighbour);
    events.clear();
    CHECK(wait_for(
        *nl,
        [](const Snapshot& x) {
            const Neighbour* n = x.find_neighbour(ip("10.81.0.99"));
            return n != nullptr && n->state == NeighState::Failed;
        },
        std::chrono::milliseconds(5000), &events));
    for (const NeighbourEvent& e : events)
        if (e.neighbour.state == NeighState::Failed) pending.fail(e.neighbour.ip, drop);
    REQUIRE(dropped.size() == 1);
    CHECK(dropped[0] == std::make_pair(3, PendingDrop::Failed));
    CHECK(nl->snapshot().next_hop(ip("10.81.0.99")).status == NextHopStatus::Unresolved);
    CHECK(pending.empty());
}

TEST_CASE("netns ctrl: routes added and deleted; next hop through the gateway", "[netns][ctrl]") {
    Bed bed(g_serial++);
    InNetns in(bed.n.a);
    auto nl = open_or_fail(bed.n.a0);

    // The topology works for the kernel (G forwards to R).
    must("ping -c 1 -W 2 10.82.0.2");

    must("ip route add 10.90.0.0/16 via 10.81.0.2 metric 50");
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        const Route* r = x.lookup_route(ip("10.90.1.1"));
        return r != nullptr && r->metric == 50 && r->gateway == ip("10.81.0.2");
    }));
    must("ip route add 10.90.0.0/16 via 10.81.0.3 metric 10");
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        const Route* r = x.lookup_route(ip("10.90.1.1"));
        return r != nullptr && r->metric == 10 && r->gateway == ip("10.81.0.3");
    }));
    must("ip route add 10.90.1.0/24 via 10.81.0.4 metric 900");
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        return x.lookup_route(ip("10.90.1.1"))->gateway == ip("10.81.0.4") &&
               x.lookup_route(ip("10.90.2.1"))->gateway == ip("10.81.0.3");
    }));
    must("ip route del 10.90.1.0/24");
    must("ip route del 10.90.0.0/16 via 10.81.0.3 metric 10");
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        const Route* r = x.lookup_route(ip("10.90.1.1"));
        return r != nullptr && r->metric == 50;
    }));
    must("ip route del 10.90.0.0/16 metric 50");
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        return x.next_hop(ip("10.90.1.1")).status == NextHopStatus::NoRoute;
    }));
    // A route's MTU metric (what connections to it take their MSS from), set and changed.
    must("ip route add 10.93.0.0/16 via 10.81.0.2 mtu 1280");
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        const Route* r = x.lookup_route(ip("10.93.0.1"));
        return r != nullptr && r->mtu == 1280;
    }));
    must("ip route change 10.93.0.0/16 via 10.81.0.2 mtu 1400");
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        const Route* r = x.lookup_route(ip("10.93.0.1"));
        return r != nullptr && r->mtu == 1400;
    }));
    CHECK(nl->snapshot().lookup_route(ip("10.81.0.2"))->mtu == 0);  // the connected route sets none
    must("ip route add blackhole 10.91.0.0/16");
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        return x.next_hop(ip("10.91.0.1")).status == NextHopStatus::Rejected;
    }));
    // Routes in other tables are not ours.
    must("ip route add 10.92.0.0/16 via 10.81.0.2 table 100");
    wait_for(*nl, [](const Snapshot&) { return false; }, std::chrono::milliseconds(300));
    CHECK(nl->snapshot().lookup_route(ip("10.92.0.1")) == nullptr);

    // The remote host lies behind the gateway: its next hop is G's MAC on A's link.
    must("ip neigh flush dev " + bed.n.a0);
    CHECK(wait_for(*nl, [](const Snapshot& x) { return x.find_neighbour(ip("10.81.0.2")) == nullptr; }));
    NextHop nh = nl->snapshot().next_hop(ip("10.82.0.2"));
    REQUIRE(nh.status == NextHopStatus::Unresolved);
    CHECK(nh.neighbour == ip("10.81.0.2"));
    require_requested(*nl, nh.neighbour);
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        return x.next_hop(ip("10.82.0.2")).status == NextHopStatus::Resolved;
    }));
    nh = nl->snapshot().next_hop(ip("10.82.0.2"));
    CHECK(nh.mac == mac(kMacG0));
    CHECK(nh.neighbour == ip("10.81.0.2"));
    CHECK(nh.source == ip("10.81.0.1"));

    // Add a default route later: unknown destinations now go to the gateway too.
    must("ip route add default via 10.81.0.2");
    CHECK(wait_for(*nl, [](const Snapshot& x) {
        NextHop h = x.next_hop(ip("198.51.100.7"));
        return h.status == NextHopStatus::Resolved && h.mac == mac(kMacG0);
    }));
}

TEST_CASE("netns ctrl: lost notifications (ENOBUFS) trigger a full re-dump", "[netns][ctrl]") {
    Bed bed(g_serial++);
    InNetns in(bed.n.a);
    auto nl = open_or_fail(bed.n.a0);
    REQUIRE(nl->set_notify_buffer(1)); // the kernel rounds it up to its minimum

    // 300 route additions while nobody reads: the socket overflows.
    constexpr int kRoutes = 300;
    std::string batch;
    for (int i = 0; i < kRoutes; ++i)
        batch += "route add 10.100." + std::to_string(i / 250) + "." + std::to_string(i % 250) + "/32 via 10.81.0.2\n";
    FILE* f = popen("ip -batch - >/dev/null 2>&1", "w");
    REQUIRE(f != nullptr);
    fputs(batch.c_str(), f);
    REQUIRE(pclose(f) == 0);

    auto all_there = [](const Snapshot& x) {
        for (int i = 0; i < kRoutes; ++i) {
            Ipv4Addr a{0x0a640000u | uint32_t(i / 250) << 8 | uint32_t(i % 250)};
            const Route* r = x.lookup_route(a);
            if (r == nullptr || r->dst.len != 32 || r->gateway != ip("10.81.0.2")) return false;
        }
        return true;
    };
    CHECK(wait_for(*nl, all_there));
    CHECK(nl->counters().resyncs >= 1);
    // Updates after the re-dump still apply.
    must("ip route del 10.100.0.7/32");
    CHECK(wait_for(*nl, [](const Snapshot& x) { return x.lookup_route(ip("10.100.0.7")) == nullptr; }));
    CHECK(nl->snapshot().lookup_route(ip("10.100.0.8")) != nullptr);
}

TEST_CASE("netns ctrl: resolution without CAP_NET_ADMIN fails with a clear error", "[netns][ctrl]") {
    Bed bed(g_serial++);
    InNetns in(bed.n.a);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        std::string err;
        auto nl = Netlink::open(bed.n.a0, &err);
        if (nl == nullptr) _exit(10);
        // Drop root: no capabilities left. Reading still works, asking does not.
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(11);
        ResolveResult r = nl->request_resolution(ip("10.81.0.2"), &err);
        if (r != ResolveResult::NoPermission) _exit(12);
        if (err.find("CAP_NET_ADMIN") == std::string::npos || err.find("10.81.0.2") == std::string::npos) _exit(13);
        std::printf("child saw: %s\n", err.c_str());
        _exit(0);
    }
    int st = 0;
    REQUIRE(waitpid(child, &st, 0) == child);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
}

TEST_CASE("netns ctrl: no namespace is left behind", "[netns][ctrl]") {
    { Bed bed(g_serial++); }
    auto [rc, out] = sh("ip netns list");
    CHECK(out.find("cc" + std::to_string(getpid() % 1000000)) == std::string::npos);
}

const char* crescent_test_skip_reason() {
    if (geteuid() != 0) return "needs root (creates network namespaces and veth pairs)";
    if (sh("ip -V").first != 0) return "needs iproute2 (`ip`)";
    return nullptr;
}
