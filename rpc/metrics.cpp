// crescent — the RPC servers' per-method statistics for the Prometheus
// endpoint (see include/crescent/rpc/metrics.hpp).
#include <crescent/rpc/metrics.hpp>

#include <map>
#include <mutex>
#include <utility>

#include <fmt/format.h>

namespace crescent::rpc {

namespace {

struct Slot {
    unsigned engine = 0;
    std::vector<MetricsRegistry::Method> methods;
};

std::mutex g_mu;
uint64_t g_next = 1;
std::map<uint64_t, Slot>& slots() {
    static std::map<uint64_t, Slot> s;  // guarded by g_mu
    return s;
}

// A label value per the text format: backslash, quote and newline escaped.
std::string esc(const std::string& v) {
    std::string o;
    for (char c : v) {
        if (c == '\\' || c == '"') o.push_back('\\');
        if (c == '\n') o += "\\n";
        else o.push_back(c);
    }
    return o;
}

} // namespace

MetricsRegistry& MetricsRegistry::get() {
    static MetricsRegistry r;
    return r;
}

uint64_t MetricsRegistry::add(unsigned engine) {
    std::lock_guard g(g_mu);
    const uint64_t id = g_next++;
    slots()[id].engine = engine;
    return id;
}

MetricsRegistry::Method MetricsRegistry::compact(const MethodStats& m) {
    Method o;
    o.name = m.name.empty() ? fmt::format("{}", m.method) : m.name;
    o.calls = m.calls;
    o.errors = m.errors();
    o.count = m.latency.count();
    o.sum_ns = m.latency.sum();
    m.latency.for_each_bucket([&](uint64_t, uint64_t hi, uint64_t n) {
        for (size_t i = 0; i < kBounds.size(); ++i)
            if (hi <= kBounds[i]) o.le[i] += n;  // a bucket counts below a bound when all of it is
    });
    return o;
}

void MetricsRegistry::publish(uint64_t id, const std::vector<MethodStats>& stats) {
    std::vector<Method> v;
    v.reserve(stats.size());
    for (const MethodStats& m : stats) v.push_back(compact(m));
    std::lock_guard g(g_mu);
    auto it = slots().find(id);
    if (it != slots().end()) it->second.methods = std::move(v);
}

void MetricsRegistry::remove(uint64_t id) {
    std::lock_guard g(g_mu);
    slots().erase(id);
}

void MetricsRegistry::render(std::string& out) const {
    std::map<std::pair<unsigned, std::string>, Method> sum;  // servers of one engine summed per method
    {
        std::lock_guard g(g_mu);
        for (const auto& [id, s] : slots())
            for (const Method& m : s.methods) {
                Method& t = sum[{s.engine, m.name}];
                t.name = m.name;
                t.calls += m.calls, t.errors += m.errors, t.count += m.count, t.sum_ns += m.sum_ns;
                for (size_t i = 0; i < kBounds.size(); ++i) t.le[i] += m.le[i];
            }
    }
    if (sum.empty()) return;
    auto it = std::back_inserter(out);
    fmt::format_to(it, "# HELP crescent_rpc_requests_total RPC requests received per method\n"
                       "# TYPE crescent_rpc_requests_total counter\n");
    for (const auto& [k, m] : sum)
        fmt::format_to(it, "crescent_rpc_requests_total{{engine=\"{}\",method=\"{}\"}} {}\n", k.first, esc(m.name),
                       m.calls);
    fmt::format_to(it, "# HELP crescent_rpc_errors_total RPC outcomes other than Ok per method\n"
                       "# TYPE crescent_rpc_errors_total counter\n");
    for (const auto& [k, m] : sum)
        fmt::format_to(it, "crescent_rpc_errors_total{{engine=\"{}\",method=\"{}\"}} {}\n", k.first, esc(m.name),
                       m.errors);
    fmt::format_to(it, "# HELP crescent_rpc_latency_seconds RPC server latency, request in to reply out\n"
                       "# TYPE crescent_rpc_latency_seconds histogram\n");
    for (const auto& [k, m] : sum) {
        const std::string l = fmt::format("engine=\"{}\",method=\"{}\"", k.first, esc(m.name));
        for (size_t i = 0; i < kBounds.size(); ++i)
            fmt::format_to(it, "crescent_rpc_latency_seconds_bucket{{{},le=\"{}\"}} {}\n", l,
                           double(kBounds[i]) / 1e9, m.le[i]);
        fmt::format_to(it, "crescent_rpc_latency_seconds_bucket{{{},le=\"+Inf\"}} {}\n", l, m.count);
        fmt::format_to(it, "crescent_rpc_latency_seconds_sum{{{}}} {}\n", l, double(m.sum_ns) / 1e9);
        fmt::format_to(it, "crescent_rpc_latency_seconds_count{{{}}} {}\n", l, m.count);
    }
}

} // namespace crescent::rpc
