// crescent — the port plan of flow bifurcation (Luna §7.1). See plan.hpp.
#include "bifurcation/plan.hpp"

#include <algorithm>
#include <bit>
#include <set>

#include <fmt/format.h>

namespace crescent::bifurcation {

std::string to_string(PortSpan s) {
    if (s.lo == s.hi) return fmt::format("{}", s.lo);
    return fmt::format("{}-{}", s.lo, s.hi);
}

uint32_t PortMatch::size() const { return uint32_t(1) << std::popcount(uint16_t(~mask)); }

std::string to_string(PortMatch m) {
    if (m.is_any()) return "*";
    if (m.is_exact()) return fmt::format("{}", m.value);
    return fmt::format("{}/{:#06x}", m.value, m.mask);
}

std::string to_string(const SteerRule& r) {
    return fmt::format("tcp dst {} src {} -> queue {} ({}, engine {})", to_string(r.dst),
                       to_string(r.src), r.queue,
                       r.kind == SteerRule::Kind::Client ? "client" : "server", r.engine);
}

// Greedy prefix decomposition: from `lo`, take the largest aligned block
// 2^b (lo divisible by 2^b) that does not pass `hi`. This is the classic
// range-to-prefix expansion and is minimal for a single range.
std::vector<PortMatch> span_to_matches(PortSpan s) {
    std::vector<PortMatch> out;
    if (s.lo > s.hi) return out;
    uint32_t lo = s.lo;
    const uint32_t end = uint32_t(s.hi) + 1; // exclusive, <= 65536
    while (lo < end) {
        // Alignment of lo (lo == 0 is aligned to everything).
        unsigned bits = lo == 0 ? 16 : unsigned(std::countr_zero(lo));
        while (bits > 0 && lo + (uint32_t(1) << bits) > end) --bits;
        const uint32_t block = uint32_t(1) << bits;
        out.push_back(PortMatch{uint16_t(lo), uint16_t(~(block - 1) & 0xffff)});
        lo += block;
    }
    return out;
}

// A complete binary tree with `engines` leaves over the low bits: with
// k = ceil(log2 n) and m = 2^k, d = m - n engines take a depth k-1 leaf
// (value v < m/2, mask m/2 - 1: residues v and v + m/2) and the other n - d take
// a depth-k leaf among the residues that are left. n rules is the minimum (an
// engine with no rule receives nothing) and leaf depths differ by at most one,
// the best balance n rules allow.
std::vector<PortMatch> spread_by_low_bits(unsigned engines) {
    std::vector<PortMatch> out;
    if (engines == 0 || engines > 65536) return out;
    if (engines == 1) {
        out.push_back(PortMatch::any());
        return out;
    }
    const unsigned k = unsigned(std::bit_width(engines - 1)); // ceil(log2 n), n >= 2
    const uint32_t m = uint32_t(1) << k;
    const uint32_t half = m / 2;
    const uint32_t d = m - engines; // engines with a double share, d < half
    for (uint32_t v = 0; v < d; ++v) out.push_back(PortMatch{uint16_t(v), uint16_t(half - 1)});
    for (uint32_t v = d; v < half; ++v) out.push_back(PortMatch{uint16_t(v), uint16_t(m - 1)});
    for (uint32_t v = half + d; v < m; ++v) out.push_back(PortMatch{uint16_t(v), uint16_t(m - 1)});
    return out;
}

std::optional<Plan> Plan::compute(PlanConfig cfg, std::string* err) {
    auto fail = [&](std::string msg) -> std::optional<Plan> {
        if (err) *err = fmt::format("crescent: port plan for {} on {}: {}", cfg.app_name,
                                    cfg.ifname.empty() ? "?" : cfg.ifname, msg);
        return std::nullopt;
    };
    const PortSpan cr = cfg.client_range;
    if (cr.lo == 0 || cr.lo > cr.hi)
        return fail(fmt::format("client range {}-{} is invalid (ports are 1-65535, low <= high)",
                                cr.lo, cr.hi));
    if (cfg.engines == 0) return fail("0 engines");
    if (uint32_t(cfg.first_queue) + cfg.engines > 65536)
        return fail(fmt::format("queues {}..{} exceed 65535", cfg.first_queue,
                                uint32_t(cfg.first_queue) + cfg.engines - 1));
    if (cfg.app_slots == 0 || cfg.app_slot >= cfg.app_slots)
        return fail(fmt::format("application slot {} out of range (0..{})", cfg.app_slot,
                                int(cfg.app_slots) - 1));

    Plan p;
    if (cfg.app_range) {
        const PortSpan ar = *cfg.app_range;
        if (ar.lo > ar.hi || ar.lo < cr.lo || ar.hi > cr.hi)
            return fail(fmt::format("application range {}-{} is not inside the client range {}",
                                    ar.lo, ar.hi, to_string(cr)));
        p.app_range_ = ar;
    } else {
        // Equal contiguous parts; the first (size % slots) slots get one more port.
        const uint32_t total = cr.size(), slots = cfg.app_slots;
        const uint32_t base = total / slots, extra = total % slots;
        if (base == 0)
            return fail(fmt::format("client range {} ({} ports) cannot be split into {} slots",
                                    to_string(cr), total, slots));
        const uint32_t s = cfg.app_slot;
        const uint32_t lo = cr.lo + s * base + std::min(s, extra);
        const uint32_t size = base + (s < extra ? 1 : 0);
        p.app_range_ = PortSpan{uint16_t(lo), uint16_t(lo + size - 1)};
    }

    const uint32_t app_size = p.app_range_.size();
    const uint32_t per_engine = app_size / cfg.engines;
    if (per_engine == 0 || per_engine < cfg.min_ports_per_engine)
        return fail(fmt::format("client sub-range {} ({} ports) is too small for {} engines: "
                                "each engine needs at least {} local ports",
                                to_string(p.app_range_), app_size, cfg.engines,
                                std::max<uint32_t>(cfg.min_ports_per_engine, 1)));
    const uint32_t extra = app_size % cfg.engines;
    uint32_t lo = p.app_range_.lo;
    for (uint32_t e = 0; e < cfg.engines; ++e) {
        const uint32_t size = per_engine + (e < extra ? 1 : 0);
        p.engine_ports_.push_back(PortSpan{uint16_t(lo), uint16_t(lo + size - 1)});
        lo += size;
    }

    std::set<uint16_t> seen;
    for (uint16_t port : cfg.listen_ports) {
        if (port == 0) return fail("listen port 0 is not a port");
        if (cr.contains(port))
            return fail(fmt::format("listen port {} lies inside the client range {} "
                                    "reserved for outgoing connections",
                                    port, to_string(cr)));
        if (!seen.insert(port).second) return fail(fmt::format("listen port {} given twice", port));
    }

    for (unsigned e = 0; e < cfg.engines; ++e)
        for (PortMatch m : span_to_matches(p.engine_ports_[e]))
            p.rules_.push_back(SteerRule{SteerRule::Kind::Client, uint16_t(e),
                                         uint16_t(cfg.first_queue + e), m, PortMatch::any()});
    p.client_rules_ = p.rules_.size();
    const std::vector<PortMatch> spread = spread_by_low_bits(cfg.engines);
    for (uint16_t port : cfg.listen_ports)
        for (unsigned e = 0; e < cfg.engines; ++e)
            p.rules_.push_back(SteerRule{SteerRule::Kind::Server, uint16_t(e),
                                         uint16_t(cfg.first_queue + e), PortMatch::exact(port),
                                         spread[e]});
    p.cfg_ = std::move(cfg);
    return p;
}

std::vector<PortSpan> Plan::steered_ranges() const {
    std::vector<PortSpan> spans{app_range_};
    for (uint16_t port : cfg_.listen_ports) spans.push_back(PortSpan{port, port});
    std::sort(spans.begin(), spans.end(),
              [](PortSpan a, PortSpan b) { return a.lo < b.lo; });
    std::vector<PortSpan> merged;
    for (PortSpan s : spans) {
        if (!merged.empty() && uint32_t(merged.back().hi) + 1 >= s.lo)
            merged.back().hi = std::max(merged.back().hi, s.hi);
        else
            merged.push_back(s);
    }
    return merged;
}

std::optional<unsigned> Plan::engine_for(uint16_t dst_port, uint16_t src_port) const {
    for (const SteerRule& r : rules_)
        if (r.matches(dst_port, src_port)) return r.engine;
    return std::nullopt;
}

std::string Plan::describe() const {
    std::string out = fmt::format(
        "crescent port plan on {}: app \"{}\" slot {}/{}, {} engine(s) on queues {}-{}\n",
        cfg_.ifname.empty() ? "?" : cfg_.ifname, cfg_.app_name, cfg_.app_slot, cfg_.app_slots,
        cfg_.engines, cfg_.first_queue, cfg_.first_queue + cfg_.engines - 1);
    out += fmt::format("  client ports {} of {} (reserved from kernel clients)\n",
                       to_string(app_range_), to_string(cfg_.client_range));
    for (unsigned e = 0; e < cfg_.engines; ++e) {
        std::string blocks;
        for (const SteerRule& r : rules_)
            if (r.kind == SteerRule::Kind::Client && r.engine == e)
                blocks += (blocks.empty() ? "" : " ") + to_string(r.dst);
        out += fmt::format("    engine {} (queue {}): local ports {} ({} ports), dst {}\n", e,
                           queue_of(e), to_string(engine_ports_[e]), engine_ports_[e].size(),
                           blocks);
    }
    const std::vector<PortMatch> spread = spread_by_low_bits(cfg_.engines);
    for (uint16_t port : cfg_.listen_ports) {
        out += fmt::format("  server port {}: by source port", port);
        for (unsigned e = 0; e < cfg_.engines; ++e)
            out += fmt::format("{} {} -> engine {} ({:.1f}%)", e ? "," : "",
                               to_string(spread[e]), e, 100.0 * spread[e].size() / 65536.0);
        out += "\n";
    }
    out += fmt::format("  {} rule(s): {} client, {} server", rules_.size(), client_rules_,
                       rules_.size() - client_rules_);
    return out;
}

// ---------------------------------------------------------------------------

std::string_view backend_name(Backend b) {
    switch (b) {
    case Backend::Auto: return "auto";
    case Backend::None: return "none";
    case Backend::Xdp: return "xdp";
    case Backend::XdpNtuple: return "xdp+ntuple";
    case Backend::RteFlow: return "rte_flow";
    }
    return "?";
}

std::optional<Backend> parse_backend(std::string_view s) {
    for (Backend b : {Backend::Auto, Backend::None, Backend::Xdp, Backend::XdpNtuple,
                      Backend::RteFlow})
        if (s == backend_name(b)) return b;
    if (s == "ntuple") return Backend::XdpNtuple;
    return std::nullopt;
}

BackendChoice choose_backend(std::string_view driver, unsigned rx_queues, Backend forced) {
    if (forced != Backend::Auto)
        return {forced, fmt::format("steering backend {} (forced by option; device driver {})",
                                    backend_name(forced), driver)};
    if (driver == "net_af_xdp") {
        if (rx_queues > 1)
            return {Backend::XdpNtuple,
                    fmt::format("steering backend xdp+ntuple: {} with {} queues (ethtool ntuple "
                                "picks the queue, the XDP program the socket)",
                                driver, rx_queues)};
        return {Backend::Xdp, fmt::format("steering backend xdp: {} with one queue", driver)};
    }
    // Devices that are not shared with a kernel netdev, or that have no way to
    // steer (af_packet sees every frame the kernel sees).
    for (std::string_view d : {"net_af_packet", "net_ring", "net_null", "net_memif", "net_pcap",
                               "net_vhost", "net_virtio_user"})
        if (driver == d)
            return {Backend::None,
                    fmt::format("steering backend none: {} offers no flow steering", driver)};
    return {Backend::RteFlow,
            fmt::format("steering backend rte_flow: {} (rules are validated one by one)", driver)};
}

} // namespace crescent::bifurcation
