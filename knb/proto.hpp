// knb — what a knb client and a knb server say to each other over crescent's
// RPC (rpc/protocol.hpp framing; --proto rpc).
//
//   method 1 "knb.echo"  request: meta = the response size (u32 LE), data =
//                        the request bytes. Response: the request's own
//                        slices when the sizes match (zero-copy echo), else a
//                        long-lived buffer holding pattern(offset), shared.
//   method 2 "knb.info"  no request data. Response meta: "knb=<version>;
//                        stack=..;mode=..;threads=N;wait=..;proto=rpc"; the
//                        client meshes with `threads` engines and refuses a
//                        version it does not speak.
//   method 3 "knb.stats" no request data. Response meta: "cpu_ns=..;
//                        retrans=..;drops=..;requests=..[;timeouts=..]" — the server
//                        process's CPU time (getrusage) and its stack's
//                        counters, read at the start and end of the window.
//
// --proto echo is RFC 862: bytes back as they came, no framing; any echo
// server will do (crescent-echo, kernel-echo, other stacks').
//
// Request bytes: [0, 8) carry the call number little-endian, the last 8 bytes
// carry it xor 0x5a (when the message is 16 bytes or more); the client checks
// both in every response (echoed), or pattern() at both ends (pre-filled).
#pragma once

#include <bit>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace knb {

static_assert(std::endian::native == std::endian::little, "stamp_ends() stores little-endian words");

inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kMethodEcho = 1;
inline constexpr uint32_t kMethodInfo = 2;
inline constexpr uint32_t kMethodStats = 3;

// The pre-filled response buffer's byte at `off`.
inline uint8_t pattern(uint64_t off) { return uint8_t(off * 7 + 3); }

// The ends of request `n` (a message of 16 bytes or more): byte p of [0, 8)
// is byte p of n; the byte `back` places before the end is byte `back` of
// n ^ 0x5a5a5a5a5a5a5a5a. Two 8-byte stores / compares per message, for the
// client's per-call path (the byte-wise rule is client.cpp's expected()).
inline uint64_t tail_word(uint64_t n) {
    const uint64_t t = n ^ 0x5a5a5a5a5a5a5a5aull;
    return __builtin_bswap64(t);  // memory order: byte 7 of t first, byte 0 last
}
inline void stamp_ends(std::byte* head, std::byte* tail, uint64_t n) {
    const uint64_t h = n, t = tail_word(n);  // little-endian host (x86-64)
    std::memcpy(head, &h, 8);
    std::memcpy(tail, &t, 8);
}
inline bool ends_match(const std::byte* head, const std::byte* tail, uint64_t n) {
    uint64_t h, t;
    std::memcpy(&h, head, 8);
    std::memcpy(&t, tail, 8);
    return h == n && t == tail_word(n);
}

// "k1=v1;k2=v2" lookups for the info/stats metadata.
inline std::string_view kv_get(std::string_view s, std::string_view key) {
    while (!s.empty()) {
        size_t semi = s.find(';');
        std::string_view item = s.substr(0, semi);
        s = semi == std::string_view::npos ? std::string_view() : s.substr(semi + 1);
        size_t eq = item.find('=');
        if (eq != std::string_view::npos && item.substr(0, eq) == key) return item.substr(eq + 1);
    }
    return {};
}
inline bool kv_u64(std::string_view s, std::string_view key, uint64_t* out) {
    std::string_view v = kv_get(s, key);
    if (v.empty()) return false;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
    return ec == std::errc() && p == v.data() + v.size();
}

}  // namespace knb
