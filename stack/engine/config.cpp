// crescent — what the engine's public settings (EngineConfig, ConnOptions)
// become in the sans-IO TCP layer (tcp::HostConfig, tcp::Config), and the
// checks that keep out-of-range limits from reaching it.
#include "stack/engine/engine_impl.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace crescent {

namespace {

tcp::CcAlgo map_cc(CongestionControl c) {
    switch (c) {
    case CongestionControl::NewReno: return tcp::CcAlgo::NewReno;
    case CongestionControl::Cubic: return tcp::CcAlgo::Cubic;
    case CongestionControl::Dctcp: return tcp::CcAlgo::Dctcp;
    }
    return tcp::CcAlgo::NewReno;
}

uint32_t tso_max(const engine::DeviceCaps& caps) {
    // TSO needs chained frames and both checksums in the device. One request
    // stays under the IPv4 total length limit with the largest TCP header.
    return caps.tso && caps.multi_segs && caps.tx_ip_csum && caps.tx_tcp_csum
               ? 0xffff - wire::kIpv4HeaderLen - 60 : 0;
}

bool fail(std::string* err, std::string msg) {
    if (err) *err = std::move(msg);
    return false;
}

constexpr uint32_t kMinBuf = 4u << 10;          // like Linux's SOCK_MIN_SNDBUF / tcp_rmem[0]
constexpr uint32_t kMaxBuf = 1u << 30;          // the largest window RFC 7323 can advertise
constexpr uint32_t kMaxConnections = 1u << 24;
constexpr uint32_t kMaxReassemblySegments = 65536;

} // namespace

bool check_conn_options(const ConnOptions& o, std::string* err) {
    if (o.snd_buf < kMinBuf || o.snd_buf > kMaxBuf)
        return fail(err, fmt::format("send buffer of {} bytes is out of range ({}..{})", o.snd_buf, kMinBuf, kMaxBuf));
    if (o.rcv_buf < kMinBuf || o.rcv_buf > kMaxBuf)
        return fail(err,
                    fmt::format("receive buffer of {} bytes is out of range ({}..{})", o.rcv_buf, kMinBuf, kMaxBuf));
    if (o.reassembly_bytes > kMaxBuf)
        return fail(err, fmt::format("reassembly limit of {} bytes is out of range (0..{})", o.reassembly_bytes,
                                     kMaxBuf));
    if (o.reassembly_segments > kMaxReassemblySegments)
        return fail(err, fmt::format("reassembly limit of {} segments is out of range (0..{})",
                                     o.reassembly_segments, kMaxReassemblySegments));
    if (o.keepalive && (o.keepalive_count == 0 || o.keepalive_interval.count() <= 0 || o.keepalive_idle.count() <= 0))
        return fail(err, "keepalive needs an idle time, an interval and a probe count above 0");
    if (o.user_timeout.count() < 0) return fail(err, "user timeout is negative");
    if (o.max_rto < std::chrono::seconds(1) || o.max_rto > std::chrono::seconds(120))
        return fail(err, fmt::format("maximum RTO of {} ms is out of range (1000..120000)",
                                     std::chrono::duration_cast<std::chrono::milliseconds>(o.max_rto).count()));
    return true;
}

