// crescent — a sans-IO TCP host: many TCBs behind one local IPv4 address.
//
// The smoltcp "interface + socket set" role: demultiplexes segments by
// 4-tuple (a flat open-addressing hash map), runs listeners with a backlog and
// an accept queue, answers with SYN cookies when a backlog is full
// (RFC 4987 §3.6), generates RSTs for segments to closed / unknown ports
// (RFC 9293 §3.10.7.1), picks RFC 6528 ISNs (SipHash-2-4 of the 4-tuple keyed
// with a secret from Config, plus a 4 µs clock term from `now`), keeps
// TIME-WAIT connections until their 2*MSL timer fires, and services timers
// from a min-heap of per-connection deadlines.
//
// Same collect-then-act contract as Tcb: every call appends to a caller-owned
// Actions; each OutSegment / Readable / Event names its ConnId, and each
// segment carries its IP source/destination. Payload views stay valid until the
// next call on this Host.
//
// Threads: one Host per engine core; not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "stack/tcp/tcb.hpp"

namespace crescent::tcp {

struct HostConfig {
    Ipv4Addr local_ip;
    Config tcp;                            // defaults for every connection
    std::array<uint64_t, 2> secret{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull}; // ISN + cookie key (seed it!)
    bool syn_cookies = true;               // RFC 4987: answer with cookies when the backlog is full
    uint32_t max_connections = 1u << 20;   // hard bound on live TCBs (incl. TIME-WAIT)
    // Rate limit of RSTs sent for segments to closed/unknown ports, per second (0 = unlimited).
    uint32_t rst_rate_limit = 0;
    // The MSS the path to `peer` carries (a route's mtu metric, "ip route add
    // ... mtu 1400", less the headers), 0 when nothing says: every connection
    // with `peer`, opened either way, uses at most this as its MSS option and
    // the ceiling of what it sends, as Linux takes dst_metric_advmss. Asked
    // once per connect(), SYN and SYN cookie, never on the data path.
    std::function<uint16_t(Ipv4Addr peer)> path_mss;
};

struct HostStats {
    uint64_t segs_in = 0;
    uint64_t drop_wrong_dst = 0;       // destination address is not ours
    uint64_t drop_land = 0;            // source address is ours too (a LAND segment): never answered
    uint64_t drop_no_listener = 0;     // no TCB and no listener: RST sent (or not, for a RST)
    uint64_t rst_sent = 0;
    uint64_t rst_rate_limited = 0;
    uint64_t drop_backlog_full = 0;    // SYN dropped: backlog full and cookies off
    uint64_t drop_too_many_conns = 0;
    uint64_t drop_listen_bad = 0;      // non-SYN segment to a listener (RST/ACK handling per §3.10.7.2)
    uint64_t syn_cookies_sent = 0;
    uint64_t syn_cookies_ok = 0;
    uint64_t syn_cookies_bad = 0;
    uint64_t accepted = 0;
    uint64_t connects = 0;
    uint64_t conns_live = 0;
    uint64_t time_wait_reused = 0;     // SYN to a TIME-WAIT connection started a new one (RFC 9293 §3.10.7.4 / RFC 6191)
    uint64_t time_wait = 0;            // connections in TIME-WAIT now (compact records, not Tcbs)
};

enum class ConnectResult : uint8_t { Ok, AddressInUse, TooManyConnections, InvalidArgument };
enum class ListenResult : uint8_t { Ok, AddressInUse, InvalidArgument };

class Host {
public:
    explicit Host(const HostConfig& cfg);
    ~Host();
    Host(const Host&) = delete;
    Host& operator=(const Host&) = delete;

    // --- listeners (RFC 9293 §3.10.1 passive OPEN) ---
    // `backlog` bounds half-open + not-yet-accepted connections.
    ListenResult listen(uint16_t port, uint32_t backlog);
    // Stop listening; pending (unaccepted) connections are reset.
    void unlisten(uint16_t port, Instant now, Actions& out);
    // Next established connection of the listener on `port`, if any.
    std::optional<ConnId> accept(uint16_t port);

    // --- active open: the caller owns the local port range ---
    ConnectResult connect(Ipv4Addr remote_ip, uint16_t remote_port, uint16_t local_port, Instant now,
                          Actions& out, ConnId* id, const Config* cfg = nullptr);

    // --- input ---
    // A received TCP segment (checksums already verified). `dst` must be our address.
    void on_segment(Ipv4Addr src, Ipv4Addr dst, uint8_t ip_ecn, const TcpRepr& seg, Slice payload, Instant now,
                    Actions& out);
    // Service every connection whose deadline is <= now (then frees the ones that closed).
    void on_timer(Instant now, Actions& out);
    Instant next_deadline() const;

    // --- application calls on a connection (no-ops / InvalidState on a stale id) ---
    SendResult send(ConnId c, Slice& data);
    SendResult send(ConnId c, Slice&& data) { return send(c, data); }
    void consume(ConnId c, uint32_t bytes);
    void shutdown_write(ConnId c);
    // The handle stays valid until the TCB is freed: at CLOSED, or on entering
    // TIME-WAIT (after the Closed event); then find() returns nullptr and calls
    // are no-ops.
    void close(ConnId c);
    void abort(ConnId c, Instant now, Actions& out);
    // Emit output of every connection touched by send/consume/close since the
    // last flush, and the ACKs held to the next flush (Config::ack_hold_segments).
    void flush(Instant now, Actions& out);
    // Some connection waits for flush().
    bool has_dirty() const;

    // --- inspection ---
    // A connection in TIME-WAIT has no Tcb any more (time_wait.hpp): find()
    // returns nullptr for it, in_time_wait() true until 2*MSL has passed.
    bool in_time_wait(ConnId c) const;
    Tcb* find(ConnId c);             // nullptr when stale
    const Tcb* find(ConnId c) const;
    std::optional<ConnId> lookup(Ipv4Addr remote_ip, uint16_t remote_port, uint16_t local_port) const;
    const HostStats& stats() const;
    size_t connection_count() const;
    // RFC 6528 ISN for a 4-tuple at `now` (exposed for tests).
    SeqNum isn(const Endpoints& ep, Instant now) const;

    struct Impl;
private:
    std::unique_ptr<Impl> impl_;
};

} // namespace crescent::tcp
