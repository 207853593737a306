// crescent — byte streams over either transport, one API (rpc/stream*.cpp).
//
// A Stream is a connected byte stream served from an engine's loop: either a
// crescent connection (user-space TCP, zero-copy both ways) or a kernel TCP
// socket in the engine's epoll set (Engine::add_fd), read with readv() into
// zbuf objs from the arena and written with writev() from the same iovecs.
// Everything above it — the RPC framing, crescent-kv's RESP — is written once
// and runs on both, so a comparison between them is like for like.
//
// Threads: a Stream, its handler and its acceptor belong to one engine and are
// used on that engine's thread only.
//
// Ownership: the library owns Stream objects. A Stream& passed to a callback
// stays valid until on_closed() has returned; keep a StreamRef (below) to find
// out later whether it is still there (deferred replies).
//
// Sending: send() takes the slices (moved out of the span; the entries are
// left empty) and never refuses while the stream is open: what the transport
// cannot take at once waits, in order, in the stream's backlog
// (backlog_bytes()) and leaves as send space returns. The bytes are read in
// place until the transport is done with them (crescent: until the peer ACKs
// them; kernel: until writev() has copied them), so they must not be written
// through another reference meanwhile. Callers bound the backlog themselves
// (e.g. stop reading requests while it is above a limit: pause_reading()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <crescent/engine.hpp>
#include <crescent/zbuf.hpp>

namespace crescent::rpc {

// Which TCP a Stream runs over. Chosen per listen() / connect(); everything
// above the Stream is the same code for both.
enum class Transport : uint8_t {
    Crescent,  // user-space TCP on the engine's queue
    Kernel,    // a kernel TCP socket in the engine's epoll set
};
std::string_view transport_name(Transport t);          // "crescent", "kernel"
// Parses "crescent" or "kernel" (transport_name()'s spellings) into *out;
// false, *out untouched, for anything else.
bool parse_transport(std::string_view s, Transport* out);
// Whether the sends a stream of transport `t` takes during one engine callback
// leave together without cork(): crescent's send() only queues bytes on the
// TCP connection, whose segments are built after the callback returns (so the
// replies to one delivery share segments anyway); a kernel stream's send() is
// a write(), and only cork() makes several of them one writev().
constexpr bool coalesces_sends(Transport t) { return t == Transport::Crescent; }

class Stream;

// What the user of a stream implements; every callback runs on the engine's
// thread. The handler must outlive its streams.
class StreamHandler {
public:
    virtual ~StreamHandler() = default;
    // Connected (active open) or accepted (passive open).
    virtual void on_open(Stream& s) { (void)s; }
    // In-order received bytes as zbuf slices: crescent, the NIC's buffers
    // (zero-copy); kernel, arena objs filled by readv(). The stream owns the
    // slices only for the call: move them out to keep them.
    virtual void on_data(Stream& s, std::span<Slice> data) = 0;
    // The send backlog became empty (everything handed to the transport).
    virtual void on_drained(Stream& s) { (void)s; }
    // The peer will send no more (FIN / EOF); we may still send.
    virtual void on_peer_closed(Stream& s) { (void)s; }
    // The stream is over (`why` names the cause: "closed", "reset by peer",
    // "connect timeout", "refused", "EPIPE", ...). `s` dies when this returns.
    virtual void on_closed(Stream& s, std::string_view why) { (void)s; (void)why; }
};

// One stream's counters, kept by the stream on its engine's thread (read them
// there too: Stream::stats(), or for_each_stream() to sum them).
struct StreamStats {
    // Payload bytes received on this stream (TCP/IP headers and
    // retransmissions are not counted).
    uint64_t bytes_in = 0, bytes_out = 0;  // payload bytes sent on this stream
    uint64_t reads = 0;              // on_data deliveries
    uint64_t writes = 0;             // transport sends (Conn::send / writev calls)
    uint64_t backlog_peak = 0;       // most bytes ever waiting in the backlog
    // StreamOptions::copy_api (crescent, batch mode): bytes that went through
    // Conn::read() / Conn::write() copies instead of zero-copy slices.
    uint64_t bytes_copied_in = 0, bytes_copied_out = 0;  // copy_api: bytes copied in with Conn::write()
    uint64_t copy_no_memory = 0;     // copy_api: a read or write found the arena empty (retried in 1 ms)
};

// A connected byte stream on one engine, over either transport (see the
// header comment). Created by listen()'s acceptor or connect(), owned and
// destroyed by the library after on_closed(); engine thread only.
class Stream {
public:
    virtual ~Stream() = default;
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    // Zero-copy, in order; see the header comment. false once closed.
    virtual bool send(std::span<Slice> iov) = 0;
    // One slice: moved out of `s` (left empty), as send(span).
    bool send(Slice&& s) { return send(std::span<Slice>(&s, 1)); }
    // Copies into arena objs, then send(). false when closed or out of memory.
    bool send_copy(std::span<const std::byte> bytes);
    // The characters of `s`, copied as send_copy(bytes); `s` may die after the call.
    bool send_copy(std::string_view s) { return send_copy(std::as_bytes(std::span(s.data(), s.size()))); }
    // Bytes accepted by send() that the transport has not taken yet (waiting
    // in the stream, in order). 0 after on_drained().
    virtual size_t backlog_bytes() const = 0;

