// crescent — two engines in one process joined by DPDK's net_ring PMD
// (rte_eth_from_rings: A's TX ring is B's RX ring and vice versa), EAL with
// --no-huge --no-pci --in-memory, static addressing. crescent <-> crescent
// echo, inline and batch dispatch, several connections, byte-exact.
//
// The zero-copy TX case asks the ring port what it can do (net_ring passes
// chained mbufs through, so the engines' header + extbuf chains reach the
// peer as they are and the peer linearizes them); the other echo cases set
// the capabilities by hand.
//
// Both engines are polled alternately from the test thread (poll_once), so the
// test is deterministic in its scheduling and needs one core.
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_gso.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <crescent/engine.hpp>
#include <crescent/zbuf.hpp>

#include "stack/engine/device.hpp"
#include "stack/engine/engine_impl.hpp"
#include "stack/engine/nexthop.hpp"
#include "tests/support/eal_cleanup.hpp"
#include "tests/support/echo_handlers.hpp"

using namespace crescent;
using crescent::engine::EthdevDevice;
using crescent::engine::StaticNextHop;

namespace {

struct Env {
    std::unique_ptr<zbuf::Arena> arena;
    rte_mempool* pool = nullptr;
    bool ok = false;
    bool eal = false;
    std::string error;
    Env() = default;
    Env(Env&&) = default;
    ~Env() {  // at exit: every engine and port of the test cases is gone by now
        arena.reset();
        if (pool) rte_mempool_free(pool);
        if (eal) crescent::test::eal_cleanup_with_run_dir();
    }
};

Env& env() {
    static Env e = [] {
        Env x;
        // --no-huge cannot go with --in-memory; --no-shconf keeps the run file-less.
        std::vector<std::string> args = {"engine_ring_test", "--no-huge", "--no-pci", "--no-shconf",
                                         "--file-prefix=engring" + std::to_string(getpid()),
                                         "-m", "256", "-l", "0", "--log-level=error", "--no-telemetry"};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        if (rte_eal_init(int(argv.size()), argv.data()) < 0) {
            x.error = "rte_eal_init failed";
            return x;
        }
        x.eal = true;
        x.pool = rte_pktmbuf_pool_create("eng_ring_pool", 16383, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
        if (!x.pool) {
            x.error = "mbuf pool";
            return x;
        }
        zbuf::Config zc;
        zc.backing = zbuf::Backing::Anonymous;
        zc.bytes = 128u << 20;
        x.arena = zbuf::Arena::create(zc, &x.error);
        x.ok = x.arena != nullptr;
        return x;
    }();
    return e;
}

bool start_port(uint16_t port, rte_mempool* pool) {
    rte_eth_conf conf{};
    if (rte_eth_dev_configure(port, 1, 1, &conf) != 0) return false;
    if (rte_eth_rx_queue_setup(port, 0, 1024, SOCKET_ID_ANY, nullptr, pool) != 0) return false;
    if (rte_eth_tx_queue_setup(port, 0, 1024, SOCKET_ID_ANY, nullptr) != 0) return false;
    return rte_eth_dev_start(port) == 0;
}

// A pair of ring ports, created once per test case with unique names.
struct RingPair {
    uint16_t a = 0, b = 0;
    bool ok = false;
    rte_ring* ab = nullptr;
    rte_ring* ba = nullptr;
    bool ports = false;
    explicit RingPair(int id) {
        std::string n = std::to_string(id);
        ab = rte_ring_create(("ab" + n).c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        ba = rte_ring_create(("ba" + n).c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (!ab || !ba) return;
        int pa = rte_eth_from_rings(("ringA" + n).c_str(), &ba, 1, &ab, 1, SOCKET_ID_ANY);
        int pb = rte_eth_from_rings(("ringB" + n).c_str(), &ab, 1, &ba, 1, SOCKET_ID_ANY);
        if (pa < 0 || pb < 0) return;
        ports = true;
        a = uint16_t(pa);
        b = uint16_t(pb);
        rte_ether_addr ma{{0x02, 0, 0, 0, 0, 0x0a}}, mb{{0x02, 0, 0, 0, 0, 0x0b}};
        ma.addr_bytes[4] = mb.addr_bytes[4] = uint8_t(id);
        rte_eth_dev_default_mac_addr_set(a, &ma);
        rte_eth_dev_default_mac_addr_set(b, &mb);
        ok = start_port(a, env().pool) && start_port(b, env().pool);
    }
    ~RingPair() {
        if (ports) {
            for (uint16_t p : {a, b}) {
                rte_eth_dev_stop(p);
                rte_eth_dev_close(p);
            }
        }
        // Frames still in flight between the engines go back to the pool.
        for (rte_ring* r : {ab, ba}) {
            if (!r) continue;
            void* m;
            while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
            rte_ring_free(r);
        }
    }
};

// A NIC's TX offloads done in software in front of a ring port: IPv4 and TCP
// checksums, and TSO by DPDK's GSO library, which reads the same mbuf contract
// a NIC does (RTE_MBUF_F_TX_TCP_SEG, tso_segsz, l2/l3/l4_len, the pseudo-header
// sum without length in the TCP checksum field).
class SoftTsoDevice final : public engine::Device {
public:
    // max_segs != 0: the device takes at most that many segments per frame
    // and per TSO request (as Intel NICs: 8); frames over it are counted.
    SoftTsoDevice(EthdevDevice& inner, rte_mempool* pool, uint16_t max_segs = 0) : inner_(inner) {
        caps_ = inner.caps();
        caps_.multi_segs = caps_.tx_ip_csum = caps_.tx_tcp_csum = caps_.tso = true;
        caps_.max_segs = caps_.max_tso_segs = max_segs;
        ctx_.direct_pool = pool;
        ctx_.indirect_pool = pool;
        ctx_.gso_types = RTE_ETH_TX_OFFLOAD_TCP_TSO;
        ctx_.flag = 0;
    }
    uint64_t requests = 0, pieces = 0, malformed = 0, ring_full = 0, over_max_segs = 0, max_nb_segs = 0;

    uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) override { return inner_.rx_burst(pkts, n); }
    uint16_t tx_burst(rte_mbuf** pkts, uint16_t n) override {
        for (uint16_t i = 0; i < n; ++i) {
            rte_mbuf* m = pkts[i];
            max_nb_segs = std::max<uint64_t>(max_nb_segs, m->nb_segs);
            if (caps_.max_segs != 0 && m->nb_segs > caps_.max_segs) ++over_max_segs;
            std::array<rte_mbuf*, 64> out{m};
            int k = 1;
            if (m->ol_flags & RTE_MBUF_F_TX_TCP_SEG) {
                ++requests;
                if (m->tso_segsz == 0 || m->l4_len < 20 || !(m->ol_flags & RTE_MBUF_F_TX_IP_CKSUM) ||
                    !(m->ol_flags & RTE_MBUF_F_TX_TCP_CKSUM) || m->pkt_len > 0xffffu + m->l2_len) {
                    ++malformed;
                    rte_pktmbuf_free(m);
                    continue;
                }
                ctx_.gso_size = uint16_t(m->l2_len + m->l3_len + m->l4_len + m->tso_segsz);
                k = rte_gso_segment(m, &ctx_, out.data(), uint16_t(out.size()));
                if (k < 0) {
                    ++malformed;
                    rte_pktmbuf_free(m);
                    continue;
                }
                if (k == 0) {  // it fit in one segment: goes as it is
                    out[0] = m;
                    k = 1;
                } else {
                    pieces += uint64_t(k);
                    rte_pktmbuf_free(m);  // the pieces hold their own references
                }
            }
            for (int j = 0; j < k; ++j) finish_checksums(out[size_t(j)]);
            uint16_t sent = inner_.tx_burst(out.data(), uint16_t(k));
            for (int j = sent; j < k; ++j) {
                ++ring_full;
                rte_pktmbuf_free(out[size_t(j)]);
            }
        }
        return n;
    }
    const engine::DeviceCaps& caps() const override { return caps_; }
    rte_mempool* tx_pool() override { return inner_.tx_pool(); }
    wire::MacAddr mac() const override { return inner_.mac(); }

private:
    static void finish_checksums(rte_mbuf* m) {
        auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, m->l2_len);
        if (m->ol_flags & RTE_MBUF_F_TX_IP_CKSUM) {
            ip->hdr_checksum = 0;
            ip->hdr_checksum = rte_ipv4_cksum(ip);
        }
        if (m->ol_flags & RTE_MBUF_F_TX_TCP_CKSUM) {
            auto* tcp = rte_pktmbuf_mtod_offset(m, rte_tcp_hdr*, m->l2_len + m->l3_len);
            tcp->cksum = 0;
            tcp->cksum = rte_ipv4_udptcp_cksum_mbuf(m, ip, uint16_t(m->l2_len + m->l3_len));
        }
        m->ol_flags &= ~(RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_L4_MASK | RTE_MBUF_F_TX_TCP_SEG);
    }
    EthdevDevice& inner_;
    engine::DeviceCaps caps_;
    rte_gso_ctx ctx_{};
};

wire::Ipv4Addr ip4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    return wire::Ipv4Addr{uint32_t(a) << 24 | uint32_t(b) << 16 | uint32_t(c) << 8 | d};
}

// Engines a (10.9.<id>.1) and b (.2) on devices da and db of one ring pair,
// each the other's static neighbour. Stays put: the params point at the next hops.
struct PairParams {
    PairParams(int id, engine::Device& da, engine::Device& db)
        : ipa(ip4(10, 9, uint8_t(id), 1)), ipb(ip4(10, 9, uint8_t(id), 2)), nh_a(ipa, 24, {{ipb, db.mac()}}),
          nh_b(ipb, 24, {{ipa, da.mac()}}) {
        a.ip = ipa;
        a.dev = &da;
        a.nexthop = &nh_a;
        a.arena = env().arena.get();
        b = a;
        b.ip = ipb;
        b.dev = &db;
        b.nexthop = &nh_b;
    }
    PairParams(const PairParams&) = delete;
    PairParams& operator=(const PairParams&) = delete;
    wire::Ipv4Addr ipa, ipb;
    StaticNextHop nh_a, nh_b;
    engine::EngineParams a, b;
};

struct Result {
    uint64_t completed = 0, mismatches = 0, client_abnormal = 0, server_abnormal = 0;
    uint64_t server_accepted = 0;
    std::string error;
    EngineStats sa, sb;
    bool timed_out = false;
    bool port_multi_segs = false;  // the ring port advertised RTE_ETH_TX_OFFLOAD_MULTI_SEGS
    uint64_t tso_requests = 0, tso_pieces = 0, tso_malformed = 0;  // SoftTso: both devices
    uint64_t over_max_segs = 0, max_nb_segs = 0;
};

enum class Caps {
    ByHand,       // fixed capabilities: software checksums, MULTI_SEGS on
    ByHandCopy,   // the same with MULTI_SEGS off (the engine copies every segment)
    ByHandCopySyscall, // ByHandCopy as AF_XDP: each TX burst a system call (frames taken one ahead)
    SoftTso,      // ByHand behind SoftTsoDevice: checksum offload and TSO
    SoftTso3Segs, // the same, with at most 3 segments per frame
    FromPort,     // EthdevDevice::query_caps of the ring port; test-only: MULTI_SEGS
                  // forced on if the PMD does not advertise it (net_ring moves
                  // chains untouched either way)
};

Result run_echo(int id, DispatchMode mode, unsigned conns, uint64_t bytes_per_conn, Caps how = Caps::ByHand,
                size_t chunk = 16 * 1024, bool own_objs = false) {
    Env& e = env();
    Result res;
    RingPair rp(id);
    REQUIRE(rp.ok);
    engine::DeviceCaps caps;  // ring PMD: no checksum offload; software checksums
    caps.mtu = 1500;
    caps.multi_segs = how != Caps::ByHandCopy && how != Caps::ByHandCopySyscall;
    caps.tx_syscall = how == Caps::ByHandCopySyscall;
    if (how == Caps::FromPort) {
        caps = EthdevDevice::query_caps(rp.a);
        res.port_multi_segs = caps.multi_segs;
        caps.multi_segs = true;
    }
    EthdevDevice dev_a(rp.a, 0, e.pool, caps), dev_b(rp.b, 0, e.pool, caps);
    std::unique_ptr<SoftTsoDevice> tso_a, tso_b;
    engine::Device* da = &dev_a;
    engine::Device* db = &dev_b;
    if (how == Caps::SoftTso || how == Caps::SoftTso3Segs) {
        const uint16_t max_segs = how == Caps::SoftTso3Segs ? 3 : 0;
        tso_a = std::make_unique<SoftTsoDevice>(dev_a, e.pool, max_segs);
        tso_b = std::make_unique<SoftTsoDevice>(dev_b, e.pool, max_segs);
        da = tso_a.get();
        db = tso_b.get();
    }
    PairParams pp(id, *da, *db);
    const wire::Ipv4Addr ipb = pp.ipb;
    for (engine::EngineParams* p : {&pp.a, &pp.b}) {
        p->cfg.mode = mode;
        p->secret = {0x1234u + uint64_t(id), 0x5678};
    }
    auto ea = engine::make_engine(pp.a);
    auto eb = engine::make_engine(pp.b);

    test::EchoServer server;
    test::StreamClient client;
    client.total = bytes_per_conn;
    client.chunk = chunk;
    client.own_objs = own_objs;
    REQUIRE(eb->listen(7, server) == ListenStatus::Ok);
    for (unsigned i = 0; i < conns; ++i) {
        Conn c;
        REQUIRE(ea->connect(Endpoint{Ipv4{ipb.v}, 7}, client, &c) == ConnectStatus::Ok);
        auto [lo, hi] = ea->client_ports();
        CHECK(c.local().port >= lo);
        CHECK(c.local().port <= hi);
        c.set_user(client.add(i * 17 + 3));
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (client.closed < conns || server.closed < conns) {
        ea->poll_once();
        eb->poll_once();
        if (std::chrono::steady_clock::now() > deadline) {
            res.timed_out = true;
            break;
        }
    }
    // Let the last frames in the rings (final ACKs) reach their engine, so
    // every TX chain is freed before the engines go.
    for (int i = 0; i < 100 && (rte_ring_count(rp.ab) != 0 || rte_ring_count(rp.ba) != 0); ++i) {
        ea->poll_once();
        eb->poll_once();
    }
    res.completed = client.completed;
    res.mismatches = client.mismatches;
    res.client_abnormal = client.closed_abnormal;
    res.server_abnormal = server.closed_abnormal;
    res.server_accepted = server.accepted;
    res.error = client.first_error;
    res.sa = ea->stats();
    res.sb = eb->stats();
    for (SoftTsoDevice* d : {tso_a.get(), tso_b.get()}) {
        if (!d) continue;
        res.tso_requests += d->requests;
        res.tso_pieces += d->pieces;
        res.tso_malformed += d->malformed;
        res.over_max_segs += d->over_max_segs;
        res.max_nb_segs = std::max(res.max_nb_segs, d->max_nb_segs);
    }
    return res;
}

void check(const Result& r, unsigned conns) {
    INFO("client error: " << r.error);
    CHECK_FALSE(r.timed_out);
    CHECK(r.completed == conns);
    CHECK(r.mismatches == 0);
    CHECK(r.client_abnormal == 0);
    CHECK(r.server_abnormal == 0);
    CHECK(r.server_accepted == conns);
    for (const EngineStats* s : {&r.sa, &r.sb}) {
        CHECK(s->rx_packets > 0);
        CHECK(s->tx_packets > 0);
        uint64_t parse_drops = 0;
        for (uint64_t d : s->parse_drops) parse_drops += d;
        CHECK(parse_drops == 0);
        CHECK(s->drop_no_route == 0);
        CHECK(s->drop_neigh_failed == 0);
        CHECK(s->tx_overflow == 0);
        CHECK(s->conns_opened == conns);
    }
}

} // namespace

TEST_CASE("engine: crescent <-> crescent echo over net_ring, inline mode", "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    Result r = run_echo(1, DispatchMode::Inline, 4, 2u << 20);
    check(r, 4);
}

TEST_CASE("engine: one RX iteration in kPhaseSampleEvery is timed, phase by phase", "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    Result r = run_echo(50, DispatchMode::Inline, 4, 2u << 20);
    check(r, 4);
    for (const EngineStats* s : {&r.sa, &r.sb}) {
        // The first iteration that receives frames is timed, then every
        // kPhaseSampleEvery-th: never more than that many of the busy ones.
        const uint64_t busy = s->loops - s->idle_loops;
        INFO("busy iterations " << busy << ", timed " << s->phase_samples);
        CHECK(s->phase_samples >= 1);
        CHECK(s->phase_samples <= busy / EngineStats::kPhaseSampleEvery + 1);
        uint64_t timed_ns = 0;
        for (uint64_t ns : s->phase_ns) timed_ns += ns;
        // The phases of the timed iterations, a sample of the busy ones: a
        // part of all the busy time (every iteration timed would be all of it).
        CHECK(s->phase_ns[size_t(0)] > 0);  // the poll that found frames
        CHECK(s->phase_ns[size_t(1)] > 0);  // frames parsed
        CHECK(s->phase_ns[size_t(2)] > 0);  // TCP's input
        CHECK(s->phase_ns[size_t(3)] > 0);  // the handlers
        CHECK(timed_ns < s->busy_ns);
        std::map<std::string, uint64_t> named;
        s->for_each([&](std::string_view k, uint64_t v) { named[std::string(k)] = v; });
        CHECK(named.at("phase_samples") == s->phase_samples);
        for (size_t i = 0; i < EngineStats::kPhases; ++i)
            CHECK(named.at("phase_" + std::string(EngineStats::phase_name(i)) + "_ns") == s->phase_ns[i]);
    }
    CHECK(EngineStats::phase_name(1) == "parse");
    CHECK(EngineStats::phase_name(3) == "app");
    CHECK(EngineStats::phase_name(EngineStats::kPhases) == "unknown");
}

TEST_CASE("engine: crescent <-> crescent echo over net_ring, batch mode", "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    Result r = run_echo(2, DispatchMode::Batch, 4, 2u << 20);
    check(r, 4);
}

TEST_CASE("engine: zero-copy TX chains over net_ring, inline echo, no zbuf leaked", "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    const uint64_t live_before = env().arena->stats().live_total();
    Result r = run_echo(5, DispatchMode::Inline, 2, 1u << 20, Caps::FromPort);
    check(r, 2);
    if (!r.port_multi_segs) WARN("net_ring does not advertise MULTI_SEGS: chained path forced for the test");
    for (const EngineStats* s : {&r.sa, &r.sb}) {
        // Every data segment went out as a chain, none copied.
        CHECK(s->tx_zero_copy_segments > 0);
        CHECK(s->tx_copied_segments == 0);
        CHECK(s->tx_no_mbuf == 0);
        // The peer received them chained and made them linear.
        CHECK(s->rx_linearized > 0);
        CHECK(s->rx_multiseg == 0);
    }
    // 2 x 1 MiB each way in MSS-sized segments at least.
    CHECK(r.sa.tx_zero_copy_segments >= 2 * (1u << 20) / 1460);
    CHECK(r.sb.tx_zero_copy_segments >= 2 * (1u << 20) / 1460);
    // Engines and ports are gone: every extbuf mbuf was freed and dropped
    // its reference on the send queue's obj.
    CHECK(env().arena->stats().live_total() == live_before);
}

TEST_CASE("engine: TSO requests a NIC (DPDK's GSO library) cuts correctly, zero-copy, no zbuf leaked",
          "[engine][ring][tso]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    const uint64_t live_before = env().arena->stats().live_total();
    Result r = run_echo(7, DispatchMode::Batch, 2, 4u << 20, Caps::SoftTso);
    check(r, 2);  // byte-exact, and every piece parsed with good checksums
    INFO("TSO requests " << r.tso_requests << " pieces " << r.tso_pieces);
    CHECK(r.tso_malformed == 0);
    CHECK(r.sa.tx_tso_requests + r.sb.tx_tso_requests == r.tso_requests);
    CHECK(r.tso_requests > 0);
    CHECK(r.tso_pieces > 2 * r.tso_requests);  // several MSS per request on average
    for (const EngineStats* s : {&r.sa, &r.sb}) {
        CHECK(s->tx_tso_requests > 0);
        CHECK(s->tx_copied_segments == 0);
        CHECK(s->rx_linearized > 0);  // GSO's pieces are chains (header + indirect payload)
    }
    CHECK(env().arena->stats().live_total() == live_before);
}

TEST_CASE("engine: a device's segments-per-frame limit bounds every zero-copy chain and TSO request",
          "[engine][ring][tso]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    const uint64_t live_before = env().arena->stats().live_total();
    // Inline echo: the server sends its RX slices back, so one TSO request
    // would span many of them without the limit.
    Result r = run_echo(8, DispatchMode::Inline, 2, 2u << 20, Caps::SoftTso3Segs);
    check(r, 2);
    INFO("largest frame: " << r.max_nb_segs << " segments");
    CHECK(r.over_max_segs == 0);
    CHECK(r.max_nb_segs == 3);  // the limit is used, not just respected
    for (const EngineStats* s : {&r.sa, &r.sb}) {
        CHECK(s->tx_copied_segments == 0);  // every segment fitted zero-copy, none fell back
        CHECK(s->tx_too_large == 0);
    }
    CHECK(r.tso_requests > 0);
    CHECK(r.tso_malformed == 0);
    CHECK(env().arena->stats().live_total() == live_before);
}

TEST_CASE("engine: payloads up to 128 B are copied behind the headers even on chaining devices (copy-break)",
          "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    Result r = run_echo(9, DispatchMode::Inline, 4, 100, Caps::FromPort);
    check(r, 4);
    for (const EngineStats* s : {&r.sa, &r.sb}) {
        CHECK(s->tx_copybreak_segments > 0);
        CHECK(s->tx_zero_copy_segments == 0);
        CHECK(s->tx_copied_segments == 0);
    }
}

TEST_CASE("engine: short views are copied into the TX chain, long ones attached", "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    const uint64_t live_before = env().arena->stats().live_total();
    // The client sends 200 B slices (below kTxAttachMin), each in an obj of
    // its own: a segment spans several of them and each frame carries them
    // as copies in its direct segments; the server echoes its RX slices (a
    // full segment's payload, >= 512 B), which travel attached.
    Result r = run_echo(12, DispatchMode::Inline, 2, 256u << 10, Caps::ByHand, 200, true);
    check(r, 2);
    CHECK(r.sa.tx_zero_copy_segments > 0);
    CHECK(r.sa.tx_copied_views > 0);
    CHECK(r.sb.tx_zero_copy_segments > 0);
    // A segment of 200 B views is at most 1460 / 200 + 1 = 8 views; copied
    // into one direct segment behind the headers (a 2 KiB mbuf holds a full
    // segment), so every view of a client segment was copied.
    CHECK(r.sa.tx_copied_views >= r.sa.tx_zero_copy_segments);
    CHECK(r.sa.tx_copied_segments == 0);
    CHECK(r.sb.tx_copied_segments == 0);
    CHECK(env().arena->stats().live_total() == live_before);
}

TEST_CASE("engine: small send_copy() writes are packed into one obj and travel as one attached view",
          "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    const uint64_t live_before = env().arena->stats().live_total();
    // The same 200 B writes by copy: each continues the last one's obj and
    // the send queue widens its tail over them, so a segment is one view (two
    // where it crosses into the next obj) of >= 512 B mostly, attached; an obj
    // of its own per write would make every segment ~8 copied views.
    Result r = run_echo(13, DispatchMode::Inline, 2, 256u << 10, Caps::ByHand, 200);
    check(r, 2);
    INFO("client: " << r.sa.tx_zero_copy_segments << " zero-copy segments, " << r.sa.tx_copied_views
                    << " views copied");
    CHECK(r.sa.tx_zero_copy_segments > 0);
    CHECK(r.sa.tx_copied_views < r.sa.tx_zero_copy_segments);
    CHECK(r.sa.tx_copied_segments == 0);
    CHECK(env().arena->stats().live_total() == live_before);
}

TEST_CASE("engine: devices without MULTI_SEGS get one copied frame per segment", "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    const uint64_t live_before = env().arena->stats().live_total();
    Result r = run_echo(6, DispatchMode::Inline, 2, 256u << 10, Caps::ByHandCopy);
    check(r, 2);
    for (const EngineStats* s : {&r.sa, &r.sb}) {
        CHECK(s->tx_zero_copy_segments == 0);
        CHECK(s->tx_copied_segments > 0);
        CHECK(s->rx_linearized == 0);
    }
    CHECK(env().arena->stats().live_total() == live_before);
}

// On AF_XDP (DeviceCaps::tx_syscall) each frame's mbuf is taken from the pool
// one frame before it is built (EngineImpl::alloc_frame): every frame must
// still be the segment's, byte for byte, and the spare an engine holds when
// it goes must be given back.
TEST_CASE("engine: frames taken one ahead (AF_XDP's TX) carry every byte and give every mbuf back",
          "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    const uint64_t live_before = env().arena->stats().live_total();
    const unsigned mbufs_before = rte_mempool_avail_count(env().pool);
    Result r = run_echo(18, DispatchMode::Inline, 3, 512u << 10, Caps::ByHandCopySyscall, 3000);
    check(r, 3);
    for (const EngineStats* s : {&r.sa, &r.sb}) {
        CHECK(s->tx_zero_copy_segments == 0);
        CHECK(s->tx_copied_segments > 0);
        CHECK(s->tx_no_mbuf == 0);
    }
    CHECK(env().arena->stats().live_total() == live_before);
    CHECK(rte_mempool_avail_count(env().pool) == mbufs_before);
}

TEST_CASE("engine: small messages 1 byte .. 64 KiB, inline", "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    for (uint64_t size : {1ull, 7ull, 1460ull, 1461ull, 65536ull}) {
        Result r = run_echo(int(10 + size % 200), DispatchMode::Inline, 1, size);
        check(r, 1);
    }
}

