// Helpers shared by the wire unit tests: an independent, deliberately naive
// Internet checksum (RFC 1071 §1, one 16-bit big-endian word at a time) and
// byte-vector utilities. Nothing here calls into stack/wire's checksum code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "stack/wire/wire.hpp"

namespace wire_test {

using ByteVec = std::vector<std::byte>;

inline ByteVec bytes(std::initializer_list<int> v)
{
    ByteVec out;
    for (int b : v)
        out.push_back(std::byte(b));
    return out;
}

inline void append(ByteVec& to, const ByteVec& from) { to.insert(to.end(), from.begin(), from.end()); }

// Byte-at-a-time one's-complement sum, folded but not inverted.
inline uint16_t ref_sum(std::span<const std::byte> d, uint32_t start = 0)
{
    uint64_t s = start;
    for (size_t i = 0; i < d.size(); i += 2) {
        uint32_t hi = uint8_t(d[i]);
        uint32_t lo = i + 1 < d.size() ? uint8_t(d[i + 1]) : 0;
        s += hi << 8 | lo;
    }
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return uint16_t(s);
}

inline uint16_t ref_csum(std::span<const std::byte> d, uint32_t start = 0) { return uint16_t(~ref_sum(d, start)); }

inline uint16_t get16(const ByteVec& v, size_t off) { return uint16_t(uint8_t(v[off]) << 8 | uint8_t(v[off + 1])); }
inline void put16(ByteVec& v, size_t off, uint16_t x)
{
    v[off] = std::byte(x >> 8);
    v[off + 1] = std::byte(x);
}

// Recomputes the IPv4 header checksum of the packet starting at `ip_off`.
inline void fix_ip_csum(ByteVec& f, size_t ip_off)
{
    size_t ihl = (uint8_t(f[ip_off]) & 0x0f) * 4;
    put16(f, ip_off + 10, 0);
    put16(f, ip_off + 10, ref_csum(std::span<const std::byte>(f).subspan(ip_off, ihl)));
}

// Recomputes the TCP checksum of the segment bounded by the IPv4 total length.
inline void fix_tcp_csum(ByteVec& f, size_t ip_off)
{
    size_t ihl = (uint8_t(f[ip_off]) & 0x0f) * 4;
    size_t total = get16(f, ip_off + 2);
    size_t tcp_off = ip_off + ihl;
    size_t len = total - ihl;
    // Pseudo-header as bytes: src, dst, zero, protocol, length.
    ByteVec pseudo(f.begin() + ptrdiff_t(ip_off + 12), f.begin() + ptrdiff_t(ip_off + 20));
    append(pseudo, bytes({0, 6, int(len >> 8), int(len & 0xff)}));
    put16(f, tcp_off + 16, 0);
    uint16_t pseudo_sum = ref_sum(pseudo);
    put16(f, tcp_off + 16, ref_csum(std::span<const std::byte>(f).subspan(tcp_off, len), pseudo_sum));
}

} // namespace wire_test
