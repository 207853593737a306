// crescent — the per-core engine: the application-facing TCP API (Luna §5).
//
// One Engine per lcore, share-nothing. Each engine owns one RX/TX queue pair,
// one sans-IO TCP host (its connections, listeners, timers), a timing wheel and
// an epoll set for the kernel fds it watches. Its loop, repeated until stop():
//
//   1. poll one RX burst (EngineConfig::burst, default 32) and run every packet
//      through wire parsing and TCP;
//   2. inline mode: the handler's on_data() runs right there with zero-copy
//      slices, and a reply sent from it leaves in the same loop iteration;
//      batch mode: readable connections and events are queued and the
//      handlers run after the burst (epoll/libev style; read()/write() copy);
//   3. run due timers (TCP deadlines, app timers, neighbour resolution);
//   4. flush TX once (a full TX ring keeps the batch for the next iteration);
//   5. one non-blocking epoll_wait on the kernel fds the engine owns.
//
// An engine without a device (RuntimeOptions::kernel_only) runs only steps 3
// and 5, spinning or sleeping in that epoll_wait as KernelWait says.
//
// Everything here is called from the engine's own thread, including every
// callback; nothing is thread-safe except Engine::stop(). No call on this API
// blocks, and none allocates on the steady-state data path except send_copy()
// and write(), which take zbuf objs from the arena.
//
// This header includes no DPDK header; the device, the control plane and the
// TCP internals stay behind the engine.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <crescent/time.hpp>
#include <crescent/zbuf.hpp>

