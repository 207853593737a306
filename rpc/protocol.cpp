// crescent — the RPC wire format: the 32-byte header and the names of kinds and
// statuses (include/crescent/rpc/protocol.hpp has the layout).
//
// Every field is stored and loaded in little-endian order, one unaligned
// load or store each (byte-swapped on a big-endian host), so the code never
// depends on the layout of `Header` in memory. (GCC 12 did not merge the
// byte-by-byte shifts this replaced: 8 loads for a 64-bit field.)
#include <crescent/rpc/protocol.hpp>

#include <bit>
#include <cstdio>
#include <cstring>

namespace crescent::rpc {

namespace {

// Little-endian fields: one load or store (and a byte swap on a big-endian
// host), at any alignment.
inline uint16_t bswap(uint16_t v) { return __builtin_bswap16(v); }
inline uint32_t bswap(uint32_t v) { return __builtin_bswap32(v); }
inline uint64_t bswap(uint64_t v) { return __builtin_bswap64(v); }
template <class T>
T to_le(T v) {
    if constexpr (std::endian::native == std::endian::little) return v;
    else return bswap(v);
}
void store_le16(std::byte* p, uint16_t v) {
    v = to_le(v);
    std::memcpy(p, &v, sizeof v);
}
void store_le32(std::byte* p, uint32_t v) {
    v = to_le(v);
    std::memcpy(p, &v, sizeof v);
}
void store_le64(std::byte* p, uint64_t v) {
    v = to_le(v);
    std::memcpy(p, &v, sizeof v);
}
uint16_t load_le16(const std::byte* p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return to_le(v);
}
uint32_t load_le32(const std::byte* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return to_le(v);
}
uint64_t load_le64(const std::byte* p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return to_le(v);
}

// Names of values outside the enums ("status(77)", "app(1003)", "kind(9)") are
// formatted into a small per-thread ring, so that a few of them can appear in
// one log statement. Each stays valid until 8 more such names were formatted
// on the same thread.
std::string_view format_unknown(const char* fmt, unsigned v) {
    constexpr int kSlots = 8;
    thread_local char ring[kSlots][24];
    thread_local int next = 0;
    char* buf = ring[next];
    next = (next + 1) % kSlots;
    int n = std::snprintf(buf, sizeof ring[0], fmt, v);
    return {buf, size_t(n)};
}

} // namespace

void Header::encode(std::byte* out) const {
    store_le32(out + 0, magic);
    out[4] = std::byte(version);
    out[5] = std::byte(kind);
    store_le16(out + 6, flags);
    store_le32(out + 8, method);
    store_le32(out + 12, status);
    store_le64(out + 16, call_id);
    store_le32(out + 24, meta_len);
    store_le32(out + 28, data_len);
}

Header Header::decode(const std::byte* in) {
    Header h;
    h.magic = load_le32(in + 0);
    h.version = uint8_t(in[4]);
    h.kind = Kind(uint8_t(in[5]));
    h.flags = load_le16(in + 6);
    h.method = load_le32(in + 8);
    h.status = load_le32(in + 12);
    h.call_id = load_le64(in + 16);
    h.meta_len = load_le32(in + 24);
    h.data_len = load_le32(in + 28);
    return h;
}

std::string_view kind_name(Kind k) {
    switch (k) {
    case Kind::Request: return "Request";
    case Kind::Response: return "Response";
    case Kind::Error: return "Error";
    case Kind::OneWay: return "OneWay";
    }
    return format_unknown("kind(%u)", unsigned(k));
}

std::string_view status_name(Status s) {
    switch (s) {
    case Status::Ok: return "Ok";
    case Status::UnknownMethod: return "UnknownMethod";
    case Status::BadRequest: return "BadRequest";
    case Status::TooLarge: return "TooLarge";
    case Status::PermissionDenied: return "PermissionDenied";
    case Status::RateLimited: return "RateLimited";
    case Status::DeadlineExceeded: return "DeadlineExceeded";
    case Status::ConnectionLost: return "ConnectionLost";
    case Status::QueueFull: return "QueueFull";
    case Status::Unavailable: return "Unavailable";
    case Status::Cancelled: return "Cancelled";
    case Status::Internal: return "Internal";
    case Status::ProtocolError: return "ProtocolError";
    case Status::Shutdown: return "Shutdown";
    case Status::kAppStatusBase: break; // the first application status: "app(1000)"
    }
    uint32_t v = uint32_t(s);
    return format_unknown(v >= uint32_t(Status::kAppStatusBase) ? "app(%u)" : "status(%u)", v);
}

} // namespace crescent::rpc
