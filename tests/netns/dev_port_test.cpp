// crescent — stack/dev Port/Queue on DPDK's net_ring PMD (TX loops back to RX).
//
// Checks what the af_xdp tests cannot force: a TX ring that fills up keeps
// the unsent tail, in order, for the next flush (never dropped, counted); a
// full batch refuses with Full and the caller keeps the mbuf; linearize copies
// a chain byte-exactly with its offload metadata; EAL mode start-up.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "stack/dev/runtime.hpp"
#include "zbuf/dpdk.hpp"

namespace dev = crescent::dev;

namespace {

struct Env {
    std::unique_ptr<dev::Runtime> rt;
    dev::Port* port = nullptr;
    std::string error;
    std::unique_ptr<crescent::zbuf::Arena> arena; // for the zbuf-backed port (net_ring1)
    ~Env() {
        // Ports (their pools) -> arena -> EAL.
        if (rt) rt->close_ports();
        arena.reset();
    }
};

// EAL starts once per process: one Runtime for every test case.
void start_env(Env& x) {
    dev::RuntimeConfig cfg;
    cfg.mode = dev::RuntimeConfig::Mode::Eal;
    for (const char* a : {"--no-pci", "--no-huge", "-m", "512", "--vdev=net_ring0", "--vdev=net_ring1",
                          "--no-telemetry"})
        cfg.eal_args.emplace_back(a);
    cfg.cores = "0";
    cfg.handle_signals = false;
    if (dev::Status st = dev::Runtime::start(cfg, &x.rt); !st.ok()) {
        x.error = st.message();
        return;
    }
    dev::PortConfig pc;
    pc.rx_desc = 256;
    pc.tx_desc = 256;
    pc.tx_pool_size = 8192;
    pc.tx_batch = 6000;
    if (dev::Status st = x.rt->open_port(x.rt->default_port(), pc, &x.port); !st.ok()) x.error = st.message();
}

// EAL starts once per process: one Runtime for every test case.
Env& env() {
    static Env e;
    static bool started = (start_env(e), true);
    (void)started;
    INFO(e.error);
    REQUIRE(e.rt != nullptr);
    return e;
}

dev::Port& port0() {
    Env& e = env();
    INFO(e.error);
    REQUIRE(e.port != nullptr);
    return *e.port;
}

// A frame carrying `seq` at offset 14 (after a dummy Ethernet header).
rte_mbuf* make_frame(dev::Queue& q, uint32_t seq, uint16_t len = 64) {
    rte_mbuf* m = q.alloc_tx();
    REQUIRE(m != nullptr);
    char* d = rte_pktmbuf_append(m, len);
    REQUIRE(d != nullptr);
    std::memset(d, 0xab, len);
    std::memcpy(d + 14, &seq, sizeof(seq));
    return m;
}

uint32_t frame_seq(const rte_mbuf* m) {
    uint32_t s;
    std::memcpy(&s, rte_pktmbuf_mtod(m, const char*) + 14, sizeof(s));
    return s;
}

// Drain RX, appending sequence numbers; bounded by `max_polls` empty polls.
void drain(dev::Queue& q, std::vector<uint32_t>* seqs, int max_polls = 100) {
    rte_mbuf* pkts[64];
    for (int idle = 0; idle < max_polls;) {
        uint16_t n = q.rx_burst(pkts, 64);
        if (n == 0) { idle++; continue; }
        for (uint16_t i = 0; i < n; i++) {
            seqs->push_back(frame_seq(pkts[i]));
            rte_pktmbuf_free(pkts[i]);
        }
    }
}

} // namespace

TEST_CASE("dev: EAL mode brings up net_ring with its capabilities", "[dev]") {
    Env& e = env();
    dev::Port& p = port0();
    CHECK(p.driver() == "net_ring");
    CHECK(p.mtu() > 0);
    CHECK(p.queue_count() == 1);
    CHECK(p.link().up);
    CHECK(e.rt->steering() == nullptr); // no XDP in EAL mode
}

TEST_CASE("dev: frames sent are received (net_ring loops TX to RX) and counted", "[dev]") {
    dev::Queue& q = port0().queue(0);
    auto before = q.stats();
    for (uint32_t i = 0; i < 10; i++) REQUIRE(q.tx_enqueue(make_frame(q, i)) == dev::TxResult::Queued);
    CHECK(q.tx_pending() == 10);
    CHECK(q.flush() == 10);
    CHECK(q.tx_pending() == 0);
    std::vector<uint32_t> seqs;
    drain(q, &seqs);
    REQUIRE(seqs.size() == 10);
    for (uint32_t i = 0; i < 10; i++) CHECK(seqs[i] == i);
    CHECK(q.stats().tx_packets - before.tx_packets == 10);
    CHECK(q.stats().tx_bytes - before.tx_bytes == 640);
    CHECK(q.stats().rx_packets - before.rx_packets == 10);
}

