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
#include <crescent/function.hpp>
#include <crescent/rpc/protocol.hpp>
#include <crescent/rpc/stats.hpp>
#include <crescent/rpc/stream.hpp>
#include <crescent/zbuf.hpp>

namespace crescent::rpc {

// What a continuation receives. Valid for the call of the continuation; move
// data slices out to keep them.
struct Reply {
    // Ok or the server's application status (a Response), or why the call
    // failed: a framework status from the server (an Error) or a local one
    // (DeadlineExceeded, ConnectionLost, Unavailable, Cancelled, ...).
    Status status = Status::Ok;
    std::span<const std::byte> meta;   // the response's metadata (empty on errors)
    std::span<Slice> data;             // zero-copy response data
    std::string_view error;            // why, when status != Ok (server's reason or the local cause)
    // From call() to the outcome, both stamped with Engine::event_time(): a
    // reply's arrival is the poll that brought it, a call's start the poll
    // whose handling made it (or the clock, for a call made outside the loop).
    Duration latency{0};
    Instant at;                        // when the outcome came (event_time(); saves a clock read)
};
// Run exactly once per accepted call, on the engine thread from the engine
// loop (never inside call()), with the outcome; the Reply dies when it returns.
// A std::function that keeps captures of up to 48 bytes inside (no allocation per call).
using Continuation = InlineFunction<void(Reply& r)>;

// How a call picks its connection among those up: the one with the fewest
// calls in flight, or each in turn.
enum class LoadBalance : uint8_t { LeastOutstanding, RoundRobin };
bool parse_load_balance(std::string_view s, LoadBalance* out);  // "least-outstanding", "round-robin"

// A Channel's configuration, fixed at construction.
struct ChannelOptions {
    // The server's address and port (the crescent port must be steered to
    // the server's engines, see the header comment).
    Endpoint server;
    std::optional<Endpoint> alternate;      // fail-over address (another NIC / path)
    // The transport of every connection (the server must listen on it).
    Transport transport = Transport::Crescent;
    unsigned server_engines = 1;            // engines serving `server` (full mesh)
    unsigned conns_per_engine = 1;          // connections to each server engine (>= 1)
    uint32_t depth = 32;                    // calls in flight per connection
    uint32_t queue_max = 4096;              // calls waiting for a connection slot
    Duration deadline = std::chrono::seconds(5);  // default per call
    LoadBalance lb = LoadBalance::LeastOutstanding;  // how a call picks its connection
    Duration reconnect_min = std::chrono::milliseconds(10);  // first reconnect back-off (doubles, with jitter)
    Duration reconnect_max = std::chrono::seconds(1);       // back-off ceiling
    unsigned failover_after = 3;            // failed connects in a row before the alternate
    Limits limits;                          // what a response may carry
    StreamOptions stream;                   // transport options of the connections
    size_t header_block = 2048;             // bytes per request-header block asked of the arena (encoder)
    size_t inline_data = 256;               // request data of at most this many bytes is copied behind its
                                            //   header (one slice, cheaper than a reference); 0: never copy
};

// A channel's counters, kept on the engine thread (Channel::stats()).
struct ChannelStats {

    uint64_t calls = 0;                 // accepted by call()
    // Calls completed with Status::Ok.
    uint64_t ok = 0, failed = 0;        // calls completed with any other status (application ones included)
    uint64_t refused_queue_full = 0;    // call() returned QueueFull
    // Calls failed locally with DeadlineExceeded (deadline passed; a late
    // reply is then counted in late_replies).
    uint64_t deadline_exceeded = 0, unavailable = 0, connection_lost = 0, cancelled = 0;  // failed Cancelled (close() / ~Channel)
    // \var ChannelStats::unavailable
    // Calls failed with Unavailable: deadline passed and no connection was ever up.
    // \var ChannelStats::connection_lost
    // Calls failed with ConnectionLost: their connection closed while they were in flight.

    uint64_t server_errors = 0;         // Error replies from the server (any status)
    uint64_t late_replies = 0;          // a reply for a call that had already completed (deadline)
    uint64_t unknown_replies = 0;       // a reply with an id never issued
    uint64_t protocol_errors = 0;       // bad magic/version/size, a request sent to a client
    // Calls waiting in the channel for a connection slot now.
    uint64_t queued_now = 0, queued_peak = 0;  // most calls ever waiting at once
    // Connections established (first ones and reconnects).
    uint64_t connects = 0, connect_failures = 0, disconnects = 0, failovers = 0;  // switches to/from the alternate address
    // \var ChannelStats::connect_failures
    // Connection attempts that failed (refused, timed out, no route).
    // \var ChannelStats::disconnects
    // Established connections that closed (each fails its in-flight calls).

    // Request bytes handed to the connections (headers, meta and data).
    uint64_t bytes_out = 0, bytes_in = 0;  // bytes received on the connections (all messages)
};

// The RPC client of one engine (see the header comment): owns its
// connections; calls, continuations and destruction on the engine thread.
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
    size_t queued() const;              // calls waiting for a connection slot
    // The address currently used (the alternate after a fail-over).
    Endpoint current_server() const;
    // Why the last connection attempt or connection failed ("" if none did).
    const std::string& last_error() const;

    // The channel's counters, live.
    const ChannelStats& stats() const;
    // TCP state and counters of the connections that are up (Stream::conn_stats).
    std::vector<ConnStats> connection_stats() const;
    // Client-side per-method stats: calls, statuses, bytes, latency.
    std::vector<MethodStats> method_stats() const;
    // The engine the channel runs on (its thread is the only one to use it).
    Engine& engine() const;

    struct Impl;
private:
    std::unique_ptr<Impl> impl_;
};

} // namespace crescent::rpc
