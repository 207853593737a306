// zbuf <-> DPDK integration, with EAL started in this process:
// memzone-backed arena, pktmbuf pools whose elements are zbuf objs (RX objs
// map back to their obj), RX mbuf -> Slice ownership, extbuf TX round trip.
//
// EAL: --no-huge --no-pci (no root, no hugepages). With CRESCENT_EAL_HUGE=1 and
// enough free 2 MiB hugepages it runs on hugepages (--in-memory) instead.
#include <catch2/catch.hpp>

#include <crescent/zbuf.hpp>

#include "tests/support/eal_cleanup.hpp"
#include "tests/support/zbuf_leak.hpp"
#include "zbuf/dpdk.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>

#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_memory.h>
#include <rte_mempool.h>

using namespace crescent;
using namespace crescent::zbuf;

namespace {

long free_hugepages() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    long v = 0;
    while (f >> key >> v) {
        if (key == "HugePages_Free:") return v;
        f.ignore(1024, '\n');
    }
    return 0;
}

bool g_huge = false;

void ensure_eal() {
    static bool up = [] {
        std::vector<std::string> args{"zbuf_dpdk_test", "--no-pci", "--log-level=error", "--no-telemetry",
                                      "--file-prefix=zbuf_dpdk_test_" + std::to_string(getpid())};
        const char* want = std::getenv("CRESCENT_EAL_HUGE");
        if (want && *want == '1' && getuid() == 0 && free_hugepages() >= 96) {
            g_huge = true;
            args.insert(args.end(), {"--in-memory", "-m", "160"});
        } else {
            if (want && *want == '1')
                WARN("CRESCENT_EAL_HUGE=1 but no root or < 96 free 2 MiB hugepages: running with --no-huge");
            args.insert(args.end(), {"--no-huge", "-m", "256"});
        }
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        if (rte_eal_init(int(argv.size()), argv.data()) < 0) return false;
        // At exit, after every test case's arena is gone: EAL and its run directory.
        static struct AtExit {
            ~AtExit() { crescent::test::eal_cleanup_with_run_dir(); }
        } at_exit;
        return true;
    }();
    REQUIRE(up);
}

struct DpdkArena {
    std::unique_ptr<Arena> arena;
    std::optional<CoreScope> core;
    DpdkArena(size_t bytes = 24u << 20) {
        ensure_eal();
        Config cfg;
        cfg.bytes = bytes;
        std::string err;
        arena = dpdk::create_arena(cfg, &err);
        INFO(err);
        REQUIRE(arena);
        core.emplace(0);
    }
};

std::string unique(const char* base) {
    static int n = 0;
    return std::string(base) + std::to_string(n++);
}

} // namespace

TEST_CASE("zbuf dpdk: arena in a memzone, IOVA from DPDK", "[zbuf][dpdk]") {
    DpdkArena d;
    test::LeakCheck leaks;
    CHECK(d.arena->backing() == Backing::External);
    INFO("hugepages: " << g_huge);
    std::vector<Zbuf> held;
    for (uint32_t size : {2048u, 4096u, 16384u, 65536u}) held.push_back(d.arena->alloc(size));
    for (auto& z : held) {
        REQUIRE(z);
        CHECK(reinterpret_cast<uintptr_t>(zone_of(z.data())) % kZoneSize == 0);
        for (size_t off : {size_t{0}, z.capacity() / 2, z.capacity() - 1}) {
            std::byte* p = z.data() + off;
            CHECK(z.iova() + off == iova(p));
            CHECK(iova(p) == rte_mem_virt2iova(p));
        }
    }
}

