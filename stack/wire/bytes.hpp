// crescent — big-endian field access for the wire parsers and emitters.
//
// Internal to stack/wire. Callers have already checked `off + width <= size`;
// the accessors are byte-wise so they are safe at any alignment, and compilers
// turn them into one load/store plus a bswap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace crescent::wire::detail {

inline uint8_t ld8(std::span<const std::byte> b, size_t off) { return uint8_t(b[off]); }

inline uint16_t ld16(std::span<const std::byte> b, size_t off)
{
    return uint16_t(uint16_t(uint8_t(b[off])) << 8 | uint8_t(b[off + 1]));
}

inline uint32_t ld32(std::span<const std::byte> b, size_t off)
{
    return uint32_t(uint8_t(b[off])) << 24 | uint32_t(uint8_t(b[off + 1])) << 16 |
           uint32_t(uint8_t(b[off + 2])) << 8 | uint32_t(uint8_t(b[off + 3]));
}

inline void st8(std::span<std::byte> b, size_t off, uint8_t v) { b[off] = std::byte(v); }

inline void st16(std::span<std::byte> b, size_t off, uint16_t v)
{
    b[off] = std::byte(v >> 8);
    b[off + 1] = std::byte(v);
}

inline void st32(std::span<std::byte> b, size_t off, uint32_t v)
{
    b[off] = std::byte(v >> 24);
    b[off + 1] = std::byte(v >> 16);
    b[off + 2] = std::byte(v >> 8);
    b[off + 3] = std::byte(v);
}

} // namespace crescent::wire::detail
