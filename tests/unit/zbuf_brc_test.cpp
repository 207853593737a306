// Unit tests of zbuf's biased reference counting (the protocol and its
// invariants are in <crescent/zbuf.hpp>'s header comment): owner-core counts
// in `biased`, other threads' counts in `shared`, merge requests through the
// owner's return ring (and its full-ring and no-core paths), MERGED on the
// owner's drop to 0, the QUEUED-while-the-owner-hits-0 case, and a seeded
// multi-thread stress test that checks every held obj's stamp (a free while
// held shows as a reused obj), then that every obj came back.
#include <catch2/catch.hpp>

#include <crescent/zbuf.hpp>

#include "tests/support/aborts.hpp"
#include "tests/support/zbuf_leak.hpp"


#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

using namespace crescent;
using namespace crescent::zbuf;

namespace {

std::unique_ptr<Arena> make_arena(size_t bytes, uint32_t ring = 4096) {
    Config c;
    c.backing = Backing::Anonymous;
    c.bytes = bytes;
    c.return_ring_size = ring;
    std::string err;
    auto a = Arena::create(c, &err);
    INFO(err);
    REQUIRE(a);
    return a;
}

uint32_t biased_of(const void* p) { return ctx_of(p).biased.load(); }
uint32_t shared_of(const void* p) { return ctx_of(p).shared.load(); }
// shared's encoding: count x kShared1 | flags.
constexpr uint32_t sh(int32_t count, uint32_t flags = 0) { return uint32_t(count) * kShared1 | flags; }

// Runs fn on a second thread registered as `core` (kNoCore: no CoreScope) and
// joins it: the calls are ordered, the thread is real.
template <class F>
void on_thread(unsigned core, F fn) {
    std::thread([&] {
        if (core == kNoCore) {
            fn();
        } else {
            CoreScope scope(core);
            fn();
        }
    }).join();
}

} // namespace

// The owner's ref+unref of an unmerged obj: two plain read-modify-writes of
// `biased`. noinline so that `objdump -d` of a release build shows the path
// (no `lock` prefix on the owner's branch; the one `lock add` is ref_shared).
[[gnu::noinline]] void brc_owner_ref_unref(const std::byte* p) {
    zbuf::ref(p);
    zbuf::unref(p);
}

TEST_CASE("zbuf brc: the owner counts in biased; the last drop frees with shared 0", "[zbuf][brc]") {
    auto a = make_arena(8u << 20);
    CoreScope core(0);
    test::LeakCheck leaks;

    Slice s = a->alloc_slice(3000);
    REQUIRE(s);
    std::byte* p = s.data();
    CHECK(biased_of(p) == 1);
    CHECK(shared_of(p) == 0);
    CHECK(refcount(p) == 1);

    Slice t = s.share();
    Slice u = s.sub(10, 20);
    Zbuf v = Zbuf::share_of(p + 100);
    CHECK(biased_of(p) == 4);
    CHECK(shared_of(p) == 0); // the owner never touches shared
    CHECK(refcount(p) == 4);
    for (int i = 0; i < 1000; ++i) brc_owner_ref_unref(p + 7);
    CHECK(biased_of(p) == 4);
    CHECK(shared_of(p) == 0);

    t.reset();
    u.reset();
    v.reset();
    CHECK(biased_of(p) == 1);
    CHECK(a->live() == 1);
    Stats st = a->stats();
    CHECK(st.classes[1].live == 1);
    CHECK(st.classes[1].high_water == 1);
    s.reset();
    CHECK(biased_of(p) == 0);
    CHECK(shared_of(p) == 0);
    CHECK(refcount(p) == 0);
    st = a->stats();
    CHECK(st.classes[1].live == 0);
    CHECK(st.classes[1].high_water == 1);
    CHECK(st.remote_frees == 0);
    CHECK(st.merge_requests == 0);
    // Back on the free stack (LIFO): the next alloc of the class returns it.
    Slice again = a->alloc_slice(4096);
    CHECK(again.data() == p);
    CHECK(a->stats().classes[1].high_water == 1);
}

