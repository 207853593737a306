// crescent — the RPC wire format (rpc/, Luna §9 "io-vector-oriented APIs").
//
// Every message is a fixed 32-byte little-endian header, then `meta_len` bytes
// of metadata (small, parsed by the application: a block request's offset,
// length and CRC), then `data_len` bytes of data (the bulk: it travels as zbuf
// slices from the sender's buffers to the receiver's handler and is never
// copied, serialized or even looked at by the framework — marshal once).
//
//   offset  size  field
//        0     4  magic      "CRPC" (0x43 0x52 0x50 0x43 on the wire)
//        4     1  version    kVersion
//        5     1  kind       Kind
//        6     2  flags      reserved, 0 (receivers ignore unknown bits)
//        8     4  method     method id (responses echo the request's)
//       12     4  status     Status (0 in requests)
//       16     8  call_id    chosen by the caller, echoed by the response
//       24     4  meta_len   bytes of metadata that follow the header
//       28     4  data_len   bytes of data that follow the metadata
//
// A response or error carries the call id of its request; an Error message's
// metadata is a human-readable reason (UTF-8, no terminator). One-way
// requests get no response at all (not even an error).
//
// Receivers enforce Limits: a header with a bad magic or an unsupported
// version, or a length above the limit, closes the connection (the stream
// cannot be resynchronised); an unknown method is answered with an Error
// (UnknownMethod) and the connection goes on. Every case bumps its own
// counter (rpc::ServerStats / rpc::ChannelStats).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace crescent::rpc {

inline constexpr uint32_t kMagic = 0x43505243u;  // little-endian "CRPC"
inline constexpr uint8_t kVersion = 1;    // the header version sent; others close the connection
inline constexpr size_t kHeaderSize = 32;  // bytes of the fixed header on the wire

// The message kind (header byte 5).
enum class Kind : uint8_t {
    Request = 0,   // expects a Response or an Error with the same call id
    Response = 1,  // status Ok (0) or an application status
    Error = 2,     // the framework refused or failed the call; meta = reason
    OneWay = 3,    // a request without a reply
};
std::string_view kind_name(Kind k);  // "Request", "Response", "Error", "OneWay" (for logs)

// Call outcomes. 0..999 belong to the framework; an application may return
// its own statuses from kAppStatusBase up in a Response.
enum class Status : uint32_t {
    Ok = 0,
    UnknownMethod = 1,       // the server has no handler for the method id
    BadRequest = 2,          // a handler refused the request (meta/data malformed)
    TooLarge = 3,            // meta or data above the receiver's limits
    PermissionDenied = 4,    // the server's ACL refuses this client or method
    RateLimited = 5,         // the server's token bucket for client/method is empty
    DeadlineExceeded = 6,    // the caller's deadline passed before the reply
    ConnectionLost = 7,      // the connection carrying the call closed (reason in the message)
    QueueFull = 8,           // every connection at its pipelining depth and the channel queue full
    Unavailable = 9,         // no connection to the server could be made
    Cancelled = 10,          // the channel was closed with the call outstanding
    Internal = 11,           // a handler dropped its call without replying, or no memory
    ProtocolError = 12,      // the peer sent a malformed message
    Shutdown = 13,           // the server is stopping
    kAppStatusBase = 1000,
};
std::string_view status_name(Status s);  // "Ok", "UnknownMethod", ..., "app(1003)" style for app statuses

// A message header in host form (the table above gives the wire layout).
struct Header {
    uint32_t magic = kMagic;     // kMagic; anything else closes the connection
    uint8_t version = kVersion;  // kVersion
    Kind kind = Kind::Request;   // what the message is
    uint16_t flags = 0;          // reserved: sent 0, ignored on receipt
    uint32_t method = 0;         // method id (a response echoes its request's)
    uint32_t status = 0;         // a Status value (0 in requests)
    uint64_t call_id = 0;        // chosen by the caller, echoed by the response
    uint32_t meta_len = 0;       // metadata bytes following the header
    uint32_t data_len = 0;       // data bytes following the metadata

    // Little-endian encode/decode of exactly kHeaderSize bytes.
    void encode(std::byte* out) const;
    // Reads kHeaderSize bytes at `in`; does not validate (callers check magic,
    // version and Limits).
    static Header decode(const std::byte* in);
};

// What a receiver accepts (per server or channel).
struct Limits {
    uint32_t max_meta = 4096;          // metadata bytes per message
    uint32_t max_data = 64u << 20;     // data bytes per message
};

} // namespace crescent::rpc
