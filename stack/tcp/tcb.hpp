// crescent — the sans-IO TCP control block (one connection).
//
// RFCs implemented here and in tcb.cpp:
//   RFC 9293  TCP: the eleven states, "SEGMENT ARRIVES" (§3.10.7), user calls
//             (§3.10.1-§3.10.6), MSS (§3.7.1), RST validation (§3.5.3)
//   RFC 6298  RTO computation, backoff, Karn's rule
//   RFC 7323  window scale, timestamps, PAWS (with Linux's allowances, tcb.cpp paws_rejects())
//   RFC 6691  MSS option value
//   RFC 2018  SACK (receiver blocks) / RFC 6675 SACK-based loss recovery (§2's duplicate
//             ACK: any ACK SACKing new data, data-carrying ones too; §5.1's new recovery
//             at snd.una = recover; tcb_ack.cpp)
//   RFC 5681, RFC 6582  congestion control / NewReno fast recovery (SACK off)
//   RFC 3042  limited transmit (extended to a raised DupThresh, RFC 4653 §3.1)
//   RFC 2883, RFC 3708, RFC 3522, RFC 4015  D-SACK; spurious fast recoveries
//             and RTOs detected (D-SACK, Eifel) and undone; a DupThresh that
//             follows the path's reordering (tcb_undo.cpp)
//   RFC 8985 §7  tail loss probe; RFC 5827  early retransmit (tcb_tlp.cpp)
//   RFC 8985 §6  RACK's reordering window, for the hole at snd.una and its
//             retransmission (tcb_rack.cpp)
//   RFC 3168  ECN negotiation; RFC 8257 §3.2 DCTCP precise CE echo
//   RFC 5961  challenge ACKs (RST, SYN, ACK validity) with a rate limit
//   RFC 1122  delayed ACK, keepalive, zero-window probes; SWS avoidance (§4.2.3.3/4)
//
// Sans-IO, "collect then act": every entry point takes `now` and appends what
// must happen to a caller-owned `Actions`; the TCB never reads a clock, never
// does I/O and never calls back into the application. The engine runs the
// actions after the call returns.
//
// Threads: a Tcb belongs to one engine core; nothing here is thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <crescent/time.hpp>
#include <crescent/zbuf.hpp>

#include "stack/tcp/cc.hpp"
#include "stack/tcp/oow_limit.hpp"
#include "stack/tcp/reassembly.hpp"
#include "stack/tcp/range_set.hpp"
#include "stack/tcp/scoreboard.hpp"
#include "stack/wire/wire.hpp"

namespace crescent::tcp {

using wire::Ipv4Addr;
using wire::SeqNum;
using wire::TcpRepr;

// ---- configuration -----------------------------------------------------------

struct KeepaliveConfig {
    bool enabled = false;
    Duration idle = std::chrono::seconds(7200); // RFC 1122 §4.2.3.6: >= 2 h by default
    Duration interval = std::chrono::seconds(75);
    uint32_t count = 9;                          // unanswered probes before abort
};

enum class EcnMode : uint8_t {
    Off,        // never negotiate ECN
    CcDefault,  // negotiate when the congestion control wants it (DCTCP)
    On,         // always negotiate (classic RFC 3168 reaction for NewReno/CUBIC)
};

inline constexpr size_t kMaxTxViews = 16; // a segment spans at most this many send-queue slices
// The MSS a path MTU black hole halves down to, and no further (Config::blackhole_timeouts;
// Linux's first step with tcp_mtu_probing=1 and tcp_base_mss 1024 lands near it).
inline constexpr uint32_t kBlackholeMss = 512;

struct Config {
    // Our SMSS ceiling, from the path MTU (1500 - 20 - 20). Sent as the MSS
    // option; the effective send MSS is min(this, peer's MSS option or 536).
    uint16_t mss = 1460;
    // Receive buffer: bytes delivered to the application but not yet
    // `consume()`d plus bytes held out of order. The advertised window is
    // rcv_buf minus that (RFC 9293 §3.8.6.2.2 receiver SWS avoidance applies).
    uint32_t rcv_buf = 1u << 20;
    // Send buffer: bytes queued by `send()` and not yet acknowledged.
    uint32_t snd_buf = 1u << 20;

    Duration initial_rto = std::chrono::seconds(1);   // RFC 6298 §2.1
    Duration min_rto = std::chrono::milliseconds(5);   // datacenter floor (RFC 6298 §2.4 says 1 s)
    Duration max_rto = std::chrono::seconds(60);       // RFC 6298 §2.5
    uint32_t max_retries = 12;  // consecutive RTOs on data/FIN before abort (RetransmitTimeout)
    // ...and no sooner than this after the first of them (RFC 1122 §4.2.3.5:
    // R2 "SHOULD correspond to at least 100 seconds"); with a 5 ms RTO floor,
    // 12 back-offs alone would give up after ~41 s. 0 = count only.
    Duration retransmit_give_up = std::chrono::seconds(100);
    uint32_t syn_retries = 6;   // SYN retransmissions before abort (ConnectTimeout); ~127 s from 1 s
    // SYN-ACK retransmissions of a passive open before it is dropped: a
    // half-open connection (a SYN flood's, or a peer that vanished) goes
    // ~63 s after its SYN, as Linux's tcp_synack_retries = 5.
    uint32_t synack_retries = 5;
    // Path MTU black holes (RFC 2923 §2.1, RFC 4821): ICMP "fragmentation
    // needed" goes to the kernel, never to us, so a path that drops full-sized
    // segments shows only as timeouts. After this many consecutive RTOs with
    // more than kBlackholeMss bytes outstanding, and again after each as many
    // more, the MSS is halved down to kBlackholeMss (Linux with
    // tcp_mtu_probing=1 does the same after tcp_retries1 = 3 timeouts; it
    // never probes back up here). 0 = off.
    uint32_t blackhole_timeouts = 3;