namespace crescent {

// An IPv4 address in host byte order (10.0.0.1 == 0x0a000001).
struct Ipv4 {
    uint32_t v = 0;   // the address, host byte order; 0 = 0.0.0.0 (none)
    // Same address.
    constexpr bool operator==(const Ipv4&) const = default;
    // Dotted quad; returns false on a malformed string.
    static bool parse(std::string_view s, Ipv4* out);
    // Dotted quad ("10.0.0.1"), the form parse() reads.
    std::string to_string() const;
};

// One end of a TCP connection: an IPv4 address and a port (host byte order).
struct Endpoint {
    Ipv4 ip;           // the address
    uint16_t port = 0; // the TCP port, host byte order
};

// Why a connection ended (on_closed).
enum class CloseReason : uint8_t {
    Normal,             // both FINs exchanged and acknowledged
    ResetByPeer,        // the peer sent an acceptable RST
    Refused,            // RST in answer to our SYN
    ConnectTimeout,     // SYN retries exhausted (includes an unresolvable neighbour)
    RetransmitTimeout,  // data retransmissions exhausted
    KeepaliveTimeout,   // keepalive probes unanswered
    FinWait2Timeout,    // orphaned FIN-WAIT-2 expired
    AbortedLocally,     // abort(), or data arrived after close()
    EngineStopped,      // the engine shut down with the connection open
};
// The enumerator's name ("ResetByPeer"), for logs; a static string.
std::string_view close_reason_name(CloseReason r);

// A connection's congestion control: NewReno (RFC 5681/6582), CUBIC
// (RFC 9438) or DCTCP (RFC 8257, needs ECN marking on the path).
enum class CongestionControl : uint8_t { NewReno, Cubic, Dctcp };
// "newreno", "cubic", "dctcp" (what parse_congestion_control() reads).
std::string_view congestion_control_name(CongestionControl c);
// "newreno", "cubic", "dctcp"; false when unknown.
bool parse_congestion_control(std::string_view s, CongestionControl* out);

// Per-connection options. Listeners apply the engine's defaults
// (EngineConfig::conn) to the connections they accept; connect() takes its own.
struct ConnOptions {
    CongestionControl cc = CongestionControl::NewReno; // congestion control algorithm
    bool nagle = false;                       // false = TCP_NODELAY behaviour
    bool keepalive = false;                   // send keepalive probes (SO_KEEPALIVE)
    Duration keepalive_idle = std::chrono::seconds(7200);   // silence before the first probe
    Duration keepalive_interval = std::chrono::seconds(75); // between unanswered probes
    uint32_t keepalive_count = 9;             // unanswered probes before KeepaliveTimeout
    uint32_t snd_buf = 1u << 20;              // bytes queued and not yet acknowledged
    uint32_t rcv_buf = 1u << 20;              // receive window ceiling
    // A connection whose data goes unacknowledged is aborted (RetransmitTimeout)
    // after 12 backed-off retransmissions and no sooner than this after the
    // first (RFC 1122 §4.2.3.5 R2, at least 100 s; TCP_USER_TIMEOUT-like).
    // 0 = after the 12 retransmissions alone (~41 s from a 5 ms RTO).
    Duration user_timeout = std::chrono::seconds(100);
    // The ceiling the retransmission timeout backs off to (RFC 6298 §2.5: a
    // maximum of at least 60 s MAY be placed; Linux's tcp_rto_max_ms allows
    // 1..120 s, the range accepted here). Lower, a connection probes a path
    // that came back sooner, and its 12 back-offs end sooner: ~41 s from a
    // 5 ms RTO at 60 s, ~10.6 s at 2 s.
    Duration max_rto = std::chrono::seconds(60);
    // Find a lost tail without the retransmission timeout: a tail loss probe
    // (RFC 8985 §7) after ~2 round trips when the ACKs stop, and early
    // retransmit (RFC 5827) when fewer than four segments are out, and
    // RACK's reordering window (RFC 8985 §6) for a hole at snd.una with too
    // little SACKed above it for DupThresh. Needs SACK. Every RPC message is
    // a tail: off, a lost last segment waits for the RTO (5 ms floor; Linux's
    // is 200 ms).
    bool tail_loss_probe = true;
    // Path MTU black holes: ICMP "fragmentation needed" stays with the kernel,
    // so a path narrower than the interface (and no route `mtu` saying so)
    // drops full-sized segments without a word. With this on, three
    // consecutive timeouts with more than 512 bytes out halve the MSS (and
    // three more halve it again, down to 512), as Linux does with
    // tcp_mtu_probing=1; the MSS is not raised again on that connection.
    bool mtu_blackhole = true;
    // Out-of-order data held for reassembly (RFC 9293 §3.10.7.4): at most
    // this many bytes and segments (a segment past either bound is dropped,
    // counted in ConnStats::drop_no_room, and retransmitted by the peer).
    // Each held segment pins its whole RX obj, so the segment bound is the
    // one that caps memory against a peer sending tiny segments. Keep
    // reassembly_segments x MSS at or above rcv_buf: a hole that lasts (a lost
    // retransmission waits for the peer's RTO, 200 ms on Linux) lets the peer
    // fill the whole window behind it, and what does not fit is dropped.
    uint32_t reassembly_bytes = 4u << 20;    // out-of-order bytes held at most
    uint32_t reassembly_segments = 1024;     // out-of-order segments held at most (1 MiB / 1024 B)
};

// The result of Conn::send() and send_copy(): all or nothing.
enum class SendStatus : uint8_t {
    Ok,           // everything was queued (zero-copy: the slices now belong to the connection)
    WouldBlock,   // not enough send space: nothing was queued; on_writable() follows
    Closed,       // the connection is gone, or its sending direction is shut
    NoMemory,     // send_copy(): the arena (or max_memory) has no room; on_writable() follows
};
// The enumerator's name ("WouldBlock"), for logs; a static string.
std::string_view send_status_name(SendStatus s);

// Per-connection statistics (a copy of the TCP control block's counters).
struct ConnStats {
    std::string_view state;                   // RFC 9293 state name
    // \var snd_una
    // SND.UNA (RFC 9293 §3.3.1): oldest unacknowledged sequence number.
    // \var snd_nxt
    // SND.NXT: the next sequence number to send.
    // \var snd_wnd
    // SND.WND: the peer's advertised window in bytes (already scaled).
    uint32_t snd_una = 0, snd_nxt = 0, snd_wnd = 0;
    // \var rcv_nxt
    // RCV.NXT: the next sequence number expected from the peer.
    // \var rcv_wnd
    // RCV.WND: the window we advertise, in bytes (before scaling).
    uint32_t rcv_nxt = 0, rcv_wnd = 0;
    uint32_t snd_mss = 0;                     // largest segment payload we send, bytes
    // \var snd_wscale
    // Window scale shift the peer applies to its windows (RFC 7323; 0 = none).
    // \var rcv_wscale
    // Window scale shift we apply to the windows we advertise.
    uint8_t snd_wscale = 0, rcv_wscale = 0;
    // \var sack_ok
    // SACK was negotiated (RFC 2018).
    // \var ts_ok
    // Timestamps were negotiated (RFC 7323).
    // \var ecn_ok
    // ECN was negotiated (RFC 3168).
    bool sack_ok = false, ts_ok = false, ecn_ok = false;
    // \var cwnd
    // Congestion window, bytes.
    // \var ssthresh
    // Slow-start threshold, bytes.
    // \var bytes_in_flight
    // Bytes sent and neither acknowledged nor presumed lost.
    uint32_t cwnd = 0, ssthresh = 0, bytes_in_flight = 0;
    // \var srtt
    // Smoothed round-trip time (RFC 6298; 0 before the first sample).
    // \var rttvar
    // Round-trip time variation (RFC 6298).
    // \var rto
    // Current retransmission timeout (after any back-off).
    Duration srtt{0}, rttvar{0}, rto{0};
    // \var ack_delay
    // How long the peer holds the ACK of a lone segment, as learned from RTT
    // samples: the tail loss probe's allowance for it (the 2 ms ceiling
    // until known).
    Duration ack_delay{0};
    // \var backoff
    // Consecutive retransmission timeouts without an acknowledgement (`rto`
    // is the base timeout doubled this many times, up to its cap; Linux's tcpi_backoff).
    uint32_t backoff = 0;
    // \var bytes_in
    // Payload bytes received in order and accepted.
    // \var bytes_out
    // Payload bytes sent, retransmissions included.
    // \var segs_in
    // Segments received on this connection.
    // \var segs_out
    // Segments sent on this connection.
    uint64_t bytes_in = 0, bytes_out = 0, segs_in = 0, segs_out = 0;
    // \var bytes_retransmitted
    // Payload bytes sent again (all retransmission kinds).
    // \var retrans_timeout
    // Retransmissions after a retransmission timeout.
    // \var retrans_fast
    // Fast retransmissions (three duplicate ACKs, RFC 5681 §3.2).
    // \var retrans_sack
    // Retransmissions of holes found by SACK loss recovery (RFC 6675).
    uint64_t bytes_retransmitted = 0, retrans_timeout = 0, retrans_fast = 0, retrans_sack = 0;
    // \var fast_recoveries
    // Times fast recovery was entered (once per window of losses).
    // \var dupacks
    // Duplicate ACKs received.
    // \var ooo_segments
    // Out-of-order segments queued for reassembly.
    uint64_t fast_recoveries = 0, dupacks = 0, ooo_segments = 0;
    // \var zero_window_events
    // Times the peer's window went to zero.
    // \var keepalive_probes
    // Keepalive probes sent.
    // \var fast_path
    // Segments handled by the header-prediction fast path.
    uint64_t zero_window_events = 0, keepalive_probes = 0, fast_path = 0;
    uint64_t drops = 0;                       // segments the TCB refused (all reasons), of which
    uint64_t drop_out_of_window = 0;          //   outside the receive window (old duplicates, mostly)
    uint64_t drop_paws = 0;                   //   older timestamp (RFC 7323 PAWS)
    uint64_t drop_no_room = 0;                //   beyond the window / reassembly limits
    // \var dsacks_sent
    // Duplicate-SACK reports sent (RFC 2883).
    // \var retrans_rescue
    // Rescue retransmissions (RFC 6675 §4, rule 4 of NextSeg()).
    uint64_t dsacks_sent = 0, retrans_rescue = 0;
    // \var undo_recoveries
    // Fast recoveries proven spurious (D-SACK or timestamps) and undone.
    // \var undo_rtos
    // Retransmission timeouts proven spurious and undone.
    // \var reordering
    // Segments the path was seen to reorder by: the duplicate-ACK threshold (3 until seen more).
    uint64_t undo_recoveries = 0, undo_rtos = 0;
    uint32_t reordering = 0;
    // \var tlp_probes
    // Tail loss probes sent (RFC 8985 §7.3).
    // \var tlp_recoveries
    // Of those, probes that repaired a loss (the window was reduced).
    uint64_t tlp_probes = 0, tlp_recoveries = 0;
    // \var retrans_probe
    // Probes that sent old data again (a tail loss probe of the last segment,
    // or the probe of a retransmission at snd.una); new-data probes are not.
    uint64_t retrans_probe = 0;
    // Segments sent again, all causes: what Linux counts in tcpi_total_retrans
    // (timeouts, fast and SACK recovery, rescue, probes of old data).
    uint64_t retransmissions() const {
        return retrans_timeout + retrans_fast + retrans_sack + retrans_rescue + retrans_probe;
    }
    // \var rack_losses
    // Holes at snd.una found lost by RACK's reordering window (RFC 8985 §6), not by DupThresh or the RTO.
    uint64_t rack_losses = 0;
    // \var ecn_ce_received
    // Data segments that arrived marked Congestion Experienced (RFC 3168
    // §6.1.3; counted only on an ECN connection, `ecn_ok`).
    // \var ecn_ece_received
    // ACKs that carried ECN-Echo: the peer saw CE marks on what we sent.
    uint64_t ecn_ce_received = 0, ecn_ece_received = 0;
    // \var mss_blackhole
    // Times the MSS was halved after repeated timeouts with full-sized
    // segments out: a path that drops large segments silently (a path MTU
    // black hole; ConnOptions::mtu_blackhole). `snd_mss` is what is left.
    uint64_t mss_blackhole = 0;
    uint32_t rx_queued = 0;                   // batch mode: bytes waiting for read()
};

// Per-engine statistics. Every dropped packet bumps exactly one counter.
struct EngineStats {
    // \var loops
    // Loop iterations run (run() or poll_once()).
    // \var idle_loops
    // Iterations that found no work (busy = loops - idle_loops).
    uint64_t loops = 0, idle_loops = 0;
    // \var busy_ns
    // Time spent in iterations that found work, from their poll to their end
    // (engines with a device). Over an interval, its growth divided by the
    // interval is the share of the core the stack and its handlers really
    // use, and divided by the frames received, what each costs. Wall time:
    // a thread preempted inside such an iteration counts the gap too.
    uint64_t busy_ns = 0;
    uint64_t sleeps = 0;              // waits with a timeout: idle back-off naps; without a
                                      //   device, KernelWait::Block epoll_waits that may sleep
    // \var rx_packets
    // Frames received from the device.
    // \var rx_bytes
    // Bytes of those frames (Ethernet header included).
    uint64_t rx_packets = 0, rx_bytes = 0;
    // \var tx_packets
    // Frames the device accepted (a TSO request counts once).
    // \var tx_bytes
    // Bytes of those frames (Ethernet header included).
    uint64_t tx_packets = 0, tx_bytes = 0;
    uint64_t tx_ring_full = 0;        // tx bursts that left frames for the next iteration
    uint64_t tx_early_flushes = 0;    // output sent before the end of its RX burst
                                      //   (EngineConfig::burst_flush_after)
    uint64_t tx_sent_now = 0;         // Conn::send_now() calls that sent frames at once
                                      //   (EngineConfig::reply_at_once)
    uint64_t tx_overflow = 0;         // frame dropped: TX backlog bound reached (ring full for long)
    uint64_t tx_no_mbuf = 0;          // segment dropped: header/frame mbuf pool empty
    uint64_t tx_too_large = 0;        // segment dropped: does not fit one frame (no multi-seg)
    uint64_t tx_zero_copy_segments = 0; // data segments sent as a header mbuf chained to extbuf
                                        // mbufs over the send queue's zbufs (MULTI_SEGS devices)
    uint64_t tx_copied_segments = 0;  // data segments copied: the device takes no chains (or no mbuf to chain)
    uint64_t tx_copybreak_segments = 0; // data segments of <= 128 B copied behind the headers on purpose
    uint64_t tx_copied_views = 0;     // send-queue views of < 512 B copied into a zero-copy chain's
                                      // direct segment instead of attached (RPC headers, small messages)
    uint64_t tx_tso_requests = 0;     // frames handed to the device to cut into segments (TSO)
    uint64_t drop_no_route = 0;       // segment dropped: no route to the destination
    uint64_t drop_neigh_pending = 0;  // segment dropped while its neighbour resolves
    uint64_t drop_neigh_failed = 0;   // segment dropped: neighbour resolution failed
    uint64_t rx_no_memory = 0;        // payload dropped: no zbuf for it (arena or max_memory)
    uint64_t mem_limit_refused = 0;   // zbuf allocations refused: the engine's core is at max_memory
    uint64_t rx_zero_copy = 0;        // payloads handed on in their RX obj (zbuf-backed pool)
    uint64_t rx_copy_pressure = 0;    // bursts copied because the RX pool was below half
    uint64_t rx_multiseg = 0;         // frame dropped: chained RX mbuf that could not be linearized
    uint64_t rx_linearized = 0;       // chained RX mbuf copied into one arena obj (loopback PMDs)
    uint64_t timers_fired = 0;        // app timers run
    uint64_t tcp_timer_runs = 0;      // Host::on_timer calls
    // \var epoll_waits
    // epoll_wait calls on the engine's kernel fds.
    // \var epoll_events
    // Events they returned (each runs an add_fd() callback).
    uint64_t epoll_waits = 0, epoll_events = 0;
    // \var conns_opened
    // Connections established (accepted or connected).
    // \var conns_closed
    // Connections that ended (on_closed() delivered).
    uint64_t conns_opened = 0, conns_closed = 0;
    uint64_t connect_no_port = 0;     // connect(): client port sub-range exhausted
    uint64_t callbacks = 0;           // Handler callbacks run
    // Parse drops, indexed like the wire layer's reasons (see parse_drop_name).
    static constexpr size_t kParseDrops = 16;
    std::array<uint64_t, kParseDrops> parse_drops{}; // frames dropped by the wire layer, per reason
    // \var tcp_segs_in
    // TCP host counters (demux level): TCP segments handed to the host.
    // \var tcp_drop_wrong_dst
    // Segment dropped: destination address is not ours.
    // \var tcp_drop_no_listener
    // Segment dropped: no connection and no listener (RST sent unless a RST).
    // \var tcp_rst_sent
    // RSTs sent by the host (no connection to take the segment).
    uint64_t tcp_segs_in = 0, tcp_drop_wrong_dst = 0, tcp_drop_no_listener = 0, tcp_rst_sent = 0;
    // \var tcp_drop_backlog_full
    // SYN dropped: listener backlog full and SYN cookies off.
    // \var tcp_syn_cookies_sent
    // SYN-ACKs carrying a SYN cookie (backlog full, RFC 4987).
    // \var tcp_accepted
    // Connections accepted by listeners.
    uint64_t tcp_drop_backlog_full = 0, tcp_syn_cookies_sent = 0, tcp_accepted = 0;
    // \var tcp_drop_listen_bad
    // Segment to a listener dropped: neither a SYN nor a valid cookie ACK, or a
    // SYN carrying FIN (RFC 9293 §3.10.7.2).
    // \var tcp_drop_too_many_conns
    // SYN dropped: the engine's connection table is full.
    // \var tcp_rst_rate_limited
    // RSTs not sent to segments without a connection (rate limit).
    // \var tcp_syn_cookies_ok
    // Connections opened from a valid SYN cookie ACK.
    // \var tcp_syn_cookies_bad
    // ACKs to a listener whose cookie did not validate (dropped).
    uint64_t tcp_drop_listen_bad = 0, tcp_drop_too_many_conns = 0, tcp_rst_rate_limited = 0;
    uint64_t tcp_syn_cookies_ok = 0, tcp_syn_cookies_bad = 0;
    // \var pcap_frames
    // Packet capture (RuntimeOptions::pcap): frames written to the file.
    // \var pcap_dropped_cap
    // Frames not written because the size cap was reached (or a write failed).
    uint64_t pcap_frames = 0, pcap_dropped_cap = 0;
    // \var phase_ns
    // Where an iteration that received frames spends its time, sampled: one
    // such iteration in kPhaseSampleEvery is timed phase by phase (a TSC read
    // at each boundary; the others pay one branch) and its nanoseconds added
    // here, by phase (phase_name): the device's poll (rx_burst); the burst
    // through the stack, frame by frame, split three ways: the frame parsed
    // and its payload made a slice (parse), TCP's input (tcp: the segment
    // checked against its connection, the ACK and the data taken), the
    // events delivered (app: in inline mode the handlers, up to the
    // Conn::send_now() of their reply); the timers; TCP's output and the
    // frames built (pump); the device's send (tx_burst); and the rest of the
    // loop after the output left (with the handlers' work after a
    // Conn::send_now()). Wall time, like busy_ns.
    // \var phase_samples
    // Iterations timed: phase_ns[i] / phase_samples is phase i's mean.
    // \var kPhases
    // The loop phases phase_ns counts (see phase_name).
    // \var kPhaseSampleEvery
    // One iteration that received frames in this many is timed.
    static constexpr size_t kPhases = 8;
    static constexpr uint32_t kPhaseSampleEvery = 64;
    std::array<uint64_t, kPhases> phase_ns{};
    uint64_t phase_samples = 0;

