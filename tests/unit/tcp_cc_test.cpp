// Unit tests for stack/tcp/cc: NewReno (RFC 5681 + RFC 3465), CUBIC (RFC 9438),
// DCTCP (RFC 8257), initial window (RFC 6928). Expected values are computed by
// hand (or with a calculator) from the RFC formulas, not by the code under test.
#include <catch2/catch.hpp>

#include "stack/tcp/cc.hpp"

using namespace crescent;
using namespace crescent::tcp;

namespace {

constexpr Instant t0 = Instant::from_nanos(1'000'000'000);
// More than any window in the DCTCP tests: each such ACK closes exactly one
// observation window (the counters restart at zero after each update).
constexpr uint32_t kWindowPlus = 1u << 20;

AckSample ack(uint32_t bytes, Instant now, bool ece = false) {
    AckSample s;
    s.acked = bytes;
    s.in_flight = 0;
    s.ece = ece;
    s.now = now;
    return s;
}

} // namespace

TEST_CASE("cc: names round-trip", "[tcp][cc]") {
    for (CcAlgo a : {CcAlgo::NewReno, CcAlgo::Cubic, CcAlgo::Dctcp}) CHECK(cc_from_name(cc_name(a)) == a);
    CHECK_FALSE(cc_from_name("vegas").has_value());
}

TEST_CASE("RFC 6928 §2: initial window min(10*MSS, max(2*MSS, 14600))", "[tcp][cc]") {
    CHECK(CongestionControl::initial_window(1460) == 14600);
    CHECK(CongestionControl::initial_window(536) == 5360);
    CHECK(CongestionControl::initial_window(9000) == 18000);
    CHECK(CongestionControl::initial_window(1000) == 10000);
    CongestionControl cc(CcAlgo::NewReno, 1460, t0);
    CHECK(cc.cwnd() == 14600);
    CHECK(cc.in_slow_start());
    // The MSS is negotiated after construction: the initial window follows it.
    cc.set_mss(8960);
    CHECK(cc.cwnd() == 17920);
}

TEST_CASE("RFC 3465 §2.2: slow start grows by min(acked, 2*SMSS) per ACK", "[tcp][cc][newreno]") {
    CongestionControl cc(CcAlgo::NewReno, 1000, t0);
    REQUIRE(cc.cwnd() == 10000);
    cc.on_ack(ack(500, t0));
    CHECK(cc.cwnd() == 10500);
    cc.on_ack(ack(1000, t0));
    CHECK(cc.cwnd() == 11500);
    cc.on_ack(ack(10000, t0)); // a stretch ACK: capped at L = 2 segments
    CHECK(cc.cwnd() == 13500);
    // app-limited ACKs do not grow the window
    AckSample s = ack(2000, t0);
    s.app_limited = true;
    cc.on_ack(s);
    CHECK(cc.cwnd() == 13500);
}

TEST_CASE("abc_limit: a stretch ACK grows slow start by up to L segments, by all it acks when L is 0", "[tcp][cc]") {
    for (CcAlgo algo : {CcAlgo::NewReno, CcAlgo::Cubic, CcAlgo::Dctcp}) {
        CongestionControl wide(algo, 1000, t0, 16);
        REQUIRE(wide.cwnd() == 10000);
        wide.on_ack(ack(32000, t0));  // one ACK for a 32-segment train
        CHECK(wide.cwnd() == 26000);
        wide.on_ack(ack(9000, t0));
        CHECK(wide.cwnd() == 35000);
        CongestionControl whole(algo, 1000, t0, 0);
        whole.on_ack(ack(32000, t0));
        CHECK(whole.cwnd() == 42000);
    }
}

TEST_CASE("RFC 5681 §3.1: congestion avoidance adds one SMSS per cwnd of acked bytes", "[tcp][cc][newreno]") {
    CongestionControl cc(CcAlgo::NewReno, 1000, t0);
    for (int i = 0; i < 10; i++) cc.on_ack(ack(1000, t0));
    REQUIRE(cc.cwnd() == 20000);
    cc.on_loss(20000, t0);            // ssthresh = 10000, cwnd = 10000: CA from here
    REQUIRE(cc.ssthresh() == 10000);
    REQUIRE(cc.cwnd() == 10000);
    REQUIRE_FALSE(cc.in_slow_start());
    for (int i = 0; i < 9; i++) cc.on_ack(ack(1000, t0));
    CHECK(cc.cwnd() == 10000);        // 9000 bytes acked < cwnd
    cc.on_ack(ack(1000, t0));
    CHECK(cc.cwnd() == 11000);        // 10000 acked: +1 SMSS
    for (int i = 0; i < 10; i++) cc.on_ack(ack(1000, t0));
    CHECK(cc.cwnd() == 11000);        // 10000 of the next 11000
    cc.on_ack(ack(1000, t0));
    CHECK(cc.cwnd() == 12000);
}

TEST_CASE("RFC 5681 §3.1 eq. 4: ssthresh = max(FlightSize/2, 2*SMSS) on loss", "[tcp][cc][newreno]") {
    CongestionControl cc(CcAlgo::NewReno, 1000, t0);
    for (int i = 0; i < 20; i++) cc.on_ack(ack(2000, t0));
    REQUIRE(cc.cwnd() == 50000);
    cc.on_loss(48000, t0);
    CHECK(cc.ssthresh() == 24000);    // halved flight, not cwnd
    CHECK(cc.cwnd() == 24000);
    cc.on_loss(1000, t0);
    CHECK(cc.ssthresh() == 2000);     // floor of 2 segments
    CHECK(cc.cwnd() == 2000);
    cc.on_recovery_exit(t0);
    CHECK(cc.cwnd() == 2000);
}

TEST_CASE("RFC 5681 eq. 4: a FlightSize past cwnd is taken as cwnd", "[tcp][cc][newreno]") {
    // A SACK recovery sends new data as the pipe drains: behind a lost
    // retransmission the unacknowledged flight grows far past cwnd, and
    // half of it would raise the window that just lost.
    for (CcAlgo algo : {CcAlgo::NewReno, CcAlgo::Dctcp}) {
        CongestionControl cc(algo, 1000, t0);
        REQUIRE(cc.cwnd() == 10000);
        cc.on_loss(600000, t0);
        CHECK(cc.ssthresh() == 5000);
        CHECK(cc.cwnd() == 5000);
        cc.on_rto(600000, t0);
        CHECK(cc.ssthresh() == 2500);
        CHECK(cc.cwnd() == 1000);
    }
}

TEST_CASE("RFC 5681 §3.1: RTO sets cwnd to the loss window; ssthresh held on repeated RTO", "[tcp][cc][newreno]") {
    CongestionControl cc(CcAlgo::NewReno, 1000, t0);
    for (int i = 0; i < 20; i++) cc.on_ack(ack(1000, t0));
    REQUIRE(cc.cwnd() == 30000);
    cc.on_rto(30000, t0);
    CHECK(cc.cwnd() == 1000);
    CHECK(cc.ssthresh() == 15000);
    cc.on_rto(1000, t0);              // the same segment timed out again
    CHECK(cc.cwnd() == 1000);
    CHECK(cc.ssthresh() == 15000);
    cc.on_ack(ack(1000, t0));         // progress: slow start again
    CHECK(cc.cwnd() == 2000);
    cc.on_rto(3000, t0);
    CHECK(cc.ssthresh() == 2000);     // half the flight within cwnd (2000), floored at 2 SMSS
}

TEST_CASE("RFC 3168 §6.1.2: NewReno reacts to ECE as to a loss", "[tcp][cc][newreno]") {
    CongestionControl cc(CcAlgo::NewReno, 1000, t0);
    CHECK_FALSE(cc.wants_ecn());
    cc.on_ecn(8000, t0);
    CHECK(cc.ssthresh() == 4000);
    CHECK(cc.cwnd() == 4000);
}

TEST_CASE("RFC 9438 §4.2/§4.6: CUBIC K and W_cubic(t) after a loss at 100 segments", "[tcp][cc][cubic]") {
    CongestionControl cc(CcAlgo::Cubic, 1000, t0);
    for (int i = 0; i < 45; i++) cc.on_ack(ack(2000, t0));
    REQUIRE(cc.cwnd() == 100000);
    cc.on_loss(100000, t0);
    CHECK(cc.cubic_wmax() == 100000);
    CHECK(cc.ssthresh() == 70000);    // beta_cubic = 0.7
    CHECK(cc.cwnd() == 70000);
    // First ACK in congestion avoidance starts the epoch:
    // K = cbrt((W_max - cwnd_epoch) / C) = cbrt(30 / 0.4) = cbrt(75) = 4.217163 s.
    cc.on_ack(ack(1000, t0));
    CHECK(cc.cubic_k_seconds() == Approx(4.217163).epsilon(1e-6));
    // W_cubic(t) = 0.4 * (t - K)^3 + 100 segments (of 1000 bytes).
    CHECK(cc.cubic_w_at(0s) == Approx(70000.0).margin(0.01));
    CHECK(cc.cubic_w_at(1s) == Approx(86680.764).margin(0.01));
    CHECK(cc.cubic_w_at(2s) == Approx(95640.336).margin(0.01));
    CHECK(cc.cubic_w_at(6s) == Approx(102266.703).margin(0.01));
    CHECK(cc.cubic_w_at(Duration(4'217'163'327)) == Approx(100000.0).margin(0.01));
}

TEST_CASE("RFC 9438 §4.4: concave region grows cwnd by (target - cwnd)/cwnd per segment", "[tcp][cc][cubic]") {
    CongestionControl cc(CcAlgo::Cubic, 1000, t0);
    for (int i = 0; i < 45; i++) cc.on_ack(ack(2000, t0));
    cc.on_loss(100000, t0);
    cc.on_ack(ack(0, t0));            // zero-byte ACK: ignored, no epoch
    AckSample s = ack(1000, t0);
    s.rtt = Duration(0);
    cc.on_ack(s);                     // epoch starts at t0 (W_est ~ 70007 < cwnd + 1 byte)
    uint32_t w1 = cc.cwnd();
    CHECK(w1 >= 70000);
    CHECK(w1 <= 70010);
    // Two seconds later: target = W_cubic(2 s) = 95640.34 (RTT 0);
    // cwnd += (95640.34 - cwnd) * 1000 / cwnd  ~= 366.3 bytes.
    cc.on_ack(ack(1000, t0 + 2s));
    double expect = w1 + (95640.336 - w1) * 1000.0 / w1;
    CHECK(double(cc.cwnd()) == Approx(expect).margin(1.0));
    // Target is clamped to 1.5 * cwnd far beyond K (t = 60 s).
    uint32_t w2 = cc.cwnd();
    cc.on_ack(ack(1000, t0 + 60s));
    CHECK(double(cc.cwnd()) == Approx(w2 + 0.5 * w2 * 1000.0 / w2).margin(1.0));
}

TEST_CASE("RFC 9438 §4.3: Reno-friendly region follows W_est with alpha = 3(1-b)/(1+b)", "[tcp][cc][cubic]") {
    CongestionControl cc(CcAlgo::Cubic, 1000, t0);
    for (int i = 0; i < 45; i++) cc.on_ack(ack(2000, t0));
    cc.on_loss(100000, t0);
    // 70 ACKs of one segment within 1 ms: W_cubic barely moves (~+21 bytes),
    // W_est grows by alpha_cubic = 0.9/1.7 = 0.5294 segments per cwnd acked.
    for (int i = 0; i < 70; i++) cc.on_ack(ack(1000, t0 + Duration(i * 10'000)));
    CHECK(double(cc.cwnd()) == Approx(70000 + 529.4).margin(6.0));
}

TEST_CASE("RFC 9438 §4.7: fast convergence lowers W_max when losses come below it", "[tcp][cc][cubic]") {
    CongestionControl cc(CcAlgo::Cubic, 1000, t0);
    for (int i = 0; i < 45; i++) cc.on_ack(ack(2000, t0));
    cc.on_loss(100000, t0);           // W_max 100000, cwnd 70000
    for (int i = 0; i < 5; i++) cc.on_ack(ack(2000, t0 + 1s));
    uint32_t w = cc.cwnd();
    REQUIRE(w < 100000);
    cc.on_loss(w, t0 + 1s);
    CHECK(double(cc.cubic_wmax()) == Approx(w * 0.85).margin(1.0)); // W_max = cwnd * (1 + b) / 2
    CHECK(cc.ssthresh() == uint32_t(w * 0.7));
    // Losses at a tiny window never take cwnd below 2 segments.
    for (int i = 0; i < 10; i++) cc.on_loss(1000, t0 + 2s);
    CHECK(cc.cwnd() == 2000);
    CHECK(cc.ssthresh() == 2000);
    cc.on_rto(2000, t0 + 3s);
    CHECK(cc.cwnd() == 1000);
}

TEST_CASE("RFC 8257 §3.3: DCTCP alpha decays as (1-g)^n with no marks", "[tcp][cc][dctcp]") {
    CongestionControl cc(CcAlgo::Dctcp, 1000, t0);
    CHECK(cc.wants_ecn());
    CHECK(cc.dctcp_alpha_x1024() == 1024);          // starts at 1
    for (int n = 1; n <= 10; n++) {
        AckSample s = ack(kWindowPlus, t0);          // one observation window per ACK
        s.app_limited = true;
        cc.on_ack(s);
        if (n == 1) CHECK(cc.dctcp_alpha_x1024() == 960);   // 1024 * 15/16
        if (n == 2) CHECK(cc.dctcp_alpha_x1024() == 900);   // 1024 * (15/16)^2
    }
    CHECK(cc.dctcp_alpha_x1024() == 537);           // 1024 * (15/16)^10 = 537.05
    // Many clean windows: alpha tends to 0.
    for (int n = 0; n < 200; n++) {
        AckSample s = ack(kWindowPlus, t0);
        s.app_limited = true;
        cc.on_ack(s);
    }
    CHECK(cc.dctcp_alpha_x1024() == 0);
}

TEST_CASE("RFC 8257 §3.3: DCTCP alpha converges to 1 under 100% marking", "[tcp][cc][dctcp]") {
    CongestionControl cc(CcAlgo::Dctcp, 1000, t0);
    for (int n = 0; n < 300; n++) {  // alpha -> 0 first
        AckSample s = ack(kWindowPlus, t0);
        s.app_limited = true;
        cc.on_ack(s);
    }
    REQUIRE(cc.dctcp_alpha_x1024() == 0);
    for (int n = 1; n <= 10; n++) {
        AckSample s = ack(kWindowPlus, t0, true);
        s.app_limited = true;
        cc.on_ack(s);
    }
    CHECK(cc.dctcp_alpha_x1024() == 487);           // 1024 * (1 - (15/16)^10) = 486.95
    for (int n = 0; n < 300; n++) {
        AckSample s = ack(kWindowPlus, t0, true);
        s.app_limited = true;
        cc.on_ack(s);
    }
    CHECK(cc.dctcp_alpha_x1024() == 1024);
}

TEST_CASE("RFC 8257 §3.3: DCTCP cuts cwnd by alpha/2 at most once per window", "[tcp][cc][dctcp]") {
    CongestionControl cc(CcAlgo::Dctcp, 1000, t0);
    for (int i = 0; i < 45; i++) cc.on_ack(ack(2000, t0));    // unmarked slow start
    // alpha after these windows: observation windows closed at 10000, then at
    // cwnd... it has decayed below 1; read it, then check the cut uses it.
    uint32_t alpha = cc.dctcp_alpha_x1024();
    REQUIRE(alpha < 1024);
    uint32_t w = cc.cwnd();
    cc.on_ack(ack(1000, t0, true));  // first ECE of the window: cut, no growth
    double expect = w * (1.0 - alpha / 2048.0);
    CHECK(double(cc.cwnd()) == Approx(expect).margin(w / 1024.0 + 1));
    CHECK(cc.ssthresh() == cc.cwnd());
    uint32_t after = cc.cwnd();
    cc.on_ack(ack(1000, t0, true));  // same window: no second cut
    cc.on_ecn(after, t0);            // nor through on_ecn
    CHECK(cc.cwnd() >= after);
    // Loss: behaves like NewReno.
    cc.on_loss(40000, t0);
    CHECK(cc.ssthresh() == 20000);
    CHECK(cc.cwnd() == 20000);
}

TEST_CASE("RFC 8257 §3.3: with alpha = 1 a DCTCP cut halves cwnd", "[tcp][cc][dctcp]") {
    CongestionControl cc(CcAlgo::Dctcp, 1000, t0);
    REQUIRE(cc.dctcp_alpha_x1024() == 1024);
    cc.on_ecn(10000, t0);
    CHECK(cc.cwnd() == 5000);
    CHECK(cc.ssthresh() == 5000);
}