    Duration time_wait = std::chrono::seconds(1);      // 2*MSL; up to 60 s for internet-facing use
    // Orphaned FIN-WAIT-2 after close() (not after shutdown_write()); 0 = wait forever.
    Duration fin_wait2_timeout = std::chrono::seconds(60);

    // Delayed ACK (RFC 1122 §4.2.3.2, RFC 5681 §4.2): ACK at least every
    // `delayed_ack_segments` full-sized segments, or when the timer fires.
    Duration delayed_ack = std::chrono::milliseconds(1);
    uint32_t delayed_ack_segments = 2;   // 1 = ACK every segment
    // Hold the count-triggered ACK (every `delayed_ack_segments`-th segment)
    // until the train pauses for `ack_hold` (each in-order segment re-arms
    // it), or until `ack_hold_segments` segments are unacknowledged or the
    // peer has used half the window we gave it: a segment we send meanwhile
    // (an RPC's reply) carries it, and a train of segments arriving a few
    // microseconds apart gets one ACK, as Linux's GRO gives (up to 64 KB).
    // At those limits the ACK goes at the next flush() — the end of the RX
    // burst in the engine, the same moment it would have left the device —
    // so that a reply to the burst still carries it. An ACK is held at most
    // ack_hold x ack_hold_segments. ACKs that must go at once (duplicates,
    // out of order, FIN, window updates) are not held. A segment without
    // PSH that arrives alone is held too rather than delayed: its sender had
    // more to send, so it is stopped (by its window, or probing after a lost
    // ACK) and waits for this one. 0 = off (RFC 5681 §4.2 as written).
    Duration ack_hold{0};
    uint32_t ack_hold_segments = 32;  // ~46 KB at a 1448-byte MSS

    // TCP segmentation offload: when above the send MSS, new data goes out in
    // OutSegments of up to this many payload bytes (a whole number of
    // segments) that the device cuts into MSS-sized ones (OutSegment::
    // tso_segsz). 0 = off. Retransmissions of a lost segment stay one MSS.
    uint32_t tso_max = 0;
    // Send-queue slices one OutSegment may span (1..kMaxTxViews): devices
    // limit the segments of a chained frame (e.g. 8 on Intel NICs), and each
    // view becomes one.
    uint8_t max_tx_views = uint8_t(kMaxTxViews);

    bool nagle = false;          // RFC 9293 §3.7.4 (opt-in, like TCP_NODELAY off)
    KeepaliveConfig keepalive;

    bool sack = true;            // RFC 2018
    bool timestamps = true;      // RFC 7323 §3
    bool window_scale = true;    // RFC 7323 §2
    CcAlgo cc = CcAlgo::NewReno;
    EcnMode ecn = EcnMode::CcDefault;
    // RFC 3465 §2.2 L: the most one ACK grows cwnd in slow start, in segments.
    // 0 = no limit: an ACK for N segments counts as N ACKs, so slow start still
    // doubles per round trip when the peer stretches its ACKs (a Linux receiver
    // with GRO; crescent's own ack_hold), as Linux's sender does since 3.13.
    uint32_t abc_limit = CongestionControl::kAbcLimit;

    // Reordering (tcb_undo.cpp): when an original segment arrives after
    // others sent after it (a SACK or cumulative ACK covers a hole that was
    // never retransmitted, or a D-SACK reports a retransmission duplicate),
    // the duplicate-ACK threshold rises to how late it came, in segments, up
    // to this bound (Linux's tcp_max_reordering). 3 keeps RFC 5681's fixed
    // DupThresh.
    uint32_t max_reordering = 300;
    // Undo a congestion response that proves spurious: every retransmission
    // of a fast recovery or RTO reported duplicate by D-SACKs (RFC 3708), or
    // the ACKs that ended it echoing timestamps older than the first
    // retransmission (RFC 3522 Eifel detection). cwnd and ssthresh return to
    // their values before it (RFC 4015); after a spurious RTO, sending
    // resumes with new data instead of going back N.
    bool undo = true;

    // RFC 8985 §7 tail loss probe (tcb_tlp.cpp): when the ACKs stop with data
    // outstanding and no recovery under way, send one segment (new data, or
    // the last one again) after a probe timeout instead of waiting for the
    // RTO, so that a lost tail — every RPC message has one — is found in
    // about two round trips. PTO = max(2 SRTT, tlp_min_pto), plus, when one
    // segment is in flight, what the peer may hold its ACK for (RFC 8985's
    // WCDelAckT): tlp_max_ack_delay until the connection has seen how long
    // this peer holds a lone segment's ACK, then that (learned from RTT
    // samples, never above tlp_max_ack_delay; crescent's delayed_ack is 1 ms,
    // Linux's at least 40 ms, where a probe is only a duplicate it reports).
    // Needs SACK. tlp_min_pto floors the PTO where round trips take tens of
    // microseconds: a lost tail costs about the floor (at 1 % loss it is
    // the p99), and a peer slower than it to answer draws a spurious probe
    // (one segment, reported duplicate; on the veth bed 0.1-0.4 % of RPCs
    // at 100 us, 0.03-0.1 % at 200 us, BENCHMARKS.md session 36).
    bool tlp = true;
    Duration tlp_min_pto = std::chrono::microseconds(100);
    Duration tlp_max_ack_delay = std::chrono::milliseconds(2);
    // Probes per tail before the RTO. RFC 8985 §7.3 sends one; crescent sends
    // a second after twice the PTO when the first drew no ACK at all (it, or
    // the one ACK a receiver returns for a whole train, was lost too) and the
    // RTO is further off. 1 is the RFC's behaviour.
    uint32_t tlp_max_probes = 2;
    // RFC 5827 early retransmit: with fewer than four segments outstanding
    // and nothing new to send, oseg - 1 duplicate ACKs (or SACKed segments)
    // mark the first hole lost — a 4 KiB message is three segments, and
    // DupThresh 3 could never be reached. Off once the path has reordered.
    bool early_retransmit = true;
    // RFC 8985 §6, for the hole at snd.una (tcb_rack.cpp): SACKed data above
    // it that is too little for DupThresh — a message's last segments, once
    // the path has reordered and DupThresh rose — makes it lost after RACK's
    // reordering window (min_RTT / 4, widened by D-SACKs, at most SRTT)
    // instead of at the RTO; in a recovery, so does a SACKed retransmission
    // sent after snd.una's. Needs SACK.
    bool rack = true;