TEST_CASE("engine: connect to a closed port is refused", "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    Env& e = env();
    RingPair rp(3);
    REQUIRE(rp.ok);
    engine::DeviceCaps caps;
    EthdevDevice dev_a(rp.a, 0, e.pool, caps), dev_b(rp.b, 0, e.pool, caps);
    PairParams pp(3, dev_a, dev_b);
    const wire::Ipv4Addr ipb = pp.ipb;
    auto ea = engine::make_engine(pp.a);
    auto eb = engine::make_engine(pp.b);

    struct H : Handler {
        int closed = 0;
        CloseReason why{};
        void on_closed(Conn, CloseReason w) override { ++closed, why = w; }
    } h;
    Conn c;
    REQUIRE(ea->connect(Endpoint{Ipv4{ipb.v}, 9}, h, &c) == ConnectStatus::Ok);
    // No route outside the static subnet.
    Conn c2;
    CHECK(ea->connect(Endpoint{Ipv4{ip4(192, 0, 2, 1).v}, 9}, h, &c2) == ConnectStatus::NoRoute);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (h.closed == 0 && std::chrono::steady_clock::now() < deadline) {
        ea->poll_once();
        eb->poll_once();
    }
    CHECK(h.closed == 1);
    CHECK(h.why == CloseReason::Refused);
    CHECK_FALSE(c.valid());
    CHECK(eb->stats().tcp_rst_sent >= 1);
}