TEST_CASE("zbuf dpdk: mbuf pool elements are zbuf objs", "[zbuf][dpdk]") {
    DpdkArena d;
    test::LeakCheck leaks;
    dpdk::PoolConfig pc;
    pc.name = unique("zrx");
    pc.mbufs = 600; // more than one 4 KiB zone holds
    pc.obj_size = 4096;
    pc.cache_size = 32;
    std::string err;
    auto pool = dpdk::MbufPool::create(*d.arena, pc, &err);
    INFO(err);
    REQUIRE(pool);
    CHECK(pool->zones() == 2);
    CHECK(pool->usable() >= 600);
    CHECK(pool->withheld() == 0);
    rte_mempool* mp = pool->mempool();
    CHECK(mp->header_size + mp->elt_size + mp->trailer_size == 4096);
    CHECK(rte_pktmbuf_data_room_size(mp) == pool->data_room());
    CHECK(pool->data_room() == 4096 - 64 - sizeof(rte_mbuf));

    // Take every mbuf: each one's data maps back to its obj, arithmetically.
    std::vector<rte_mbuf*> ms;
    std::set<std::byte*> objs;
    while (rte_mbuf* m = rte_pktmbuf_alloc(mp)) {
        auto* data = rte_pktmbuf_mtod(m, std::byte*);
        std::byte* obj = obj_base(data);
        REQUIRE(contains(data));
        REQUIRE(obj + dpdk::MbufPool::kObjHeader == reinterpret_cast<std::byte*>(m));
        REQUIRE(obj_base(data + pool->data_room() - RTE_PKTMBUF_HEADROOM - 1) == obj); // last data byte
        REQUIRE(dpdk::mbuf_of(data + 100) == m);
        REQUIRE(ctx_of(data).meta == reinterpret_cast<uintptr_t>(m));
        REQUIRE(refcount(data) == 0); // in the mbuf world, not held as a zbuf
        REQUIRE(zone_of(obj)->kind == ZoneKind::Mempool);
        REQUIRE(m->buf_iova == iova(m->buf_addr));
        objs.insert(obj);
        ms.push_back(m);
        REQUIRE(ms.size() <= pool->usable());
    }
    CHECK(ms.size() == pool->usable());
    CHECK(objs.size() == ms.size());
    for (rte_mbuf* m : ms) rte_pktmbuf_free(m);
    CHECK(rte_mempool_avail_count(mp) == pool->usable());
    // alloc() never hands out pool zones.
    Zbuf z = d.arena->alloc(4096);
    CHECK(zone_of(z.data())->kind == ZoneKind::Slab);
}