TEST_CASE("zbuf brc: a slice moved to another core and dropped there is merged and freed by the owner",
          "[zbuf][brc]") {
    auto a = make_arena(8u << 20);
    CoreScope core0(0);
    test::LeakCheck leaks;

    Slice s = a->alloc_slice(100);
    std::byte* p = s.data();
    Slice keep = s.share(); // biased 2
    on_thread(1, [&] {
        Slice mine = std::move(s);
        mine.reset(); // a reference the owner counted: shared goes to -1, QUEUED
    });
    CHECK(biased_of(p) == 2);
    CHECK(shared_of(p) == (sh(-1) | kQueued));
    CHECK(refcount(p) == 1);
    Stats st = a->stats();
    CHECK(st.merge_requests == 1);
    CHECK(st.remote_frees == 1);
    CHECK(a->live() == 1);

    a->drain_returns(); // the merge: 2 + -1 = 1 into shared, MERGED
    CHECK(biased_of(p) == kUnbiased);
    CHECK(shared_of(p) == (sh(1) | kMerged));
    CHECK(refcount(p) == 1);
    CHECK(a->live() == 1);
    // Merged: the owner now counts in shared too.
    Slice k2 = keep.share();
    CHECK(shared_of(p) == (sh(2) | kMerged));
    k2.reset();
    keep.reset(); // count 1 & MERGED: the owner's free, no ring
    CHECK(shared_of(p) == 0);
    CHECK(refcount(p) == 0);
    CHECK(a->live() == 0);
    CHECK(a->stats().remote_frees == 1);

    // The common case: the only reference moved and dropped: the merge frees.
    Slice only = a->alloc_slice(100);
    std::byte* q = only.data();
    on_thread(1, [&] { Slice(std::move(only)).reset(); });
    CHECK(shared_of(q) == (sh(-1) | kQueued));
    CHECK(a->live() == 1);
    a->drain_returns();
    CHECK(a->live() == 0);
    CHECK(shared_of(q) == 0);
    CHECK(refcount(q) == 0);
    CHECK(a->alloc_slice(100).data() == q); // back on the owner's free stack
}

TEST_CASE("zbuf brc: shared references outlive the owner's: MERGED, the last remote drop frees",
          "[zbuf][brc]") {
    auto a = make_arena(8u << 20);
    CoreScope core0(0);
    test::LeakCheck leaks;

    Slice s = a->alloc_slice(100);
    std::byte* p = s.data();
    Slice held_by_1;
    on_thread(1, [&] {
        Slice mine = std::move(s);
        held_by_1 = mine.share(); // counted in shared: +1
        s = std::move(mine);      // the owner gets its slice back
    });
    CHECK(biased_of(p) == 1);
    CHECK(shared_of(p) == sh(1));
    s.reset(); // the owner's count reaches 0 with shared 1: MERGED, nothing freed
    CHECK(biased_of(p) == kUnbiased);
    CHECK(shared_of(p) == (sh(1) | kMerged));
    CHECK(refcount(p) == 1);
    CHECK(a->live() == 1);
    on_thread(1, [&] { held_by_1.reset(); }); // count 1, MERGED: core 1 frees through the ring
    CHECK(shared_of(p) == 0);
    Stats st = a->stats();
    CHECK(st.merge_requests == 0);
    CHECK(st.remote_frees == 1);
    CHECK(a->live() == 1); // in the ring
    a->drain_returns();
    CHECK(a->live() == 0);

    // Two shared references: the decrement that leaves exactly MERGED frees.
    Slice t = a->alloc_slice(100);
    std::byte* q = t.data();
    Slice x, y;
    on_thread(2, [&] {
        x = t.share();
        y = t.share();
    });
    CHECK(shared_of(q) == sh(2));
    t.reset();
    CHECK(shared_of(q) == (sh(2) | kMerged));
    on_thread(2, [&] { x.reset(); });
    CHECK(shared_of(q) == (sh(1) | kMerged));
    CHECK(a->live() == 1);
    on_thread(1, [&] { y.reset(); });
    a->drain_returns();
    CHECK(a->live() == 0);
}