    ReassemblyLimits reassembly;  // bounded out-of-order memory

    // RFC 5961 §7: at most this many challenge ACKs per interval per connection.
    uint32_t challenge_ack_limit = 10;
    Duration challenge_ack_interval = std::chrono::seconds(1);
    // At most one answer per interval to unacceptable pure segments (ACK
    // loops; Linux's tcp_invalid_ratelimit, oow_limit.hpp).
    Duration oow_ack_interval = std::chrono::milliseconds(500);
    // Persist timer (zero-window probes) backoff ceiling.
    Duration max_persist = std::chrono::seconds(60);
};

// ---- states, reasons, events ----------------------------------------------------

// RFC 9293 §3.3.2.
enum class State : uint8_t {
    Closed,
    Listen,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
};
std::string_view state_name(State s);

enum class CloseReason : uint8_t {
    None,               // still open
    Normal,             // both FINs exchanged and acknowledged
    ResetByPeer,        // acceptable RST in a synchronized state
    Refused,            // RST in answer to our SYN (RFC 9293 §3.10.7.3)
    ConnectTimeout,     // SYN / SYN-ACK retries exhausted
    RetransmitTimeout,  // max_retries consecutive RTOs
    KeepaliveTimeout,   // keepalive probes unanswered
    FinWait2Timeout,    // orphaned FIN-WAIT-2 expired
    AbortedLocally,     // abort(), or data arrived after close() (RFC 9293 §3.10.7.4 / RFC 1122 §4.2.2.13)
};
std::string_view close_reason_name(CloseReason r);

// A connection handle: index + generation, stable for the connection's life.
// A Tcb used on its own carries whatever id its creator gave it.
struct ConnId {
    uint32_t index = 0;
    uint32_t gen = 0;
    constexpr bool operator==(const ConnId&) const = default;
};

enum class EventKind : uint8_t {
    Connected,    // reached ESTABLISHED (active or passive open)
    PeerFin,      // the peer closed its direction: no more readable data (EOF)
    Acked,        // `bytes` of sent data acknowledged; their send-queue references are dropped
    Writable,     // send buffer space after a refused send() (edge-triggered)
    Closed,       // the connection is over for the application; `reason` says why. Emitted
                  // once: on CLOSED, or on entering TIME-WAIT (reason Normal; the 2*MSL
                  // wait then ends silently)
    Acceptable,   // Host only: a listener on `port` has a connection in its accept queue
};

struct Event {
    ConnId conn;
    EventKind kind;
    CloseReason reason = CloseReason::None;  // Closed only
    uint32_t bytes = 0;                      // Acked only
    uint16_t port = 0;                       // Acceptable only: the listening port
};

// A borrowed view of payload bytes inside the send queue. Valid until the next
// call on the Tcb (or Host) that produced it. The engine takes its own zbuf
// reference with `Zbuf::share_of(data)` when it hands the bytes to the NIC.
// No default member initializers: OutSegment::views is left uninitialized
// (only the first view_count entries mean anything), so a pure ACK does not
// pay for zeroing sixteen of them on the fast path.
struct TxView {
    const std::byte* data;
    uint32_t len;
};

struct OutSegment {
    // User-provided so that value-initialization (emplace_back()) does not
    // zero the view array either.
    OutSegment() {}
    ConnId conn;
    Ipv4Addr src, dst;        // IP addresses for emission (local, remote)
    TcpRepr repr;
    uint8_t ip_ecn = 0;       // 2-bit ECN field: 0 Not-ECT, 2 ECT(0)
    uint8_t view_count = 0;
    // Non-zero: the payload is more than one segment (TSO, Config::tso_max);
    // the device cuts it into tso_segsz-byte segments, each with these
    // headers (SEQ advanced; FIN and PSH on the last, CWR on the first only).
    uint16_t tso_segsz = 0;
    std::array<TxView, kMaxTxViews> views;  // [0, view_count) are set

    std::span<const TxView> payload() const { return {views.data(), view_count}; }
    uint32_t payload_len() const {
        uint32_t n = 0;
        for (uint8_t i = 0; i < view_count; ++i) n += views[i].len;
        return n;
    }
};

// In-order data for the application. Ownership of the slice transfers to the
// receiver of the Actions; the bytes count against the receive window until
// the application calls `consume()`.
struct Readable {
    ConnId conn;
    Slice data;
};

// What a call asks the engine to do. Owned by the caller, reused across calls
// (clear() keeps capacity, so the steady state does not allocate).
struct Actions {
    std::vector<OutSegment> segments;
    std::vector<Readable> readable;
    std::vector<Event> events;