TEST_CASE("engine: app timers fire on the wheel, in order, and can be cancelled; event_time()", "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    Env& e = env();
    RingPair rp(4);
    REQUIRE(rp.ok);
    engine::DeviceCaps caps;
    EthdevDevice dev(rp.a, 0, e.pool, caps);
    StaticNextHop nh(ip4(10, 9, 4, 1), 24, {});
    engine::EngineParams p;
    p.ip = ip4(10, 9, 4, 1);
    p.dev = &dev;
    p.nexthop = &nh;
    p.arena = e.arena.get();
    auto en = engine::make_engine(p);
    std::vector<int> order;
    const Instant t0 = en->now();
    // event_time() inside the loop: the poll's time, not a fresh read.
    Instant loop_at_3{}, event_at_3{};
    en->add_timer(std::chrono::milliseconds(3), [&] {
        order.push_back(3);
        loop_at_3 = en->loop_time();
        event_at_3 = en->event_time();
    });
    en->add_timer(std::chrono::milliseconds(1), [&] { order.push_back(1); });
    TimerId t2 = en->add_timer(std::chrono::milliseconds(2), [&] { order.push_back(2); });
    CHECK(en->cancel_timer(t2));
    CHECK_FALSE(en->cancel_timer(t2));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (order.size() < 2 && std::chrono::steady_clock::now() < deadline) en->poll_once();
    CHECK(order == std::vector<int>{1, 3});
    CHECK(en->stats().timers_fired == 2);
    // loop_time(): the last poll's start, at least 3 ms (the last timer) after t0, not ahead of now.
    CHECK(en->loop_time() - t0 >= std::chrono::milliseconds(3));
    CHECK(en->loop_time() <= en->now());
    CHECK(event_at_3 == loop_at_3);
    // Outside the loop (between poll_once() calls): the clock.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const Instant before = en->now();
    const Instant ev = en->event_time();
    CHECK(ev >= before);
    CHECK(ev - en->loop_time() >= std::chrono::milliseconds(2));
}

