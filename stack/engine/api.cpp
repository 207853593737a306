// crescent — names and small helpers of the public engine API.
#include <arpa/inet.h>

#include <fmt/format.h>

#include <crescent/engine.hpp>

#include "stack/wire/wire.hpp"

namespace crescent {

static_assert(wire::kDropCount <= EngineStats::kParseDrops, "EngineStats::parse_drops is too small");

bool Ipv4::parse(std::string_view s, Ipv4* out) {
    char buf[INET_ADDRSTRLEN];
    if (s.empty() || s.size() >= sizeof buf) return false;
    s.copy(buf, s.size());
    buf[s.size()] = '\0';
    in_addr a;
    if (inet_pton(AF_INET, buf, &a) != 1) return false;
    out->v = ntohl(a.s_addr);
    return true;
}

std::string Ipv4::to_string() const {
    return fmt::format("{}.{}.{}.{}", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff);
}

std::string_view close_reason_name(CloseReason r) {
    switch (r) {
    case CloseReason::Normal: return "normal";
    case CloseReason::ResetByPeer: return "reset-by-peer";
    case CloseReason::Refused: return "refused";
    case CloseReason::ConnectTimeout: return "connect-timeout";
    case CloseReason::RetransmitTimeout: return "retransmit-timeout";
    case CloseReason::KeepaliveTimeout: return "keepalive-timeout";
    case CloseReason::FinWait2Timeout: return "fin-wait-2-timeout";
    case CloseReason::AbortedLocally: return "aborted-locally";
    case CloseReason::EngineStopped: return "engine-stopped";
    }
    return "unknown";
}

std::string_view congestion_control_name(CongestionControl c) {
    switch (c) {
    case CongestionControl::NewReno: return "newreno";
    case CongestionControl::Cubic: return "cubic";
    case CongestionControl::Dctcp: return "dctcp";
    }
    return "unknown";
}

bool parse_congestion_control(std::string_view s, CongestionControl* out) {
    for (auto c : {CongestionControl::NewReno, CongestionControl::Cubic, CongestionControl::Dctcp})
        if (s == congestion_control_name(c)) {
            *out = c;
            return true;
        }
    return false;
}

std::string_view send_status_name(SendStatus s) {
    switch (s) {
    case SendStatus::Ok: return "ok";
    case SendStatus::WouldBlock: return "would-block";
    case SendStatus::Closed: return "closed";
    case SendStatus::NoMemory: return "no-memory";
    }
    return "unknown";
}

bool parse_dispatch_mode(std::string_view s, DispatchMode* out) {
    if (s == "inline") *out = DispatchMode::Inline;
    else if (s == "batch") *out = DispatchMode::Batch;
    else return false;
    return true;
}

std::string_view EngineStats::parse_drop_name(size_t i) {
    if (i >= wire::kDropCount) return "unknown";
    return wire::drop_name(wire::Drop(i));
}

std::string_view EngineStats::phase_name(size_t i) {
    static constexpr std::array<std::string_view, kPhases> names{"poll",   "parse", "tcp",   "app",
                                                                          "timers", "output", "flush", "rest"};
    return i < kPhases ? names[i] : "unknown";
}

void EngineStats::for_each(const std::function<void(std::string_view, uint64_t)>& fn) const {
#define CRESCENT_STAT(f) fn(#f, f)
    CRESCENT_STAT(loops); CRESCENT_STAT(idle_loops); CRESCENT_STAT(busy_ns); CRESCENT_STAT(sleeps);
    CRESCENT_STAT(rx_packets); CRESCENT_STAT(rx_bytes); CRESCENT_STAT(tx_packets); CRESCENT_STAT(tx_bytes);
    CRESCENT_STAT(tx_ring_full); CRESCENT_STAT(tx_early_flushes); CRESCENT_STAT(tx_sent_now); CRESCENT_STAT(tx_overflow); CRESCENT_STAT(tx_no_mbuf); CRESCENT_STAT(tx_too_large);
    CRESCENT_STAT(tx_zero_copy_segments); CRESCENT_STAT(tx_copied_segments); CRESCENT_STAT(tx_copybreak_segments); CRESCENT_STAT(tx_copied_views); CRESCENT_STAT(tx_tso_requests); CRESCENT_STAT(rx_linearized);
    CRESCENT_STAT(drop_no_route); CRESCENT_STAT(drop_neigh_pending); CRESCENT_STAT(drop_neigh_failed);
    CRESCENT_STAT(rx_no_memory); CRESCENT_STAT(mem_limit_refused); CRESCENT_STAT(rx_zero_copy); CRESCENT_STAT(rx_copy_pressure); CRESCENT_STAT(rx_multiseg); CRESCENT_STAT(timers_fired);
    CRESCENT_STAT(tcp_timer_runs); CRESCENT_STAT(epoll_waits); CRESCENT_STAT(epoll_events);
    CRESCENT_STAT(conns_opened); CRESCENT_STAT(conns_closed); CRESCENT_STAT(connect_no_port);
    CRESCENT_STAT(callbacks); CRESCENT_STAT(tcp_segs_in); CRESCENT_STAT(tcp_drop_wrong_dst);
    CRESCENT_STAT(tcp_drop_no_listener); CRESCENT_STAT(tcp_rst_sent); CRESCENT_STAT(tcp_drop_backlog_full);
    CRESCENT_STAT(tcp_syn_cookies_sent); CRESCENT_STAT(tcp_accepted);
    CRESCENT_STAT(tcp_drop_listen_bad); CRESCENT_STAT(tcp_drop_too_many_conns); CRESCENT_STAT(tcp_rst_rate_limited);
    CRESCENT_STAT(tcp_syn_cookies_ok); CRESCENT_STAT(tcp_syn_cookies_bad);
    CRESCENT_STAT(pcap_frames); CRESCENT_STAT(pcap_dropped_cap);
#undef CRESCENT_STAT
    fn("phase_samples", phase_samples);
    for (size_t i = 0; i < kPhases; ++i) fn(fmt::format("phase_{}_ns", phase_name(i)), phase_ns[i]);
    for (size_t i = 1; i < wire::kDropCount; ++i)
        fn(fmt::format("parse_{}", parse_drop_name(i)), parse_drops[i]);
}

} // namespace crescent
