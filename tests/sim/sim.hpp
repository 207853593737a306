// crescent sim — two tcp::Host instances joined by two simulated links, on a
// virtual clock, with a small traffic model that checks every byte.
//
//   host A (10.0.0.1) --- link ab ---> host B (10.0.0.2)
//                     <--- link ba ---
//
// Every OutSegment is serialised to an Ethernet/IPv4/TCP frame by the wire
// layer and parsed back (checksums verified) on arrival, so corruption on the
// link is caught where a real NIC path would catch it. Received payloads are
// copied into zbuf slices (the driver's RX buffers) and handed to
// Host::on_segment.
//
// Traffic: each connection end ("Endpoint") sends `to_send` bytes of a seeded
// pseudo-random stream, then half-closes; it hashes what it sends and what it
// receives (FNV-1a 64), and closes once the peer's FIN arrived. At the end the
// test compares each side's sent hash with the other side's received hash.
#pragma once

#include <array>
#include <string>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include <crescent/zbuf.hpp>

#include "stack/tcp/host.hpp"
#include "tests/sim/link.hpp"

namespace crescent::sim {

inline constexpr wire::Ipv4Addr kIpA{0x0a000001}, kIpB{0x0a000002};

struct Fnv64 {
    uint64_t h = 0xcbf29ce484222325ull;
    void add(const std::byte* p, size_t n) {
        uint64_t x = h;
        for (size_t i = 0; i < n; i++) x = (x ^ uint8_t(p[i])) * 0x100000001b3ull;
        h = x;
    }
};

enum class Side : uint8_t { A = 0, B = 1 };

struct Endpoint {
    Side side;
    tcp::ConnId id;
    uint16_t local_port = 0, remote_port = 0;
    uint64_t to_send = 0;     // bytes this end sends before its FIN
    uint64_t queued = 0;      // bytes accepted by Host::send
    uint64_t received = 0;
    Fnv64 sent_hash, recv_hash;
    Rng gen{0};
    Slice pending;            // a chunk refused with WouldBlock
    // Echo mode (listen_echo): received bytes go back as they arrive, and are
    // consumed (reopening the receive window) only once send() took them —
    // the backpressure of an echo server that reads only what it can write.
    bool echo = false;
    std::deque<Slice> echo_q;
    // An echo in whole messages of `whole` bytes (an RPC server: the reply
    // goes once the request is in): bytes are consumed as they arrive and
    // `echo_ready` of the queue may go back.
    uint32_t whole = 0;
    uint64_t echo_held = 0, echo_ready = 0;
    // Ping-pong (a client of listen_echo): one message of `ping` bytes at a
    // time, the next once the echo of the last is back; each round trip's
    // time goes into round_trips.
    uint32_t ping = 0;
    Instant ping_sent;
    std::vector<Duration> round_trips;
    bool connected = false, fin_queued = false, peer_fin = false, close_called = false, closed = false;
    tcp::CloseReason reason = tcp::CloseReason::None;
    Instant connected_at, closed_at;
    tcp::Stats stats;         // the TCB's counters when the peer's FIN arrived (and at Closed, if still there)
};

struct SimConfig {
    LinkConfig ab, ba;
    tcp::HostConfig host_a, host_b;  // local_ip is filled in
    size_t chunk = 16384;            // bytes per send() slice
    size_t arena_bytes = 512u << 20; // anonymous zbuf arena (touched lazily)
};

struct SimStats {
    std::array<uint64_t, wire::kDropCount> rx_drops{}; // parse failures per reason (both sides)
    uint64_t frames_in = 0;
    uint64_t events = 0;
    uint64_t unowned_bytes = 0; // data for a connection the test does not know (a bug)
    uint64_t tso_segments = 0;  // OutSegments cut by the simulated NIC (TSO)
    uint64_t tso_pieces = 0;    // frames they became
    // Data segments that ended past the right edge their receiver had
    // advertised (its RCV.ADV, which never moves left) when they were sent:
    // RFC 9293 §3.8.6 forbids it, and a sender that does it puts its own
    // ACKs' SEQ outside the peer's window too. The first one is described.
    uint64_t beyond_window = 0;
    std::string first_beyond_window;
};

class SimNet {
public:
    explicit SimNet(SimConfig cfg);
    ~SimNet();
    SimNet(const SimNet&) = delete;
    SimNet& operator=(const SimNet&) = delete;

    Instant now() const { return now_; }
    tcp::Host& host(Side s) { return *hosts_[size_t(s)]; }
    Link& link_from(Side s) { return s == Side::A ? ab_ : ba_; }
    const SimStats& stats() const { return st_; }
    zbuf::Arena& arena() { return *arena_; }

    // B listens on `port`; each accepted connection sends `to_send` bytes.
    void listen(uint16_t port, uint32_t backlog, uint64_t to_send);
    // B listens on `port`; each accepted connection echoes what it receives
    // and closes after the peer's FIN once everything went back.
    void listen_echo(uint16_t port, uint32_t backlog, uint32_t whole = 0);
    // A connects from `local_port` to B:`port` and will send `to_send` bytes.
    Endpoint* connect(uint16_t local_port, uint16_t port, uint64_t to_send, const tcp::Config* cfg = nullptr);

    // Advance to the next event and process it. False when nothing is pending.
    bool step();
    // Step until `done()` or the virtual clock passes `limit`; true iff done.
    bool run_until(const std::function<bool()>& done, Duration limit);
    // Let the clock run (timers, TIME-WAIT) for `d` of virtual time.
    void run_for(Duration d);

    // All endpoints of a side (by ConnId).
    const std::map<uint64_t, std::unique_ptr<Endpoint>>& endpoints(Side s) const { return eps_[size_t(s)]; }
    // True when every endpoint on both sides saw Closed.
    bool all_closed() const;
    // The B endpoint paired with A endpoint `a` (by ports), or nullptr.
    const Endpoint* peer_of(const Endpoint& a) const;

private:
    static uint64_t key(tcp::ConnId c) { return uint64_t(c.index) << 32 | c.gen; }
    Endpoint* make_endpoint(Side s, tcp::ConnId id, uint64_t to_send);
    void deliver(Side to, Bytes frame);
    void trace_frame(Side from, Side to, const wire::Frame& fr, Instant at, const char* what);
    void dispatch(Side s);
    void pump(Endpoint& e);
    void pump_echo(Endpoint& e);
    void handle_event(Side s, const tcp::Event& ev);

    SimConfig cfg_;
    std::unique_ptr<zbuf::Arena> arena_;
    std::unique_ptr<zbuf::CoreScope> core_;
    std::array<std::unique_ptr<tcp::Host>, 2> hosts_;
    Link ab_, ba_;
    Instant now_ = Instant::from_nanos(1'000'000'000);
    std::array<tcp::Actions, 2> acts_;
    std::array<std::map<uint64_t, std::unique_ptr<Endpoint>>, 2> eps_;
    std::map<uint16_t, uint64_t> listen_to_send_;
    std::map<uint16_t, uint32_t> listen_echo_;  // port -> whole (0: as it arrives)
    std::vector<Endpoint*> touched_;  // endpoints whose sending may progress
    SimStats st_;
    void check_window(Side s, const tcp::OutSegment& seg);
    bool trace_ = false;         // CRESCENT_SIM_TRACE: print every delivered (and lost) segment
};

} // namespace crescent::sim