    void clear() {
        segments.clear();
        readable.clear();
        events.clear();
    }
    bool empty() const { return segments.empty() && readable.empty() && events.empty(); }
};

// ---- statistics -------------------------------------------------------------------

struct Stats {
    State state = State::Closed;
    CloseReason close_reason = CloseReason::None;
    // RFC 9293 §3.3.1 variables.
    uint32_t snd_una = 0, snd_nxt = 0, snd_wnd = 0, iss = 0;
    uint32_t rcv_nxt = 0, rcv_wnd = 0, irs = 0;
    uint32_t snd_mss = 0;
    uint8_t snd_wscale = 0, rcv_wscale = 0;
    bool sack_ok = false, ts_ok = false, ecn_ok = false;
    // Congestion control.
    uint32_t cwnd = 0, ssthresh = 0;
    uint32_t bytes_in_flight = 0;
    // RFC 6298.
    Duration srtt{0}, rttvar{0}, rto{0};
    Duration ack_delay{0};                        // the TLP's allowance for the peer's delayed ACK (tcb_tlp.cpp)
    uint32_t rtt_samples = 0;
    uint32_t backoff = 0;                         // consecutive RTO expiries (rto is doubled this often)
    // Traffic.
    uint64_t bytes_in = 0, bytes_out = 0;         // payload bytes (in: accepted; out: incl. retransmits)
    uint64_t segs_in = 0, segs_out = 0;
    uint64_t bytes_retransmitted = 0;
    uint64_t retrans_timeout = 0, retrans_fast = 0, retrans_sack = 0;
    uint64_t retrans_rescue = 0;                  // RFC 6675 §4 rule 4
    uint64_t rto_events = 0;
    uint64_t mss_blackhole = 0;                   // MSS halvings after repeated timeouts (Config::blackhole_timeouts)
    uint64_t dupacks = 0;
    uint64_t fast_recoveries = 0;
    uint64_t undo_recoveries = 0;                 // fast recoveries proven spurious and undone
    uint64_t undo_rtos = 0;                       // RTOs proven spurious and undone
    uint64_t reorder_events = 0;                  // originals seen arriving after later data
    uint32_t reordering = 0;                      // the current reordering degree (segments; DupThresh)
    uint64_t tlp_probes = 0;                      // tail loss probes sent (RFC 8985 §7.3)
    uint64_t retrans_probe = 0;                   // of those, and of the probes of snd.una's retransmission: old data sent again
    uint64_t tlp_recoveries = 0;                  // probes that repaired a loss (§7.4: cwnd reduced)
    uint64_t rack_losses = 0;                     // holes found lost by RACK's reordering window (§6)
    uint64_t ooo_segments = 0;                    // segments queued for reassembly
    uint64_t zero_window_events = 0;              // peer advertised zero window
    uint64_t zero_window_probes = 0;
    uint64_t zero_window_sent = 0;                // we advertised zero window
    uint64_t keepalive_probes = 0;
    uint64_t challenge_acks = 0, challenge_acks_suppressed = 0;
    uint64_t oow_acks_suppressed = 0;             // answers to unacceptable pure segments not sent (oow_limit.hpp)
    uint64_t delayed_acks = 0;                    // ACKs sent by the delayed-ACK timer
    uint64_t dsacks_sent = 0;                     // RFC 2883 duplicate reports
    uint64_t fast_path = 0;                       // segments handled by the fast path
    uint64_t ecn_ce_received = 0, ecn_ece_received = 0;
    // Drops (each reason a counter).
    uint64_t drop_not_acceptable = 0;   // seq test failed (RFC 9293 §3.10.7.4 first)
    uint64_t drop_paws = 0;             // RFC 7323 §5 PAWS
    uint64_t drop_bad_ack = 0;          // ACK of unsent data / too old (RFC 5961 §5)
    uint64_t drop_rst_invalid = 0;      // RST out of window
    uint64_t drop_no_room = 0;          // reassembly full / beyond window
    uint64_t drop_no_ack = 0;           // no ACK bit in synchronized state
    uint64_t drop_after_close = 0;      // data after close()

    // Segments sent again, all causes (as ConnStats::retransmissions()).
    uint64_t retransmissions() const {
        return retrans_timeout + retrans_fast + retrans_sack + retrans_rescue + retrans_probe;
    }
};

// ---- the TCB ------------------------------------------------------------------------

struct Endpoints {
    Ipv4Addr local_ip, remote_ip;
    uint16_t local_port = 0, remote_port = 0;
};

// A new segment of the connection `id` between `ep`, appended to `out` with
// its addresses, ports, SEQ and flags; the caller fills in the rest (the
// reference is valid until the next append).
inline OutSegment& append_segment(std::vector<OutSegment>& out, ConnId id, const Endpoints& ep, SeqNum seq,
                                  uint8_t flags) {
    OutSegment& o = out.emplace_back();
    o.conn = id;
    o.src = ep.local_ip;
    o.dst = ep.remote_ip;
    o.repr.src_port = ep.local_port;
    o.repr.dst_port = ep.remote_port;
    o.repr.seq = seq;
    o.repr.flags = flags;
    return o;
}

enum class SendResult : uint8_t {
    Ok,
    WouldBlock,     // the send buffer is full (or the slice does not fit): wait for Writable
    InvalidState,   // not connected yet, or this direction is closed
};

// RFC 9293 §3.10.7.1: the reset answering segment `in` (with `payload_len`
// bytes) that reached no connection. Returns false when no reset may be sent
// (the segment is itself a RST).
bool reset_for(const TcpRepr& in, size_t payload_len, TcpRepr* out);

class TcbTestAccess;
class TimeWait;

// RFC 7323 §5.5: TS.Recent is invalid after a long idle time. Our own
// timestamp clock ticks in microseconds (as Linux's usec TS option), so a
// crescent peer's clock wraps half-way after ~35 minutes: invalidate earlier
// than the RFC's 24 days (the safe direction: PAWS then accepts).
inline constexpr Duration kPawsIdle = std::chrono::minutes(30);

class Tcb {
public:
    Tcb(const Config& cfg, ConnId id, Endpoints ep);
    Tcb(const Tcb&) = delete;
    Tcb& operator=(const Tcb&) = delete;
    ~Tcb();