    // Batching: while corked, send() only queues; uncork() hands everything
    // queued to the transport at once (one writev() / Conn::send()), for a
    // handler that sends several times in one callback (the RPC layer gets
    // the same by encoding a delivery's messages into one vector of its own
    // and sending that once). Not nested.
    virtual void cork() = 0;
    // Ends cork(): the queued bytes go to the transport in one send.
    virtual void uncork() = 0;
    // Latency: the bytes sent so far leave now where the transport can,
    // instead of at the end of the loop's turn — crescent: Conn::send_now(),
    // which acts only inside a callback of an RX burst's last frame (see
    // there); kernel: nothing to do, a send is already a write. For the end
    // of an exchange: the RPC layer calls it after the reply to, or the call
    // made by the continuation of, the last message of a delivery.
    virtual void send_now() {}

    // Backpressure: while paused no on_data() is delivered and received bytes
    // stay with the transport (crescent batch mode and kernel: the receive
    // window closes; crescent inline mode: the stream holds them, the window
    // does not close).
    virtual void pause_reading(bool paused) = 0;
    // The last pause_reading() value (false for a new stream).
    bool reading_paused() const { return paused_; }

    // Graceful close: the backlog drains, then FIN; on_closed() follows.
    virtual void close() = 0;
    // Now: RST (crescent) / SO_LINGER 0 close (kernel); on_closed() follows.
    virtual void abort() = 0;
    // From on_open() until close()/abort() is called or the transport ends
    // it; send() returns false once this is false.
    bool is_open() const { return open_; }

    // This end's address and port (kernel: getsockname()).
    virtual Endpoint local() const = 0;
    // The peer's address and port.
    virtual Endpoint remote() const = 0;
    // The connection's TCP state and counters: crescent's own (Conn::stats),
    // or the kernel's TCP_INFO mapped onto the same fields (state, MSS,
    // cwnd/ssthresh in bytes, srtt/rttvar/rto, bytes and segments in/out,
    // bytes retransmitted; total retransmitted segments in retrans_timeout).
    virtual ConnStats conn_stats() const = 0;
    // The transport the stream runs over (fixed for its lifetime).
    Transport transport() const { return transport_; }
    // The engine whose loop serves the stream; its thread is the only one
    // that may use the stream.
    Engine& engine() const { return *engine_; }
    // This stream's counters, live (updated by the engine thread).
    const StreamStats& stats() const { return stats_; }
    // A number unique among this thread's streams for the process lifetime
    // (2^40 of them).
    uint64_t id() const { return id_; }