TEST_CASE("engine: counters are published for other threads every stats_interval", "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    Env& e = env();
    RingPair rp(60);  // the other tests take ids 1-18, 40-50, 70, 71 and 146
    REQUIRE(rp.ok);
    engine::DeviceCaps caps;
    EthdevDevice dev_a(rp.a, 0, e.pool, caps), dev_b(rp.b, 0, e.pool, caps);
    StaticNextHop nh_a(ip4(10, 9, 60, 1), 24, {}), nh_b(ip4(10, 9, 60, 2), 24, {});
    auto make = [&](EthdevDevice& dev, StaticNextHop& nh, wire::Ipv4Addr ip, Duration every) {
        engine::EngineParams p;
        p.ip = ip;
        p.dev = &dev;
        p.nexthop = &nh;
        p.arena = e.arena.get();
        p.cfg.stats_interval = every;
        return engine::make_engine(p);
    };
    // One engine publishing every 20 ms, one every hour (the first publication
    // is on its first iteration), polled for ~150 ms.
    auto fast = make(dev_a, nh_a, ip4(10, 9, 60, 1), std::chrono::milliseconds(20));
    auto slow = make(dev_b, nh_b, ip4(10, 9, 60, 2), std::chrono::hours(1));
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
    while (std::chrono::steady_clock::now() < end) {
        fast->poll_once();
        slow->poll_once();
    }
    engine::EngineSnapshot sf, ss;
    REQUIRE(fast->impl().publisher().engine(&sf));
    REQUIRE(slow->impl().publisher().engine(&ss));
    // 150 ms / 20 ms: the first publication and about 7 more (a loaded machine may
    // stretch an iteration, never shorten the interval).
    CHECK(sf.seq >= 3);
    CHECK(sf.seq <= 9);
    CHECK(ss.seq == 1);
    // The slow engine's copy is of its first iteration; the fast one's of a later one.
    CHECK(ss.stats.loops == 1);
    CHECK(sf.stats.loops > 1);
}

