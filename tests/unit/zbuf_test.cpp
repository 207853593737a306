// Unit tests of the zbuf slab core (no DPDK): zone/obj arithmetic, refcounts,
// slices, cross-core frees through the return ring (and its full path),
// exhaustion and recovery, accounting, debug-build checks.
#include <catch2/catch.hpp>

#include <crescent/zbuf.hpp>

#include "tests/support/aborts.hpp"
#include "tests/support/zbuf_leak.hpp"


#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

using namespace crescent;
using namespace crescent::zbuf;

namespace {

std::unique_ptr<Arena> make_arena(Config cfg) {
    std::string err;
    auto a = Arena::create(cfg, &err);
    INFO(err);
    REQUIRE(a);
    return a;
}

Config anon(size_t bytes, std::vector<uint32_t> classes = {2048, 4096, 16384, 65536}) {
    Config c;
    c.backing = Backing::Anonymous;
    c.bytes = bytes;
    c.size_classes = std::move(classes);
    return c;
}

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

} // namespace

TEST_CASE("zbuf: one arena per process, bad configs are refused", "[zbuf]") {
    auto a = make_arena(anon(4u << 20));
    CHECK(Arena::current() == a.get());
    CHECK(a->backing() == Backing::Anonymous);
    std::string err;
    CHECK_FALSE(Arena::create(anon(4u << 20), &err));
    CHECK(err.find("already") != std::string::npos);
    a.reset();
    CHECK(Arena::current() == nullptr);

    CHECK_FALSE(Arena::create(anon(4u << 20, {4096, 2048}), &err));
    CHECK_FALSE(Arena::create(anon(4u << 20, {}), &err));
    CHECK_FALSE(Arena::create(anon(4u << 20, {4u << 20}), &err));
    Config bad_ring = anon(4u << 20);
    bad_ring.return_ring_size = 1000;
    CHECK_FALSE(Arena::create(bad_ring, &err));
    CHECK(Arena::current() == nullptr);
}

TEST_CASE("zbuf: Auto backing uses hugepages or says it fell back", "[zbuf]") {
    Config c = anon(4u << 20);
    c.backing = Backing::Auto;
    auto a = make_arena(c);
    CHECK((a->backing() == Backing::Hugetlb || a->backing() == Backing::Anonymous));
    CoreScope core(0);
    Slice s = a->alloc_slice(100);
    REQUIRE(s);
    CHECK(addr(zone_of(s.data())) % kZoneSize == 0);
}

TEST_CASE("zbuf: zone and obj arithmetic on every size class", "[zbuf]") {
    // Two powers of two, and sizes that need the multiply-shift division.
    std::vector<uint32_t> classes{1500, 2048, 4096, 9216, 16384, 65536, 100000};
    auto a = make_arena(anon(32u << 20, classes));
    CoreScope core(0);
    test::LeakCheck leaks;

    for (uint32_t size : classes) {
        DYNAMIC_SECTION("class " << size) {
            // Fill exactly one zone: objs come from one zone until it is empty.
            std::vector<Zbuf> held;
            Zbuf first = a->alloc(size);
            REQUIRE(first);
            ZoneHeader* z = zone_of(first.data());
            REQUIRE(z->magic == kZoneMagic);
            REQUIRE(z->obj_size == size);
            REQUIRE(z->obj_count == Arena::objs_per_zone(size, ZoneKind::Slab));
            REQUIRE(z->obj_count > 0);
            CHECK(z->obj_offset % 64 == 0);
            CHECK(addr(z) % kZoneSize == 0);
            // The last obj ends inside the zone, and no bigger count would fit.
            CHECK(size_t(z->obj_offset) + size_t(z->obj_count) * size <= kZoneSize);
            // The free stack ends right below obj 0 (its top entry, which a
            // lightly used zone pops and pushes, away from the header's hot
            // fields: at a page's last 8 bytes for page-aligned objs), and
            // its sentinel lies above the ctx array.
            CHECK(addr(z->free_stack + z->obj_count) == addr(z->obj(0)));
            CHECK(z->free_stack[-1] == nullptr);
            CHECK(addr(z->free_stack - 1) >= addr(z->ctx() + z->obj_count));
            if (z->obj_offset % 4096 == 0) CHECK(addr(z->free_stack + z->obj_count - 1) % 4096 == 4088);
            held.push_back(std::move(first));
            for (uint32_t i = 1; i < z->obj_count; ++i) {
                held.push_back(a->alloc(size));
                REQUIRE(held.back());
            }
            for (uint32_t i = 0; i < z->obj_count; ++i) {
                std::byte* p = held[i].data();
                INFO("obj " << i << " of " << z->obj_count);
                REQUIRE(zone_of(p) == z);
                REQUIRE(p == z->obj(i)); // fresh zone: objs come in address order
                REQUIRE(held[i].capacity() == size);
                // first byte, interior bytes, last byte all map back
                for (size_t off : {size_t{0}, size_t{1}, size_t(size / 2), size_t(size - 64), size_t(size - 1)}) {
                    REQUIRE(obj_base(p + off) == p);
                    REQUIRE(zone_of(p + off)->index_of(p + off) == i);
                    REQUIRE(&ctx_of(p + off) == &z->ctx()[i]);
                    REQUIRE(contains(p + off));
                    REQUIRE(iova(p + off) == z->iova + (addr(p) + off - addr(z)));
                }
                REQUIRE(refcount(p + size - 1) == 1);
                REQUIRE(obj_size(p) == size);
            }
            // Anonymous memory: IOVA is the virtual address.
            CHECK(z->iova == addr(z));
            // The zone is full now: the next alloc opens a new zone.
            Zbuf next = a->alloc(size);
            REQUIRE(next);
            CHECK(zone_of(next.data()) != z);
        }
    }
}

