// crescent — the RPC client: a channel from one client engine to a server.
//
//   rpc::ChannelOptions o;
//   o.server = {server_ip, 7100};
//   o.server_engines = 4;              // the full mesh: a connection to each server engine
//   rpc::Channel ch(engine, o);
//   ch.call(kRead, meta, {}, [](rpc::Reply& r) {
//       if (r.status != rpc::Status::Ok) return report(r.status, r.error);
//       consume(r.meta, r.data);      // data: zero-copy slices of the received zbufs
//   });
//
// Connections (Luna §7.1, §9): the channel opens `server_engines` x
// `conns_per_engine` connections. Over crescent each takes a local port whose
// low bits name the server engine (the server steers by them), so every
// client engine reaches every server engine. Each call goes to one connection
// (least outstanding or round-robin) with at most `depth` calls in flight per
// connection (pipelining); beyond that calls wait in the channel, up to
// `queue_max`, then call() refuses them with QueueFull. The request is encoded
// only when it is sent (marshal once, as late as possible): the data slices
// go from the caller to the transport untouched.
//
// Failures: every call has a deadline (the engine's timer wheel); when it
// passes the continuation gets DeadlineExceeded (Unavailable if no connection
// was ever up), and a late reply is dropped and counted. A connection that
// closes fails its in-flight calls with ConnectionLost and a message naming
// the cause, then reconnects with exponential back-off (with jitter); after
// `failover_after` failed attempts in a row it tries the alternate address
// (Luna §9: reconnect through another link), and back. Calls not yet sent
// wait for a connection until their deadline.
//
// The continuation runs exactly once per accepted call, always from the
// engine loop (never inside call()). Engine-thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/rpc/protocol.hpp>
#include <crescent/rpc/stats.hpp>
#include <crescent/rpc/stream.hpp>
#include <crescent/zbuf.hpp>

namespace crescent::rpc {

// What a continuation receives. Valid for the call of the continuation; move
// data slices out to keep them.
struct Reply {
    Status status = Status::Ok;
    std::span<const std::byte> meta;   // the response's metadata (empty on errors)
    std::span<Slice> data;             // zero-copy response data
    std::string_view error;            // why, when status != Ok (server's reason or the local cause)
    Duration latency{0};               // from call() to now
};
using Continuation = std::function<void(Reply& r)>;

enum class LoadBalance : uint8_t { LeastOutstanding, RoundRobin };
bool parse_load_balance(std::string_view s, LoadBalance* out);  // "least-outstanding", "round-robin"

struct ChannelOptions {
    Endpoint server;
    std::optional<Endpoint> alternate;      // fail-over address (another NIC / path)
    Transport transport = Transport::Crescent;
    unsigned server_engines = 1;            // engines serving `server` (full mesh)
    unsigned conns_per_engine = 1;
    uint32_t depth = 32;                    // calls in flight per connection
    uint32_t queue_max = 4096;              // calls waiting for a connection slot
    Duration deadline = std::chrono::seconds(5);  // default per call
    LoadBalance lb = LoadBalance::LeastOutstanding;
    Duration reconnect_min = std::chrono::milliseconds(10);
    Duration reconnect_max = std::chrono::seconds(1);
    unsigned failover_after = 3;            // failed connects in a row before the alternate
    Limits limits;                          // what a response may carry
    StreamOptions stream;
    size_t header_block = 2048;
};

struct ChannelStats {
    uint64_t calls = 0;                 // accepted by call()
    uint64_t ok = 0, failed = 0;        // completions
    uint64_t refused_queue_full = 0;    // call() returned QueueFull
    uint64_t deadline_exceeded = 0, unavailable = 0, connection_lost = 0, cancelled = 0;
    uint64_t server_errors = 0;         // Error replies from the server (any status)
    uint64_t late_replies = 0;          // a reply for a call that had already completed (deadline)
    uint64_t unknown_replies = 0;       // a reply with an id never issued
    uint64_t protocol_errors = 0;       // bad magic/version/size, a request sent to a client
    uint64_t queued_now = 0, queued_peak = 0;
    uint64_t connects = 0, connect_failures = 0, disconnects = 0, failovers = 0;
    uint64_t bytes_out = 0, bytes_in = 0;
};

class Channel {
public:
    // Starts connecting at once.
    Channel(Engine& e, ChannelOptions o);
    // Fails every outstanding call with Cancelled (continuations run now) and
    // closes the connections.
    ~Channel();
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;

    // Ok: accepted, the continuation will run once. QueueFull / Shutdown:
    // refused now, the continuation is not run and `data` is left untouched.
    // `deadline` 0 = the channel's default.
    Status call(uint32_t method, std::span<const std::byte> meta, std::span<Slice> data, Continuation done,
                Duration deadline = Duration(0));
    // Fire and forget (Kind::OneWay): sent when a connection has room.
    Status send_one_way(uint32_t method, std::span<const std::byte> meta, std::span<Slice> data);

    // Fails every outstanding call with Cancelled and stops reconnecting.
    void close();

    size_t connected() const;           // connections up
    size_t connections() const;         // connections configured
    size_t outstanding() const;         // calls accepted and not completed (queued + in flight)
    size_t queued() const;
    // The address currently used (the alternate after a fail-over).
    Endpoint current_server() const;
    // Why the last connection attempt or connection failed ("" if none did).
    const std::string& last_error() const;

    const ChannelStats& stats() const;
    // TCP state and counters of the connections that are up (Stream::conn_stats).
    std::vector<ConnStats> connection_stats() const;
    // Client-side per-method stats: calls, statuses, bytes, latency.
    std::vector<MethodStats> method_stats() const;
    Engine& engine() const;

    struct Impl;
private:
    std::unique_ptr<Impl> impl_;
};

} // namespace crescent::rpc
