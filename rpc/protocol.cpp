// crescent — the RPC wire format: the 32-byte header and the names of kinds and
// statuses (include/crescent/rpc/protocol.hpp has the layout).
//
// Every field is stored and loaded byte by byte in little-endian order, so the
// code is right on any host and never depends on the layout of `Header` in
// memory (compilers turn the shifts into single loads and stores on x86-64).
#include <crescent/rpc/protocol.hpp>

#include <cstdio>

namespace crescent::rpc {

namespace {

void store_le16(std::byte* p, uint16_t v) {
    p[0] = std::byte(v);
    p[1] = std::byte(v >> 8);
}
void store_le32(std::byte* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = std::byte(v >> (8 * i));
}
void store_le64(std::byte* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = std::byte(v >> (8 * i));
}
uint16_t load_le16(const std::byte* p) { return uint16_t(uint16_t(p[0]) | uint16_t(p[1]) << 8); }
uint32_t load_le32(const std::byte* p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
    return v;
}
uint64_t load_le64(const std::byte* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
    return v;
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