TEST_CASE("zbuf brc: QUEUED while the owner's count hits 0: only the merge frees", "[zbuf][brc]") {
    auto a = make_arena(8u << 20);
    CoreScope core0(0);
    test::LeakCheck leaks;

    // R1 (the owner's) and R2 (moved to core 1), both counted in biased.
    Slice r1 = a->alloc_slice(100);
    std::byte* p = r1.data();
    Slice r2 = r1.share();
    Slice r3, r4;
    on_thread(1, [&] {
        r2.reset(); // shared -1, QUEUED: a merge request in core 0's ring
        Slice r1_at_1 = std::move(r1);
        r3 = r1_at_1.share(); // shared 0 | QUEUED
        r4 = r1_at_1.share(); // shared 1 | QUEUED
        r1 = std::move(r1_at_1);
    });
    CHECK(shared_of(p) == (sh(1) | kQueued));
    CHECK(biased_of(p) == 2);
    Slice r1_kept;
    on_thread(1, [&] { r1_kept = std::move(r1); }); // core 1 holds R1 now (no count change)
    r3.reset();
    CHECK(biased_of(p) == 1);
    r4.reset(); // the owner's count hits 0 while QUEUED: MERGED, not freed
    CHECK(biased_of(p) == kUnbiased);
    CHECK(shared_of(p) == (sh(1) | kMerged | kQueued));
    CHECK(refcount(p) == 1);

    SECTION("the last reference goes before the merge: the merge frees") {
        on_thread(1, [&] { r1_kept.reset(); });
        // count 0, MERGED|QUEUED: core 1 must not free it (a request is in the ring)
        CHECK(shared_of(p) == (kMerged | kQueued));
        CHECK(a->stats().remote_frees == 1); // the merge request only
        CHECK(a->live() == 1);
        a->drain_returns();
        CHECK(a->live() == 0);
        CHECK(shared_of(p) == 0);
        CHECK(refcount(p) == 0);
        CHECK(a->alloc_slice(100).data() == p);
    }
    SECTION("the merge comes first: it clears QUEUED, the last remote drop frees") {
        a->drain_returns();
        CHECK(shared_of(p) == (sh(1) | kMerged));
        CHECK(a->live() == 1);
        on_thread(1, [&] { r1_kept.reset(); });
        CHECK(shared_of(p) == 0);
        CHECK(a->stats().remote_frees == 2); // the merge request, then the free
        a->drain_returns();
        CHECK(a->live() == 0);
    }
}

TEST_CASE("zbuf brc: a thread without a core drops the owner's objs (ring and orphans)", "[zbuf][brc]") {
    auto a = make_arena(8u << 20, /*ring=*/2);
    CoreScope core0(0);
    test::LeakCheck leaks;
    std::vector<Slice> v;
    for (int i = 0; i < 5; ++i) v.push_back(a->alloc_slice(2048));
    Slice shared_one = a->alloc_slice(2048);
    Slice nocore_ref;
    on_thread(kNoCore, [&] {
        for (Slice& s : v) s.reset(); // 2 merge requests fit the ring, 3 become orphans
        nocore_ref = shared_one.share(); // no core: counted in shared
    });
    Stats st = a->stats();
    CHECK(st.merge_requests == 5);
    CHECK(st.return_ring_full == 3);
    CHECK(st.deferred == 3);
    CHECK(a->live() == 6);
    a->drain_returns(); // the ring's 2 and the 3 orphans (the owner takes its own)
    CHECK(a->live() == 1);
    CHECK(a->stats().deferred == 0);
    CHECK(shared_of(shared_one.data()) == sh(1));
    shared_one.reset(); // MERGED with shared 1
    on_thread(kNoCore, [&] { nocore_ref.reset(); });
    a->drain_returns();
    CHECK(a->live() == 0);
}