    // --- opening (each moves out of CLOSED) ---
    // Active open (RFC 9293 §3.10.1): CLOSED -> SYN-SENT, emits the SYN.
    void connect(SeqNum iss, Instant now, Actions& out);
    // Passive open from a LISTEN socket's SYN (RFC 9293 §3.10.7.2 "third"):
    // CLOSED -> SYN-RECEIVED, emits the SYN-ACK. `ip_ecn` is the SYN's IP ECN field.
    void accept_syn(const TcpRepr& syn, uint8_t ip_ecn, SeqNum iss, Instant now, Actions& out);
    // Passive open completed by a valid SYN cookie (RFC 4987 §3.6): straight to
    // ESTABLISHED with what the cookie encoded. `ack` is the third-handshake ACK.
    struct CookieParams {
        SeqNum iss, irs;
        uint16_t peer_mss = 536;
        std::optional<uint8_t> peer_wscale; // when the cookie could carry it
        bool sack_ok = false;
        bool ts_ok = false;
        bool ecn_ok = false;
    };
    void accept_cookie(const CookieParams& p, const TcpRepr& ack, Instant now, Actions& out);

    // --- input ---
    // One received segment (already checksum-verified and demultiplexed to this
    // connection). `payload` ownership moves in; in-order bytes move out through
    // out.readable, out-of-order bytes are kept in the reassembly queue.
    void on_segment(const TcpRepr& seg, uint8_t ip_ecn, Slice payload, Instant now, Actions& out);
    // Service every timer due at `now` (RTO, persist, delayed ACK, keepalive,
    // TIME-WAIT, FIN-WAIT-2). Harmless when nothing is due.
    void on_timer(Instant now, Actions& out);
    // Earliest instant at which on_timer has work; Instant::never() if none.
    Instant next_deadline() const { return deadline_; }

    // --- application calls ---
    // Queue `data` for sending (zero-copy: the queue takes over the reference).
    // Nothing is emitted until flush(). WouldBlock leaves `data` with the caller
    // and arms a Writable event.
    SendResult send(Slice& data);
    SendResult send(Slice&& data) { return send(data); }
    // Emit what queued data, FIN and pending ACKs / window updates allow now.
    void flush(Instant now, Actions& out);
    // The application released `bytes` of data it was handed in out.readable:
    // the receive window opens (a window update goes out at flush when it matters).
    void consume(uint32_t bytes);
    // Half-close (RFC 9293 §3.10.4): FIN after queued data; reading continues.
    void shutdown_write();
    // Full close: shutdown_write(), and data arriving afterwards resets the connection.
    void close();
    // RFC 9293 §3.10.5 ABORT: RST (in synchronized states), then CLOSED.
    void abort(Instant now, Actions& out);

    // --- inspection ---
    State state() const { return state_; }
    ConnId id() const { return id_; }
    SeqNum rcv_nxt() const { return rcv_.nxt; }  // RCV.NXT: the next byte expected in order
    const Endpoints& endpoints() const { return ep_; }
    Stats stats() const;
    // The congestion control algorithm this connection runs (ss -ti's `cc`).
    CcAlgo cc_algo() const { return cc_.algo(); }
    uint32_t send_space() const { return cfg_.snd_buf - snd_queued_; }
    bool has_pending_output() const;  // a flush() would emit something
    bool ack_owed_at_flush() const { return ack_at_flush_; }  // Host: flush() this one soon

private:
    // A retransmission sent in a recovery, as RACK's log keeps it (tcb_rack.cpp).
    struct RackSent {
        SeqNum start, end;
        SeqNum max;  // snd.max when it went: SACKed data above it was sent later
        Instant at;
    };
    friend class TcbTestAccess;
    friend class TimeWait;  // takes over in TIME-WAIT (time_wait.hpp)
    // Out-of-line slow path: everything the fast-path predicate rejects.
    [[gnu::noinline]] void segment_slow(const TcpRepr& seg, uint8_t ip_ecn, Slice payload, Instant now,
                                        Actions& out);
    bool fast_path_ok(const TcpRepr& seg, size_t len) const;
    void fast_path(const TcpRepr& seg, Slice payload, Instant now, Actions& out);