TEST_CASE("zbuf: index arithmetic is exact for every offset of every size", "[zbuf]") {
    // index_of() is one multiply-shift for every size, powers of two
    // included; check it against division at every byte offset of a zone.
    for (uint32_t size : {64u, 1500u, 2047u, 2048u, 4096u, 9000u, 9216u, 16384u, 65535u, 65536u, 100000u,
                          1048575u}) {
        alignas(64) static std::byte raw[sizeof(ZoneHeader)];
        auto* z = reinterpret_cast<ZoneHeader*>(raw);
        z->obj_size = size;
        z->obj_offset = 0;
        z->obj_shift = 0;
        z->div_magic = ((uint64_t{1} << kDivShift) + size - 1) / size;
        uint32_t bad = 0;
        for (uint32_t off = 0; off < kZoneSize; ++off)
            if (z->index_of(raw + off) != off / size) ++bad;
        INFO("size " << size);
        CHECK(bad == 0);
    }
}

TEST_CASE("zbuf: refcount lifecycle", "[zbuf]") {
    auto a = make_arena(anon(8u << 20));
    CoreScope core(0);
    test::LeakCheck leaks;

    Zbuf z = a->alloc(3000); // 4 KiB class
    REQUIRE(z);
    std::byte* p = z.data();
    CHECK(z.capacity() == 4096);
    CHECK(refcount(p) == 1);
    CHECK(a->live() == 1);

    Zbuf s = z.share();
    CHECK(s.data() == p);
    CHECK(refcount(p) == 2);
    Zbuf t = Zbuf::share_of(p + 1234);
    CHECK(t.data() == p);
    CHECK(refcount(p) == 3);

    // Moves transfer ownership without touching the count.
    Zbuf moved = std::move(s);
    CHECK_FALSE(s);
    CHECK(refcount(p) == 3);

    // release()/adopt() hand a raw reference across an API boundary.
    std::byte* raw = moved.release();
    CHECK_FALSE(moved);
    CHECK(refcount(p) == 3);
    Zbuf back = Zbuf::adopt(raw + 10);
    CHECK(back.data() == p);
    CHECK(refcount(p) == 3);

    back.reset();
    CHECK(refcount(p) == 2);
    t.reset();
    CHECK(refcount(p) == 1);
    CHECK(a->live() == 1);
    z.reset();
    CHECK(refcount(p) == 0);
    CHECK(a->live() == 0);

    // The free function pair.
    Zbuf u = a->alloc(4096);
    std::byte* q = u.release();
    zbuf::ref(q + 5);
    CHECK(refcount(q) == 2);
    unref(q);
    unref(q + 4095);
    CHECK(a->live() == 0);

    // A freed obj is handed out again (LIFO free stack: hot in cache).
    Zbuf again = a->alloc(4096);
    CHECK(again.data() == q);
}

