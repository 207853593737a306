// docs/examples/blob_proto.hpp — the wire contract of the blob-store example
// (rpc_server.cpp, rpc_client.cpp): method ids, the metadata layout and the
// application status. The RPC layer carries the bytes; what they mean is
// agreed here, on both sides.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include <crescent/rpc/protocol.hpp>

namespace blob {

enum Method : uint32_t {
    kPut = 1,   // meta: key (8 bytes, LE); data: the value           -> reply: empty
    kGet = 2,   // meta: key                                          -> reply data: the value
    kSync = 3,  // nothing; answered once "stored" (a deferred reply)  -> reply: empty
};

// Application statuses start at kAppStatusBase (0..999 are the framework's).
inline constexpr crescent::rpc::Status kNotFound =
    crescent::rpc::Status(uint32_t(crescent::rpc::Status::kAppStatusBase) + 1);

// The 8-byte key metadata (little-endian on the wire; x86 is).
inline std::array<std::byte, 8> key_meta(uint64_t key) {
    std::array<std::byte, 8> m;
    std::memcpy(m.data(), &key, 8);
    return m;
}
inline bool parse_key(std::span<const std::byte> meta, uint64_t* key) {
    if (meta.size() != 8) return false;
    std::memcpy(key, meta.data(), 8);
    return true;
}

} // namespace blob