    // Helpers (tcb.cpp).
    bool check_seq_acceptable(const TcpRepr& seg, uint32_t len) const;
    // A segment check_seq_acceptable() refused whose ACK is still taken: a
    // valid pure ACK below RCV.NXT while our window is closed (tcb.cpp).
    bool zero_window_ack(const TcpRepr& seg, uint32_t len) const;
    bool process_ack(const TcpRepr& seg, uint32_t payload_len, Instant now, Actions& out);
    // Takes the ACK's SACK blocks into the scoreboard; true when the first is a D-SACK.
    bool process_sack(const TcpRepr& seg, uint32_t* newly_sacked);
    void update_window(const TcpRepr& seg);
    void detect_loss(Instant now, Actions& out);
    void deliver(Slice payload, Actions& out);
    void receive_data(const TcpRepr& seg, SeqNum seq, Slice payload, Instant now, Actions& out);
    void on_fin_received(Instant now, Actions& out);
    void ack_received_data(bool pushed, bool force_now, Instant now, Actions& out);
    void hold_ack(Instant now);
    void rtt_sample(Duration r);
    void send_control(uint8_t flags, SeqNum seq, Instant now, Actions& out);
    void send_ack(Instant now, Actions& out);
    void send_rst(SeqNum seq, Actions& out);
    bool challenge_ack(Instant now, Actions& out);
    // <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK> for a segment refused by PAWS, the
    // sequence test or an ACK of unsent data, unless the ACK-loop limit holds it back.
    void answer_unacceptable(const TcpRepr& seg, uint32_t seg_len, Instant now, Actions& out);
    void send_syn(bool with_ack, Instant now, Actions& out);
    uint32_t emit_data(SeqNum seq, uint32_t max_len, bool retransmit, Instant now, Actions& out);
    void output(Instant now, Actions& out);
    void output_recovery(Instant now, Actions& out);
    void enter_recovery(Instant now);
    void on_rto(Instant now, Actions& out);
    // Reordering and undo (tcb_undo.cpp).
    uint32_t dup_thresh() const;
    void note_reordering(SeqNum late, SeqNum fack);
    void check_sack_reordering(SeqNum ack, std::span<const SackBlock> blocks);
    void undo_begin(bool rto);
    void undo_note_retransmit(SeqNum seq, SeqNum end, Instant now);
    void undo_on_dsack(const SackBlock& b);
    void undo_on_ack(const TcpRepr& seg);
    void undo_apply();
    // Tail loss probe (tcb_tlp.cpp).
    bool probe_allowed() const;
    bool probe_conditions() const;
    Duration probe_timeout() const;
    Duration answer_wait() const;
    void ack_delay_sample(Duration rtt);
    void schedule_probe(Instant now);
    void on_probe(Instant now, Actions& out);
    void tlp_on_ack(SeqNum ack, uint32_t flight, Instant now);
    void tlp_repaired(uint32_t flight, Instant now);
    void tlp_settle(Instant now);
    void tlp_on_dsack(const SackBlock& b);
    void tlp_spurious();
    void tlp_on_dupack(SeqNum ack, bool reports_new);
    SackScoreboard::Range last_segment() const;  // the highest-sequence segment sent
    uint32_t segment_room() const;               // payload the next segment carries (tcb_output.cpp)
    // RACK's reordering window for the first hole and its retransmission (tcb_rack.cpp).
    Duration reo_wnd() const;
    bool rack_timer_usable() const;
    void arm_reo_timer(Instant now);
    void on_reo_timeout(Instant now, Actions& out);
    void rack_on_dsack();
    void rack_on_recovery();
    void rack_note_retransmit(SeqNum seq, SeqNum end, Instant now);
    void rack_on_ack();
    const RackSent* rack_una_rxt() const;
    bool rack_una_original() const;
    bool rack_una_rxt_lost() const;
    uint32_t rack_resend_una(SeqNum end, Instant now, Actions& out);
    bool may_start_recovery() const;
    void fast_retransmit(Instant now, Actions& out);
    void on_persist(Instant now, Actions& out);
    void to_closed(CloseReason why, Actions& out);
    void enter_time_wait(Instant now, Actions& out);
    void start_sequence(SeqNum iss);
    void negotiate(const TcpRepr& syn, uint8_t ip_ecn);
    void ts_start(Instant now) {
        ts_recent_age_ = ts_first_at_ = now;
        ts_first_ = ts_recent_;
    }
    uint32_t paws_window() const;  // how much older than TS.Recent a TSval may be (peer ticks)
    bool paws_rejects(const TcpRepr& seg, uint32_t len, Instant now) const;
    void fill_options(TcpRepr& r, bool syn, Instant now) const;
    void fill_ack_fields(TcpRepr& r, Instant now);
    uint32_t rcv_window_bytes() const;
    // SEQ for a segment without text: SND.MAX, held inside the peer's window.
    SeqNum ack_seq() const;
    // RFC 2883 §4: report [left, right) as a duplicate in the next ACK.
    void note_duplicate(SeqNum left, SeqNum right);
    uint16_t advertise_window();
    // The window field for the edge already advertised (RCV.ADV - RCV.NXT, scaled).
    uint16_t window_field() const;
    SeqNum snd_wnd_end() const;
    uint32_t in_flight() const;
    uint32_t usable_window() const;
    // Payload bytes one OutSegment of new data may carry: the MSS, or Config::tso_max.
    uint32_t seg_max() const { return cfg_.tso_max > snd_.mss ? cfg_.tso_max : snd_.mss; }
    void drop_acked(SeqNum new_una, Actions& out);
    void arm_rto(Instant now);
    void update_deadline();
    uint32_t ts_now(Instant now) const { return ts_clock(now, ts_offset_); }
    // Our RFC 7323 TSval clock: microseconds, offset per connection.
    static uint32_t ts_clock(Instant now, uint32_t offset) { return uint32_t(now.nanos() / 1000) + offset; }
    void push_event(EventKind k, Actions& out, CloseReason r = CloseReason::None, uint32_t bytes = 0);
    bool locate(SeqNum seq, uint32_t* idx, uint32_t* off);
    Slice& sq_at(uint32_t i) { return sq_[(sq_head_ + i) & (uint32_t(sq_.size()) - 1)]; }
    void synchronized_arrives(const TcpRepr& seg, uint8_t ip_ecn, Slice payload, Instant now, Actions& out);
    void syn_sent_arrives(const TcpRepr& seg, uint8_t ip_ecn, Slice payload, Instant now, Actions& out);
    void ack_advanced(const TcpRepr& seg, Instant now, Actions& out);
    bool wants_ecn() const;
    SeqNum data_end() const { return sq_seq_ + snd_queued_; }
    bool can_send_data() const;