namespace {

// Counts the TX bursts an engine makes, in front of a ring port.
class CountingDevice final : public engine::Device {
public:
    explicit CountingDevice(engine::Device& inner) : inner_(inner) {}
    uint64_t tx_calls = 0;
    uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) override { return inner_.rx_burst(pkts, n); }
    uint16_t tx_burst(rte_mbuf** pkts, uint16_t n) override {
        ++tx_calls;
        return inner_.tx_burst(pkts, n);
    }
    const engine::DeviceCaps& caps() const override { return inner_.caps(); }
    rte_mempool* tx_pool() override { return inner_.tx_pool(); }
    wire::MacAddr mac() const override { return inner_.mac(); }

private:
    engine::Device& inner_;
};

struct OneBurst {
    uint64_t tx_calls = 0;       // the echo server's TX bursts while it handled one RX burst
    uint64_t early_flushes = 0;  // of which sent before the burst's end
    std::string echoed;          // what came back, in order
};

// Keeps what arrives and answers nothing: the client, and the sink server
// (whose consumption only opens the window).
struct Collector : Handler {
    Conn conn;
    uint64_t connected = 0;
    std::string got;
    void on_connected(Conn c) override {
        conn = c;
        ++connected;
    }
    void on_data(Conn, std::span<Slice> data) override {
        for (const Slice& s : data) got.append(reinterpret_cast<const char*>(s.data()), s.size());
    }
};