TEST_CASE("zbuf brc: merge requests that meet a full ring wait on the sender's deferred list",
          "[zbuf][brc]") {
    auto a = make_arena(8u << 20, /*ring=*/4);
    CoreScope core0(0);
    test::LeakCheck leaks;
    std::vector<Slice> v;
    std::vector<Slice> kept;
    for (int i = 0; i < 10; ++i) {
        v.push_back(a->alloc_slice(4096));
        if (i % 2) kept.push_back(v.back().share()); // odd ones stay held by the owner
    }
    {
        CoreScope core1(1); // this thread acts as core 1 (nested scope)
        for (Slice& s : v) s.reset();
    }
    Stats st = a->stats();
    CHECK(st.merge_requests == 10);
    CHECK(st.remote_frees == 4);
    CHECK(st.return_ring_full == 6);
    CHECK(st.deferred == 6);
    CHECK(a->live() == 10);
    for (int round = 0; round < 10 && a->stats().deferred != 0; ++round) {
        a->drain_returns();
        CoreScope core1(1);
        a->drain_returns();
    }
    a->drain_returns();
    CHECK(a->stats().deferred == 0);
    CHECK(a->stats().remote_frees == 10);
    CHECK(a->live() == 5); // the merges freed the even ones
    for (Slice& s : kept) CHECK(shared_of(s.data()) == (sh(1) | kMerged));
    kept.clear();
    CHECK(a->live() == 0);
}

#if !defined(NDEBUG) || defined(CRESCENT_DEBUG_CHECKS)
using test::aborts;

TEST_CASE("zbuf brc: debug builds abort on double frees on every path", "[zbuf][brc]") {
    auto a = make_arena(8u << 20);
    CoreScope core0(0);
    // Freed by the owner's merge (biased 0, shared 0).
    std::byte* p = a->alloc(4096).release();
    {
        CoreScope core1(1);
        unref(p); // a merge request
    }
    a->drain_returns();
    CHECK(refcount(p) == 0);
    CHECK(aborts([&] { unref(p); }, "unref: refcount is already 0"));
    CHECK(aborts([&] { CoreScope c1(1); unref(p); }, "unref: refcount is already 0"));
    // Freed by a non-owner after MERGED (biased stays kUnbiased until the next alloc).
    std::byte* q = a->alloc(4096).release();
    {
        CoreScope core1(1);
        zbuf::ref(q);
    }
    unref(q); // the owner's 1 -> 0 with shared 1: MERGED
    {
        CoreScope core1(1);
        unref(q); // the last: freed through the ring
        CHECK(aborts([&] { unref(q); }, "unref: refcount is already 0"));
        CHECK(aborts([&] { zbuf::ref(q); }, "ref: refcount is already 0"));
    }
    a->drain_returns();
    CHECK(aborts([&] { unref(q); }, "unref: refcount is already 0"));
    CHECK(a->live() == 0);
}
#endif

// --- stress -------------------------------------------------------------------

namespace {

// A held reference and the stamp its obj had when it was allocated: a free
// while held lets the owner hand the obj out again with a new stamp.
struct Held {
    Slice s;
    uint64_t stamp = 0;
};

struct Mailbox {
    std::mutex mu;
    std::vector<Held> items;
};

uint64_t stamp_of(const Slice& s) {
    uint64_t v;
    std::memcpy(&v, s.buf().data(), sizeof v);
    return v;
}

} // namespace