    Config cfg_;
    ConnId id_;
    Endpoints ep_;
    State state_ = State::Closed;
    CloseReason close_reason_ = CloseReason::None;

    // RFC 9293 §3.3.1 send sequence variables.
    struct Send {
        SeqNum iss;
        SeqNum una;      // oldest unacknowledged
        SeqNum nxt;      // next to send (rewound by an RTO; una <= nxt <= max)
        SeqNum max;      // highest sequence sent + 1 (snd.nxt before any RTO rewind)
        SeqNum wl1, wl2; // segment seq / ack used for the last window update
        uint32_t wnd = 0;       // peer's window in bytes (already scaled)
        uint32_t max_wnd = 0;   // largest window the peer offered (sender SWS avoidance)
        uint8_t wscale = 0;     // shift for the peer's window field
        uint32_t mss = 536;     // effective SMSS (payload bytes per segment, options excluded)
    } snd_;
    // RFC 9293 §3.3.1 receive sequence variables.
    struct Recv {
        SeqNum irs;
        SeqNum nxt;
        SeqNum adv;             // right edge advertised: never moves left (RFC 9293 §3.8.6.2.2)
        uint8_t wscale = 0;     // shift for our window field
        uint32_t unread = 0;    // delivered to the application, not yet consume()d
    } rcv_;

    // Send queue: slices in sequence order, first byte at `sq_seq_`.
    std::vector<Slice> sq_;      // ring buffer, capacity a power of two
    uint32_t sq_head_ = 0, sq_count_ = 0;
    SeqNum sq_seq_;              // sequence number of the first queued byte
    uint32_t snd_queued_ = 0;    // bytes in sq_ (invariant: == sum of slice sizes <= cfg_.snd_buf)
    // Cursor to the slice containing snd.nxt (fast output without a walk).
    // Valid iff cur_valid_; otherwise found again by a walk from the head.
    uint32_t cur_idx_ = 0, cur_off_ = 0;
    SeqNum cur_seq_;
    bool cur_valid_ = false;

    // Congestion control and loss recovery.
    CongestionControl cc_;
    SackScoreboard sb_;
    bool in_recovery_ = false;
    SeqNum recover_;             // RFC 6582 / RFC 6675 RecoveryPoint
    SeqNum high_rxt_;            // RFC 6675 HighRxt
    uint32_t reordering_ = kDupThresh;  // segments an original may arrive late (dup_thresh())
    SeqRangeSet rxt_;            // retransmitted ranges above snd.una (ambiguous deliveries)
    // The congestion response that may still prove spurious (tcb_undo.cpp).
    struct Undo {
        std::optional<CongestionControl> cc;  // before the response; engaged = an episode is open
        SeqRangeSet pending;     // its retransmissions not yet reported duplicate
        SeqNum marker;           // snd.una when it began
        SeqNum fack;             // highest byte known delivered when it began
        uint32_t tsval = 0;      // TSval of its first retransmission
        bool retransmitted = false;
        bool eifel = true;       // every ACK since the first retransmission echoed an older TSval
        bool rto = false;        // an RTO (else a fast recovery)
    } undo_;
    // RFC 8985 §7.4: the open tail-loss-probe episode (one per flight; its
    // probes: cfg_.tlp_max_probes, the later ones while no ACK came at all).
    struct Tlp {
        SeqNum start, end;       // what the last probe sent; end = SND.MAX after it (TLP.end_seq)
        uint32_t probes = 0;     // probes sent in this episode
        bool active = false;
        bool retrans = false;    // it sent old data again (else new data: nothing to judge)
        bool lone = false;       // one segment was in flight: its PTO waited for the peer's ACK delay
        bool in_recovery = false;  // sent in a fast recovery (which made the window's response)
        Instant end_acked_at;    // when the ACK reached TLP.end_seq (then waiting for a D-SACK)
        uint32_t flight = 0;     // the flight before that ACK
    } tlp_;
    // How long the peer holds the ACK of a lone segment (tcb_tlp.cpp): the
    // PTO's allowance for it. Unknown until the first sample (then
    // cfg_.tlp_max_ack_delay is used).
    std::optional<Duration> ack_delay_;
    // RFC 8985 §6: the hole the reordering timer runs for, and the window's
    // D-SACK multiplier (RACK.reo_wnd_mult, RACK.dsack_round, reo_wnd_persist).
    struct Rack {
        SeqNum una;
        SeqNum dsack_round;
        bool dsack_round_valid = false;
        uint32_t mult = 1;
        uint32_t persist = 0;
        // In a recovery: the retransmissions sent in it, oldest first (at
        // most kSent; a full log drops its oldest). The one that judges
        // snd.una is the latest that covers it (rack_una_rxt()); those the
        // cumulative ACK has passed leave, and acked_at keeps the send time
        // of the latest of them: a retransmission sent before it and still
        // missing was lost (RACK's "a later one was delivered").
        static constexpr uint32_t kSent = 8;
        std::array<RackSent, kSent> sent{};
        uint32_t sent_n = 0;
        std::optional<Instant> acked_at;
        std::optional<SeqNum> probed;  // the snd.una whose retransmission was probed (once each)
    } rack_;
    uint32_t dupacks_ = 0;
    bool ecn_cwr_due_ = false;   // set CWR on the next new data segment
    SeqNum ecn_recover_;         // one ECN reaction per window (RFC 3168 §6.1.2)

