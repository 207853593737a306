// Request/response bytes for the RPC tests: a pattern that depends on the
// call and the offset, written into arena slices of at most 16 KiB and
// checked byte by byte on the way back.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <crescent/zbuf.hpp>

namespace crescent::test {

inline uint8_t pattern(uint64_t call, uint64_t off) { return uint8_t((call * 131 + off * 7) >> 1); }

// `n` bytes of pattern(call, .) in 16 KiB arena slices; empty when the arena is.
inline std::vector<Slice> make_data(uint64_t call, size_t n) {
    std::vector<Slice> v;
    for (size_t off = 0; off < n;) {
        size_t k = std::min<size_t>(n - off, 16384);
        Slice s = zbuf::Arena::current()->alloc_slice(k);
        if (!s) return {};
        for (size_t i = 0; i < k; ++i) s.data()[i] = std::byte(pattern(call, off + i));
        v.push_back(std::move(s));
        off += k;
    }
    return v;
}

// True when `d` holds exactly `n` bytes of pattern(call, .).
inline bool check_data(uint64_t call, std::span<Slice> d, size_t n) {
    size_t off = 0;
    for (const Slice& s : d)
        for (size_t i = 0; i < s.size(); ++i, ++off)
            if (uint8_t(s.data()[i]) != pattern(call, off)) return false;
    return off == n;
}

}  // namespace crescent::test