TEST_CASE("zbuf: Slice share, sub, remove_prefix", "[zbuf]") {
    auto a = make_arena(anon(8u << 20));
    CoreScope core(0);
    test::LeakCheck leaks;

    Slice s = a->alloc_slice(1000);
    REQUIRE(s);
    CHECK(s.size() == 1000);
    CHECK(s.offset() == 0);
    for (size_t i = 0; i < s.size(); ++i) s.data()[i] = std::byte(i & 0xff);
    std::byte* base = s.data();

    Slice t = s.share();
    CHECK(refcount(base) == 2);
    CHECK(t.data() == base);

    Slice u = s.sub(100, 50);
    CHECK(refcount(base) == 3);
    CHECK(u.data() == base + 100);
    CHECK(u.size() == 50);
    CHECK(u.data()[0] == std::byte(100));
    CHECK(u.iova() == s.iova() + 100);
    CHECK(obj_base(u.data()) == base);

    u.remove_prefix(10);
    CHECK(u.data() == base + 110);
    CHECK(u.size() == 40);
    CHECK(u.offset() == 110);
    CHECK(u.data()[0] == std::byte(110));
    u.remove_suffix(30);
    CHECK(u.size() == 10);
    CHECK(u.bytes().back() == std::byte(119));

    Slice v = Slice::share_of(base + 500, 20);
    CHECK(v.offset() == 500);
    CHECK(v.data()[0] == std::byte(500 & 0xff));
    CHECK(refcount(base) == 4);

    Slice whole(a->alloc(2048));
    CHECK(whole.size() == 2048);

    t.reset();
    u.reset();
    v.reset();
    CHECK(refcount(base) == 1);
    Slice empty_slice;
    CHECK_FALSE(empty_slice);
    s = std::move(empty_slice); // move-assign drops the old reference
    CHECK(a->live() == 1);      // `whole`
}

TEST_CASE("zbuf: cross-core free through the return ring, two threads", "[zbuf]") {
    Config c = anon(32u << 20);
    c.return_ring_size = 64; // small: the full-ring path is exercised too
    auto a = make_arena(c);
    test::LeakCheck leaks;
    constexpr int kObjs = 20000;

    std::mutex mu;
    std::vector<std::byte*> handoff; // core 0 -> core 1, raw references
    std::atomic<bool> producer_done{false};
    std::atomic<int> consumed{0};

    std::thread consumer([&] {
        CoreScope core(1);
        for (;;) {
            std::vector<std::byte*> batch;
            {
                std::lock_guard lk(mu);
                batch.swap(handoff);
            }
            for (std::byte* p : batch) {
                // touch the payload the producer wrote
                if (*p != std::byte(0xab)) std::abort();
                Zbuf::adopt(p).reset(); // remote free: core 0 owns the zone
            }
            consumed += int(batch.size());
            if (producer_done && consumed == kObjs) break;
            a->drain_returns(); // retries parked frees
            std::this_thread::yield();
        }
        // Keep retrying parked frees until the owner has taken them all.
        while (a->stats().deferred != 0) {
            a->drain_returns();
            std::this_thread::yield();
        }
    });

    {
        CoreScope core(0);
        for (int i = 0; i < kObjs; ++i) {
            Zbuf z = a->alloc(i % 2 ? 2048 : 4096);
            while (!z) { // out of memory until the consumer's frees come back
                a->drain_returns();
                std::this_thread::yield();
                z = a->alloc(i % 2 ? 2048 : 4096);
            }
            *z.data() = std::byte(0xab);
            std::lock_guard lk(mu);
            handoff.push_back(z.release());
        }
        producer_done = true;
        while (consumed < kObjs || a->stats().deferred != 0) {
            a->drain_returns();
            std::this_thread::yield();
        }
        consumer.join();
        a->drain_returns();
        Stats s = a->stats();
        CHECK(s.remote_frees == uint64_t(kObjs));
        CHECK(s.deferred == 0);
        CHECK(a->live() == 0);
        for (auto& cs : s.classes) {
            CHECK(cs.live == 0);
            CHECK(cs.live_per_core[0] == 0);
            CHECK(cs.live_per_core[1] == 0);
        }
        INFO("return_ring_full " << s.return_ring_full);
    }
}

