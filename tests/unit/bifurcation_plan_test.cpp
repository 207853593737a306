// Unit tests of the bifurcation port plan (bifurcation/plan.hpp): sub-ranges per
// application and engine, minimal prefix decomposition, low-bit spreading of
// server connections for 1..N engines, validation messages, backend choice.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include <arpa/inet.h>

#include "bifurcation/ntuple.hpp"
#include "bifurcation/plan.hpp"

using namespace crescent::bifurcation;

namespace {

// Independent minimal cover of [lo, hi] by prefix blocks: recurse on the binary
// trie of 16-bit ports; a node fully inside costs 1, disjoint costs 0.
unsigned trie_cover(uint32_t node_lo, unsigned bits, uint32_t lo, uint32_t hi) {
    const uint32_t node_hi = node_lo + (uint32_t(1) << bits) - 1;
    if (node_hi < lo || node_lo > hi) return 0;
    if (lo <= node_lo && node_hi <= hi) return 1;
    return trie_cover(node_lo, bits - 1, lo, hi) +
           trie_cover(node_lo + (uint32_t(1) << (bits - 1)), bits - 1, lo, hi);
}

// Ports of [0, 65536) matched by the matches, each counted once; fails on overlap.
void check_exact_cover(PortSpan s, const std::vector<PortMatch>& ms) {
    std::vector<uint8_t> hits(65536, 0);
    for (PortMatch m : ms) {
        REQUIRE((m.value & ~m.mask & 0xffff) == 0);
        for (uint32_t p = 0; p < 65536; ++p)
            if (m.matches(uint16_t(p))) ++hits[p];
    }
    for (uint32_t p = 0; p < 65536; ++p) {
        const bool inside = s.contains(uint16_t(p));
        if (hits[p] != (inside ? 1 : 0)) {
            INFO("port " << p << " hit " << int(hits[p]) << " times, inside=" << inside);
            REQUIRE(false);
        }
    }
}

PlanConfig cfg(uint16_t engines) {
    PlanConfig c;
    c.ifname = "veth0";
    c.app_name = "test";
    c.engines = engines;
    return c;
}

} // namespace

TEST_CASE("span_to_matches: aligned blocks give one rule") {
    auto ms = span_to_matches({61440, 65535});
    REQUIRE(ms.size() == 1);
    CHECK(ms[0] == PortMatch{61440, 0xf000});
    ms = span_to_matches({61440, 62463});
    REQUIRE(ms.size() == 1);
    CHECK(ms[0] == PortMatch{61440, 0xfc00});
    ms = span_to_matches({80, 80});
    REQUIRE(ms.size() == 1);
    CHECK(ms[0].is_exact());
    CHECK(span_to_matches({0, 65535}) == std::vector<PortMatch>{PortMatch::any()});
    CHECK(span_to_matches({5, 4}).empty());
}

TEST_CASE("span_to_matches: exact, disjoint and minimal cover for unaligned spans") {
    const PortSpan spans[] = {{61440, 62805}, {62806, 64170}, {64171, 65535}, {1, 65535},
                              {1000, 1000},   {1023, 1025},   {7, 65534},     {65535, 65535},
                              {32767, 32768}, {0, 1}};
    for (PortSpan s : spans) {
        INFO("span " << s.lo << "-" << s.hi);
        const auto ms = span_to_matches(s);
        check_exact_cover(s, ms);
        CHECK(ms.size() == trie_cover(0, 16, s.lo, s.hi));
    }
}

TEST_CASE("spread_by_low_bits: every source port maps to exactly one engine") {
    for (unsigned n = 1; n <= 9; ++n) {
        INFO(n << " engines");
        const auto rules = spread_by_low_bits(n);
        // Minimal: one rule per engine (an engine without a rule gets nothing).
        REQUIRE(rules.size() == n);
        std::vector<uint32_t> share(n, 0);
        for (uint32_t p = 0; p < 65536; ++p) {
            unsigned matched = 0;
            for (unsigned e = 0; e < n; ++e)
                if (rules[e].matches(uint16_t(p))) {
                    ++matched;
                    ++share[e];
                }
            if (matched != 1) {
                INFO("source port " << p << " matched " << matched << " rules");
                REQUIRE(false);
            }
        }
        // Only the low bits are looked at: ports p and p + 2^k go to the same engine.
        for (PortMatch m : rules) CHECK(m.mask < 16);
        const auto [mn, mx] = std::minmax_element(share.begin(), share.end());
        CHECK(*mn > 0);
        CHECK(*mx <= 2 * *mn); // the best N prefix rules can do
        if ((n & (n - 1)) == 0) CHECK(*mx == *mn); // powers of two: equal
    }
}