TEST_CASE("dev: a full TX ring keeps the tail in order for the next flush", "[dev]") {
    dev::Queue& q = port0().queue(0);
    auto before = q.stats();
    const uint32_t n = 5000; // more than the PMD ring holds
    for (uint32_t i = 0; i < n; i++) REQUIRE(q.tx_enqueue(make_frame(q, i)) == dev::TxResult::Queued);
    uint16_t sent = q.flush();
    CHECK(sent < n);
    CHECK(q.tx_pending() == n - sent);
    CHECK(q.stats().tx_full_retries == before.tx_full_retries + 1);
    std::vector<uint32_t> seqs;
    // Alternate: drain what arrived, flush the tail; bounded.
    for (int round = 0; round < 100 && seqs.size() < n; round++) {
        drain(q, &seqs, 3);
        q.flush();
    }
    REQUIRE(seqs.size() == n);
    for (uint32_t i = 0; i < n; i++) REQUIRE(seqs[i] == i);
    CHECK(q.tx_pending() == 0);
    CHECK(q.stats().tx_packets - before.tx_packets == n);
}

TEST_CASE("dev: a full batch refuses with Full and the caller keeps the mbuf", "[dev]") {
    dev::Queue& q = port0().queue(0);
    auto before = q.stats();
    // Fill the device ring and the batch.
    uint32_t queued = 0;
    dev::TxResult r = dev::TxResult::Queued;
    rte_mbuf* refused = nullptr;
    for (uint32_t i = 0; i < 20000; i++) {
        rte_mbuf* m = make_frame(q, i);
        r = q.tx_enqueue(m);
        if (r != dev::TxResult::Queued) {
            refused = m;
            break;
        }
        queued++;
    }
    REQUIRE(r == dev::TxResult::Full);
    CHECK(q.tx_pending() == q.tx_capacity());
    CHECK(q.stats().tx_backpressure == before.tx_backpressure + 1);
    CHECK(rte_mbuf_refcnt_read(refused) == 1); // still ours, intact
    rte_pktmbuf_free(refused);
    std::vector<uint32_t> seqs;
    for (int round = 0; round < 200 && seqs.size() < queued; round++) {
        drain(q, &seqs, 3);
        q.flush();
    }
    CHECK(seqs.size() == queued);
    CHECK(q.tx_pending() == 0);
}

TEST_CASE("dev: linearize copies a chain into one mbuf with its offload metadata", "[dev]") {
    dev::Queue& q = port0().queue(0);
    auto before = q.stats();
    rte_mbuf* h = q.alloc_tx();
    rte_mbuf* p1 = q.alloc_tx();
    rte_mbuf* p2 = q.alloc_tx();
    REQUIRE((h && p1 && p2));
    std::string a(54, 'h'), b(1000, 'x'), c(300, 'y');
    std::memcpy(rte_pktmbuf_append(h, uint16_t(a.size())), a.data(), a.size());
    std::memcpy(rte_pktmbuf_append(p1, uint16_t(b.size())), b.data(), b.size());
    std::memcpy(rte_pktmbuf_append(p2, uint16_t(c.size())), c.data(), c.size());
    REQUIRE(rte_pktmbuf_chain(h, p1) == 0);
    REQUIRE(rte_pktmbuf_chain(h, p2) == 0);
    bool ip_sw = false;
    dev::Offloads off;
    off.tx_tcp_csum = true;
    CHECK(dev::set_tx_offload(h, off, 14, 20, 20, 0, &ip_sw) == crescent::wire::CsumMode::PseudoOnly);
    CHECK(ip_sw);
    rte_mbuf* flat = q.linearize(h);
    REQUIRE(flat != nullptr);
    CHECK(flat->nb_segs == 1);
    REQUIRE(rte_pktmbuf_pkt_len(flat) == a.size() + b.size() + c.size());
    std::string got(rte_pktmbuf_mtod(flat, const char*), rte_pktmbuf_data_len(flat));
    CHECK(got == a + b + c);
    CHECK((flat->ol_flags & RTE_MBUF_F_TX_TCP_CKSUM) != 0);
    CHECK(flat->l2_len == 14);
    CHECK(flat->l3_len == 20);
    CHECK(flat->l4_len == 20);
    CHECK(q.stats().linearized == before.linearized + 1);
    rte_pktmbuf_free(flat);

    // Larger than one mbuf: refused, chain untouched and still the caller's.
    rte_mbuf* big = q.alloc_tx();
    REQUIRE(big != nullptr);
    uint16_t room = rte_pktmbuf_tailroom(big);
    REQUIRE(rte_pktmbuf_append(big, room) != nullptr);
    rte_mbuf* more = q.alloc_tx();
    REQUIRE(rte_pktmbuf_append(more, 100) != nullptr);
    REQUIRE(rte_pktmbuf_chain(big, more) == 0);
    CHECK(q.linearize(big) == nullptr);
    CHECK(q.stats().linearize_too_big == before.linearize_too_big + 1);
    CHECK(big->nb_segs == 2);
    rte_pktmbuf_free(big);
}