TEST_CASE("zbuf dpdk: RX mbuf becomes a Slice; the last unref frees the mbuf", "[zbuf][dpdk]") {
    DpdkArena d;
    test::LeakCheck leaks;
    dpdk::PoolConfig pc;
    pc.name = unique("zrx");
    pc.mbufs = 256;
    pc.obj_size = 2048;
    pc.cache_size = 0; // avail_count is then exact
    std::string err;
    auto pool = dpdk::MbufPool::create(*d.arena, pc, &err);
    INFO(err);
    REQUIRE(pool);
    rte_mempool* mp = pool->mempool();
    const unsigned avail = rte_mempool_avail_count(mp);

    // A "received" frame: what a PMD leaves in a fresh mbuf.
    rte_mbuf* m = rte_pktmbuf_alloc(mp);
    REQUIRE(m);
    char* payload = rte_pktmbuf_append(m, 1000);
    REQUIRE(payload);
    for (int i = 0; i < 1000; ++i) payload[i] = char(i * 7);
    CHECK(rte_mempool_avail_count(mp) == avail - 1);

    Slice s = dpdk::rx_slice(m);
    REQUIRE(s);
    CHECK(s.data() == reinterpret_cast<std::byte*>(payload));
    CHECK(s.size() == 1000);
    CHECK(refcount(s.data()) == 1);
    CHECK(d.arena->live() == 1); // counted as external_live
    CHECK(d.arena->stats().external_live == 1);
    CHECK(s.iova() == rte_pktmbuf_iova(m));

    Slice a = s.sub(10, 20), b = s.share();
    CHECK(a.data()[0] == std::byte(70));
    CHECK(refcount(s.data()) == 3);
    s.reset();
    b.reset();
    CHECK(rte_mempool_avail_count(mp) == avail - 1); // `a` still holds it
    a.reset();
    CHECK(rte_mempool_avail_count(mp) == avail);
    CHECK(d.arena->live() == 0);

    // Freed on another thread (no core): same result.
    rte_mbuf* m2 = rte_pktmbuf_alloc(mp);
    REQUIRE(m2);
    Slice s2 = dpdk::rx_slice(m2);
    REQUIRE(s2);
    std::thread([s3 = std::move(s2)]() mutable { s3.reset(); }).join();
    CHECK(rte_mempool_avail_count(mp) == avail);
    CHECK(d.arena->live() == 0);

    // Not ours: chained mbufs and mbufs of other pools stay with the caller.
    rte_mbuf* h = rte_pktmbuf_alloc(mp);
    rte_mbuf* t = rte_pktmbuf_alloc(mp);
    REQUIRE(rte_pktmbuf_chain(h, t) == 0);
    CHECK_FALSE(dpdk::rx_slice(h));
    rte_pktmbuf_free(h);
    rte_mempool* plain = rte_pktmbuf_pool_create(unique("plain").c_str(), 63, 0, 0, 2048, SOCKET_ID_ANY);
    REQUIRE(plain);
    rte_mbuf* pm = rte_pktmbuf_alloc(plain);
    REQUIRE(pm);
    CHECK_FALSE(dpdk::rx_slice(pm));
    rte_pktmbuf_free(pm);
    rte_mempool_free(plain);
    CHECK(rte_mempool_avail_count(mp) == avail);
}

TEST_CASE("zbuf dpdk: af_xdp-safe pool keeps every element inside the umem length", "[zbuf][dpdk]") {
    DpdkArena d;
    test::LeakCheck leaks;
    dpdk::PoolConfig pc;
    pc.name = unique("zxdp");
    pc.mbufs = 3000; // three 2 KiB zones
    pc.obj_size = 2048;
    pc.cache_size = 0;
    pc.af_xdp_umem = true;
    std::string err;
    auto pool = dpdk::MbufPool::create(*d.arena, pc, &err);
    INFO(err);
    REQUIRE(pool);
    rte_mempool* mp = pool->mempool();
    CHECK(pool->usable() >= 3000);
    CHECK(pool->withheld() > 0);
    CHECK(pool->usable() + pool->withheld() == mp->populated_size);
    // What the af_xdp PMD computes: base = first chunk, length populated * elt.
    rte_mempool_memhdr* first = STAILQ_FIRST(&mp->mem_list);
    auto base = reinterpret_cast<uintptr_t>(first->addr);
    uintptr_t umem_end = base + uintptr_t(mp->populated_size) * 2048;
    std::vector<rte_mbuf*> ms;
    while (rte_mbuf* m = rte_pktmbuf_alloc(mp)) {
        auto elt = reinterpret_cast<uintptr_t>(m) - mp->header_size;
        REQUIRE(elt >= base);
        REQUIRE(elt + 2048 <= umem_end);
        REQUIRE((elt - base) % 2048 == 0); // frame stride
        ms.push_back(m);
    }
    CHECK(ms.size() == pool->usable());
    for (auto* m : ms) rte_pktmbuf_free(m);
}

