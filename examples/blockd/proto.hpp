// crescent-blockd — the block protocol over crescent RPC (rpc/protocol.hpp).
//
// Methods, each with a 16-byte little-endian metadata part; block data travels
// as the RPC message's data part (zbuf slices, never copied by the framework):
//
//   method     request meta              request data   response meta               response data
//   READ  = 1  {offset, len, 0}          -              {offset, len, crc of data}  len bytes
//   WRITE = 2  {offset, len, crc}        len bytes      {offset, len, crc}          -
//   FLUSH = 3  {0, 0, 0} (or no meta)    -              {0, 0, 0}                   -
//
//   BlockMeta:  offset  size
//                    0     8   offset   bytes into the volume, a multiple of 4096
//                    8     4   len      bytes, a multiple of 4096, > 0 (READ/WRITE)
//                   12     4   crc32c   CRC32C (Castagnoli) of the data
//
// A WRITE's len must equal its data length. The server checks a WRITE's CRC
// before storing it and computes a READ reply's CRC, unless it runs with
// --no-crc (then it leaves the data untouched, and a READ reply's crc is 0).
// Refusals come back as application statuses (rpc::Status >= 1000, below);
// malformed metadata as rpc::Status::BadRequest.
#pragma once

#include "examples/blockd/volume.hpp"

#include <crescent/rpc/protocol.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace crescent::blockd {

enum Method : uint32_t {
    kRead = 1,
    kWrite = 2,
    kFlush = 3,
};

inline constexpr size_t kMetaSize = 16;

struct BlockMeta {
    uint64_t offset = 0;
    uint32_t len = 0;
    uint32_t crc32c = 0;

    void encode(std::byte* out) const {
        for (int i = 0; i < 8; ++i) out[i] = std::byte(offset >> (8 * i));
        for (int i = 0; i < 4; ++i) out[8 + i] = std::byte(len >> (8 * i));
        for (int i = 0; i < 4; ++i) out[12 + i] = std::byte(crc32c >> (8 * i));
    }
    // false when `in` is not exactly kMetaSize bytes.
    static bool decode(std::span<const std::byte> in, BlockMeta* m) {
        if (in.size() != kMetaSize) return false;
        m->offset = 0;
        m->len = m->crc32c = 0;
        for (int i = 0; i < 8; ++i) m->offset |= uint64_t(std::to_integer<uint8_t>(in[i])) << (8 * i);
        for (int i = 0; i < 4; ++i) m->len |= uint32_t(std::to_integer<uint8_t>(in[8 + i])) << (8 * i);
        for (int i = 0; i < 4; ++i) m->crc32c |= uint32_t(std::to_integer<uint8_t>(in[12 + i])) << (8 * i);
        return true;
    }
};

// Application statuses: the volume's refusals (kStatusBase + VolStatus), a
// WRITE whose data does not match its CRC, and a WRITE whose meta len is not
// its data length.
inline constexpr uint32_t kStatusBase = uint32_t(rpc::Status::kAppStatusBase);
inline constexpr uint32_t kCrcMismatch = kStatusBase + 100;
inline constexpr uint32_t kLengthMismatch = kStatusBase + 101;

inline rpc::Status app_status(VolStatus s) { return rpc::Status(kStatusBase + uint32_t(s)); }
inline rpc::Status app_status(uint32_t code) { return rpc::Status(code); }

// "misaligned", "crc_mismatch", ... for an application status; "" for others.
inline std::string app_status_name(rpc::Status s) {
    uint32_t v = uint32_t(s);
    if (v == kCrcMismatch) return "crc_mismatch";
    if (v == kLengthMismatch) return "length_mismatch";
    if (v >= kStatusBase && v < kStatusBase + kStatusCount) return std::string(status_name(VolStatus(v - kStatusBase)));
    return "";
}

} // namespace crescent::blockd