// Four 100-byte messages, each sent in its own client iteration, wait in the
// server's RX ring and reach it in one burst; the server echoes each as it
// comes (inline) or after the burst (batch), or with `echo` false only
// takes them (a sink).
OneBurst four_segments_one_burst(int id, DispatchMode mode, std::optional<Duration> flush_after, bool echo = true) {
    Env& e = env();
    OneBurst r;
    RingPair rp(id);
    REQUIRE(rp.ok);
    engine::DeviceCaps caps;
    caps.mtu = 1500;
    EthdevDevice dev_a(rp.a, 0, e.pool, caps), dev_b(rp.b, 0, e.pool, caps);
    CountingDevice counted_b(dev_b);
    PairParams pp(id, dev_a, counted_b);
    const wire::Ipv4Addr ipb = pp.ipb;
    pp.b.cfg.mode = mode;
    pp.b.cfg.burst_flush_after = flush_after;
    auto ea = engine::make_engine(pp.a);
    auto eb = engine::make_engine(pp.b);

    test::EchoServer server;
    Collector sink, client;
    Handler& served = echo ? static_cast<Handler&>(server) : static_cast<Handler&>(sink);
    auto accepted = [&] { return echo ? server.accepted : sink.connected; };
    REQUIRE(eb->listen(7, served) == ListenStatus::Ok);
    Conn c;
    REQUIRE(ea->connect(Endpoint{Ipv4{ipb.v}, 7}, client, &c) == ConnectStatus::Ok);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((!client.conn.valid() || accepted() == 0) && std::chrono::steady_clock::now() < deadline) {
        ea->poll_once();
        eb->poll_once();
    }
    REQUIRE(client.conn.valid());
    REQUIRE(rte_ring_count(rp.ab) == 0);
    std::string sent;
    for (char k = 'a'; k < 'e'; ++k) {
        std::string m(100, k);
        REQUIRE(client.conn.send_copy(m) == SendStatus::Ok);
        sent += m;
        ea->poll_once();
    }
    REQUIRE(rte_ring_count(rp.ab) == 4);
    const uint64_t calls0 = counted_b.tx_calls, early0 = eb->stats().tx_early_flushes;
    eb->poll_once();
    r.tx_calls = counted_b.tx_calls - calls0;
    r.early_flushes = eb->stats().tx_early_flushes - early0;
    if (echo) {
        while (client.got.size() < sent.size() && std::chrono::steady_clock::now() < deadline) {
            ea->poll_once();
            eb->poll_once();
        }
        r.echoed = client.got;
        CHECK(r.echoed == sent);
    } else {
        CHECK(sink.got == sent);
    }
    client.conn.abort();
    for (int i = 0; i < 100; ++i) {
        ea->poll_once();
        eb->poll_once();
    }
    return r;
}

} // namespace

