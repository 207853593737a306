// crescent — RPC policies on a virtual clock: token arithmetic (exact refill,
// burst cap, fractional rates, huge idle gaps, no drift), the rate limiter
// (per-client isolation, prefix precedence, shared method buckets, table
// bound), the ACL (prefix boundaries, method sets, run-time removal) and
// Prefix::parse's messages.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include <crescent/rpc/policy.hpp>

using crescent::Instant;
using crescent::Ipv4;
using crescent::rpc::Acl;
using crescent::rpc::Policies;
using crescent::rpc::Prefix;
using crescent::rpc::RateLimiter;
using crescent::rpc::TokenBucket;
using namespace std::chrono_literals;
using Verdict = RateLimiter::Verdict;

namespace {

Prefix P(const char* s) {
    Prefix p;
    std::string err;
    INFO(s);
    REQUIRE(Prefix::parse(s, &p, &err));
    return p;
}

Ipv4 A(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    return Ipv4{uint32_t(a) << 24 | uint32_t(b) << 16 | uint32_t(c) << 8 | d};
}

std::string parse_error(const char* s) {
    Prefix p;
    p.len = 7;
    std::string err;
    INFO(s);
    REQUIRE_FALSE(Prefix::parse(s, &p, &err));
    CHECK(p.len == 7);   // untouched on failure
    return err;
}

// Calls a client may make at `now` before being refused.
int drain(RateLimiter& rl, Ipv4 c, uint32_t method, Instant now, int limit = 10000) {
    int n = 0;
    while (n < limit && rl.check(c, method, now) == Verdict::Allow) ++n;
    return n;
}

const Instant t0 = Instant::from_nanos(1'000'000'000'000);

} // namespace

// --- Prefix ---------------------------------------------------------------------

TEST_CASE("prefix: parse, to_string, contains at the boundaries", "[rpc][policy]") {
    CHECK(P("10.0.0.0/24") == Prefix{A(10, 0, 0, 0), 24});
    CHECK(P("10.0.0.7") == Prefix{A(10, 0, 0, 7), 32});
    CHECK(P("0.0.0.0/0") == Prefix{A(0, 0, 0, 0), 0});
    CHECK(P("255.255.255.255/32").addr.v == 0xffffffffu);
    CHECK(P("10.0.0.0/24").to_string() == "10.0.0.0/24");
    CHECK(P("10.0.0.7").to_string() == "10.0.0.7/32");
    CHECK(P("192.168.128.0/17").to_string() == "192.168.128.0/17");

    const Prefix all = P("0.0.0.0/0");
    CHECK(all.contains(A(0, 0, 0, 0)));
    CHECK(all.contains(A(255, 255, 255, 255)));
    const Prefix p8 = P("10.0.0.0/8");
    CHECK(p8.contains(A(10, 0, 0, 0)));
    CHECK(p8.contains(A(10, 255, 255, 255)));
    CHECK_FALSE(p8.contains(A(9, 255, 255, 255)));
    CHECK_FALSE(p8.contains(A(11, 0, 0, 0)));
    const Prefix p24 = P("10.1.2.0/24");
    CHECK(p24.contains(A(10, 1, 2, 0)));
    CHECK(p24.contains(A(10, 1, 2, 255)));
    CHECK_FALSE(p24.contains(A(10, 1, 1, 255)));
    CHECK_FALSE(p24.contains(A(10, 1, 3, 0)));
    const Prefix p32 = P("10.1.2.3");
    CHECK(p32.contains(A(10, 1, 2, 3)));
    CHECK_FALSE(p32.contains(A(10, 1, 2, 2)));
    CHECK_FALSE(p32.contains(A(10, 1, 2, 4)));
    const Prefix p17 = P("192.168.128.0/17");
    CHECK(p17.contains(A(192, 168, 255, 255)));
    CHECK_FALSE(p17.contains(A(192, 168, 127, 255)));
}

