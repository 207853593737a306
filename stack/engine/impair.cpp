// crescent — netem-like impairment of an engine Device (see impair.hpp).
#include "stack/engine/impair.hpp"

#include <cstdlib>

#include <fmt/format.h>

namespace crescent::engine {

std::optional<ImpairSpec> parse_impair(std::string_view s, std::string* err) {
    ImpairSpec sp;
    auto bad = [&](std::string_view item) -> std::optional<ImpairSpec> {
        if (err) *err = fmt::format("impairment '{}': expected loss=P,dup=P,reorder=P,delay=Nms|Nus,seed=N", item);
        return std::nullopt;
    };
    while (!s.empty()) {
        size_t comma = s.find(',');
        std::string_view item = s.substr(0, comma);
        s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
        size_t eq = item.find('=');
        if (eq == std::string_view::npos) return bad(item);
        std::string key(item.substr(0, eq)), val(item.substr(eq + 1));
        char* end = nullptr;
        double v = std::strtod(val.c_str(), &end);
        if (end == val.c_str()) return bad(item);
        std::string unit(end);
        if (key == "loss" || key == "dup" || key == "reorder") {
            if (!unit.empty() && unit != "%") return bad(item);
            if (v < 0 || v > 100) return bad(item);
            (key == "loss" ? sp.loss : key == "dup" ? sp.dup : sp.reorder) = v / 100.0;
        } else if (key == "delay") {
            if (v < 0) return bad(item);
            if (unit == "ms") sp.delay = Duration(int64_t(v * 1e6));
            else if (unit == "us") sp.delay = Duration(int64_t(v * 1e3));
            else return bad(item);
        } else if (key == "seed") {
            sp.seed = uint64_t(v);
        } else {
            return bad(item);
        }
    }
    return sp;
}

ImpairDevice::ImpairDevice(std::unique_ptr<Device> inner, const ImpairSpec& spec)
    : inner_(std::move(inner)), spec_(spec), rng_(spec.seed) {}

ImpairDevice::~ImpairDevice() {
    for (auto& h : rx_line_) rte_pktmbuf_free(h.m);
    for (auto& h : tx_line_) rte_pktmbuf_free(h.m);
}

void ImpairDevice::admit(rte_mbuf* m, std::deque<Held>& line, Instant now) {
    if (chance(spec_.loss)) {
        ++ctr_.dropped;
        rte_pktmbuf_free(m);
        return;
    }
    int copies = 1;
    if (chance(spec_.dup)) {
        ++ctr_.duplicated;
        copies = 2;
    }
    for (int i = 0; i < copies; ++i) {
        rte_mbuf* f = m;
        if (i == 1) {
            f = rte_pktmbuf_copy(m, inner_->tx_pool(), 0, UINT32_MAX);
            if (!f) break;
        }
        if (spec_.delay.count() == 0) {
            line.push_back(Held{f, now});
        } else if (chance(spec_.reorder)) {
            ++ctr_.reordered;  // netem: this frame is sent at once, overtaking the delayed ones
            line.push_front(Held{f, now});
        } else {
            ++ctr_.delayed;
            line.push_back(Held{f, now + spec_.delay});
        }
    }
}

uint16_t ImpairDevice::rx_burst(rte_mbuf** pkts, uint16_t n) {
    Instant now = clock_.now();
    uint16_t got = inner_->rx_burst(scratch_, uint16_t(std::min<size_t>(n, 64)));
    for (uint16_t i = 0; i < got; ++i) admit(scratch_[i], rx_line_, now);
    uint16_t out = 0;
    while (out < n && !rx_line_.empty() && rx_line_.front().release <= now) {
        pkts[out++] = rx_line_.front().m;
        rx_line_.pop_front();
    }
    return out;
}

uint16_t ImpairDevice::tx_burst(rte_mbuf** pkts, uint16_t n) {
    Instant now = clock_.now();
    for (uint16_t i = 0; i < n; ++i) admit(pkts[i], tx_line_, now);
    flush();
    return n;  // the delay line owns them now
}

void ImpairDevice::flush() {
    Instant now = clock_.now();
    while (!tx_line_.empty() && tx_line_.front().release <= now) {
        rte_mbuf* m = tx_line_.front().m;
        if (inner_->tx_burst(&m, 1) != 1) break;  // ring full: retry next iteration
        tx_line_.pop_front();
    }
    if (inner_->tx_pending()) inner_->flush();
}

} // namespace crescent::engine