TEST_CASE("spread_by_low_bits: Luna's example, 4 threads by the lowest 2 bits") {
    const auto rules = spread_by_low_bits(4);
    for (unsigned e = 0; e < 4; ++e) CHECK(rules[e] == PortMatch{uint16_t(e), 3});
    const auto three = spread_by_low_bits(3);
    CHECK(three[0] == PortMatch{0, 1}); // even ports: half
    CHECK(three[1] == PortMatch{1, 3});
    CHECK(three[2] == PortMatch{3, 3});
}

TEST_CASE("Plan: default range split over engines, contiguous and covering") {
    for (uint16_t n = 1; n <= 6; ++n) {
        INFO(n << " engines");
        std::string err;
        auto plan = Plan::compute(cfg(n), &err);
        REQUIRE(plan);
        CHECK(plan->app_range() == kDefaultClientRange);
        uint32_t next = plan->app_range().lo, total = 0;
        for (unsigned e = 0; e < n; ++e) {
            const PortSpan s = plan->engine_ports(e);
            CHECK(s.lo == next);
            next = uint32_t(s.hi) + 1;
            total += s.size();
            CHECK(s.size() >= 4096u / n);
            CHECK(s.size() <= 4096u / n + 1);
            CHECK(plan->queue_of(e) == e);
        }
        CHECK(total == 4096);
        // Every client port is steered to the engine that owns it, nothing else.
        for (uint32_t p = 1; p < 65536; ++p) {
            const auto eng = plan->engine_for(uint16_t(p), 12345);
            if (!plan->app_range().contains(uint16_t(p))) {
                REQUIRE(!eng);
                continue;
            }
            REQUIRE(eng);
            REQUIRE(plan->engine_ports(*eng).contains(uint16_t(p)));
        }
    }
}

TEST_CASE("Plan: Luna's example, two apps with two threads each") {
    PlanConfig c = cfg(2);
    c.client_range = {61440, 65535};
    c.app_slots = 2;
    c.app_slot = 0;
    std::string err;
    auto a = Plan::compute(c, &err);
    REQUIRE(a);
    CHECK(a->app_range() == PortSpan{61440, 63487});
    CHECK(a->engine_ports(0) == PortSpan{61440, 62463});
    CHECK(a->engine_ports(1) == PortSpan{62464, 63487});
    CHECK(a->client_rule_count() == 2);
    c.app_slot = 1;
    c.first_queue = 2;
    auto b = Plan::compute(c, &err);
    REQUIRE(b);
    CHECK(b->app_range() == PortSpan{63488, 65535});
    CHECK(b->queue_of(0) == 2);
    CHECK(b->rules()[0].queue == 2);
}

TEST_CASE("Plan: server rules spread by source port low bits") {
    for (uint16_t n = 1; n <= 6; ++n) {
        INFO(n << " engines");
        PlanConfig c = cfg(n);
        c.listen_ports = {1234, 80};
        std::string err;
        auto plan = Plan::compute(c, &err);
        REQUIRE(plan);
        CHECK(plan->rules().size() - plan->client_rule_count() == 2u * n);
        std::map<unsigned, unsigned> per_engine;
        for (uint32_t src = 0; src < 65536; ++src) {
            const auto eng = plan->engine_for(1234, uint16_t(src));
            REQUIRE(eng);
            CHECK(plan->engine_for(80, uint16_t(src)) == eng);
            ++per_engine[*eng];
        }
        CHECK(per_engine.size() == n);
        CHECK(!plan->engine_for(1235, 5)); // other ports stay with the kernel
        CHECK(!plan->engine_for(22, 61440));
    }
    auto plan = Plan::compute([] { auto c = cfg(4); c.listen_ports = {1234}; return c; }(), nullptr);
    REQUIRE(plan);
    for (uint16_t src : {40000, 40001, 40002, 40003, 40004})
        CHECK(plan->engine_for(1234, src) == unsigned(src & 3));
}

TEST_CASE("Plan: steered ranges merge the app range and listen ports") {
    PlanConfig c = cfg(2);
    c.listen_ports = {9000, 61439, 80};
    auto plan = Plan::compute(c, nullptr);
    REQUIRE(plan);
    const auto r = plan->steered_ranges();
    REQUIRE(r.size() == 3);
    CHECK(r[0] == PortSpan{80, 80});
    CHECK(r[1] == PortSpan{9000, 9000});
    CHECK(r[2] == PortSpan{61439, 65535});
}