TEST_CASE("zbuf: full return ring parks frees on the freeing core, then recovers", "[zbuf]") {
    Config c = anon(8u << 20);
    c.return_ring_size = 4;
    auto a = make_arena(c);
    CoreScope core0(0);
    test::LeakCheck leaks;

    std::vector<std::byte*> objs;
    for (int i = 0; i < 10; ++i) objs.push_back(a->alloc(4096).release());
    CHECK(a->live() == 10);

    {
        CoreScope core1(1); // this thread now acts as core 1 (nested scope)
        CHECK(current_core() == 1);
        for (std::byte* p : objs) unref(p);
    }
    CHECK(current_core() == 0);
    Stats s = a->stats();
    CHECK(s.remote_frees == 4);     // the ring took 4
    CHECK(s.return_ring_full == 6); // 6 frees had to be parked
    CHECK(s.deferred == 6);
    CHECK(a->live() == 10);         // nothing is back before the owner drains

    for (int round = 0; round < 10 && a->live() != 0; ++round) {
        a->drain_returns(); // owner (core 0) takes what is in its ring
        CoreScope core1(1);
        a->drain_returns(); // core 1 retries its parked frees
    }
    s = a->stats();
    CHECK(a->live() == 0);
    CHECK(s.deferred == 0);
    CHECK(s.remote_frees == 10);
    CHECK(s.return_ring_full == 6);
}

TEST_CASE("zbuf: frees from a thread without a core go through the ring", "[zbuf]") {
    Config c = anon(8u << 20);
    c.return_ring_size = 2;
    auto a = make_arena(c);
    CoreScope core0(0);
    test::LeakCheck leaks;
    std::vector<std::byte*> objs;
    for (int i = 0; i < 5; ++i) objs.push_back(a->alloc(2048).release());
    std::thread([&] {
        CHECK(current_core() == kNoCore);
        CHECK_FALSE(a->alloc(2048)); // no core, no alloc (counted)
        for (std::byte* p : objs) unref(p);
    }).join();
    Stats s = a->stats();
    CHECK(s.return_ring_full == 3);
    CHECK(s.classes[0].alloc_failed == 1);
    a->drain_returns();
    CHECK(a->live() == 0);
    CHECK(a->stats().remote_frees == 5);
}

TEST_CASE("zbuf: exhaustion returns empty handles, counts them, and recovers", "[zbuf]") {
    auto a = make_arena(anon(2 * kZoneSize, {65536}));
    CoreScope core(0);
    test::LeakCheck leaks;
    const uint32_t per_zone = Arena::objs_per_zone(65536, ZoneKind::Slab);
    REQUIRE(per_zone > 0);

    std::vector<Zbuf> held;
    for (;;) {
        Zbuf z = a->alloc(65536);
        if (!z) break;
        held.push_back(std::move(z));
        REQUIRE(held.size() <= 2 * per_zone);
    }
    CHECK(held.size() == 2 * per_zone);
    CHECK_FALSE(a->alloc(1));
    CHECK_FALSE(a->alloc_slice(100));
    Stats s = a->stats();
    CHECK(s.classes[0].alloc_failed == 3);
    CHECK(s.classes[0].live == 2 * per_zone);
    CHECK(s.classes[0].capacity == 2 * per_zone);
    CHECK(s.zones_used == 2);
    CHECK(s.zones_total == 2);

    // Too large for any class: empty and counted separately.
    CHECK_FALSE(a->alloc(65537));
    CHECK(a->stats().alloc_too_large == 1);

    // Recovery: free objs of the first zone while the current zone is the second.
    held[3].reset();
    held[7].reset();
    Zbuf r1 = a->alloc(65536), r2 = a->alloc(65536);
    CHECK(r1);
    CHECK(r2);
    CHECK_FALSE(a->alloc(65536));
    held.clear();
    r1.reset();
    r2.reset();
    CHECK(a->live() == 0);
    CHECK(a->alloc(100)); // temporary: allocated and freed at once
}