TEST_CASE("zbuf dpdk: TX extbuf holds a reference until the mbuf is freed", "[zbuf][dpdk]") {
    DpdkArena d;
    test::LeakCheck leaks;
    dpdk::AttachPool att = dpdk::create_attach_pool(unique("zatt"), 255, 0, SOCKET_ID_ANY);
    REQUIRE(att);
    const unsigned att_avail = rte_mempool_avail_count(att.mbufs);

    Slice s = d.arena->alloc_slice(3000);
    REQUIRE(s);
    std::memset(s.data(), 0x5a, s.size());
    s.remove_prefix(100); // a window that does not start at the obj

    rte_mbuf* m = dpdk::attach_slice(att, s, 64);
    REQUIRE(m);
    CHECK(RTE_MBUF_HAS_EXTBUF(m));
    CHECK(refcount(s.data()) == 2);
    CHECK(rte_pktmbuf_mtod(m, std::byte*) == s.data());
    CHECK(rte_pktmbuf_data_len(m) == 2900);
    CHECK(rte_pktmbuf_pkt_len(m) == 2900);
    CHECK(rte_pktmbuf_iova(m) == s.iova());
    CHECK(rte_pktmbuf_headroom(m) == 64);
    // Headers prepend into the obj's bytes before the window.
    char* hdr = rte_pktmbuf_prepend(m, 14);
    REQUIRE(hdr);
    CHECK(reinterpret_cast<std::byte*>(hdr) == s.data() - 14);

    // The application drops its reference first: the mbuf keeps the obj.
    std::byte* obj = s.buf().data();
    s.reset();
    CHECK(refcount(obj) == 1);
    CHECK(d.arena->live() == 1);
    rte_pktmbuf_free(m); // TX completion
    CHECK(d.arena->live() == 0);
    CHECK(rte_mempool_avail_count(att.mbufs) == att_avail);

    // Freed by a thread without a core (e.g. a driver thread): the reference
    // travels back through the return ring.
    Slice s2 = d.arena->alloc_slice(100);
    rte_mbuf* m2 = dpdk::attach_slice(att, s2);
    REQUIRE(m2);
    s2.reset();
    std::thread([m2] { rte_pktmbuf_free(m2); }).join();
    d.arena->drain_returns();
    CHECK(d.arena->live() == 0);

    // Windows over 64 KiB and headroom outside the obj are refused.
    Slice s3 = d.arena->alloc_slice(65536);
    REQUIRE(s3);
    CHECK_FALSE(dpdk::attach_slice(att, s3));
    Slice s4 = s3.sub(0, 100);
    CHECK_FALSE(dpdk::attach_slice(att, s4, 1));
    CHECK(rte_mempool_avail_count(att.mbufs) == att_avail);
    CHECK(dpdk::free_attach_pool(att));
}

TEST_CASE("zbuf dpdk: zero-copy echo: an RX slice attached for TX", "[zbuf][dpdk]") {
    DpdkArena d;
    test::LeakCheck leaks;
    dpdk::PoolConfig pc;
    pc.name = unique("zecho");
    pc.mbufs = 128;
    pc.obj_size = 2048;
    pc.cache_size = 0;
    std::string err;
    auto pool = dpdk::MbufPool::create(*d.arena, pc, &err);
    INFO(err);
    REQUIRE(pool);
    dpdk::AttachPool att = dpdk::create_attach_pool(unique("zatt"), 63, 0, SOCKET_ID_ANY);
    REQUIRE(att);
    const unsigned avail = rte_mempool_avail_count(pool->mempool());

    rte_mbuf* rx = rte_pktmbuf_alloc(pool->mempool());
    REQUIRE(rx);
    REQUIRE(rte_pktmbuf_append(rx, 512));
    Slice req = dpdk::rx_slice(rx);
    REQUIRE(req);
    rte_mbuf* tx = dpdk::attach_slice(att, req.sub(12, 500));
    REQUIRE(tx);
    CHECK(refcount(req.data()) == 2);
    req.reset(); // the app is done; the RX mbuf lives on for the TX
    CHECK(rte_mempool_avail_count(pool->mempool()) == avail - 1);
    rte_pktmbuf_free(tx);
    CHECK(rte_mempool_avail_count(pool->mempool()) == avail);
    CHECK(d.arena->live() == 0);
    CHECK(dpdk::free_attach_pool(att));
}
