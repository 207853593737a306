// crescent — the RPC servers' per-method statistics for the Prometheus
// endpoint (RuntimeOptions::metrics_port, stack/engine/metrics_http.hpp).
//
// Every rpc::Server owns a slot here: on its engine thread it publishes a
// compact copy of its methods' counters and latency (cut to kBounds fixed
// buckets) every 100 ms; render() (any thread, the endpoint's) writes them in
// the Prometheus text format 0.0.4, summed per (engine, method):
//   crescent_rpc_requests_total{engine,method}        counter
//   crescent_rpc_errors_total{engine,method}          counter (outcomes other than Ok)
//   crescent_rpc_latency_seconds{engine,method}       histogram (_bucket{le}, _sum, _count)
// A mutex per registry guards the slots: publish and render are 10 Hz, not
// on any data path.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <crescent/rpc/stats.hpp>

namespace crescent::rpc {

// The process-wide table of published per-method RPC statistics (see the
// header comment). Thread-safe: a mutex guards the slots.
class MetricsRegistry {
public:
    // Upper bounds of the latency buckets (ns); +Inf follows.
    static constexpr std::array<uint64_t, 12> kBounds = {
        10'000, 25'000, 50'000, 100'000, 250'000, 500'000, 1'000'000, 2'500'000, 5'000'000, 10'000'000,
        100'000'000, 1'000'000'000};

    // One method's published counters, as the endpoint renders them.
    struct Method {
        std::string name;                               // the registered method name (label `method`)
        uint64_t calls = 0, errors = 0;                 // calls not answered Ok (framework or application status)
        // \var calls
        // Calls answered (every outcome).
        uint64_t count = 0, sum_ns = 0;                 // the latency samples' sum, ns
        // \var count
        // Latency samples recorded.
        std::array<uint64_t, kBounds.size()> le{};      // cumulative: samples <= kBounds[i]
    };

    // The process's registry (created on first use, never destroyed).
    static MetricsRegistry& get();

    // A new, empty slot for a server on `engine`; returns its id (never 0).
    uint64_t add(unsigned engine);
    // Replaces slot `id`'s methods with a compact copy of `stats` (unknown ids are ignored).
    void publish(uint64_t id, const std::vector<MethodStats>& stats);
    // Drops slot `id` (its server is gone); its methods leave the next render.
    void remove(uint64_t id);
    // Appends the families above (nothing when no server published a method).
    void render(std::string& out) const;

    // `m` cut down to what the endpoint shows: counters and the fixed latency buckets.
    static Method compact(const MethodStats& m);
};

} // namespace crescent::rpc