TEST_CASE("zbuf: a full arena re-formats an idle zone of another class for the one that needs it",
          "[zbuf]") {
    auto a = make_arena(anon(2 * kZoneSize, {2048, 65536}));
    CoreScope core(0);
    test::LeakCheck leaks;
    const uint32_t small = Arena::objs_per_zone(2048, ZoneKind::Slab);
    const uint32_t big = Arena::objs_per_zone(65536, ZoneKind::Slab);

    // Both zones go to 2 KiB objs; the arena has nothing left.
    std::vector<Zbuf> held;
    for (uint32_t i = 0; i < 2 * small; ++i) {
        held.push_back(a->alloc(2048));
        REQUIRE(held.back());
    }
    CHECK_FALSE(a->alloc(2048));
    CHECK_FALSE(a->alloc(65536));  // no zone for 64 KiB and none idle
    CHECK(a->stats().zones_reclaimed == 0);

    // Free the first zone's objs entirely and one obj of the second.
    for (uint32_t i = 0; i < small; ++i) held[i].reset();
    held[small].reset();
    // The wholly free zone now serves 64 KiB objs; the partly used one stays 2 KiB.
    std::vector<Zbuf> large;
    for (uint32_t i = 0; i < big; ++i) {
        large.push_back(a->alloc(65536));
        REQUIRE(large.back());
    }
    CHECK_FALSE(a->alloc(65536));
    Stats s = a->stats();
    CHECK(s.zones_reclaimed == 1);
    CHECK(s.classes[0].zones == 1);
    CHECK(s.classes[1].zones == 1);
    CHECK(s.classes[0].live == small - 1);
    CHECK(s.classes[1].live == big);
    // 2 KiB allocations still find the freed obj of the zone they kept.
    Zbuf again = a->alloc(2048);
    CHECK(again);
    CHECK_FALSE(a->alloc(2048));
}

TEST_CASE("zbuf: a core's zone limit caps its memory; other cores keep theirs; lifting it recovers",
          "[zbuf]") {
    auto a = make_arena(anon(8 * kZoneSize, {2048, 65536}));
    test::LeakCheck leaks;
    const uint32_t big = Arena::objs_per_zone(65536, ZoneKind::Slab);
    const uint32_t small = Arena::objs_per_zone(2048, ZoneKind::Slab);
    a->set_core_limit(0, kZoneSize + 1);  // rounds up to 2 zones
    CHECK(a->core_limit(0) == 2 * kZoneSize);
    CHECK(a->core_limit(1) == 0);

    std::vector<Zbuf> held;
    {
        CoreScope core(0);
        // Exactly two zones' worth of 64 KiB objs, then nothing: the arena has 6 zones left.
        for (uint32_t i = 0; i < 2 * big; ++i) {
            held.push_back(a->alloc(65536));
            REQUIRE(held.back());
        }
        CHECK_FALSE(a->alloc(65536));
        CHECK_FALSE(a->alloc(2048));  // no third zone for another class either
        Stats s = a->stats();
        CHECK(a->core_usage(0).zones == 2);
        CHECK(a->core_usage(0).limit_zones == 2);
        CHECK(a->core_usage(0).limit_refused == 2);
        CHECK(s.core_limit_refused == 2);
        CHECK(s.classes[1].alloc_failed == 1);
        CHECK(s.classes[0].alloc_failed == 1);
        CHECK(s.zones_used == 2);
    }
    {
        // Another core is not limited by core 0's cap.
        CoreScope core(1);
        Zbuf other = a->alloc(65536);
        CHECK(other);
        CHECK(a->core_usage(1).zones == 1);
    }
    {
        CoreScope core(0);
        // At its cap, a core re-formats an idle zone of its own for another class.
        for (uint32_t i = 0; i < big; ++i) held[i].reset();
        Zbuf s1 = a->alloc(2048);
        CHECK(s1);
        CHECK(a->core_usage(0).zones == 2);
        CHECK(a->stats().zones_reclaimed == 1);
        std::vector<Zbuf> smalls;
        for (uint32_t i = 1; i < small; ++i) {
            smalls.push_back(a->alloc(2048));
            REQUIRE(smalls.back());
        }
        CHECK_FALSE(a->alloc(2048));
        // Lifting the cap lets the core take fresh zones again.
        a->set_core_limit(0, 0);
        Zbuf more = a->alloc(2048);
        CHECK(more);
        CHECK(a->core_usage(0).zones == 3);
        held.clear();
    }
}

