// crescent — the engine's hashed timing wheel, on a virtual clock.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "stack/engine/timer_wheel.hpp"

using crescent::Duration;
using crescent::Instant;
using crescent::engine::TimerWheel;
using namespace std::chrono_literals;

TEST_CASE("timer wheel: fires at the deadline, not before", "[engine][wheel]") {
    Instant t0 = Instant::from_nanos(1'000'000);
    TimerWheel w(t0, 10us, 64);
    int fired = 0;
    w.add(t0 + 105us, [&] { ++fired; });
    CHECK(w.advance(t0 + 104us) == 0);
    CHECK(fired == 0);
    CHECK(w.next_deadline() == t0 + 105us);
    CHECK(w.advance(t0 + 105us) == 1);
    CHECK(fired == 1);
    CHECK(w.pending() == 0);
    CHECK(w.next_deadline().is_never());
}

TEST_CASE("timer wheel: beyond one revolution waits for its round", "[engine][wheel]") {
    Instant t0 = Instant::zero();
    TimerWheel w(t0, 1us, 16);  // one revolution = 16 us
    std::vector<int> order;
    w.add(t0 + 50us, [&] { order.push_back(50); });
    w.add(t0 + 2us, [&] { order.push_back(2); });
    for (int us = 0; us <= 49; ++us) w.advance(t0 + Duration(std::chrono::microseconds(us)));
    CHECK(order == std::vector<int>{2});
    w.advance(t0 + 50us);
    CHECK(order == std::vector<int>{2, 50});
}

TEST_CASE("timer wheel: a long jump runs everything due, in deadline order", "[engine][wheel]") {
    Instant t0 = Instant::zero();
    TimerWheel w(t0, 1us, 8);
    std::vector<int> order;
    std::mt19937 rng(7);
    std::vector<int> ds;
    for (int i = 0; i < 200; ++i) ds.push_back(int(rng() % 1000) + 1);
    for (int d : ds) w.add(t0 + Duration(std::chrono::microseconds(d)), [&order, d] { order.push_back(d); });
    w.add(t0 + 5000us, [&] { order.push_back(-1); });
    CHECK(w.advance(t0 + 1000us) == 200);
    CHECK(std::is_sorted(order.begin(), order.end()));
    CHECK(w.pending() == 1);
    CHECK(w.advance(t0 + 6000us) == 1);
    CHECK(order.back() == -1);
}

TEST_CASE("timer wheel: cancel, stale ids, re-arming from a callback", "[engine][wheel]") {
    Instant t0 = Instant::zero();
    TimerWheel w(t0, 1us, 32);
    int a = 0, b = 0;
    auto id = w.add(t0 + 10us, [&] { ++a; });
    CHECK(w.cancel(id));
    CHECK_FALSE(w.cancel(id));
    CHECK_FALSE(w.cancel(TimerWheel::kNoTimer));
    // The slot is reused: the old id must not cancel the new timer.
    auto id2 = w.add(t0 + 10us, [&] { ++b; });
    CHECK(id2 != id);
    CHECK_FALSE(w.cancel(id));
    std::function<void()> rearm = [&] {
        ++b;
        if (b < 3) w.add(t0 + 20us, rearm);
    };
    w.add(t0 + 15us, rearm);
    w.advance(t0 + 30us);
    CHECK(a == 0);
    CHECK(b == 2);  // id2 and the first rearm; the second was added for <= now
    w.advance(t0 + 31us);
    CHECK(b == 3);
    CHECK(w.pending() == 0);
}

TEST_CASE("timer wheel: a deadline in the past runs at the next advance", "[engine][wheel]") {
    Instant t0 = Instant::from_nanos(5'000'000);
    TimerWheel w(t0, 1us, 16);
    w.advance(t0 + 100us);
    int n = 0;
    w.add(t0 + 1us, [&] { ++n; });
    w.advance(t0 + 100us);
    CHECK(n == 1);
}

TEST_CASE("timer wheel: polls before the earliest deadline skip the slots; the catch-up fires in order",
          "[engine][wheel]") {
    Instant t0 = Instant::zero();
    TimerWheel w(t0, 1us, 16);  // one revolution = 16 us
    std::vector<int> order;
    auto a = w.add(t0 + 5us, [&] { order.push_back(5); });
    w.add(t0 + 40us, [&] { order.push_back(40); });
    w.add(t0 + 7us, [&] { order.push_back(7); });
    for (int ns = 0; ns < 5000; ns += 100) CHECK(w.advance(t0 + Duration(ns)) == 0);
    // Cancelling the earliest timer: the next one (7 us) is what polls wait for.
    CHECK(w.cancel(a));
    CHECK(w.advance(t0 + 6us) == 0);
    CHECK(w.next_deadline() == t0 + 7us);
    // A long gap (more than a revolution) and several due at once: all run, by deadline.
    w.add(t0 + 30us, [&] { order.push_back(30); });
    CHECK(w.advance(t0 + 45us) == 3);
    CHECK(order == std::vector<int>{7, 30, 40});
    CHECK(w.pending() == 0);
}

TEST_CASE("timer wheel: a deadline later in the tick just walked runs on time, not a tick late", "[engine][wheel]") {
    Instant t0 = Instant::zero();
    TimerWheel w(t0, 16us, 64);
    std::vector<int> order;
    w.add(t0 + 5us, [&] { order.push_back(5); });
    w.add(t0 + 10us, [&] { order.push_back(10); });
    CHECK(w.advance(t0 + 6us) == 1);
    CHECK(w.advance(t0 + 9us) == 0);
    CHECK(w.advance(t0 + 10us) == 1);
    CHECK(order == std::vector<int>{5, 10});
}

TEST_CASE("timer wheel: cancelling the earliest of many timers costs the polls no scan", "[engine][wheel]") {
    // Per-connection timers (an idle timeout re-armed on every request): the
    // earliest is cancelled again and again while the loop polls. advance()
    // must not rescan every pending timer to find the next one.
    Instant t0 = Instant::zero();
    TimerWheel w(t0, 16us, 4096);
    constexpr int kTimers = 10'000;
    std::vector<TimerWheel::Id> ids;
    int fired = 0;
    for (int i = 0; i < kTimers; ++i)
        ids.push_back(w.add(t0 + 1ms + Duration(std::chrono::microseconds(i)), [&] { ++fired; }));
    Instant now = t0;
    for (int i = 0; i < kTimers / 2; ++i) {
        CHECK(w.cancel(ids[size_t(i)]));  // always the earliest pending
        now = now + 100ns;
        CHECK(w.advance(now) == 0);
    }
    CHECK(w.scans() == 0);
    CHECK(fired == 0);
    // The survivors run at their deadlines, none early and none lost.
    const Instant first_left = t0 + 1ms + Duration(std::chrono::microseconds(kTimers / 2));
    CHECK(w.advance(first_left - 1ns) == 0);
    CHECK(w.advance(first_left) == 1);
    CHECK(w.next_deadline() == first_left + 1us);
    CHECK(w.advance(t0 + 1ms + Duration(std::chrono::microseconds(kTimers))) == size_t(kTimers / 2 - 1));
    CHECK(fired == kTimers / 2);
    CHECK(w.pending() == 0);
}