TEST_CASE("dev: TX offload flags follow what the port has", "[dev]") {
    dev::Queue& q = port0().queue(0);
    rte_mbuf* m = q.alloc_tx();
    REQUIRE(m != nullptr);
    bool ip_sw = false;
    dev::Offloads none;
    CHECK(dev::set_tx_offload(m, none, 14, 20, 32, 1448, &ip_sw) == crescent::wire::CsumMode::Full);
    CHECK(ip_sw);
    CHECK((m->ol_flags & RTE_MBUF_F_TX_OFFLOAD_MASK) == 0);
    dev::Offloads all;
    all.tx_ipv4_csum = all.tx_tcp_csum = all.tso = all.multi_segs = true;
    CHECK(dev::set_tx_offload(m, all, 14, 20, 32, 1448, &ip_sw) == crescent::wire::CsumMode::PseudoOnly);
    CHECK_FALSE(ip_sw);
    CHECK((m->ol_flags & RTE_MBUF_F_TX_TCP_SEG) != 0);
    CHECK((m->ol_flags & RTE_MBUF_F_TX_IP_CKSUM) != 0);
    CHECK(m->tso_segsz == 1448);
    rte_pktmbuf_free(m);
}

TEST_CASE("dev: a second EAL start in one process is refused cleanly", "[dev]") {
    (void)env();
    dev::RuntimeConfig cfg;
    cfg.mode = dev::RuntimeConfig::Mode::Eal;
    for (const char* a : {"--no-pci", "--no-huge"}) cfg.eal_args.emplace_back(a);
    std::unique_ptr<dev::Runtime> rt2;
    dev::Status st = dev::Runtime::start(cfg, &rt2);
    CHECK(st.code() == dev::Errc::AlreadyStarted);
    CHECK(rt2 == nullptr);
    CHECK(st.message().rfind("crescent: ", 0) == 0);
}

TEST_CASE("dev: with rx_arena, RX mbufs are zbuf objs and become Slices", "[dev]") {
    Env& e = env();
    uint16_t pid = 0;
    REQUIRE(rte_eth_dev_get_port_by_name("net_ring1", &pid) == 0);
    crescent::zbuf::Config zc;
    zc.bytes = 64u << 20;
    std::string err;
    e.arena = crescent::zbuf::dpdk::create_arena(zc, &err);
    INFO(err);
    REQUIRE(e.arena != nullptr);
    dev::PortConfig pc;
    pc.rx_desc = 256;
    pc.tx_desc = 256;
    pc.rx_arena = e.arena.get();
    dev::Port* port = nullptr;
    dev::Status st = e.rt->open_port(pid, pc, &port);
    INFO(st.message());
    REQUIRE(st.ok());
    dev::Queue& q = port->queue(0);
    for (uint32_t i = 0; i < 4; i++) REQUIRE(q.tx_enqueue(make_frame(q, 100 + i)) == dev::TxResult::Queued);
    REQUIRE(q.flush() == 4);
    // net_ring hands the TX mbufs back as RX: to see the RX pool, take
    // fresh mbufs from it the way a PMD does and check they are zbuf objs.
    rte_mbuf* pkts[8];
    uint16_t n = 0;
    for (int i = 0; i < 100 && n < 4; i++) n = uint16_t(n + q.rx_burst(pkts + n, uint16_t(8 - n)));
    REQUIRE(n == 4);
    for (uint16_t i = 0; i < n; i++) {
        CHECK(frame_seq(pkts[i]) == 100u + i);
        rte_pktmbuf_free(pkts[i]);
    }
    rte_mbuf* m = rte_pktmbuf_alloc(q.rx_pool());
    REQUIRE(m != nullptr);
    CHECK(crescent::zbuf::contains(rte_pktmbuf_mtod(m, void*)));
    char* d = rte_pktmbuf_append(m, 64);
    REQUIRE(d != nullptr);
    std::memset(d, 0x5a, 64);
    crescent::zbuf::Slice s = crescent::zbuf::dpdk::rx_slice(m);
    REQUIRE(s);
    CHECK(s.size() == 64);
    CHECK(std::to_integer<int>(s.data()[0]) == 0x5a);
    s = crescent::zbuf::Slice(); // last reference: the mbuf returns to its pool
    e.rt->close_ports();         // before the arena goes (Env's destructor)
    e.port = nullptr;
}
