// crescent-blockd — CRC32C (Castagnoli, polynomial 0x1EDC6F41, reflected
// 0x82F63B78; RFC 3720 §12.1 / B.4), the checksum blockd's clients put in a
// request's metadata and verify on every read.
//
// Two implementations with the same results:
//   - hardware: SSE4.2 `crc32` (8 bytes per instruction), compiled with a
//     target attribute and chosen at run time by __builtin_cpu_supports, so the
//     binary still runs on CPUs without SSE4.2;
//   - software: slicing-by-8 over tables built at compile time.
//
// Values are the finished CRC (initial ~0, final xor ~0), and extend() chains
// them: crc32c(a + b) == crc32c_extend(crc32c(a), b), so a message held in
// several zbuf slices is checksummed slice by slice without copying.
#pragma once

#include <crescent/zbuf.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace crescent::blockd {

namespace crc32c_detail {

inline constexpr uint32_t kPoly = 0x82F63B78u; // reflected Castagnoli

constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
    std::array<std::array<uint32_t, 256>, 8> t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
        t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
        for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    return t;
}
inline constexpr auto kTables = make_tables();

// `state` is the running register (not inverted).
inline uint32_t update_sw(uint32_t state, const unsigned char* p, size_t n) {
    const auto& t = kTables;
    while (n >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8); // little-endian hosts only (x86-64, aarch64)
        w ^= state;
        state = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^
                t[4][(w >> 24) & 0xff] ^ t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^
                t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) state = (state >> 8) ^ t[0][(state ^ *p++) & 0xff];
    return state;
}

#if defined(__x86_64__)
[[gnu::target("sse4.2")]] inline uint32_t update_hw(uint32_t state, const unsigned char* p, size_t n) {
    uint64_t s = state;
    while (n >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        s = _mm_crc32_u64(s, w);
        p += 8;
        n -= 8;
    }
    uint32_t s32 = uint32_t(s);
    while (n--) s32 = _mm_crc32_u8(s32, *p++);
    return s32;
}
inline bool hw_supported() {
    static const bool ok = __builtin_cpu_supports("sse4.2");
    return ok;
}
#else
inline uint32_t update_hw(uint32_t state, const unsigned char* p, size_t n) { return update_sw(state, p, n); }
inline bool hw_supported() { return false; }
#endif

} // namespace crc32c_detail

enum class Crc32cImpl : uint8_t { Auto, Software, Hardware };

// True when the SSE4.2 instruction is used by Auto.
inline bool crc32c_hw_available() { return crc32c_detail::hw_supported(); }

// CRC32C of `n` more bytes after a message whose CRC32C is `crc` (0 for none).
// Hardware asked for but absent falls back to software.
inline uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n, Crc32cImpl impl = Crc32cImpl::Auto) {
    auto* p = static_cast<const unsigned char*>(data);
    bool hw = impl != Crc32cImpl::Software && crc32c_detail::hw_supported();
    uint32_t s = ~crc;
    s = hw ? crc32c_detail::update_hw(s, p, n) : crc32c_detail::update_sw(s, p, n);
    return ~s;
}

inline uint32_t crc32c(const void* data, size_t n, Crc32cImpl impl = Crc32cImpl::Auto) {
    return crc32c_extend(0, data, n, impl);
}

// CRC32C of the bytes of `slices`, in order.
inline uint32_t crc32c(std::span<const Slice> slices, Crc32cImpl impl = Crc32cImpl::Auto) {
    uint32_t c = 0;
    for (const Slice& s : slices) c = crc32c_extend(c, s.data(), s.size(), impl);
    return c;
}
inline uint32_t crc32c(std::span<Slice> slices, Crc32cImpl impl = Crc32cImpl::Auto) {
    return crc32c(std::span<const Slice>(slices.data(), slices.size()), impl);
}

} // namespace crescent::blockd
