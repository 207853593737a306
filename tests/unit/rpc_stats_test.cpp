// crescent — rpc::MethodStats: status slots, errors(), merge across engines.
#include <catch2/catch.hpp>

#include <crescent/rpc/stats.hpp>

using crescent::rpc::MethodStats;
using crescent::rpc::Status;

TEST_CASE("method stats: statuses land in their slots", "[rpc][stats]") {
    MethodStats s;
    s.record_status(uint32_t(Status::Ok));
    s.record_status(uint32_t(Status::Ok));
    s.record_status(uint32_t(Status::UnknownMethod));
    s.record_status(uint32_t(Status::RateLimited));
    s.record_status(uint32_t(Status::RateLimited));
    s.record_status(uint32_t(Status::Shutdown));
    s.record_status(14);     // a framework status this build does not know
    s.record_status(999);
    s.record_status(1000);   // application statuses
    s.record_status(0xffffffffu);
    CHECK(s.ok == 2);
    CHECK(s.errors_by_status[0] == 0);
    CHECK(s.errors_by_status[1] == 1);
    CHECK(s.errors_by_status[5] == 2);
    CHECK(s.errors_by_status[13] == 1);
    CHECK(s.errors_by_status[MethodStats::kOtherFrameworkSlot] == 2);
    CHECK(s.errors_by_status[MethodStats::kAppSlot] == 2);
    CHECK(s.errors() == 8);
    CHECK(s.calls == 0);   // counted by the caller when the call starts
    CHECK(MethodStats::status_slot(uint32_t(Status::PermissionDenied)) == 4);
}

TEST_CASE("method stats: merge sums everything, latency included", "[rpc][stats]") {
    MethodStats a, b, all;
    a.method = b.method = all.method = 7;
    b.name = "read";
    for (uint64_t i = 0; i < 1000; ++i) {
        MethodStats& s = (i % 3 == 0) ? a : b;
        for (MethodStats* t : {&s, &all}) {
            ++t->calls;
            t->bytes_in += 32 + i;
            t->bytes_out += 4096;
            t->record_status(i % 10 == 0 ? uint32_t(Status::DeadlineExceeded) : i % 17 == 0 ? 1003u : 0u);
            t->latency.record(1000 + i * 37);
        }
    }
    MethodStats m;
    m.method = 7;
    m.merge(a);
    CHECK(m.name.empty());
    m.merge(b);
    CHECK(m.name == "read");          // taken from b: m had none
    CHECK(m.method == 7);
    CHECK(m.calls == all.calls);
    CHECK(m.calls == 1000);
    CHECK(m.ok == all.ok);
    CHECK(m.errors_by_status == all.errors_by_status);
    CHECK(m.errors() == all.errors());
    CHECK(m.errors() + m.ok == 1000);
    CHECK(m.bytes_in == all.bytes_in);
    CHECK(m.bytes_out == 4096 * 1000);
    CHECK(m.latency.count() == 1000);
    CHECK(m.latency.sum() == all.latency.sum());
    CHECK(m.latency.min() == 1000);
    CHECK(m.latency.max() == 1000 + 999 * 37);
    for (double p : {50.0, 99.0, 99.9}) CHECK(m.latency.percentile(p) == all.latency.percentile(p));
    // A named stats keeps its own name.
    MethodStats named;
    named.name = "write";
    named.merge(b);
    CHECK(named.name == "write");
}