TEST_CASE("zbuf brc: stress: random share/move/drop across cores and a thread without one",
          "[zbuf][brc][stress]") {
    uint64_t seed = std::random_device{}();
    if (const char* e = std::getenv("ZBUF_BRC_SEED")) seed = std::strtoull(e, nullptr, 0);
    double seconds = 1.5;
    if (const char* e = std::getenv("ZBUF_BRC_SECONDS")) seconds = std::atof(e);
    if (seconds > 5) seconds = 5;
    std::fprintf(stderr, "zbuf brc stress: seed %llu (rerun with ZBUF_BRC_SEED=%llu)\n",
                 static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
    INFO("seed " << seed << " (rerun with ZBUF_BRC_SEED=" << seed << ")");

    auto a = make_arena(64u << 20, /*ring=*/64); // a small ring: the deferred paths run too
    test::LeakCheck leaks;
    constexpr unsigned kCores = 3;               // cores 0..2, plus one thread without a core
    constexpr unsigned kThreads = kCores + 1;
    constexpr size_t kMaxHeld = 48;
    Mailbox boxes[kThreads];
    std::atomic<uint64_t> next_stamp{1};
    std::atomic<uint64_t> bad_stamps{0}, ops_done{0};
    std::atomic<unsigned> moving{kThreads}; // threads still in the random phase
    std::atomic<unsigned> dropped{0};       // threads that dropped everything
    std::atomic<bool> leftovers{false};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);

    auto worker = [&](unsigned me) {
        std::optional<CoreScope> scope;
        if (me < kCores) scope.emplace(me);
        std::mt19937_64 rng(seed * 7919 + me);
        std::vector<Held> held;
        auto check = [&](const Held& h) {
            if (stamp_of(h.s) != h.stamp) bad_stamps.fetch_add(1);
        };
        uint64_t n = 0;
        while (std::chrono::steady_clock::now() < deadline) {
            for (int k = 0; k < 64; ++k, ++n) {
                unsigned op = unsigned(rng() % 100);
                if (op < 15 && me < kCores && held.size() < kMaxHeld) { // alloc on my core
                    Slice s = a->alloc_slice(rng() % 2 ? 2048 : 4096);
                    if (!s) { a->drain_returns(); continue; }
                    uint64_t st = next_stamp.fetch_add(1);
                    std::memcpy(s.data(), &st, sizeof st);
                    held.push_back({std::move(s), st});
                } else if (op < 35 && !held.empty() && held.size() < kMaxHeld) { // share or sub
                    Held& h = held[rng() % held.size()];
                    check(h);
                    held.push_back({rng() % 2 ? h.s.share() : h.s.sub(8, 16), h.stamp});
                } else if (op < 60 && !held.empty()) { // move to another thread
                    size_t i = rng() % held.size();
                    unsigned to = unsigned(rng() % kThreads);
                    Mailbox& b = boxes[to];
                    std::lock_guard lk(b.mu);
                    if (b.items.size() < kMaxHeld) {
                        check(held[i]);
                        b.items.push_back(std::move(held[i]));
                        held[i] = std::move(held.back());
                        held.pop_back();
                    }
                } else if (op < 85 && !held.empty()) { // drop
                    size_t i = rng() % held.size();
                    check(held[i]);
                    held[i] = std::move(held.back());
                    held.pop_back();
                } else if (op < 95) { // take my mail
                    std::vector<Held> in;
                    {
                        std::lock_guard lk(boxes[me].mu);
                        in.swap(boxes[me].items);
                    }
                    for (Held& h : in) {
                        check(h);
                        if (held.size() < kMaxHeld) held.push_back(std::move(h));
                    }
                } else if (me < kCores) {
                    a->drain_returns();
                }
            }
        }
        ops_done.fetch_add(n);
        for (const Held& h : held) check(h);
        held.clear();
        // Nobody moves any more: drop my mail too, then (cores) drain until
        // every obj is back: each core's merges and parked frees.
        moving.fetch_sub(1);
        while (moving.load() != 0) std::this_thread::yield();
        {
            std::lock_guard lk(boxes[me].mu);
            for (const Held& h : boxes[me].items) check(h);
            boxes[me].items.clear();
        }
        dropped.fetch_add(1);
        while (dropped.load() != kThreads) std::this_thread::yield();
        if (me >= kCores) return;
        const auto stop = std::chrono::steady_clock::now() + std::chrono::seconds(3);
        while (a->live() != 0 || a->stats().deferred != 0) {
            if (std::chrono::steady_clock::now() > stop) {
                leftovers = true;
                break;
            }
            a->drain_returns();
            std::this_thread::yield();
        }
    };
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < kThreads; ++t) ts.emplace_back(worker, t);
    for (auto& t : ts) t.join();

    Stats st = a->stats();
    std::fprintf(stderr, "zbuf brc stress: %llu ops, %llu merge requests, %llu remote frees, %llu ring full\n",
                 static_cast<unsigned long long>(ops_done.load()), static_cast<unsigned long long>(st.merge_requests),
                 static_cast<unsigned long long>(st.remote_frees), static_cast<unsigned long long>(st.return_ring_full));
    INFO("ops " << ops_done.load() << ", merge requests " << st.merge_requests << ", remote frees "
                << st.remote_frees << ", ring full " << st.return_ring_full << ", live " << a->live());
    CHECK(bad_stamps.load() == 0);
    CHECK_FALSE(leftovers.load());
    CHECK(a->live() == 0);
    CHECK(st.deferred == 0);
    CHECK(st.merge_requests > 0);             // the protocol ran, not only the owner path
    CHECK(st.remote_frees > st.merge_requests); // and MERGED objs freed by non-owners
}