TEST_CASE("zbuf: accounting per class, per core, high water", "[zbuf]") {
    auto a = make_arena(anon(16u << 20));
    test::LeakCheck leaks;
    std::vector<Zbuf> c0, c1;
    {
        CoreScope core(0);
        for (int i = 0; i < 5; ++i) c0.push_back(a->alloc(2048));
        for (int i = 0; i < 3; ++i) c0.push_back(a->alloc(16384));
    }
    std::thread([&] {
        CoreScope core(1);
        for (int i = 0; i < 7; ++i) c1.push_back(a->alloc(4000));
        c1.resize(4); // frees 3 on their owner
    }).join();
    Stats s = a->stats();
    REQUIRE(s.classes.size() == 4);
    CHECK(s.classes[0].obj_size == 2048);
    CHECK(s.classes[0].live == 5);
    CHECK(s.classes[0].live_per_core[0] == 5);
    CHECK(s.classes[1].live == 4);
    CHECK(s.classes[1].live_per_core[1] == 4);
    CHECK(s.classes[1].high_water == 7);
    CHECK(s.classes[2].live == 3);
    CHECK(s.classes[3].live == 0);
    CHECK(s.classes[1].zones == 1);
    CHECK(s.classes[3].zones == 0);
    CHECK(s.live_total() == 12);
    CHECK(a->live() == 12);

    CoreScope core(0);
    c0.clear();
    // core 1's objs freed by core 0: remote, back after core 1 drains
    c1.clear();
    CHECK(a->live() == 4);
    std::thread([&] {
        CoreScope core1(1);
        a->drain_returns();
    }).join();
    CHECK(a->live() == 0);
    CHECK(a->stats().classes[0].high_water == 5);
}

TEST_CASE("zbuf: live and high water stay exact through frees below the peak and a new peak", "[zbuf]") {
    auto a = make_arena(anon(8u << 20));
    test::LeakCheck leaks;
    CoreScope core(0);
    auto cls0 = [&] { return a->stats().classes[0]; };
    std::vector<Zbuf> held;
    for (int i = 0; i < 6; ++i) held.push_back(a->alloc(2048));
    CHECK(cls0().live == 6);
    CHECK(cls0().high_water == 6);
    held.resize(2); // 4 frees: below the peak
    CHECK(cls0().live == 2);
    CHECK(cls0().high_water == 6);
    for (int i = 0; i < 4; ++i) held.push_back(a->alloc(2048)); // back up to the peak, not past it
    CHECK(cls0().live == 6);
    CHECK(cls0().high_water == 6);
    held.push_back(a->alloc(2048)); // a new peak
    CHECK(cls0().live == 7);
    CHECK(cls0().high_water == 7);
    CHECK(a->core_live_bytes(0) == 7 * 2048);
    // Alternating alloc/free at the peak (the micro-benchmark's pattern): the
    // first alloc is a new peak (8), the rest move neither live nor the peak.
    for (int i = 0; i < 1000; ++i) a->alloc(2048).reset();
    CHECK(cls0().live == 7);
    CHECK(cls0().high_water == 8);
    held.clear();
    CHECK(cls0().live == 0);
    CHECK(cls0().high_water == 8);
    CHECK(a->core_live_bytes(0) == 0);
}