    // Phase i's name (< kPhases): poll, parse, tcp, app, timers, output,
    // flush, rest; its counter is `phase_<name>_ns` in for_each().
    static std::string_view phase_name(size_t i);
    // The wire layer's name of parse drop reason `i` (< kParseDrops);
    // its counter is `parse_<name>` in for_each(); "unknown" past the
    // wire layer's reasons.
    static std::string_view parse_drop_name(size_t i);
    // Every counter by name (parse drops as "parse_<reason>"), for printing.
    void for_each(const std::function<void(std::string_view name, uint64_t value)>& fn) const;
};

class Engine;
class Handler;
namespace engine { class EngineImpl; }

// A connection handle: cheap to copy; becomes invalid (every call a no-op or
// Closed) once on_closed() has returned.
class Conn {
public:
    Conn() = default;
    // True until on_closed() of this connection has returned (false for a
    // default-constructed handle).
    bool valid() const;
    // valid().
    explicit operator bool() const { return valid(); }
    // Same connection (a closed slot reused later compares unequal: generation).
    bool operator==(const Conn& o) const { return e_ == o.e_ && index_ == o.index_ && gen_ == o.gen_; }

    // Zero-copy send, all or nothing: on Ok every slice moved into the send
    // queue (the entries are left empty); on WouldBlock nothing moved and
    // on_writable() fires once space is back. Never an unbounded queue.
    // The bytes are read in place until the peer acknowledges them — by the
    // NIC (chained TX on devices that take it), and again by every
    // retransmission — so they must not be written through another reference
    // to the same obj before on_acked() has released them.
    SendStatus send(std::span<Slice> iov);
    // send() of one slice; `s` is left empty on Ok.
    SendStatus send(Slice&& s) { return send(std::span<Slice>(&s, 1)); }
    // Copies `bytes` into zbufs from the arena, all or nothing: behind the
    // connection's last copy while its obj has room (small writes pack into
    // one obj), then into new objs.
    SendStatus send_copy(std::span<const std::byte> bytes);
    // send_copy() of a string's bytes.
    SendStatus send_copy(std::string_view s) { return send_copy(std::as_bytes(std::span(s.data(), s.size()))); }
    // Socket-like: copies as much as fits in the send buffer and in memory
    // (0 when either is full: wait for on_writable()).
    size_t write(const void* buf, size_t len);
    // Batch mode: copies queued received bytes (0 when none). The receive
    // window reopens as bytes are read.
    size_t read(void* buf, size_t len);
    // Batch mode, zero-copy: moves up to `max` queued bytes onto `out` as the
    // received slices themselves (a slice cut at `max` leaves its rest
    // queued). Returns the bytes moved; the receive window reopens by them.
    size_t read_slices(std::vector<Slice>& out, size_t max = SIZE_MAX);
    size_t readable() const;    // batch mode: bytes waiting for read()
    size_t send_space() const;  // bytes send()/write() would accept now
    // Latency, inline mode: called from a callback of the last frame of an RX
    // burst — after the reply to what on_data() delivered has been sent —
    // this connection's queued output leaves now: its segments are built
    // (the first carrying the ACK of the delivered data) and handed to the
    // device before the call returns, rather than after the callback has
    // unwound and the loop's timers and output pass have run. What the
    // burst's other connections queued goes in the same TX burst (the end of
    // the iteration would have sent it with this anyway). Anywhere else
    // (earlier frames of a burst, whose output EngineConfig::burst_flush_after
    // governs; timers; batch mode; EngineConfig::reply_at_once off) it does
    // nothing and the output leaves at the end of the iteration as usual.
    // Call it once, after the last send of an exchange (rpc::Server and
    // rpc::Channel do, for the last message of a delivery): output sent after
    // it makes a frame of its own. True when frames left.
    bool send_now();

