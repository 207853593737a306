// crescent — tests of rpc::MetricsRegistry (include/crescent/rpc/metrics.hpp):
// the servers' per-method stats cut to fixed buckets and rendered in the
// Prometheus text format 0.0.4.
#include <catch2/catch.hpp>

#include <crescent/rpc/metrics.hpp>

#include <string>

using namespace crescent::rpc;

namespace {
MethodStats method(std::string name, std::initializer_list<uint64_t> lat_ns, uint64_t errors = 0) {
    MethodStats m;
    m.name = std::move(name);
    for (uint64_t v : lat_ns) {
        ++m.calls;
        m.latency.record(v);
        m.record_status(0);
    }
    for (uint64_t i = 0; i < errors; ++i) ++m.calls, m.record_status(uint32_t(Status::Shutdown));
    return m;
}
} // namespace

TEST_CASE("rpc metrics: compact cuts the histogram into cumulative fixed buckets", "[rpc][metrics]") {
    auto c = MetricsRegistry::compact(method("m", {5'000, 20'000, 20'000, 3'000'000, 7'000'000'000}, 2));
    CHECK(c.name == "m");
    CHECK(c.calls == 7);
    CHECK(c.errors == 2);
    CHECK(c.count == 5);
    CHECK(c.sum_ns == 7'003'045'000);
    CHECK(c.le[0] == 1);   // <= 10 us
    CHECK(c.le[1] == 3);   // <= 25 us
    CHECK(c.le[6] == 3);   // <= 1 ms
    CHECK(c.le[8] == 4);   // <= 5 ms
    CHECK(c.le[11] == 4);  // <= 1 s: the 7 s sample only in +Inf (count)
}

TEST_CASE("rpc metrics: render sums the servers of one engine per method", "[rpc][metrics]") {
    MetricsRegistry& r = MetricsRegistry::get();
    const uint64_t a = r.add(3), b = r.add(3), c = r.add(4);
    r.publish(a, {method("get", {1'000, 2'000})});
    r.publish(b, {method("get", {30'000}), method("q\"x", {})});
    r.publish(c, {method("get", {1'000})});
    std::string o;
    r.render(o);
    CHECK(o.find("# TYPE crescent_rpc_requests_total counter\n") != std::string::npos);
    CHECK(o.find("crescent_rpc_requests_total{engine=\"3\",method=\"get\"} 3\n") != std::string::npos);
    CHECK(o.find("crescent_rpc_requests_total{engine=\"4\",method=\"get\"} 1\n") != std::string::npos);
    CHECK(o.find("method=\"q\\\"x\"") != std::string::npos);  // label value escaped
    CHECK(o.find("crescent_rpc_latency_seconds_bucket{engine=\"3\",method=\"get\",le=\"2.5e-05\"} 2\n") !=
          std::string::npos);
    CHECK(o.find("crescent_rpc_latency_seconds_bucket{engine=\"3\",method=\"get\",le=\"5e-05\"} 3\n") !=
          std::string::npos);
    CHECK(o.find("crescent_rpc_latency_seconds_bucket{engine=\"3\",method=\"get\",le=\"+Inf\"} 3\n") !=
          std::string::npos);
    CHECK(o.find("crescent_rpc_latency_seconds_count{engine=\"3\",method=\"get\"} 3\n") != std::string::npos);
    CHECK(o.find("crescent_rpc_latency_seconds_sum{engine=\"3\",method=\"get\"} 3.3e-05\n") != std::string::npos);
    r.remove(a), r.remove(b), r.remove(c);
    std::string empty;
    r.render(empty);
    CHECK(empty.empty());
}