TEST_CASE("prefix: parse errors name the input and the problem", "[rpc][policy]") {
    CHECK(parse_error("10.0.0.1/24") == "prefix '10.0.0.1/24' has host bits set (did you mean 10.0.0.0/24?)");
    CHECK(parse_error("10.0.0.0/33") == "prefix '10.0.0.0/33': bad length '33' (want 0..32)");
    CHECK(parse_error("10.0.0.256/24") == "prefix '10.0.0.256/24': bad IPv4 address '10.0.0.256'");
    CHECK(parse_error("") == "empty prefix (want a.b.c.d or a.b.c.d/len)");
    CHECK(parse_error("10.0.0.0/") == "prefix '10.0.0.0/': bad length '' (want 0..32)");
    CHECK(parse_error("10.0.0.0/-1") == "prefix '10.0.0.0/-1': bad length '-1' (want 0..32)");
    CHECK(parse_error("10.0.0.0/8x") == "prefix '10.0.0.0/8x': bad length '8x' (want 0..32)");
    CHECK(parse_error("10.0.0.0/08") == "prefix '10.0.0.0/08': bad length '08' (want 0..32)");
    CHECK(parse_error("10.0.0.0/100") == "prefix '10.0.0.0/100': bad length '100' (want 0..32)");
    CHECK(parse_error("1.2.3.4/0") == "prefix '1.2.3.4/0' has host bits set (did you mean 0.0.0.0/0?)");
    for (const char* bad : {"10.0.0", "10.0.0.0.0", "a.b.c.d", "010.0.0.0", " 10.0.0.0", "10.0.0.0 ",
                            "10..0.0", "1000.0.0.0", "-1.0.0.0", "10.0.0.", ".10.0.0"}) {
        const std::string e = parse_error(bad);
        INFO(bad << ": " << e);
        CHECK(e.find("bad IPv4 address") != std::string::npos);
        CHECK(e.find(std::string("'") + bad + "'") != std::string::npos);
    }
    Prefix p;
    CHECK_FALSE(Prefix::parse("10.0.0.1/24", &p, nullptr));   // err is optional
}

// --- TokenBucket -------------------------------------------------------------------

TEST_CASE("token bucket: starts full, refills exactly at the rate, capped at burst", "[rpc][policy]") {
    TokenBucket b(10, 5);   // 10 tokens/s: one every 100 ms
    CHECK(b.tokens(t0) == 5.0);
    for (int i = 0; i < 5; ++i) CHECK(b.take(t0));
    CHECK_FALSE(b.take(t0));
    CHECK(b.tokens(t0) == 0.0);
    CHECK(b.tokens(t0 + 50ms) == 0.5);
    CHECK_FALSE(b.take(t0 + 99'999'999ns));
    CHECK(b.take(t0 + 100ms));
    CHECK_FALSE(b.take(t0 + 100ms));
    CHECK(b.tokens(t0 + 100ms + 300ms) == 3.0);
    // Burst cap after any idle time.
    CHECK(b.tokens(t0 + 1h) == 5.0);
    for (int i = 0; i < 5; ++i) CHECK(b.take(t0 + 1h));
    CHECK_FALSE(b.take(t0 + 1h));
    // A refused take takes nothing: 0.7 tokens stay 0.7.
    CHECK_FALSE(b.take(t0 + 1h + 70ms));
    CHECK(b.tokens(t0 + 1h + 70ms) == Approx(0.7).margin(1e-12));
    // Take several at once.
    CHECK_FALSE(b.take(t0 + 1h + 270ms, 3));
    CHECK(b.take(t0 + 1h + 300ms, 3));
    CHECK(b.tokens(t0 + 1h + 300ms) == 0.0);
}