TEST_CASE("engine: output made during a burst goes out before the burst's end (burst_flush_after)",
          "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    SECTION("0: each echo leaves before the next segment is handled") {
        OneBurst r = four_segments_one_burst(40, DispatchMode::Inline, Duration::zero());
        CHECK(r.early_flushes == 3);  // after segments 1-3; the 4th's echo leaves at the end
        CHECK(r.tx_calls == 4);
    }
    SECTION("max: all four echoes leave together at the burst's end") {
        OneBurst r = four_segments_one_burst(41, DispatchMode::Inline, Duration::max());
        CHECK(r.early_flushes == 0);
        CHECK(r.tx_calls == 1);
    }
    SECTION("data taken but not answered is no output: nothing leaves before the burst's end") {
        // The consumption may make a window update due; like an ACK it waits
        // for the burst's end (at most one TX burst: the held ACK).
        OneBurst r = four_segments_one_burst(43, DispatchMode::Inline, Duration::zero(), false);
        CHECK(r.early_flushes == 0);
        CHECK(r.tx_calls <= 1);
    }
    SECTION("batch mode answers after the burst whatever the setting") {
        OneBurst r = four_segments_one_burst(42, DispatchMode::Batch, Duration::zero());
        CHECK(r.early_flushes == 0);
        CHECK(r.tx_calls == 1);
    }
}

