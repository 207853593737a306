// crescent — the RPC server: method handlers over iovecs of zbufs (Luna §9).
//
//   rpc::Server srv(engine);                       // one per engine, share-nothing
//   srv.register_method(kRead, "read", [&](rpc::Call& c) {
//       auto req = parse(c.meta());                // small, copied part
//       std::vector<Slice> out = volume.share(req); // long-lived buffers, by reference
//       c.reply(reply_meta, out);                  // zero-copy: TX reads them in place
//   });
//   srv.register_method(kWrite, "write", [&](rpc::Call& c) {
//       disk.submit(c.data(), [call = std::move(c)]() mutable { call.reply({}); });  // deferred
//   });
//   srv.listen(rpc::Transport::Crescent, 7100, &err);   // and/or Transport::Kernel
//
// A handler runs on the engine thread (inline or batch dispatch) and gets a
// Call: the request's metadata (copied, small) and its data as slices of the
// received zbufs (zero-copy; move them out to keep them — e.g. as a block's
// new contents). It replies at once or later: a Call is a move-only handle
// that may outlive the handler (storage I/O, another RPC). A Call destroyed
// without a reply answers Internal ("handler dropped the call"), so a client
// never waits for a reply that will not come. A reply to a connection that
// closed meanwhile is dropped and counted.
//
// The Server must outlive every Call it handed out. Everything is engine-thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/rpc/policy.hpp>
#include <crescent/rpc/protocol.hpp>
#include <crescent/rpc/stats.hpp>
#include <crescent/rpc/stream.hpp>
#include <crescent/zbuf.hpp>

namespace crescent::rpc {

class Server;

// One received request. Move-only.
class Call {
public:
    Call() = default;
    // Takes over `o`'s request and duty to reply; `o` is left answered (empty).
    Call(Call&& o) noexcept;
    // Answers this Call first if it is still pending (as ~Call), then takes over `o`.
    Call& operator=(Call&& o) noexcept;
    ~Call();  // unanswered: fail(Internal, "handler dropped the call")
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    // The method id requested.
    uint32_t method() const { return method_; }
    // The client's call id (echoed in the reply).
    uint64_t id() const { return id_; }
    // Kind::OneWay: the client expects no reply.
    bool one_way() const { return one_way_; }
    // The client's address and port.
    Endpoint peer() const { return peer_; }
    // The transport the request came over.
    Transport transport() const { return transport_; }
    // When the engine decoded the request (the start of the server-side latency).
    Instant received_at() const { return received_; }

    // The metadata, copied out of the request: valid as long as the Call.
    std::span<const std::byte> meta() const { return {meta_.data(), meta_.size()}; }
    // The data, zero-copy: slices of the received zbufs. Move them out to keep them.
    std::span<Slice> data() { return {data_.data(), data_.size()}; }
    // The request's data length in bytes (the header's data_len).
    size_t data_bytes() const { return data_len_; }

    // Reply once: `st` is Ok or an application status (>= kAppStatusBase);
    // meta is copied; data slices are moved (zero-copy: fresh buffers, the
    // request's own slices, or shares of long-lived ones). Returns false when
    // the reply could not be sent (connection gone, no memory, already replied).
    bool reply(std::span<const std::byte> meta, std::span<Slice> data, Status st = Status::Ok);
    // Reply Ok with metadata only (copied), no data.
    bool reply(std::span<const std::byte> meta = {}) { return reply(meta, {}, Status::Ok); }
    // Reply with a framework status and a reason (an Error message).
    bool fail(Status st, std::string_view reason = {});

