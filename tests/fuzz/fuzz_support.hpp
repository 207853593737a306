// crescent fuzz targets — what every target shares: one anonymous zbuf arena
// for the whole run (the fuzzing thread registered as core 0), and a
// diagnostic abort when an invariant does not hold.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

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

// An input read as: `nsplit` little-endian u16 split points (after the
// config byte at data[0]), then the stream itself. `cuts` are the slice
// boundaries in the stream: sorted, from 0 to len inclusive.
struct Split {
    const uint8_t* stream = nullptr;
    size_t len = 0;
    std::vector<size_t> cuts;
};
inline Split split_input(const uint8_t* data, size_t size, size_t nsplit) {
    size_t off = 1;
    std::vector<size_t> raw;
    for (size_t i = 0; i < nsplit && off + 2 <= size; ++i, off += 2)
        raw.push_back(size_t(data[off]) | size_t(data[off + 1]) << 8);
    off = std::min(off, size);
    Split sp;
    sp.stream = data + off;
    sp.len = size - off;
    sp.cuts = {0, sp.len};
    for (size_t r : raw) sp.cuts.push_back(r % (sp.len + 1));
    std::sort(sp.cuts.begin(), sp.cuts.end());
    return sp;
}

} // namespace crescent::fuzz
