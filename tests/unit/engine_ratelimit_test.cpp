// crescent — the rate limiter of the engine's data-path warnings, on a virtual clock.
#include <catch2/catch.hpp>

#include <vector>

#include "stack/engine/ratelimit.hpp"

using crescent::Instant;
using crescent::engine::RateLimit;
using namespace std::chrono_literals;

TEST_CASE("ratelimit: the first event is reported at once", "[engine][ratelimit]") {
    RateLimit r;
    const Instant t0 = Instant::from_nanos(5'000'000'000);
    REQUIRE(r.hit(t0));
    CHECK(r.count() == 1);
    CHECK(r.span().count() == 0);
    CHECK(r.suppressed() == 0);
}

TEST_CASE("ratelimit: one line per 1 s window with the suppressed count", "[engine][ratelimit]") {
    RateLimit r;
    Instant t = Instant::from_nanos(0);
    int lines = 0;
    std::vector<uint64_t> counts;
    std::vector<double> spans;
    // 10 000 events, one every 500 us: 5 s of virtual time.
    for (int i = 0; i < 10000; ++i) {
        if (r.hit(t)) {
            ++lines;
            counts.push_back(r.count());
            spans.push_back(r.span_seconds());
        }
        t += 500us;
    }
    // Lines at t = 0, 1.0, 2.0, 3.0, 4.0 s: the first reports 1 event, the
    // others the 2000 events since the previous line (that one excluded,
    // this one included).
    REQUIRE(lines == 5);
    CHECK(counts[0] == 1);
    for (size_t i = 1; i < counts.size(); ++i) {
        CHECK(counts[i] == 2000);
        CHECK(spans[i] == Approx(1.0));
    }
    // The events of the last second are counted, not yet reported.
    CHECK(r.suppressed() == 1999);
    uint64_t total = r.suppressed();
    for (uint64_t c : counts) total += c;
    CHECK(total == 10000);
}

TEST_CASE("ratelimit: a quiet period ends the window; the next event reports at once", "[engine][ratelimit]") {
    RateLimit r;
    Instant t = Instant::from_nanos(100);
    REQUIRE(r.hit(t));
    for (int i = 0; i < 41; ++i) CHECK_FALSE(r.hit(t + 999ms));
    CHECK(r.suppressed() == 41);
    // 7.5 s later: one line with the 41 suppressed plus this one, over 7.5 s.
    REQUIRE(r.hit(t + 7500ms));
    CHECK(r.count() == 42);
    CHECK(r.span_seconds() == Approx(7.5));
    CHECK(r.suppressed() == 0);
    // And the window restarts from this line.
    CHECK_FALSE(r.hit(t + 8499ms));
    CHECK(r.hit(t + 8500ms));
    CHECK(r.count() == 2);
}

TEST_CASE("ratelimit: the window is configurable", "[engine][ratelimit]") {
    RateLimit r(10ms);
    Instant t = Instant::from_nanos(0);
    int lines = 0;
    for (int i = 0; i < 1000; ++i, t += 1ms) lines += r.hit(t) ? 1 : 0;
    CHECK(lines == 100);
}