namespace {

// Answers each delivery with two sends ("A", then "B" + the data) and then
// Conn::send_now(), noting the engine's TX bursts around each step.
struct TwoReplies : Handler {
    CountingDevice* dev = nullptr;
    Conn conn;
    uint64_t accepted = 0, deliveries = 0;
    uint64_t during_sends = 0;     // TX bursts made inside the two send()s
    uint64_t during_send_now = 0;  // ... inside send_now()
    uint64_t send_now_true = 0;    // send_now() calls that said frames left
    void on_connected(Conn c) override {
        conn = c;
        ++accepted;
    }
    void on_data(Conn c, std::span<Slice> data) override {
        std::string in;
        for (const Slice& s : data) in.append(reinterpret_cast<const char*>(s.data()), s.size());
        answer(c, in);
    }
    void on_readable(Conn c) override {  // batch mode
        char buf[4096];
        size_t n = c.read(buf, sizeof buf);
        answer(c, std::string(buf, n));
    }
    void answer(Conn c, const std::string& in) {
        ++deliveries;
        const uint64_t t0 = dev->tx_calls;
        CHECK(c.send_copy(std::string("A")) == SendStatus::Ok);
        CHECK(c.send_copy("B" + in) == SendStatus::Ok);
        const uint64_t t1 = dev->tx_calls;
        send_now_true += c.send_now() ? 1 : 0;
        during_sends += t1 - t0;
        during_send_now += dev->tx_calls - t1;
    }
};

struct AtOnce {
    uint64_t deliveries = 0;
    uint64_t during_sends = 0, during_send_now = 0, send_now_true = 0;  // TwoReplies'
    uint64_t tx_calls = 0, tx_packets = 0;  // the server's, while it handled the burst
    uint64_t sent_now = 0;                  // EngineStats::tx_sent_now
    std::string got;                        // what the client received
};

// `frames` messages of 100 bytes, from `conns` client connections in turn, wait
// in the server's RX ring and reach it in one burst; the server answers each
// delivery with two sends and send_now().
AtOnce replies_to_one_burst(int id, bool at_once, DispatchMode mode, int frames, int conns = 1) {
    Env& e = env();
    AtOnce r;
    RingPair rp(id);
    REQUIRE(rp.ok);
    engine::DeviceCaps caps;
    caps.mtu = 1500;
    EthdevDevice dev_a(rp.a, 0, e.pool, caps), dev_b(rp.b, 0, e.pool, caps);
    CountingDevice counted_b(dev_b);
    PairParams pp(id, dev_a, counted_b);
    pp.b.cfg.mode = mode;
    pp.b.cfg.reply_at_once = at_once;
    pp.b.cfg.burst_flush_after = Duration::max();  // earlier frames' output waits for the burst's end
    auto ea = engine::make_engine(pp.a);
    auto eb = engine::make_engine(pp.b);
    TwoReplies server;
    server.dev = &counted_b;
    std::vector<Collector> clients(static_cast<size_t>(conns));
    REQUIRE(eb->listen(7, server) == ListenStatus::Ok);
    for (Collector& cl : clients) {
        Conn c;
        REQUIRE(ea->connect(Endpoint{Ipv4{pp.ipb.v}, 7}, cl, &c) == ConnectStatus::Ok);
    }
    auto all = [&](auto pred) {
        for (const Collector& cl : clients)
            if (!pred(cl)) return false;
        return true;
    };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((!all([](const Collector& cl) { return cl.conn.valid(); }) || server.accepted < uint64_t(conns)) &&
           std::chrono::steady_clock::now() < deadline) {
        ea->poll_once();
        eb->poll_once();
    }
    REQUIRE(all([](const Collector& cl) { return cl.conn.valid(); }));
    for (int i = 0; i < 10; ++i) {  // the handshake's last ACKs settle: the burst below is the messages
        ea->poll_once();
        eb->poll_once();
    }
    REQUIRE(rte_ring_count(rp.ab) == 0);
    std::vector<std::string> expect(static_cast<size_t>(conns));
    for (int k = 0; k < frames; ++k) {
        std::string m(100, char('a' + k));
        REQUIRE(clients[size_t(k % conns)].conn.send_copy(m) == SendStatus::Ok);
        ea->poll_once();
        expect[size_t(k % conns)] += "AB" + m;
    }
    REQUIRE(rte_ring_count(rp.ab) == size_t(frames));
    const uint64_t calls0 = counted_b.tx_calls, packets0 = eb->stats().tx_packets, now0 = eb->stats().tx_sent_now;
    eb->poll_once();
    r.tx_calls = counted_b.tx_calls - calls0;
    r.tx_packets = eb->stats().tx_packets - packets0;
    r.sent_now = eb->stats().tx_sent_now - now0;
    r.deliveries = server.deliveries;
    r.during_sends = server.during_sends;
    r.during_send_now = server.during_send_now;
    r.send_now_true = server.send_now_true;
    auto all_answered = [&] {
        for (size_t k = 0; k < clients.size(); ++k)
            if (clients[k].got.size() < expect[k].size()) return false;
        return true;
    };
    while (!all_answered() && std::chrono::steady_clock::now() < deadline) {
        ea->poll_once();
        eb->poll_once();
    }
    for (size_t k = 0; k < clients.size(); ++k) {
        r.got += clients[k].got;
        if (frames == conns || mode == DispatchMode::Inline) CHECK(clients[k].got == expect[k]);
    }
    for (Collector& cl : clients) cl.conn.abort();
    for (int i = 0; i < 100; ++i) {
        ea->poll_once();
        eb->poll_once();
    }
    return r;
}

} // namespace

TEST_CASE("engine: Conn::send_now() sends the last frame's replies from inside the callback (reply_at_once)",
          "[engine][ring]") {
    REQUIRE(env().ok);
    zbuf::CoreScope core(0);
    SECTION("on (the default): both replies are on the wire before send_now() returns") {
        AtOnce r = replies_to_one_burst(44, true, DispatchMode::Inline, 1);
        CHECK(r.deliveries == 1);
        CHECK(r.during_sends == 0);
        CHECK(r.during_send_now == 1);
        CHECK(r.send_now_true == 1);
        CHECK(r.sent_now == 1);
        CHECK(r.tx_calls == 1);
        // One frame for both replies and the ACK of the request: none follows it.
        CHECK(r.tx_packets == 1);
    }
    SECTION("off: send_now() does nothing, the replies leave after the callback") {
        AtOnce r = replies_to_one_burst(45, false, DispatchMode::Inline, 1);
        CHECK(r.during_send_now == 0);
        CHECK(r.send_now_true == 0);
        CHECK(r.sent_now == 0);
        CHECK(r.tx_calls == 1);
        CHECK(r.tx_packets == 1);
    }
    SECTION("a burst of three frames: only the last one's send_now() acts, and takes all the replies") {
        AtOnce r = replies_to_one_burst(46, true, DispatchMode::Inline, 3);
        CHECK(r.deliveries == 3);
        CHECK(r.during_send_now == 1);
        CHECK(r.send_now_true == 1);
        CHECK(r.sent_now == 1);
        CHECK(r.tx_calls == 1);  // nothing was left for the end of the burst
    }
    SECTION("two connections' frames in one burst: the last one's send_now() takes the other's replies too") {
        AtOnce r = replies_to_one_burst(48, true, DispatchMode::Inline, 2, 2);
        CHECK(r.deliveries == 2);
        CHECK(r.during_send_now == 1);
        CHECK(r.sent_now == 1);
        CHECK(r.tx_calls == 1);  // one TX burst for both: nothing left for the end of the iteration
        CHECK(r.tx_packets == 2);
    }
    SECTION("batch mode calls back after the burst: send_now() does nothing") {
        AtOnce r = replies_to_one_burst(47, true, DispatchMode::Batch, 1);
        CHECK(r.deliveries == 1);
        CHECK(r.during_send_now == 0);
        CHECK(r.sent_now == 0);
        CHECK(r.tx_calls == 1);
    }
}

TEST_CASE("engine: a negative burst_flush_after is refused, naming the field", "[engine]") {
    EngineConfig c;
    std::string err;
    CHECK(check_engine_config(c, &err));
    c.burst_flush_after = Duration::max();
    CHECK(check_engine_config(c, &err));
    c.burst_flush_after = std::chrono::nanoseconds(-1);
    CHECK_FALSE(check_engine_config(c, &err));
    CHECK(err.find("burst_flush_after") != std::string::npos);
}
