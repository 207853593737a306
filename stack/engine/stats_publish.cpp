// crescent — an engine's statistics published for other threads (see
// stats_publish.hpp). Runs on the engine's thread, every 10 ms at most.
#include "stack/engine/stats_publish.hpp"

#include <time.h>

#include <algorithm>
#include <cstring>

#include "stack/engine/engine_impl.hpp"

namespace crescent::engine {

namespace {

int64_t mono_now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

template <size_t N>
void copy_name(char (&dst)[N], std::string_view s) {
    size_t n = std::min(s.size(), N - 1);
    std::memcpy(dst, s.data(), n);
    dst[n] = '\0';
}

int64_t to_us(Duration d) { return int64_t(std::chrono::duration_cast<std::chrono::microseconds>(d).count()); }

} // namespace

void StatsPublisher::publish_slow(const EngineImpl& e, Instant now, bool force) {
    next_ = now + every_;
    const int64_t mono = mono_now_ns();
    EngineSnapshot s;
    s.seq = ++eng_seq_;
    s.engine_ns = now.nanos();
    s.mono_ns = mono;
    s.index = e.p_.index;
    s.core = e.p_.core;
    s.stats = e.stats();
    s.busy_loops = s.stats.loops - s.stats.idle_loops;
    s.timers_pending = e.wheel_.pending();
    s.connections = e.host_.connection_count();
    s.listeners = e.listeners_.size();
    s.kernel_fds = e.fds_.size();
    if (e.arena_) {
        const zbuf::Stats z = e.arena_->stats();
        s.zbuf_classes = uint32_t(std::min<size_t>(z.classes.size(), zbuf::kMaxClasses));
        for (uint32_t c = 0; c < s.zbuf_classes; ++c) {
            const zbuf::ClassStats& cs = z.classes[c];
            ZbufClassSnapshot& o = s.zbuf[c];
            o.obj_size = cs.obj_size;
            o.capacity = cs.capacity;
            o.live = cs.live;
            o.live_core = e.p_.core < zbuf::kMaxCores ? cs.live_per_core[e.p_.core] : 0;
            o.high_water = cs.high_water;
            o.alloc_failed = cs.alloc_failed;
        }
        s.zbuf_alloc_too_large = z.alloc_too_large;
        s.zbuf_external_live = z.external_live;
        s.zbuf_zones_total = z.zones_total;
        s.zbuf_zones_used = z.zones_used;
        const zbuf::Arena::CoreUsage u = e.arena_->core_usage(e.p_.core);
        s.mem_bytes = u.zones * zbuf::kZoneSize;
        s.mem_limit_bytes = u.limit_zones * zbuf::kZoneSize;
    }
    eng_.store(s);
    if (force || now >= next_conns_) {
        next_conns_ = now + every_ * kConnEveryNth;
        publish_conns(e, mono);
    }
}

void StatsPublisher::publish_conns(const EngineImpl& e, int64_t mono_ns) {
    scratch_.clear();
    uint64_t total = 0;
    const std::string_view default_cc = congestion_control_name(e.p_.cfg.conn.cc);
    for (const auto& [port, h] : e.listeners_) {
        (void)h;
        ++total;
        if (scratch_.size() >= kMaxConns) continue;
        ConnSnapshot& c = scratch_.emplace_back();
        copy_name(c.state, "LISTEN");
        copy_name(c.cc, default_cc);
        c.local_ip = e.p_.ip.v;
        c.local_port = port;
    }
    for (uint32_t i = 0; i < e.conns_.size(); ++i) {
        const EngineImpl::ConnState& st = e.conns_[i];
        if (!st.live) continue;
        const tcp::Tcb* t = e.host_.find(tcp::ConnId{i, st.gen});
        if (!t) continue;  // TIME-WAIT: no control block any more
        ++total;
        if (scratch_.size() >= kMaxConns) continue;
        const tcp::Stats x = t->stats();
        const tcp::Endpoints& ep = t->endpoints();
        ConnSnapshot& c = scratch_.emplace_back();
        copy_name(c.state, tcp::state_name(x.state));
        copy_name(c.cc, tcp::cc_name(t->cc_algo()));
        c.local_ip = ep.local_ip.v;
        c.remote_ip = ep.remote_ip.v;
        c.local_port = ep.local_port;
        c.remote_port = ep.remote_port;
        c.mss = x.snd_mss;
        c.cwnd = x.cwnd;
        c.ssthresh = x.ssthresh;
        c.bytes_in_flight = x.bytes_in_flight;
        c.snd_wnd = x.snd_wnd;
        c.rcv_wnd = x.rcv_wnd;
        c.snd_wscale = x.snd_wscale;
        c.rcv_wscale = x.rcv_wscale;
        c.sack = x.sack_ok;
        c.ts = x.ts_ok;
        c.ecn = x.ecn_ok;
        c.srtt_us = to_us(x.srtt);
        c.rttvar_us = to_us(x.rttvar);
        c.rto_us = to_us(x.rto);
        c.backoff = x.backoff;
        const uint64_t once = x.bytes_out >= x.bytes_retransmitted ? x.bytes_out - x.bytes_retransmitted : 0;
        c.bytes_acked = once >= x.bytes_in_flight ? once - x.bytes_in_flight : 0;
        c.bytes_received = x.bytes_in;
        c.bytes_sent = x.bytes_out;
        c.bytes_retrans = x.bytes_retransmitted;
        c.segs_in = x.segs_in;
        c.segs_out = x.segs_out;
        c.retrans = x.retransmissions();
        c.rto_events = x.rto_events;
        c.fast_recoveries = x.fast_recoveries;
        c.dupacks = x.dupacks;
        c.undone = x.undo_recoveries + x.undo_rtos;
        c.tlp_probes = x.tlp_probes;
        c.rack_losses = x.rack_losses;
        c.ecn_ce_in = x.ecn_ce_received;
        c.ecn_ece_in = x.ecn_ece_received;
        c.mss_blackhole = x.mss_blackhole;
        c.reordering = x.reordering;
        c.drops = x.drop_not_acceptable + x.drop_paws + x.drop_bad_ack + x.drop_rst_invalid + x.drop_no_room +
                  x.drop_no_ack + x.drop_after_close;
        c.send_q = st.snd_buf >= t->send_space() ? st.snd_buf - t->send_space() : 0;
        c.recv_q = st.rxq_bytes;
    }
    ConnTableHead h;
    h.seq = ++conn_seq_;
    h.mono_ns = mono_ns;
    h.total = total;
    conns_.store(h, scratch_.data(), scratch_.size());
}

} // namespace crescent::engine