    // An opaque pointer for the application (e.g. its per-connection state);
    // the stream never reads or frees it. nullptr until set.
    void set_user(void* p) { user_ = p; }
    // The pointer given to set_user() (nullptr if none).
    void* user() const { return user_; }
    // The handler that receives this stream's callbacks.
    StreamHandler& handler() const { return *handler_; }
    // Routes the following callbacks to `h` (e.g. from a generic acceptor
    // handler to a per-protocol one in on_open()); `h` must outlive the stream.
    void set_handler(StreamHandler& h) { handler_ = &h; }

protected:
    // For the transports' implementations: registers the stream on `e` under
    // a fresh id (StreamRef, live_streams()), not yet open.
    Stream(Engine& e, Transport t, StreamHandler& h);
    Engine* engine_;            // the serving engine, never null
    StreamHandler* handler_;    // never null; see set_handler()
    Transport transport_;       // fixed at construction
    bool open_ = false;         // is_open(): set by the transport on open, cleared on close
    bool paused_ = false;       // reading_paused()
    uint64_t id_;               // id(): key in the engine's live-stream table
    void* user_ = nullptr;      // set_user()
    StreamStats stats_;         // stats(): maintained by the transport
};

// A weak reference: valid() tells whether the stream still exists (it checks
// the engine's live-stream table by id). Cheap to copy; engine thread only.
class StreamRef {
public:
    StreamRef() = default;
    // Refers to `s` (records its engine and id, keeps nothing alive).
    explicit StreamRef(Stream& s) : engine_(&s.engine()), id_(s.id()) {}
    Stream* get() const;          // nullptr once the stream is gone
    // The stream still exists (get() is not nullptr); false for a default one.
    bool valid() const { return get() != nullptr; }
private:
    Engine* engine_ = nullptr;
    uint64_t id_ = 0;
};

// How listen() and connect() set up streams; fields name the transport they
// apply to and are ignored by the other.
struct StreamOptions {
    ConnOptions conn;                // crescent: TCP options (snd_buf, rcv_buf, cc, ...)
    uint32_t kernel_rcvbuf = 0;      // kernel: SO_RCVBUF (0 = system default)
    uint32_t kernel_sndbuf = 0;      // kernel: SO_SNDBUF
    uint32_t read_chunk = 16384;     // kernel, copy_api: bytes per read buffer (an arena size class)
    bool kernel_nodelay = true;      // kernel: TCP_NODELAY
    bool kernel_reuse_port = false;  // kernel listen: SO_REUSEPORT (one listener per engine on one port)
    Ipv4 kernel_bind_ip;             // kernel active open: source address (0 = the kernel's choice)
    uint16_t local_port = 0;         // active open: a specific local port (0 = any of the engine's)
    Duration connect_timeout = std::chrono::seconds(3);  // kernel active open (crescent: its SYN retries)
    Duration close_linger = std::chrono::seconds(5);     // kernel close(): wait this long for the peer's FIN
    // Crescent in batch dispatch mode: use the socket-like copy API instead of
    // zero-copy slices (Luna §5.1's "batch with a copy API"): received bytes
    // are copied out with Conn::read() into arena objs the stream allocates
    // (read_chunk bytes each; on_data() gets slices of them), and sent bytes
    // are copied in with Conn::write() (what the send buffer does not take
    // waits in the backlog for on_writable()). StreamStats::bytes_copied_in/
    // _out count them. Ignored in inline mode (bytes arrive in on_data(),
    // zero-copy, with no read call to make) and by the kernel transport (it
    // always copies).
    bool copy_api = false;
};

// Accepts streams on a port of one engine, over one transport. Destroying it
// stops accepting; established streams go on.
class Acceptor {
public:
    virtual ~Acceptor() = default;
    // The transport it accepts on.
    virtual Transport transport() const = 0;
    // The local port it listens on (host byte order).
    virtual uint16_t port() const = 0;
    // Streams accepted since listen() (a counter; closed ones included).
    virtual uint64_t accepted() const = 0;
};

// Listen on `port`: Crescent through the engine (the port must be in the
// runtime's listen_ports to be steered to it); Kernel on a non-blocking
// SO_REUSEADDR socket bound to `bind_ip` (0 = any) in the engine's epoll set.
// `h` handles every accepted stream. nullptr + *err on failure.
std::unique_ptr<Acceptor> listen(Engine& e, Transport t, uint16_t port, StreamHandler& h,
                                 const StreamOptions& o, std::string* err, Ipv4 bind_ip = {});

// Active open; on_open() or on_closed(why) follows. nullptr + *err when it
// cannot even start (no route, no port, socket() failed).
Stream* connect(Engine& e, Transport t, Endpoint remote, StreamHandler& h, const StreamOptions& o,
                std::string* err);

// Streams alive on this engine (all transports).
size_t live_streams(Engine& e);
// Calls `fn` for each of them (e.g. to sum their StreamStats); `fn` must not
// open or close streams. Engine thread only.
void for_each_stream(Engine& e, const std::function<void(Stream&)>& fn);

} // namespace crescent::rpc