    // Not yet answered: reply() or fail() is still owed (false after either,
    // after a move-from, and for a default-constructed Call).
    bool pending() const { return server_ != nullptr; }  // not yet answered
    // pending().
    explicit operator bool() const { return pending(); }
    // The connection the request came on is still open.
    bool connection_alive() const { return stream_.valid(); }

private:
    friend class Server;
    // A request as Server::Session::on_message() hands it to the handler
    // (fields set once, not zeroed first: this runs for every call).
    Call(Server* s, Stream& st, uint32_t method, uint32_t slot, uint64_t id, bool one_way, Endpoint peer,
         Instant received, size_t data_len)
        : server_(s), stream_(st), method_(method), method_slot_(slot), id_(id), one_way_(one_way),
          transport_(st.transport()), peer_(peer), received_(received), data_len_(data_len) {}
    Server* server_ = nullptr;
    StreamRef stream_;
    uint32_t method_ = 0;
    uint32_t method_slot_ = 0;   // index into the server's method table (stats)
    uint64_t id_ = 0;
    bool one_way_ = false;
    Transport transport_ = Transport::Crescent;
    Endpoint peer_;
    Instant received_;
    size_t data_len_ = 0;
    std::vector<std::byte> meta_;
    std::vector<Slice> data_;
};

// A method's handler: runs on the engine thread for each request of its
// method; reply through `call` now, or move the Call out to reply later.
using MethodHandler = std::function<void(Call& call)>;

// A Server's configuration, fixed at construction.
struct ServerOptions {
    Limits limits;                     // what a request may carry
    StreamOptions stream;              // transport options of accepted connections
    size_t max_backlog = 8u << 20;     // per connection: replies waiting to be sent above this
                                       //   pause reading requests until they drain
    uint32_t max_pending = 4096;       // per connection: unanswered (deferred) calls above this
                                       //   pause reading requests too
    size_t header_block = 2048;        // encoder header block (arena obj) size
    size_t inline_data = 256;          // reply data of at most this many bytes is copied behind its
                                       //   header (one slice, cheaper than a reference); 0: never copy
};

// A server's counters, kept on its engine thread (Server::stats()).
struct ServerStats {
    uint64_t connections_accepted = 0;  // connections accepted (over every listen())
    uint64_t connections_refused = 0;  // ACL: unknown client, closed at set-up
    uint64_t connections_open = 0;     // connections open now
    // Requests received that expect a reply (Kind::Request).
    uint64_t requests = 0, one_way = 0;  // one-way requests received (no reply)
    // Responses sent (Call::reply()).
    uint64_t replies = 0, errors_sent = 0;  // Error messages sent (fail(), refusals, dropped calls)
    uint64_t unknown_method = 0;       // answered UnknownMethod
    uint64_t bad_kind = 0;             // a Response/Error or unknown kind sent to a server: ProtocolError
    uint64_t refused_acl = 0;          // calls answered PermissionDenied
    uint64_t refused_rate = 0;         // calls answered RateLimited
    // Headers with a magic other than kMagic (the connection is closed).
    uint64_t bad_magic = 0, bad_version = 0, meta_too_large = 0, data_too_large = 0;  // data_len above Limits::max_data: connection closed
    // \var ServerStats::bad_version
    // Headers with a version other than kVersion (the connection is closed).
    // \var ServerStats::meta_too_large
    // Headers with meta_len above Limits::max_meta (the connection is closed).

    uint64_t truncated_at_close = 0;   // a connection ended in the middle of a message
    uint64_t replies_dropped = 0;      // the connection closed before a deferred reply
    uint64_t handler_dropped = 0;      // a Call destroyed unanswered (answered Internal)
    uint64_t no_memory = 0;            // a reply that could not be encoded (arena empty)
    uint64_t reads_paused = 0;         // times a connection stopped reading (backlog / pending bound)
    // Meta + data bytes of the requests received (headers not counted).
    uint64_t bytes_in = 0, bytes_out = 0;  // meta + data bytes of the replies sent
};

// The RPC server of one engine (share-nothing: one per engine; see the header
// comment). Everything, destruction included, on the engine thread.
class Server {
public:
    // Serves on `e`, which must outlive it; nothing is accepted until listen().
    explicit Server(Engine& e, ServerOptions o = {});
    // Stops listening and aborts the open connections. Calls still held
    // become no-ops (their replies are dropped).
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // false when the id is taken. `name` shows in stats.
    bool register_method(uint32_t id, std::string name, MethodHandler h);
    // false when no such method; later requests for it get UnknownMethod
    // (Calls already handed out can still reply).
    bool unregister_method(uint32_t id);

    // Accept on `port` over a transport; call once per transport/port. A
    // crescent port must be in the runtime's listen_ports (steering).
    bool listen(Transport t, uint16_t port, std::string* err, Ipv4 bind_ip = {});

    // Policies (ACL, rate limits): install, change and remove at run time,
    // from the engine thread; absent ones cost one branch per call.
    Policies& policies() { return policies_; }

    // The server's counters, live.
    const ServerStats& stats() const { return st_; }
    // One entry per registered method (and one for unknown methods, id ~0u).
    std::vector<MethodStats> method_stats() const;
    // Connections open now.
    size_t connections() const { return st_.connections_open; }
    // TCP state and counters of the open connections (Stream::conn_stats).
    std::vector<ConnStats> connection_stats() const;
    // The engine it serves on.
    Engine& engine() const { return e_; }

    struct Session;  // per connection (server.cpp)
    // An entry of the server's method table (internal; public for server.cpp).
    struct Method {
        uint32_t id = 0;         // the method id
        bool live = false;       // registered now (false after unregister_method(): stats kept)
        MethodHandler handler;   // called for each request
        MethodStats stats;       // this method's server-side counters
    };

private:
    friend class Call;
    friend struct Session;
    class Handler;
    // Send a reply / error for `c` (Call::reply / fail / ~Call).
    bool finish(Call& c, Status st, std::span<const std::byte> meta, std::span<Slice> data, bool error);
    uint32_t method_slot(uint32_t id) const;  // table index, or the unknown-method slot

    Engine& e_;
    ServerOptions o_;
    Policies policies_;
    ServerStats st_;
    std::vector<Method> methods_;       // [0] = unknown methods
    std::vector<uint32_t> by_id_;       // small ids: direct index into methods_ (0 = none)
    std::unique_ptr<Handler> handler_;  // the StreamHandler of every accepted connection
    std::vector<std::unique_ptr<Acceptor>> acceptors_;
    std::unordered_set<Session*> sessions_;  // open connections
    // The Prometheus endpoint's copy (rpc/metrics.hpp): method_stats() put
    // into this server's MetricsRegistry slot every 100 ms by a timer.
    void publish_metrics();
    uint64_t metrics_slot_ = 0;
    TimerId metrics_timer_ = 0;
};

} // namespace crescent::rpc