    // RFC 6298.
    Duration srtt_{0}, rttvar_{0}, rto_;
    Duration min_rtt_{0};        // the smallest RTT sample (RFC 8985 RACK.min_RTT)
    bool have_rtt_ = false;
    uint32_t backoff_ = 0;       // consecutive RTOs / SYN retransmissions
    Instant rto_first_ = Instant::never();  // the first RTO of the current run of them (backoff_ > 0)
    bool rtt_timing_ = false;    // Karn: timing one segment not retransmitted
    SeqNum rtt_seq_;
    Instant rtt_start_;

    // RFC 7323.
    bool ts_ok_ = false;
    uint32_t ts_recent_ = 0;
    Instant ts_recent_age_;
    uint32_t ts_offset_ = 0;
    uint32_t ts_first_ = 0;       // the handshake's TSval and when it came (paws_window())
    Instant ts_first_at_;

    bool ws_ok_ = false;         // both sides sent the window scale option
    bool sack_ok_ = false;
    // RFC 2883 D-SACK: a duplicate segment to report in the first SACK block
    // of the next ACK (once).
    // RFC 6675 §4 NextSeg rule 4: RescueRxt (valid once set).
    SeqNum rescue_rxt_{};
    bool rescue_valid_ = false;
    SackBlock dsack_{};
    bool dsack_due_ = false;
    bool ecn_ok_ = false;
    bool ce_pending_ = false;    // classic: echo ECE until CWR; DCTCP: CE state of the last segment

    // Receive side.
    Reassembly reasm_;
    uint32_t delack_segs_ = 0;   // full segments received since the last ACK
    bool ack_now_ = false;       // an ACK must go out at the end of this call
    bool ack_at_flush_ = false;  // the held ACK reached a limit (hold_ack): it goes at the
                                 // next flush() (what this call's caller sends meanwhile carries it)
    bool fin_received_ = false;
    bool window_update_due_ = false; // consume() opened the window enough to tell the peer
    SeqNum last_ack_sent_;           // RFC 7323 §4.3 Last.ACK.sent
    std::vector<Slice> reasm_out_;   // scratch for Reassembly::pop_in_order (keeps capacity)

    // Application side.
    bool fin_queued_ = false;    // shutdown_write() called
    bool fin_sent_ = false;
    bool app_closed_ = false;    // close() called
    bool want_writable_ = false; // a send() was refused
    bool closed_reported_ = false; // the Closed event went out

    // Timers (Instant::never() when disarmed). deadline_ = min of them.
    Instant rto_at_ = Instant::never();       // retransmission (or SYN) timer
    Instant pto_at_ = Instant::never();       // tail loss probe (before rto_at_)
    Instant reo_at_ = Instant::never();       // RACK's reordering window for the hole at snd.una
    Instant persist_at_ = Instant::never();   // zero-window probe
    Instant delack_at_ = Instant::never();
    Instant keepalive_at_ = Instant::never();
    Instant state_at_ = Instant::never();     // TIME-WAIT or FIN-WAIT-2 expiry
    Instant deadline_ = Instant::never();
    uint32_t persist_backoff_ = 0;
    uint32_t keepalive_probes_ = 0;
    uint32_t probes_unanswered_ = 0;  // zero-window probes since the peer last sent anything
    Instant last_rx_;

    // RFC 5961 §7 rate limit.
    Instant chack_window_start_;
    uint32_t chack_count_ = 0;
    OowLimiter oow_;

    Stats st_;
};

// Small accessors the segment path calls several times per segment, here so
// that every caller (host.cpp too) can inline them.

inline uint32_t Tcb::rcv_window_bytes() const {
    uint32_t held = rcv_.unread + reasm_.bytes();
    return held >= cfg_.rcv_buf ? 0 : cfg_.rcv_buf - held;
}

inline uint16_t Tcb::window_field() const {
    int32_t wnd = rcv_.adv - rcv_.nxt;
    uint32_t w = wnd > 0 ? uint32_t(wnd) : 0;
    return uint16_t(std::min<uint32_t>(w >> rcv_.wscale, 0xffff));
}

// The right edge of the peer's window. SND.WND counts from the ACK of the
// segment that set it (SND.WL2), not from SND.UNA: a later ACK whose segment
// fails the SND.WL1 test (an older SEQ — the retransmission that fills a hole
// after later segments updated the window) moves SND.UNA but not the edge, and
// SND.UNA + SND.WND would point past what the peer offered (RFC 9293
// §3.10.7.4; tcp_tcb_test "the send window ends where the segment that set it
// put it").
inline SeqNum Tcb::snd_wnd_end() const { return snd_.wl2 + snd_.wnd; }

inline uint32_t Tcb::in_flight() const {
    if (in_recovery_ && sack_ok_) return sb_.pipe(snd_.una, snd_.max, high_rxt_, snd_.mss, dup_thresh());
    return uint32_t(snd_.nxt - snd_.una);
}

inline bool Tcb::can_send_data() const {
    switch (state_) {
    case State::Established:
    case State::CloseWait:
    case State::FinWait1:
    case State::Closing:
    case State::LastAck:
        return true;
    case State::Closed:
    case State::Listen:
    case State::SynSent:
    case State::SynReceived:
    case State::FinWait2:
    case State::TimeWait:
        return false;
    }
    return false;
}

inline void Tcb::update_deadline() {
    deadline_ = min(min(min(min(rto_at_, pto_at_), min(persist_at_, reo_at_)), min(delack_at_, keepalive_at_)), state_at_);
}

inline bool Tcb::has_pending_output() const {
    if (ack_now_ || ack_at_flush_ || window_update_due_) return true;
    if (!can_send_data()) return false;
    return data_end() - snd_.nxt > 0 || (fin_queued_ && !fin_sent_);
}

} // namespace crescent::tcp
