// crescent — zbuf micro-benchmark (issue 2). Not a test: prints a table.
//
// In one process and one run, on one (EAL-pinned) thread:
//   zbuf alloc+free 4 KiB, hot per-core cache   Arena::alloc + Zbuf::reset
//   zbuf ptr -> obj                             obj_base() of interior pointers
//   zbuf ref + unref                            on the owner core: biased 1 -> 2 -> 1, two plain
//                                               load+store pairs, no locked instruction
//   rte_mempool get+put, per-lcore cache        rte_mempool_get / rte_mempool_put
//   jemalloc mallocx+dallocx 4 KiB              jemalloc's own API
//   glibc malloc+free 4 KiB                     libc.so.6's malloc (jemalloc is linked
//                                               in and interposes plain malloc)
// and the ratios zbuf/rte_mempool and zbuf/jemalloc, against the targets
// (<= 1.0, <= 0.5, ptr->obj <= 5 ns). Each figure is the best of several rounds
// (the machines are shared and noisy; the minimum is the code path's cost).
//
//   bench_zbuf [--rounds N] [--ops N]
#include <crescent/zbuf.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <jemalloc/jemalloc.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_version.h>

#include "tests/support/eal_cleanup.hpp"

using namespace crescent;

namespace {

// Keep the compiler from optimising a value or memory away.
template <class T>
inline void escape(T const& v) {
    asm volatile("" : : "r,m"(v) : "memory");
}

struct Result {
    const char* name;
    double ns = 0;
};

// Best-of-`rounds` ns per op of fn(ops).
template <class F>
double measure(unsigned rounds, uint64_t ops, F fn) {
    fn(ops / 10); // warm up
    double best = 1e30;
    for (unsigned r = 0; r < rounds; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        fn(ops);
        auto t1 = std::chrono::steady_clock::now();
        best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / double(ops));
    }
    return best;
}

bool start_eal() {
    std::string prefix = "bench_zbuf_" + std::to_string(getpid());
    std::vector<std::string> args{"bench_zbuf", "-l",          "0",          "--no-huge",   "--no-pci",
                                  "-m",         "256",         "--file-prefix", prefix,     "--log-level=error",
                                  "--no-telemetry"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return rte_eal_init(int(argv.size()), argv.data()) >= 0;
}

} // namespace

