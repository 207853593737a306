// crescent — an engine's statistics published for other threads (the
// control socket, crescent-stat) without stopping or slowing the loop.
//
// At the end of each loop iteration the engine calls tick(now): one compare
// against the next due time, nothing else. Every EngineConfig::stats_interval
// (10 ms unless set) it copies its counters (EngineStats, zbuf arena usage,
// timer wheel, epoll, busy/idle iterations) into a Seqlock; every tenth time it also
// copies what `ss -ti` shows of its first kMaxConns connections (and its
// listeners) into a SeqlockArray. Readers on any thread get a consistent copy
// of the last publication (seqlock.hpp); the engine never waits for them.
//
// Threads: tick() and everything it calls run on the engine's thread; the
// read functions are for any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/time.hpp>
#include <crescent/zbuf.hpp>

#include "stack/engine/seqlock.hpp"

namespace crescent::engine {

class EngineImpl;

// One zbuf size class (the arena is process-wide; live_core is this engine's part).
struct ZbufClassSnapshot {
    uint64_t obj_size = 0;
    uint64_t capacity = 0;       // objs in the class's zones (all cores)
    uint64_t live = 0;           // allocated now (all cores)
    uint64_t live_core = 0;      // allocated now by this engine's core
    uint64_t high_water = 0;
    uint64_t alloc_failed = 0;   // allocations refused (all cores)
};

struct EngineSnapshot {
    uint64_t seq = 0;            // publications so far (1 = the first)
    int64_t engine_ns = 0;       // engine clock at publication
    int64_t mono_ns = 0;         // CLOCK_MONOTONIC at publication (rates across processes)
    uint32_t index = 0, core = 0;
    EngineStats stats;           // every counter (includes the TCP host's)
    uint64_t busy_loops = 0;     // == stats.loops - stats.idle_loops
    uint64_t timers_pending = 0; // application timers on the wheel
    uint64_t connections = 0;    // TCP control blocks (tcp::Host)
    uint64_t listeners = 0;
    uint64_t kernel_fds = 0;     // fds in the engine's epoll set
    uint32_t zbuf_classes = 0;   // entries of zbuf[] in use
    ZbufClassSnapshot zbuf[zbuf::kMaxClasses];
    uint64_t zbuf_alloc_too_large = 0, zbuf_external_live = 0;
    uint64_t zbuf_zones_total = 0, zbuf_zones_used = 0;
    uint64_t mem_bytes = 0;        // zbuf zones the engine's core owns, in bytes
    uint64_t mem_limit_bytes = 0;  // EngineConfig::max_memory in whole zones (0 = none)
};

// What `ss -ti` shows of one connection (or a listener: state "LISTEN").
struct ConnSnapshot {
    char state[16] = {};         // RFC 9293 name, NUL-terminated ("ESTABLISHED")
    char cc[8] = {};             // congestion control name
    uint32_t local_ip = 0, remote_ip = 0;  // host byte order
    uint16_t local_port = 0, remote_port = 0;
    uint32_t mss = 0, cwnd = 0, ssthresh = 0, bytes_in_flight = 0;
    uint32_t snd_wnd = 0, rcv_wnd = 0;
    uint8_t snd_wscale = 0, rcv_wscale = 0;
    bool sack = false, ts = false, ecn = false;
    int64_t srtt_us = 0, rttvar_us = 0, rto_us = 0;
    uint32_t backoff = 0;        // consecutive RTO expiries
    uint64_t bytes_acked = 0;    // payload bytes sent once and acknowledged
    uint64_t bytes_received = 0; // payload bytes accepted
    uint64_t bytes_sent = 0;     // payload bytes sent, retransmissions included
    uint64_t bytes_retrans = 0;
    uint64_t segs_in = 0, segs_out = 0;
    uint64_t retrans = 0;        // retransmitted segments (timeout, fast, SACK, rescue, probes of old data)
    uint64_t rto_events = 0, fast_recoveries = 0, dupacks = 0, drops = 0;
    uint64_t undone = 0;         // fast recoveries and RTOs proven spurious and undone
    uint64_t tlp_probes = 0;     // tail loss probes sent
    uint64_t rack_losses = 0;    // holes found lost by RACK's reordering window
    uint64_t ecn_ce_in = 0;      // ECN: data segments that arrived marked CE
    uint64_t ecn_ece_in = 0;     // ECN: ACKs that carried ECN-Echo
    uint64_t mss_blackhole = 0;  // MSS halvings after repeated timeouts (a path MTU black hole)
    uint32_t reordering = 0;     // the duplicate-ACK threshold the path's reordering raised (3 if none)
    uint64_t send_q = 0;         // bytes queued, not yet acknowledged
    uint64_t recv_q = 0;         // batch mode: bytes received, not yet read()
};

struct ConnTableHead {
    uint64_t seq = 0;            // publications so far
    int64_t mono_ns = 0;
    uint64_t total = 0;          // connections + listeners when taken (may exceed the records)
};

class StatsPublisher {
public:
    static constexpr size_t kMaxConns = 4096;
    static constexpr unsigned kConnEveryNth = 10;  // the connection table: every tenth publication

    // `every`: EngineConfig::stats_interval.
    explicit StatsPublisher(Duration every) : every_(every), conns_(kMaxConns) { scratch_.reserve(64); }

    // Engine thread, end of every loop iteration: one branch until due.
    void tick(const EngineImpl& e, Instant now) {
        if (__builtin_expect(now < next_, 1)) return;
        publish_slow(e, now);
    }
    // Engine thread: publish now (e.g. before a test reads).
    void publish(const EngineImpl& e, Instant now) { publish_slow(e, now, true); }

    // Any thread: the last publication. False before the first one.
    bool engine(EngineSnapshot* out) const { return eng_.load(out); }
    bool conns(ConnTableHead* head, std::vector<ConnSnapshot>* out) const { return conns_.load(head, out); }

private:
    [[gnu::noinline]] void publish_slow(const EngineImpl& e, Instant now, bool force = false);
    void publish_conns(const EngineImpl& e, int64_t mono_ns);

    Duration every_;
    Instant next_ = Instant::zero();
    Instant next_conns_ = Instant::zero();
    uint64_t eng_seq_ = 0, conn_seq_ = 0;
    Seqlock<EngineSnapshot> eng_;
    SeqlockArray<ConnTableHead, ConnSnapshot> conns_;
    std::vector<ConnSnapshot> scratch_;   // engine thread: the table being built
};

} // namespace crescent::engine