TEST_CASE("token bucket: fractional rates", "[rpc][policy]") {
    TokenBucket b(0.5, 1);   // one token every 2 s
    CHECK(b.take(t0));
    CHECK_FALSE(b.take(t0 + 1s));
    CHECK_FALSE(b.take(t0 + 1'999'999'999ns));
    CHECK(b.take(t0 + 2s));
    CHECK(b.tokens(t0 + 3s) == 0.5);
    CHECK(b.take(t0 + 4s));

    TokenBucket q(0.25, 2);
    CHECK(q.take(t0, 2));
    CHECK(q.tokens(t0 + 2s) == 0.5);
    CHECK_FALSE(q.take(t0 + 3'999'999'999ns));
    CHECK(q.take(t0 + 4s));
    CHECK(q.rate() == 0.25);
    CHECK(q.burst() == 2.0);
}

TEST_CASE("token bucket: no drift over a long run of irregular takes", "[rpc][policy]") {
    // Burst large enough never to cap while taking greedily, so after T the
    // tokens granted must be exactly floor(T * rate), however the steps fall.
    struct Case {
        double rate;
        int64_t step_max_ns;
    };
    for (Case c : {Case{0.5, 50'000'000}, Case{3, 10'000'000}, Case{7.25, 3'000'000},
                   Case{1e6, 10'000}, Case{123.456, 1'000'000}}) {
        INFO("rate " << c.rate);
        TokenBucket b(c.rate, 1000);
        REQUIRE(b.take(t0, 1000));
        std::mt19937_64 rng(uint64_t(c.rate * 1000));
        std::uniform_int_distribution<int64_t> step(1, c.step_max_ns);
        Instant now = t0;
        uint64_t granted = 0;
        for (int i = 0; i < 200'000; ++i) {
            now += crescent::Duration(step(rng));
            while (b.take(now)) ++granted;
        }
        // Exact: rate * 1e9 is an integer number of nano-tokens per second here.
        __extension__ using u128 = unsigned __int128;
        const u128 rate_nano = u128(c.rate * 1e9 + 0.5);
        const u128 expect = u128(uint64_t((now - t0).count())) * rate_nano / u128(1'000'000'000'000'000'000ull);
        CHECK(granted == uint64_t(expect));
        CHECK(granted > 0);
    }
}

TEST_CASE("token bucket: many small takes", "[rpc][policy]") {
    TokenBucket b(1000, 1);   // 1 token per ms
    int n = 0;
    while (n < 5000 && b.take(t0, 0.001)) ++n;
    CHECK(n == 1000);
    n = 0;
    while (n < 5000 && b.take(t0 + 1ms, 0.001)) ++n;
    CHECK(n == 1000);
    n = 0;
    while (n < 5000 && b.take(t0 + 1ms + 250us, 0.001)) ++n;
    CHECK(n == 250);
    CHECK(b.take(t0 + 1ms + 250us, 0));   // zero tokens: always
}

TEST_CASE("token bucket: huge idle gaps, extreme rates, clock going backwards", "[rpc][policy]") {
    // The 128-bit refill path: 1e6 tokens/s, elapsed 1 s (1e24 nano-token*ns/s).
    TokenBucket b(1e6, 2e6);
    CHECK(b.take(t0, 2e6));
    CHECK(b.tokens(t0 + 1s) == 1e6);
    CHECK(b.tokens(t0 + 1500ms) == 1.5e6);
    CHECK(b.tokens(t0 + 24h * 365 * 100) == 2e6);
    CHECK(b.take(t0 + 1s, 1e6));
    CHECK(b.tokens(t0 + 1s) == 0.0);

    // The whole int64 clock range in one gap, at the highest rate.
    TokenBucket m(1e12, 9e9);   // rate clamped to 1e10
    const Instant early = Instant::from_nanos(INT64_MIN + 1);
    const Instant late = Instant::from_nanos(INT64_MAX - 1);
    CHECK(m.take(early, 9e9));
    CHECK(m.tokens(early) == 0.0);
    CHECK(m.tokens(late) == 9e9);
    CHECK(m.take(late, 9e9));
    CHECK_FALSE(m.take(late));

    // A tiny rate over a long gap: 1e-9 tokens/s for 2^62 ns (~146 years).
    TokenBucket t(1e-9, 100);
    CHECK(t.take(Instant::zero(), 100));
    CHECK(t.tokens(Instant::from_nanos(int64_t(1) << 62)) == Approx(4.611686018).margin(1e-9));

    // Backwards: nothing refills, nothing breaks.
    TokenBucket r(10, 1);
    CHECK(r.take(t0));
    CHECK_FALSE(r.take(t0 - 1s));
    CHECK(r.tokens(t0 - 1s) == 0.0);
    CHECK(r.take(t0 + 100ms));

    // Rate 0: never refills. Burst 0: never gives.
    TokenBucket z(0, 2);
    CHECK(z.take(t0, 2));
    CHECK_FALSE(z.take(t0 + 24h));
    TokenBucket e(100, 0);
    CHECK_FALSE(e.take(t0));
    CHECK(e.full(t0));
}

TEST_CASE("token bucket: configure keeps the level, capped at the new burst", "[rpc][policy]") {
    TokenBucket b(1, 10);
    CHECK(b.take(t0, 4));
    b.configure(2, 8);
    CHECK(b.tokens(t0) == 6.0);
    b.configure(2, 3);
    CHECK(b.tokens(t0) == 3.0);
    CHECK(b.tokens(t0 + 1s) == 3.0);
    CHECK(b.take(t0 + 1s, 3));
    CHECK(b.tokens(t0 + 1500ms) == 1.0);   // new rate 2/s
    // Never used: a reconfigured bucket still starts full.
    TokenBucket n(1, 2);
    n.configure(1, 5);
    CHECK(n.tokens(t0) == 5.0);
}

// --- RateLimiter ---------------------------------------------------------------------

TEST_CASE("rate limiter: per-client buckets are isolated", "[rpc][policy]") {
    RateLimiter rl;
    CHECK(rl.empty());
    CHECK(rl.check(A(10, 0, 0, 1), 1, t0) == Verdict::Allow);   // no rule: no limit
    rl.set_client_default(1, 2);
    CHECK_FALSE(rl.empty());
    CHECK(drain(rl, A(10, 0, 0, 1), 1, t0) == 2);
    CHECK(rl.check(A(10, 0, 0, 1), 2, t0) == Verdict::ClientLimited);
    // Another client is not affected by the first one's exhaustion.
    CHECK(drain(rl, A(10, 0, 0, 2), 1, t0) == 2);
    CHECK(drain(rl, A(10, 0, 0, 1), 1, t0 + 1s) == 1);
    CHECK(rl.stats().refused_client == 4);
    CHECK(rl.stats().refused_method == 0);
    CHECK(rl.stats().clients == 2);
    rl.clear_client_default();
    CHECK(rl.empty());
    CHECK(rl.stats().clients == 0);
    CHECK(drain(rl, A(10, 0, 0, 1), 1, t0 + 1s, 100) == 100);
}

TEST_CASE("rate limiter: the most specific prefix override wins", "[rpc][policy]") {
    RateLimiter rl;
    rl.set_client_default(0, 1);
    rl.set_client(P("10.1.0.0/16"), 0, 3);   // set out of order on purpose
    rl.set_client(P("10.1.2.3"), 0, 0);
    rl.set_client(P("10.0.0.0/8"), 0, 5);
    CHECK(drain(rl, A(10, 9, 9, 9), 1, t0) == 5);
    CHECK(drain(rl, A(10, 1, 5, 5), 1, t0) == 3);
    CHECK(drain(rl, A(10, 1, 2, 3), 1, t0) == 0);
    CHECK(drain(rl, A(10, 1, 2, 4), 1, t0) == 3);
    CHECK(drain(rl, A(192, 168, 1, 1), 1, t0) == 1);
    // Replacing an override in place, at run time.
    rl.set_client(P("10.0.0.0/8"), 1, 7);
    CHECK(drain(rl, A(10, 9, 9, 10), 1, t0) == 7);
    // Removing the /16: its clients fall back to the /8 (rate 1/s, burst 7).
    CHECK(rl.remove_client(P("10.1.0.0/16")));
    CHECK_FALSE(rl.remove_client(P("10.1.0.0/16")));
    CHECK(drain(rl, A(10, 1, 5, 5), 1, t0 + 60s) == 7);
    // Without a default, a client outside every override is not limited.
    rl.clear_client_default();
    CHECK(drain(rl, A(192, 168, 1, 1), 1, t0, 100) == 100);
    CHECK(drain(rl, A(10, 1, 2, 3), 1, t0) == 0);
}

TEST_CASE("rate limiter: a method bucket is shared by all clients", "[rpc][policy]") {
    RateLimiter rl;
    rl.set_method(7, 0, 3);
    CHECK_FALSE(rl.empty());
    CHECK(rl.check(A(1, 1, 1, 1), 7, t0) == Verdict::Allow);
    CHECK(rl.check(A(2, 2, 2, 2), 7, t0) == Verdict::Allow);
    CHECK(rl.check(A(3, 3, 3, 3), 7, t0) == Verdict::Allow);
    CHECK(rl.check(A(4, 4, 4, 4), 7, t0) == Verdict::MethodLimited);
    CHECK(rl.check(A(1, 1, 1, 1), 7, t0) == Verdict::MethodLimited);
    CHECK(drain(rl, A(4, 4, 4, 4), 8, t0, 50) == 50);   // other methods unlimited
    CHECK(rl.stats().refused_method == 2);
    // Reconfigured at run time: the level is kept (0), the new rate refills.
    rl.set_method(7, 10, 3);
    CHECK(rl.check(A(1, 1, 1, 1), 7, t0) == Verdict::MethodLimited);
    CHECK(rl.check(A(1, 1, 1, 1), 7, t0 + 100ms) == Verdict::Allow);
    CHECK(rl.remove_method(7));
    CHECK_FALSE(rl.remove_method(7));
    CHECK(rl.empty());
    CHECK(drain(rl, A(1, 1, 1, 1), 7, t0 + 100ms, 50) == 50);
}

TEST_CASE("rate limiter: a call takes from both buckets or from neither", "[rpc][policy]") {
    RateLimiter rl;
    rl.set_client_default(0, 2);
    rl.set_method(7, 0, 1);
    rl.set_method(9, 0, 1);
    const Ipv4 a = A(10, 0, 0, 1), b = A(10, 0, 0, 2);
    CHECK(rl.check(a, 7, t0) == Verdict::Allow);            // a: 1 left, m7: 0
    CHECK(rl.check(a, 7, t0) == Verdict::MethodLimited);    // a keeps its token
    CHECK(rl.check(a, 8, t0) == Verdict::Allow);            // a: 0
    CHECK(rl.check(a, 9, t0) == Verdict::ClientLimited);    // m9 keeps its token
    CHECK(rl.check(b, 9, t0) == Verdict::Allow);
    CHECK(rl.check(b, 9, t0) == Verdict::MethodLimited);
    CHECK(rl.stats().refused_client == 1);
    CHECK(rl.stats().refused_method == 2);
}

TEST_CASE("rate limiter: the client table is bounded; idle full buckets are evicted", "[rpc][policy]") {
    RateLimiter rl(4);
    rl.set_client_default(1, 2);
    for (uint8_t i = 1; i <= 4; ++i) CHECK(rl.check(A(10, 0, 0, i), 1, t0) == Verdict::Allow);
    CHECK(rl.stats().clients == 4);
    // Full table, every bucket in use (not full): a new client is refused.
    CHECK(rl.check(A(10, 0, 0, 5), 1, t0) == Verdict::ClientLimited);
    CHECK(rl.stats().refused_table_full == 1);
    CHECK(rl.stats().refused_client == 1);
    CHECK(rl.stats().evicted == 0);
    // Known clients still work.
    CHECK(rl.check(A(10, 0, 0, 1), 1, t0) == Verdict::Allow);
    // One second later clients 2..4 are full again (client 1 is not: it took 2).
    CHECK(rl.check(A(10, 0, 0, 5), 1, t0 + 1s) == Verdict::Allow);
    CHECK(rl.stats().evicted == 1);
    CHECK(rl.stats().clients == 4);
    CHECK(rl.check(A(10, 0, 0, 6), 1, t0 + 1s) == Verdict::Allow);
    CHECK(rl.check(A(10, 0, 0, 7), 1, t0 + 1s) == Verdict::Allow);
    CHECK(rl.stats().evicted == 3);
    // Now 1 (1 token), 5, 6, 7 (1 token each) are held: nothing is full.
    CHECK(rl.check(A(10, 0, 0, 8), 1, t0 + 1s) == Verdict::ClientLimited);
    CHECK(rl.stats().refused_table_full == 2);
    CHECK(rl.stats().clients == 4);
    // Client 1 kept its own (non-full) bucket through the evictions.
    CHECK(drain(rl, A(10, 0, 0, 1), 1, t0 + 1s) == 1);
    // An evicted client comes back with a full bucket: same as if remembered.
    CHECK(drain(rl, A(10, 0, 0, 2), 1, t0 + 10s) == 2);
    // Many distinct clients never grow the table past its bound.
    RateLimiter big(100);
    big.set_client_default(1000, 1);
    for (uint32_t i = 0; i < 5000; ++i) {
        big.check(Ipv4{0x0a000000u + i}, 1, t0 + std::chrono::microseconds(i));
        REQUIRE(big.stats().clients <= 100);
    }
    CHECK(big.stats().evicted > 0);
    CHECK(big.stats().clients == 100);
}

// --- Acl -------------------------------------------------------------------------------

TEST_CASE("acl: prefixes, method sets, unknown clients, run-time changes", "[rpc][policy]") {
    Acl acl;
    CHECK(acl.size() == 0);
    CHECK_FALSE(acl.client_known(A(10, 0, 0, 1)));
    acl.allow(P("10.0.0.0/8"), {3, 2, 3});
    acl.allow(P("10.1.1.0/24"), {});   // every method
    acl.allow(P("192.168.7.7"), {9});
    CHECK(acl.size() == 3);

    CHECK(acl.client_known(A(10, 0, 0, 0)));
    CHECK(acl.client_known(A(10, 255, 255, 255)));
    CHECK_FALSE(acl.client_known(A(9, 255, 255, 255)));
    CHECK_FALSE(acl.client_known(A(11, 0, 0, 0)));
    CHECK(acl.client_known(A(192, 168, 7, 7)));
    CHECK_FALSE(acl.client_known(A(192, 168, 7, 6)));
    CHECK_FALSE(acl.client_known(A(192, 168, 7, 8)));

    CHECK(acl.call_allowed(A(10, 2, 3, 4), 2));
    CHECK(acl.call_allowed(A(10, 2, 3, 4), 3));
    CHECK_FALSE(acl.call_allowed(A(10, 2, 3, 4), 4));
    CHECK(acl.call_allowed(A(10, 1, 1, 0), 4));     // the /24 allows all
    CHECK(acl.call_allowed(A(10, 1, 1, 255), 4));
    CHECK_FALSE(acl.call_allowed(A(10, 1, 2, 0), 4));
    CHECK(acl.call_allowed(A(10, 1, 2, 0), 2));     // the /8 still applies
    CHECK(acl.call_allowed(A(192, 168, 7, 7), 9));
    CHECK_FALSE(acl.call_allowed(A(192, 168, 7, 7), 2));
    CHECK_FALSE(acl.call_allowed(A(8, 8, 8, 8), 2));

    // /0 covers everyone, for its methods only.
    acl.allow(P("0.0.0.0/0"), {1});
    CHECK(acl.client_known(A(8, 8, 8, 8)));
    CHECK(acl.call_allowed(A(8, 8, 8, 8), 1));
    CHECK_FALSE(acl.call_allowed(A(8, 8, 8, 8), 2));
    CHECK(acl.call_allowed(A(255, 255, 255, 255), 1));

    // Same prefix again replaces its method set.
    acl.allow(P("10.0.0.0/8"), {5});
    CHECK(acl.size() == 4);
    CHECK_FALSE(acl.call_allowed(A(10, 2, 3, 4), 2));
    CHECK(acl.call_allowed(A(10, 2, 3, 4), 5));

    // Removal at run time.
    CHECK(acl.remove(P("10.1.1.0/24")));
    CHECK_FALSE(acl.remove(P("10.1.1.0/24")));
    CHECK_FALSE(acl.call_allowed(A(10, 1, 1, 5), 4));
    CHECK(acl.remove(P("0.0.0.0/0")));
    CHECK_FALSE(acl.client_known(A(8, 8, 8, 8)));
    CHECK(acl.size() == 2);
    acl.clear();
    CHECK(acl.size() == 0);
    CHECK_FALSE(acl.client_known(A(10, 2, 3, 4)));
    CHECK_FALSE(acl.call_allowed(A(192, 168, 7, 7), 9));
}

// --- Policies ----------------------------------------------------------------------------

TEST_CASE("policies: absent admits everything; added and removed at run time", "[rpc][policy]") {
    using D = Policies::Decision;
    Policies pol;
    const Ipv4 good = A(10, 0, 0, 1), bad = A(172, 16, 0, 1);
    CHECK(pol.admit_client(bad));
    CHECK(pol.admit_call(bad, 1, t0) == D::Allow);

    pol.acl = std::make_unique<Acl>();
    pol.acl->allow(P("10.0.0.0/24"), {1, 2});
    CHECK(pol.admit_client(good));
    CHECK_FALSE(pol.admit_client(bad));
    CHECK(pol.admit_call(good, 1, t0) == D::Allow);
    CHECK(pol.admit_call(good, 3, t0) == D::Denied);
    CHECK(pol.admit_call(bad, 1, t0) == D::Denied);

    pol.rate = std::make_unique<RateLimiter>();
    pol.rate->set_client_default(0, 2);
    CHECK(pol.admit_call(good, 3, t0) == D::Denied);   // denied calls take no token
    CHECK(pol.admit_call(good, 1, t0) == D::Allow);
    CHECK(pol.admit_call(good, 2, t0) == D::Allow);
    CHECK(pol.admit_call(good, 1, t0) == D::RateLimited);
    CHECK(pol.rate->stats().refused_client == 1);

    pol.acl.reset();
    CHECK(pol.admit_client(bad));
    CHECK(pol.admit_call(bad, 3, t0) == D::Allow);
    pol.rate.reset();
    CHECK(pol.admit_call(good, 1, t0) == D::Allow);
}