int main(int argc, char** argv) {
    unsigned rounds = 7;
    uint64_t ops = 4'000'000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--rounds")) rounds = unsigned(std::atoi(argv[i + 1]));
        if (!std::strcmp(argv[i], "--ops")) ops = uint64_t(std::atoll(argv[i + 1]));
    }
    if (rounds == 0 || ops < 100) {
        std::fprintf(stderr, "usage: bench_zbuf [--rounds N] [--ops N>=100]\n");
        return 2;
    }

    // EAL first: it pins this thread to lcore 0, so every figure below runs on
    // the same, pinned core.
    if (!start_eal()) {
        std::fprintf(stderr, "bench_zbuf: rte_eal_init failed\n");
        return 1;
    }

    zbuf::Config cfg;
    cfg.bytes = 64u << 20;
    cfg.backing = zbuf::Backing::Auto;
    std::string err;
    auto arena = zbuf::Arena::create(cfg, &err);
    if (!arena) {
        std::fprintf(stderr, "bench_zbuf: arena: %s\n", err.c_str());
        return 1;
    }
    zbuf::CoreScope core(0);

    std::vector<Result> res;

    // 1. zbuf alloc+free, 4 KiB, hot per-core cache.
    res.push_back({"zbuf alloc+free 4 KiB (hot per-core cache)",
                   measure(rounds, ops, [&](uint64_t n) {
                       for (uint64_t i = 0; i < n; ++i) {
                           Zbuf z = arena->alloc(4096);
                           escape(z.data());
                       }
                   })});

    // 2. ptr -> obj: interior pointers spread over objs of every class.
    std::vector<Zbuf> held;
    std::vector<const std::byte*> ptrs;
    for (uint32_t size : cfg.size_classes)
        for (int i = 0; i < 64; ++i) {
            held.push_back(arena->alloc(size));
            if (!held.back()) return 1;
        }
    uint64_t seed = 88172645463325252ull;
    for (int i = 0; i < 4096; ++i) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        const Zbuf& z = held[seed % held.size()];
        ptrs.push_back(z.data() + (seed >> 32) % z.capacity());
    }
    size_t mismatches = 0;
    for (auto* p : ptrs)
        if (!zbuf::contains(p) || zbuf::obj_base(zbuf::obj_base(p)) != zbuf::obj_base(p)) ++mismatches;
    res.push_back({"zbuf ptr -> obj (interior pointers, all classes)",
                   measure(rounds, ops, [&](uint64_t n) {
                       for (uint64_t i = 0; i < n; ++i) escape(zbuf::obj_base(ptrs[i & 4095]));
                   })});

    // 3. ref + unref of a once-held obj on its owner core (biased reference
    //    counting: `biased` 1 -> 2 -> 1, plain loads and stores, no locked
    //    instruction; before it, a plain store and one `lock sub`).
    std::byte* shared = held[64].data();
    res.push_back({"zbuf ref+unref (count 1 -> 2 -> 1)",
                   measure(rounds, ops, [&](uint64_t n) {
                       for (uint64_t i = 0; i < n; ++i) {
                           zbuf::ref(shared);
                           zbuf::unref(shared);
                       }
                   })});
    held.clear();

    // 4. rte_mempool get+put through the per-lcore cache.
    rte_mempool* mp = rte_mempool_create("bench_zbuf", 8191, 4096, 256, 0, nullptr, nullptr, nullptr,
                                         nullptr, SOCKET_ID_ANY, 0);
    if (!mp) {
        std::fprintf(stderr, "bench_zbuf: rte_mempool_create: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    res.push_back({"rte_mempool get+put 4 KiB (per-lcore cache 256)",
                   measure(rounds, ops, [&](uint64_t n) {
                       for (uint64_t i = 0; i < n; ++i) {
                           void* o;
                           if (rte_mempool_get(mp, &o) != 0) std::abort();
                           escape(o);
                           rte_mempool_put(mp, o);
                       }
                   })});

    // 5. jemalloc, its own API (no interposition question).
    res.push_back({"jemalloc mallocx+dallocx 4 KiB",
                   measure(rounds, ops, [&](uint64_t n) {
                       for (uint64_t i = 0; i < n; ++i) {
                           void* p = mallocx(4096, 0);
                           escape(p);
                           dallocx(p, 0);
                       }
                   })});

    // 6. glibc malloc: from libc.so.6 itself, since jemalloc interposes malloc.
    void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    auto libc_malloc = libc ? reinterpret_cast<void* (*)(size_t)>(dlsym(libc, "malloc")) : nullptr;
    auto libc_free = libc ? reinterpret_cast<void (*)(void*)>(dlsym(libc, "free")) : nullptr;
    bool glibc_ok = libc_malloc && libc_free && reinterpret_cast<void*>(libc_malloc) != reinterpret_cast<void*>(&mallocx);
    if (glibc_ok)
        res.push_back({"glibc malloc+free 4 KiB",
                       measure(rounds, ops, [&](uint64_t n) {
                           for (uint64_t i = 0; i < n; ++i) {
                               void* p = libc_malloc(4096);
                               escape(p);
                               libc_free(p);
                           }
                       })});

    // --- report ---------------------------------------------------------------
    auto st = arena->stats();
    const char* backing = st.backing == zbuf::Backing::Hugetlb ? "hugetlb 2 MiB pages" : "anonymous 4 KiB pages";
    std::printf("crescent zbuf micro-benchmark  (%s; arena: %s; best of %u rounds x %llu ops, one pinned core)\n\n",
                rte_version(), backing, rounds, static_cast<unsigned long long>(ops));
    std::printf("  %-52s %10s\n", "operation", "ns/op");
    std::printf("  %-52s %10s\n", "----------------------------------------------------", "----------");
    for (auto& r : res) std::printf("  %-52s %10.2f\n", r.name, r.ns);
    if (!glibc_ok) std::printf("  %-52s %10s\n", "glibc malloc+free 4 KiB", "n/a");

    double zb = res[0].ns, lookup = res[1].ns, mpool = res[3].ns, je = res[4].ns;
    double r_mp = zb / mpool, r_je = zb / je;
    std::printf("\n  %-52s %10.2f   (target <= 1.00: %s)\n", "ratio zbuf / rte_mempool", r_mp, r_mp <= 1.0 ? "met" : "MISSED");
    std::printf("  %-52s %10.2f   (target <= 0.50: %s)\n", "ratio zbuf / jemalloc", r_je, r_je <= 0.5 ? "met" : "MISSED");
    std::printf("  %-52s %10.2f   (target <= 5 ns: %s)\n", "ptr -> obj", lookup, lookup <= 5.0 ? "met" : "MISSED");
    if (mismatches) std::printf("\n  WARNING: %zu interior pointers did not map back to their obj\n", mismatches);

    rte_mempool_free(mp);
    if (arena->live() != 0) std::printf("\n  WARNING: %llu zbufs leaked\n", static_cast<unsigned long long>(arena->live()));
    arena.reset();
    crescent::test::eal_cleanup_with_run_dir();  // and /var/run/dpdk/bench_zbuf_<pid>
    return 0;
}