TEST_CASE("Plan: validation errors are clear") {
    std::string err;
    PlanConfig c = cfg(2);
    c.client_range = {0, 100};
    CHECK(!Plan::compute(c, &err));
    CHECK_THAT(err, Catch::Contains("client range 0-100 is invalid"));

    c = cfg(2);
    c.client_range = {65000, 64000};
    CHECK(!Plan::compute(c, &err));
    CHECK_THAT(err, Catch::Contains("invalid"));

    c = cfg(3);
    c.client_range = {61440, 61447};
    CHECK(!Plan::compute(c, &err));
    CHECK_THAT(err, Catch::Contains("too small for 3 engines"));
    CHECK_THAT(err, Catch::Contains("61440-61447"));

    c = cfg(2);
    c.listen_ports = {62000};
    CHECK(!Plan::compute(c, &err));
    CHECK_THAT(err, Catch::Contains("listen port 62000 lies inside the client range"));

    c = cfg(2);
    c.listen_ports = {0};
    CHECK(!Plan::compute(c, &err));
    CHECK_THAT(err, Catch::Contains("listen port 0"));

    c = cfg(2);
    c.listen_ports = {80, 80};
    CHECK(!Plan::compute(c, &err));
    CHECK_THAT(err, Catch::Contains("given twice"));

    c = cfg(2);
    c.app_slots = 2;
    c.app_slot = 2;
    CHECK(!Plan::compute(c, &err));
    CHECK_THAT(err, Catch::Contains("slot 2 out of range"));

    c = cfg(2);
    c.app_range = PortSpan{60000, 62000};
    CHECK(!Plan::compute(c, &err));
    CHECK_THAT(err, Catch::Contains("not inside the client range"));

    c = cfg(0);
    CHECK(!Plan::compute(c, &err));
    CHECK_THAT(err, Catch::Contains("0 engines"));
}

TEST_CASE("Plan: describe names every engine, port and rule count") {
    PlanConfig c = cfg(3);
    c.listen_ports = {1234};
    auto plan = Plan::compute(c, nullptr);
    REQUIRE(plan);
    const std::string d = plan->describe();
    CHECK_THAT(d, Catch::Contains("veth0"));
    CHECK_THAT(d, Catch::Contains("engine 2 (queue 2)"));
    CHECK_THAT(d, Catch::Contains("server port 1234"));
    CHECK_THAT(d, Catch::Contains(std::to_string(plan->rules().size()) + " rule(s)"));
}

TEST_CASE("choose_backend from the driver, overridable") {
    CHECK(choose_backend("net_af_xdp", 1).backend == Backend::Xdp);
    CHECK(choose_backend("net_af_xdp", 2).backend == Backend::XdpNtuple);
    CHECK(choose_backend("net_tap", 2).backend == Backend::RteFlow);
    CHECK(choose_backend("mlx5_pci", 4).backend == Backend::RteFlow);
    CHECK(choose_backend("net_af_packet", 1).backend == Backend::None);
    CHECK(choose_backend("net_tap", 2, Backend::None).backend == Backend::None);
    CHECK_THAT(choose_backend("net_tap", 2, Backend::Xdp).reason, Catch::Contains("forced"));
    CHECK(parse_backend("xdp+ntuple") == Backend::XdpNtuple);
    CHECK(parse_backend("ntuple") == Backend::XdpNtuple);
    CHECK(parse_backend("rte_flow") == Backend::RteFlow);
    CHECK(!parse_backend("bogus"));
}

TEST_CASE("ntuple_spec: network byte order, kernel mask sense, queue") {
    PlanConfig c = cfg(2);
    c.listen_ports = {1234};
    auto plan = Plan::compute(c, nullptr);
    REQUIRE(plan);
    for (const SteerRule& r : plan->rules()) {
        const ethtool_rx_flow_spec fs = ntuple_spec(r);
        CHECK(fs.flow_type == TCP_V4_FLOW);
        CHECK(fs.ring_cookie == r.queue);
        CHECK(ntohs(fs.h_u.tcp_ip4_spec.pdst) == r.dst.value);
        CHECK(ntohs(fs.m_u.tcp_ip4_spec.pdst) == r.dst.mask);
        CHECK(ntohs(fs.h_u.tcp_ip4_spec.psrc) == r.src.value);
        CHECK(ntohs(fs.m_u.tcp_ip4_spec.psrc) == r.src.mask);
        CHECK(fs.h_u.tcp_ip4_spec.ip4dst == 0);
        CHECK(fs.m_u.tcp_ip4_spec.ip4dst == 0); // addresses: not compared
    }
    const ethtool_rx_flow_spec client = ntuple_spec(plan->rules()[0]);
    // 61440/0xf800 on the wire: 0xf0 0x00 / 0xf8 0x00.
    const auto* v = reinterpret_cast<const uint8_t*>(&client.h_u.tcp_ip4_spec.pdst);
    const auto* m = reinterpret_cast<const uint8_t*>(&client.m_u.tcp_ip4_spec.pdst);
    CHECK(v[0] == 0xf0);
    CHECK(v[1] == 0x00);
    CHECK(m[0] == 0xf8);
    CHECK(m[1] == 0x00);
}
