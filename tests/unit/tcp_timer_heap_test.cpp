// crescent — the Host's indexed timer heap (stack/tcp/timer_heap.hpp): one
// entry per slot, re-keyed in place, removed at never; checked against a
// reference (a map of slot -> deadline) under random operations.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>

#include "stack/tcp/timer_heap.hpp"

using crescent::Instant;
using crescent::tcp::TimerHeap;

namespace {

// The earliest deadline of the reference (never when empty).
Instant ref_top(const std::map<uint32_t, int64_t>& ref) {
    int64_t best = INT64_MAX;
    for (auto [slot, at] : ref) best = std::min(best, at);
    return Instant::from_nanos(best);
}

} // namespace

TEST_CASE("timer heap: set, re-key, remove, pop order", "[tcp][timers]") {
    TimerHeap h;
    CHECK(h.empty());
    CHECK(h.top_at().is_never());
    h.set(3, Instant::from_nanos(300));
    h.set(1, Instant::from_nanos(100));
    h.set(7, Instant::from_nanos(700));
    CHECK(h.size() == 3);
    CHECK(h.top_slot() == 1);
    h.set(1, Instant::from_nanos(500));  // later: sifts down, one entry still
    CHECK(h.size() == 3);
    CHECK(h.top_slot() == 3);
    CHECK(h.at(1) == Instant::from_nanos(500));
    h.set(7, Instant::from_nanos(50));   // earlier: sifts up
    CHECK(h.top_slot() == 7);
    h.set(7, Instant::never());          // removed
    CHECK(h.size() == 2);
    CHECK(h.at(7).is_never());
    h.set(9, Instant::never());          // removing what is not there is a no-op
    CHECK(h.size() == 2);
    CHECK(h.top_slot() == 3);
    h.set(3, Instant::never());
    CHECK(h.top_slot() == 1);
    h.set(1, Instant::never());
    CHECK(h.empty());
}

TEST_CASE("timer heap: random operations match a reference", "[tcp][timers]") {
    std::mt19937 rng(42);
    TimerHeap h;
    std::map<uint32_t, int64_t> ref;
    for (int op = 0; op < 200000; ++op) {
        const uint32_t slot = rng() % 300;
        const unsigned kind = rng() % 10;
        if (kind < 2) {
            h.set(slot, Instant::never());
            ref.erase(slot);
        } else if (kind < 3 && !ref.empty()) {
            // Fire the earliest: what Host::on_timer does (re-key later or remove).
            const uint32_t top = h.top_slot();
            REQUIRE(ref.count(top) == 1);
            REQUIRE(ref[top] == h.top_at().nanos());
            if (rng() % 2) {
                const int64_t at = ref[top] + 1 + int64_t(rng() % 1000);
                h.set(top, Instant::from_nanos(at));
                ref[top] = at;
            } else {
                h.set(top, Instant::never());
                ref.erase(top);
            }
        } else {
            const int64_t at = int64_t(rng() % 100000);
            h.set(slot, Instant::from_nanos(at));
            ref[slot] = at;
        }
        REQUIRE(h.size() == ref.size());
        REQUIRE(h.top_at() == ref_top(ref));
        if (op % 997 == 0)
            for (auto [s, at] : ref) REQUIRE(h.at(s) == Instant::from_nanos(at));
    }
}