    void shutdown();  // half-close: FIN after queued data; reading goes on
    void close();     // full close; on_closed() follows
    void abort();     // RST now; on_closed(AbortedLocally) follows

    // This end's address and port ({} once the handle is invalid).
    Endpoint local() const;
    // The peer's address and port ({} once the handle is invalid).
    Endpoint remote() const;
    // A copy of the connection's counters (state "CLOSED" once invalid).
    ConnStats stats() const;
    // Attach an application pointer (not owned; crescent never dereferences
    // it), e.g. per-connection state for a shared Handler.
    void set_user(void* p);
    // The pointer given to set_user(), nullptr if none or once invalid.
    void* user() const;
    // Inline mode, from on_data(): this delivery's bytes stay in the receive
    // window when on_data() returns (it does not reopen by them) until
    // release_window() gives them back. Backpressure for a handler that keeps
    // the slices because it cannot pass them on yet (an echo whose send
    // buffer is full): the held bytes count against ConnOptions::rcv_buf, so
    // the peer stops there instead of the handler's queue growing.
    void hold_window();
    // Reopen the window by `bytes` held with hold_window() (at most what is held).
    void release_window(size_t bytes);
    // Bytes held now (hold_window() less release_window()).
    size_t held_window() const;
    // The engine that owns the connection (nullptr for a default handle).
    Engine* engine() const;

private:
    friend class engine::EngineImpl;
    Conn(engine::EngineImpl* e, uint32_t index, uint32_t gen) : e_(e), index_(index), gen_(gen) {}
    engine::EngineImpl* e_ = nullptr;
    uint32_t index_ = 0;
    uint32_t gen_ = 0;
};

// What the application implements: one handler may serve many connections
// (use Conn::set_user for per-connection state). Every method runs on the
// engine's thread; the defaults do nothing.
class Handler {
public:
    virtual ~Handler() = default;
    // The connection is established (active or passive open).
    virtual void on_connected(Conn c) { (void)c; }
    // Inline mode: in-order bytes, zero-copy. The engine owns `data`; move
    // slices out (e.g. into send()) to keep them. The receive window reopens
    // when the callback returns.
    virtual void on_data(Conn c, std::span<Slice> data) { (void)c; (void)data; }
    // Batch mode: bytes are waiting for Conn::read() (level: fires after each
    // burst that brought data).
    virtual void on_readable(Conn c) { (void)c; }
    // `bytes` of sent data were acknowledged and their zbufs released.
    virtual void on_acked(Conn c, size_t bytes) { (void)c; (void)bytes; }
    // Send space is back after a WouldBlock / short write(), or memory may be
    // back after a NoMemory (asked again every millisecond while refused).
    virtual void on_writable(Conn c) { (void)c; }
    // The peer sent FIN: no more data will arrive (we may still send).
    virtual void on_peer_closed(Conn c) { (void)c; }
    // The connection is over; the handle dies when this returns.
    virtual void on_closed(Conn c, CloseReason why) { (void)c; (void)why; }
};

// How received data reaches the handler (see the header comment): Inline =
// on_data() with zero-copy slices during the burst; Batch = on_readable()
// after the burst, then Conn::read()/read_slices().
enum class DispatchMode : uint8_t { Inline, Batch };
// "inline" or "batch"; false when unknown.
bool parse_dispatch_mode(std::string_view s, DispatchMode* out);

// How an engine without a device (RuntimeOptions::kernel_only: kernel sockets
// in its epoll set, timers, no NIC queue) waits for work. Engines with a
// device always poll (see EngineConfig::idle_spin).
enum class KernelWait : uint8_t {
    Busy,   // spin on epoll_wait(timeout 0): no sleep, no wake-up latency (the tuned kernel baseline)
    Block,  // sleep in epoll_wait until an fd is ready or the next timer is due: one
            // epoll_wait per wake-up (an epoll/libev server, Luna's kernel baseline)
};
std::string_view kernel_wait_name(KernelWait w);              // "busy", "block"
bool parse_kernel_wait(std::string_view s, KernelWait* out);  // false when unknown

// Per-engine settings (RuntimeOptions::engine applies one to every engine).
struct EngineConfig {
    DispatchMode mode = DispatchMode::Inline; // how handlers receive data
    uint16_t burst = 32;              // RX burst size (1..512)
    // Limits (check_engine_config() states the ranges):
    // per listener: connections half-open or not yet handed to the handler
    uint32_t backlog = 1024;
    // A listener whose backlog is full answers SYNs with a SYN cookie (RFC
    // 4987: no state kept until the handshake completes); off = drop them
    // (counted in tcp_drop_backlog_full).
    bool syn_cookies = true;
    // Connections the engine holds at once, TIME-WAIT included: connect()
    // fails with TooManyConnections and SYNs are dropped (counted in
    // tcp_drop_too_many_conns) while at the limit.
    uint32_t max_connections = 1u << 20;
    // Memory the engine's core may take from the zbuf arena, in bytes
    // (rounded up to whole 2 MiB zones; 0 = no cap but the arena's size):
    // send_copy()/write() data, received payloads copied out of the RX pool,
    // RPC buffers. At the cap send_copy() returns NoMemory, write() 0,
    // received payloads are dropped (rx_no_memory; the peer retransmits)
    // until memory is freed. The RX pool of the engine's queue is fixed at
    // start and counts on top of it.
    size_t max_memory = 0;
    ConnOptions conn;                 // defaults for accepted connections
    // Idle back-off: after `idle_spin` consecutive empty iterations, sleep in
    // epoll_wait for up to `idle_sleep` (bounded by the next timer). 0 = always spin.
    uint32_t idle_spin = 0;
    Duration idle_sleep = std::chrono::microseconds(100); // longest idle nap
    uint32_t epoll_batch = 16;        // events per epoll_wait
    // Engines with a device poll their epoll set (add_fd(): the control socket,
    // the metrics server, the application's own fds) at most once per
    // `fd_poll_interval` while busy: an epoll_wait per loop iteration costs a
    // system call per packet burst. 0 = every iteration.
    Duration fd_poll_interval = std::chrono::microseconds(50);
    // How often the engine publishes its counters for other threads
    // (the control socket's crescent-stat, the metrics endpoint); the
    // connection table goes every tenth time. 1 ms..1 h: shorter reads fresher,
    // longer costs less (a publication copies the counters and the zbuf
    // classes, ~12k instructions).
    Duration stats_interval = std::chrono::milliseconds(10);
    // Inline mode: what the handlers send while an RX burst is processed
    // (replies) waits for the end of the burst at most this long; once it has
    // and frames of the burst remain, it is sent first (with any ACKs due),
    // so that the peer works on the first replies while this engine handles
    // the rest (a pipelined client's 16 requests arrive as two segments in one
    // burst). ACKs alone wait for the burst's end, where a later reply may
    // carry them. 0 = after every frame that left output; Duration::max() =
    // only at the end of the burst. Unset: 1 us, or only at the end of the burst on
    // AF_XDP, where each TX burst is a system call (and on veth the call
    // also delivers the frames: the sender pays for them either way).
    // Costs a clock read per frame while output waits.
    std::optional<Duration> burst_flush_after;
    // Whether Conn::send_now() acts: a reply sent from a callback of an RX
    // burst's last frame leaves from inside that call instead of after the
    // callback, the timers and the loop's output pass.
    bool reply_at_once = true;
    KernelWait kernel_wait = KernelWait::Busy;  // engines without a device only
};

// Checks the limits of `c` and its connection defaults: burst 1..512,
// backlog 1..65535, max_connections 1..16M, max_memory 0 or >= 2 MiB,
// conn.snd_buf and conn.rcv_buf 4 KiB..1 GiB, conn.reassembly_bytes
// <= 1 GiB, conn.reassembly_segments <= 65536. false with a message naming
// the field when one is out of range (Runtime::start() refuses such a config).
bool check_engine_config(const EngineConfig& c, std::string* err);
// The same for one connection's options (Engine::connect() refuses bad ones
// with InvalidArgument).
bool check_conn_options(const ConnOptions& o, std::string* err);

// Names a timer of Engine::add_timer() for cancel_timer(); unique per engine.
using TimerId = uint64_t;

// Engine::listen(): Ok, AddressInUse (the port already has a listener), or
// InvalidArgument (port 0, or an engine without a device).
enum class ListenStatus : uint8_t { Ok, AddressInUse, InvalidArgument };
// Engine::connect(): Ok (on_connected() or on_closed() follows), NoPort (no
// free client port, or `local_port` taken), NoRoute (no route or no device),
// TooManyConnections (the engine's table is full), or InvalidArgument (port
// or address 0, `local_port` outside client_ports()).
enum class ConnectStatus : uint8_t { Ok, NoPort, NoRoute, TooManyConnections, InvalidArgument };

// One share-nothing TCP engine on its own core (see the header comment).
// Created and owned by the Runtime (Runtime::engine()); every call from the
// engine's own thread except stop().
class Engine {
public:
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Accept connections on `port` of this engine's address; `h` must outlive them.
    // An engine without a device (RuntimeOptions::kernel_only) has no crescent
    // connections: listen() is InvalidArgument and connect() NoRoute there.
    ListenStatus listen(uint16_t port, Handler& h);
    // Stop accepting on `port`; connections not yet accepted are reset,
    // established ones go on. No-op when not listening.
    void unlisten(uint16_t port);
    // Active open from this engine's client-port sub-range (Luna §7.1), so the
    // replies come back to this engine's queue. on_connected() or
    // on_closed(Refused/ConnectTimeout) follows. `local_port` (0 = the next
    // free one) asks for a given port of client_ports(), e.g. to reach a given
    // engine of a server that spreads connections by the low bits of the
    // source port; NoPort when it is taken, InvalidArgument when outside.
    ConnectStatus connect(Endpoint remote, Handler& h, Conn* out, const ConnOptions* opts = nullptr,
                          uint16_t local_port = 0);