TEST_CASE("zbuf: Mempool zones call release at the last unref", "[zbuf]") {
    auto a = make_arena(anon(8u << 20));
    CoreScope core(0);
    test::LeakCheck leaks;
    static std::vector<uint32_t> released;
    released.clear();
    ReleaseFn rel = [](ZoneHeader* z, uint32_t idx) {
        CHECK(z->release_arg == &released);
        released.push_back(idx);
    };
    ZoneHeader* z = a->take_zones(2, 2176, ZoneKind::Mempool, rel, &released);
    REQUIRE(z);
    auto* z2 = reinterpret_cast<ZoneHeader*>(z->base() + kZoneSize);
    CHECK(z2->magic == kZoneMagic);
    CHECK(z->obj_count == Arena::objs_per_zone(2176, ZoneKind::Mempool));
    CHECK(z->kind == ZoneKind::Mempool);
    CHECK(z->free_stack == nullptr);

    // An integration hands out obj 5 as a zbuf (as rx_slice does for an mbuf).
    std::byte* p = z->obj(5);
    detail::set_external_ref(z->ctx()[5]);
    detail::note_external_acquire();
    CHECK(a->live() == 1);
    Slice s = Slice(Zbuf::adopt(p + 300), 300, 64);
    Slice t = s.share();
    s.reset();
    CHECK(released.empty());
    t.reset();
    REQUIRE(released.size() == 1);
    CHECK(released[0] == 5);
    CHECK(a->live() == 0);
    // alloc() never uses integration zones
    Zbuf y = a->alloc(2048);
    CHECK(zone_of(y.data()) != z);
    CHECK(zone_of(y.data()) != z2);
}

TEST_CASE("zbuf: External memory backing", "[zbuf]") {
    size_t len = 3 * kZoneSize;
    void* raw = std::aligned_alloc(kZoneSize, len);
    REQUIRE(raw);
    static bool freed;
    freed = false;
    ExternalMemory mem;
    mem.va = raw;
    mem.len = len;
    mem.arg = raw;
    mem.iova_of = [](const void* zva, void* arg) {
        return uint64_t(0x1000000000) + uint64_t(static_cast<const std::byte*>(zva) - static_cast<std::byte*>(arg));
    };
    mem.free = [](void* arg) { freed = true; std::free(arg); };
    Config c;
    c.backing = Backing::External;
    std::string err;
    auto a = Arena::create(c, mem, &err);
    INFO(err);
    REQUIRE(a);
    CHECK(a->backing() == Backing::External);
    {
        CoreScope core(0);
        Zbuf z = a->alloc(4096);
        REQUIRE(z);
        ZoneHeader* zh = zone_of(z.data());
        CHECK(z.iova() == 0x1000000000 + uint64_t(z.data() - static_cast<std::byte*>(raw)));
        CHECK(zh->iova == 0x1000000000 + uint64_t(zh->base() - static_cast<std::byte*>(raw)));
    }
    a.reset();
    CHECK(freed);
}

#if !defined(NDEBUG) || defined(CRESCENT_DEBUG_CHECKS)
using test::aborts;

namespace {
std::string hex(const void* p) {
    char b[32];
    std::snprintf(b, sizeof b, "%p", p);
    return b;
}
} // namespace

TEST_CASE("zbuf: debug builds abort on double free and foreign pointers", "[zbuf]") {
    auto a = make_arena(anon(8u << 20));
    CoreScope core(0);
    std::byte* p = a->alloc(4096).release();
    unref(p); // now free
    std::string msg = hex(p) + ": unref: refcount is already 0 (double free";
    CHECK(aborts([&] { unref(p); }, msg.c_str()));                          // double free
    CHECK(aborts([&] { zbuf::ref(p + 7); }, "ref: refcount is already 0")); // use after free
    int local = 0;
    msg = hex(&local) + ": unref: not inside the zbuf arena";
    CHECK(aborts([&] { unref(&local); }, msg.c_str()));                      // foreign pointer
    CHECK(aborts([&] { unref(zone_of(p)); }, "inside a zone header"));       // not an obj
    {
        Zbuf held = a->alloc(4096); // unref_obj() takes only an obj's first byte
        CHECK(aborts([&] { unref_obj(held.data() + 64); }, "unref: not the first byte of its obj"));
    }
    // and a correct sequence does not abort
    CHECK_FALSE(aborts([&] {
        Zbuf z = a->alloc(100);
        z.share().reset();
    }));
    CHECK(a->live() == 0);
}
#endif