bool check_engine_config(const EngineConfig& c, std::string* err) {
    if (c.burst == 0 || c.burst > 512) return fail(err, fmt::format("burst {} is out of range (1..512)", c.burst));
    if (c.backlog == 0 || c.backlog > 65535)
        return fail(err, fmt::format("listen backlog {} is out of range (1..65535)", c.backlog));
    if (c.max_connections == 0 || c.max_connections > kMaxConnections)
        return fail(err, fmt::format("connection limit {} is out of range (1..{})", c.max_connections,
                                     kMaxConnections));
    if (c.max_memory != 0 && c.max_memory < zbuf::kZoneSize)
        return fail(err, fmt::format("memory limit of {} bytes is below one 2 MiB zone (give 0 for none, or at "
                                     "least {})", c.max_memory, zbuf::kZoneSize));
    if (c.burst_flush_after && *c.burst_flush_after < Duration::zero())
        return fail(err, fmt::format("burst_flush_after of {} ns is negative (0 = after every frame)",
                                     c.burst_flush_after->count()));
    if (c.stats_interval < std::chrono::milliseconds(1) || c.stats_interval > std::chrono::hours(1))
        return fail(err, fmt::format("stats interval of {} us is out of range (1000..3600000000)",
                                     std::chrono::duration_cast<std::chrono::microseconds>(c.stats_interval).count()));
    std::string e;
    if (!check_conn_options(c.conn, &e)) return fail(err, "connection defaults: " + e);
    return true;
}

namespace engine {

tcp::Config tcp_config(const ConnOptions& o, const DeviceCaps& caps) {
    tcp::Config c;
    c.mss = uint16_t(caps.mtu - wire::kIpv4HeaderLen - 20);
    c.tso_max = tso_max(caps);
    // A zero-copy frame is a header mbuf plus one mbuf per view: keep it
    // within what the device takes per frame (and per TSO request).
    if (caps.multi_segs) {
        uint32_t segs = caps.max_segs != 0 ? caps.max_segs : UINT16_MAX;
        if (c.tso_max != 0 && caps.max_tso_segs != 0) segs = std::min<uint32_t>(segs, caps.max_tso_segs);
        c.max_tx_views = uint8_t(std::clamp<uint32_t>(segs - 1, 1, tcp::kMaxTxViews));
    }
    c.rcv_buf = o.rcv_buf;
    c.snd_buf = o.snd_buf;
    c.reassembly.max_bytes = o.reassembly_bytes;
    c.reassembly.max_segments = o.reassembly_segments;
    c.nagle = o.nagle;
    c.retransmit_give_up = o.user_timeout;
    c.max_rto = o.max_rto;
    c.tlp = c.early_retransmit = c.rack = o.tail_loss_probe;
    c.blackhole_timeouts = o.mtu_blackhole ? 3 : 0;
    c.ack_hold = std::chrono::microseconds(10);  // a reply or the train's end carries the ACK
    // A peer's ACK may then cover up to ack_hold_segments segments: let one
    // grow cwnd by up to half of that in slow start (1.5x per round trip at
    // worst; RFC 3465's L = 2 made it 1.06x). No limit overshoots a queue badly.
    c.abc_limit = c.ack_hold_segments / 2;
    c.keepalive.enabled = o.keepalive;
    c.keepalive.idle = o.keepalive_idle;
    c.keepalive.interval = o.keepalive_interval;
    c.keepalive.count = o.keepalive_count;
    c.cc = map_cc(o.cc);
    return c;
}

namespace {
// The MSS a route's MTU allows (0: the route sets none), no lower than
// Linux's floor for an MSS (tcp_min_snd_mss, 48).
uint16_t mss_of_route_mtu(uint32_t mtu) {
    if (mtu == 0) return 0;
    const uint32_t headers = wire::kIpv4HeaderLen + 20;
    return uint16_t(std::min<uint32_t>(mtu > headers + 48 ? mtu - headers : 48, UINT16_MAX));
}
} // namespace

tcp::HostConfig host_config(const EngineParams& p) {
    tcp::HostConfig hc;
    hc.local_ip = p.ip;
    hc.tcp = tcp_config(p.cfg.conn, p.dev ? p.dev->caps() : DeviceCaps{});
    if (p.nexthop != nullptr)
        hc.path_mss = [nh = p.nexthop](wire::Ipv4Addr peer) { return mss_of_route_mtu(nh->path_mtu(peer)); };
    hc.secret = p.secret;
    hc.syn_cookies = p.cfg.syn_cookies;
    hc.max_connections = p.cfg.max_connections;
    return hc;
}

} // namespace engine
} // namespace crescent