    // One-shot timer on this engine's wheel; the callback runs on this thread.
    TimerId add_timer(Duration after, std::function<void()> fn);
    // Cancel a pending timer: true when it was pending (its callback will not
    // run), false when it already ran or was cancelled.
    bool cancel_timer(TimerId id);

    // Watch a kernel fd in the engine's epoll set (EPOLLIN/EPOLLOUT/...); the
    // callback runs from the loop's non-blocking epoll_wait. false on failure.
    bool add_fd(int fd, uint32_t events, std::function<void(uint32_t events)> fn);
    // Stop watching `fd` (the caller still owns and closes it); false when it
    // was not watched.
    bool remove_fd(int fd);

    // Run `fn` on the engine's thread when the engine stops (after run()
    // returns, once its connections are reset and their handlers told
    // EngineStopped): for state the loop drives that is not a connection,
    // e.g. kernel sockets in the epoll set. Returns an id for cancel_at_stop().
    uint64_t at_stop(std::function<void()> fn);
    // Forget an at_stop() callback (no-op for an unknown or already run id).
    void cancel_at_stop(uint64_t id);

    // Run the loop until stop(). poll_once() runs one iteration (tests,
    // applications with their own loop); returns the work done (packets+events).
    void run();
    // One loop iteration (see run()); returns the packets and events handled.
    size_t poll_once();
    // Any thread, async-signal-safe: the loop returns at the next iteration
    // (a KernelWait::Block loop asleep in epoll_wait is woken through an eventfd).
    void stop();
    // True once stop() was called (the loop is returning or has returned).
    bool stopping() const;

