// crescent fuzz targets — what every target shares: one anonymous zbuf arena
// for the whole run (the fuzzing thread registered as core 0), and a
// diagnostic abort when an invariant does not hold.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <crescent/zbuf.hpp>

namespace crescent::fuzz {

[[noreturn]] inline void fail(const char* prog, const char* what) {
    std::fprintf(stderr, "%s: invariant violated: %s\n", prog, what);
    std::abort();
}

// The process's arena (64 MiB, anonymous memory), created on first use.
inline zbuf::Arena* arena(const char* prog, size_t bytes = 64u << 20) {
    static std::unique_ptr<zbuf::Arena> a = [&] {
        zbuf::Config c;
        c.backing = zbuf::Backing::Anonymous;
        c.bytes = bytes;
        std::string err;
        auto p = zbuf::Arena::create(c, &err);
        if (!p) {
            std::fprintf(stderr, "%s: cannot create the zbuf arena: %s\n", prog, err.c_str());
            std::abort();
        }
        return p;
    }();
    static zbuf::CoreScope core(0);  // the fuzzing thread is core 0 for the whole run
    return a.get();
}

} // namespace crescent::fuzz