    Instant now() const;            // the engine's clock (TSC-derived)
    // When the engine last polled for input: the start of this loop iteration,
    // or the return of the epoll wait whose events are being handled. What
    // "received" means for anything handed over now, and free (no clock read).
    Instant loop_time() const;
    // The time of the event being handled, without a clock read where that is
    // possible: loop_time() while the loop dispatches what it polled (frames,
    // timers, fd events: every callback of run() or poll_once()), now()
    // outside it (set-up before run(), code between poll_once() calls). What
    // an rpc::Channel call's start and its reply's arrival are stamped with:
    // a TSC read costs ~17 ns on the test machine, two of them a call
    // (BENCHMARKS.md, session 42). A stamp is then up to one burst's handling
    // early: a call made late in a long burst counts that handling too.
    Instant event_time() const;
    unsigned core() const;          // zbuf core id of this engine
    unsigned index() const;         // engine index in its runtime (0..n-1)
    DispatchMode dispatch_mode() const;  // EngineConfig::mode
    // The address connections use (0.0.0.0 without a device).
    Ipv4 local_ip() const;
    std::pair<uint16_t, uint16_t> client_ports() const;  // inclusive sub-range
    // A copy of the engine's counters (engine thread; other threads read the
    // published copy, crescent-stat).
    EngineStats stats() const;
    // Connections the engine holds now (any TCP state but CLOSED).
    size_t connection_count() const;

    // The implementation behind the API, for crescent's own layers (rpc,
    // tests); not a stable interface.
    engine::EngineImpl& impl() { return *impl_; }

private:
    friend class engine::EngineImpl;
    explicit Engine(std::unique_ptr<engine::EngineImpl> impl);
    std::unique_ptr<engine::EngineImpl> impl_;
};

// Luna §7.1: the client port range 61440-65535 split evenly between `count`
// engines; engine `index` gets the returned inclusive sub-range.
std::pair<uint16_t, uint16_t> client_port_subrange(unsigned index, unsigned count);
inline constexpr uint16_t kClientPortLo = 61440; // first port of the client range
inline constexpr uint16_t kClientPortHi = 65535; // last port of the client range (inclusive)

} // namespace crescent
