// Sans-IO tests of how the TCB finds losses at the tail of a flight without
// its retransmission timeout (stack/tcp/tcb_tlp.cpp): the Tail Loss Probe of
// RFC 8985 §7 (when it goes, what it sends, how the ACKs it draws are judged)
// and RFC 5827 Early Retransmit (a lost segment among fewer than four).
#include "tests/unit/tcp_sack_peer.hpp"

using namespace crescent;
using namespace crescent::tcp;
using namespace crescent::tcp::test;

namespace {

constexpr Duration kRtt = 300us;

Config probing(bool sack = true) {
    Config c = SackPeer::config(false);
    c.sack = sack;
    c.tlp = true;
    c.early_retransmit = true;
    c.tlp_min_pto = 200us;
    c.tlp_max_ack_delay = 2ms;
    return c;
}


// Four segments sent; after one RTT the first three are acknowledged and the
// fourth (the tail) never is. The probe is due 2 SRTT + the delayed-ACK
// allowance (one segment left in flight) after that ACK.
void tail_of_four_lost(SackPeer& p) {
    p.send_segments(4);
    p.t.advance(kRtt);
    p.ack(3000);
    p.t.clear();
    REQUIRE(p.t.tcb->stats().srtt == kRtt);
    p.t.advance(2 * kRtt + 2ms - 1us);
    INFO(sent(p.t));
    REQUIRE(p.t.out.segments.empty());
    p.t.advance(1us);
    INFO(sent(p.t));
    REQUIRE(p.t.out.segments.size() == 1);
    CHECK(p.t.out.segments[0].repr.seq == rel(3000));
    CHECK(p.t.out.segments[0].payload_len() == kMss);
    CHECK(p.t.tcb->stats().tlp_probes == 1);
    CHECK(p.t.tcb->stats().retrans_probe == 1);  // the last segment again
    CHECK(p.t.tcb->stats().rto_events == 0);
    p.t.clear();
}

// One segment sent and acknowledged `delay` later than the path's RTT (the
// peer held its ACK, or answered only after its service time).
void lone_exchange(SackPeer& p, Duration delay, char c = 'a') {
    const int64_t at = int64_t(p.t.tcb->stats().bytes_out);
    p.send_segments(1, c);
    p.t.advance(kRtt + delay);
    p.ack(at + kMss);
    p.t.clear();
}

} // namespace

TEST_CASE("RFC 8985 §7.3: a lost tail is probed with the last segment after 2 SRTT (+ delayed-ACK allowance), "
          "not the RTO",
          "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    tail_of_four_lost(p);
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    SECTION("an ACK past TLP.end_seq with no D-SACK before it") {
        // The probe repaired the tail; new data went out before its ACK came.
        p.send_segments(1, 'x');
        p.ack(5000);
    }
    SECTION("the next flight goes out once a D-SACK has had a probe timeout to arrive") {
        // The probe repaired the tail: its ACK is the only one for [3000, 4000).
        // At TLP.end_seq itself the episode waits (a D-SACK may still follow)...
        p.ack(4000);
        CHECK(p.t.tcb->stats().tlp_recoveries == 0);
        // ...and none came: the next message's flight settles it.
        p.t.advance(2 * p.t.tcb->stats().srtt);
        p.send_segments(1, 'x');
    }
    // A loss: the window pays what a fast recovery would (NewReno: half the flight, at least 2 MSS).
    CHECK(p.t.tcb->stats().tlp_recoveries == 1);
    CHECK(p.t.tcb->stats().cwnd == 2 * kMss);
    CHECK(p.t.tcb->stats().cwnd < cwnd);
    CHECK(p.t.tcb->stats().rto_events == 0);
    CHECK(p.t.tcb->stats().fast_recoveries == 0);
}

TEST_CASE("crescent: a flight sent while an episode waits at TLP.end_seq for a D-SACK ends it, and is probed itself",
          "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    tail_of_four_lost(p);
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    p.ack(4000);
    // The next message at once: too soon to tell the probe's ACK from the
    // original's, so the episode ends unjudged...
    p.send_segments(2, 'x');
    CHECK(p.t.tcb->stats().tlp_recoveries == 0);
    CHECK(p.t.tcb->stats().cwnd >= cwnd);
    // ...and when this flight's ACK is lost it has a probe of its own, not the RTO.
    p.t.advance(2 * p.t.tcb->stats().srtt);
    INFO(sent(p.t));
    CHECK(p.sent_seq(5000));
    CHECK(p.t.tcb->stats().tlp_probes == 2);
    CHECK(p.t.tcb->stats().rto_events == 0);
}

TEST_CASE("RFC 8985 §7.4: a probe whose original arrived too costs the window nothing", "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    tail_of_four_lost(p);
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    p.ack(4000);  // the original was only late
    SECTION("the receiver reports the probe duplicate (D-SACK)") { p.ack(4000, {{3000, 4000}}); }
    SECTION("a plain duplicate ACK at TLP.end_seq (nothing outstanding: the fast path takes it)") { p.ack(4000); }
    p.send_segments(1, 'x');
    p.ack(5000);
    CHECK(p.t.tcb->stats().tlp_recoveries == 0);
    CHECK(p.t.tcb->stats().cwnd >= cwnd);
}

TEST_CASE("RFC 8985 §7.3 (tlp_max_probes 1): one probe per flight; when it draws nothing the RTO fires one RTO "
          "after it",
          "[tcp][tlp]") {
    Config c = probing();
    c.tlp_max_probes = 1;
    SackPeer p(c, kRtt);
    tail_of_four_lost(p);
    const Duration rto = p.t.tcb->stats().rto;
    p.t.advance(rto - 1us);
    INFO(sent(p.t));
    CHECK(p.t.out.segments.empty());
    p.t.advance(1us);
    CHECK(p.t.tcb->stats().rto_events == 1);
    CHECK(p.t.tcb->stats().tlp_probes == 1);
    CHECK(p.sent_seq(3000));
}

TEST_CASE("crescent: no second probe when the RTO comes first (a lone segment's PTO waits for the peer's ACK delay)",
          "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    tail_of_four_lost(p);  // PTO 2.6 ms: twice that is past the RTO
    const Duration rto = p.t.tcb->stats().rto;
    REQUIRE(2 * (2 * kRtt + 2ms) > rto);
    p.t.advance(rto);
    CHECK(p.t.tcb->stats().rto_events == 1);
    CHECK(p.t.tcb->stats().tlp_probes == 1);
}

namespace {

// A cwnd-limited sender with three segments queued past its window; the
// first probe (the next new segment) goes 2 SRTT after the flight.
uint32_t cwnd_limited_first_probe(SackPeer& p) {
    const uint32_t cwnd_segs = p.t.tcb->stats().cwnd / kMss;
    for (uint32_t i = 0; i < cwnd_segs + 3; ++i) REQUIRE(p.t.send(std::string(kMss, 'a')) == SendResult::Ok);
    p.t.flush();
    REQUIRE(p.t.out.segments.size() == cwnd_segs);
    p.t.clear();
    p.t.advance(2 * kRtt);
    INFO(sent(p.t));
    REQUIRE(p.t.out.segments.size() == 1);
    REQUIRE(p.t.out.segments[0].repr.seq == rel(int64_t(cwnd_segs) * kMss));
    REQUIRE(p.t.tcb->stats().tlp_probes == 1);
    p.t.clear();
    return cwnd_segs;
}

} // namespace

TEST_CASE("crescent: a probe that draws no ACK at all gets a second after twice the PTO, then only the RTO",
          "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    const uint32_t cwnd_segs = cwnd_limited_first_probe(p);
    const Duration rto = p.t.tcb->stats().rto;
    REQUIRE(4 * kRtt < rto);
    // The probe, or the receiver's one ACK for the flight, was lost too.
    p.t.advance(4 * kRtt - 1us);
    CHECK(p.t.out.segments.empty());
    p.t.advance(1us);
    INFO(sent(p.t));
    REQUIRE(p.t.out.segments.size() == 1);
    CHECK(p.t.out.segments[0].repr.seq == rel(int64_t(cwnd_segs + 1) * kMss));  // new data again
    CHECK(p.t.tcb->stats().tlp_probes == 2);
    CHECK(p.t.tcb->stats().rto_events == 0);
    p.t.clear();
    // No third: the RTO, one RTO after the second probe.
    p.t.advance(rto - 1us);
    CHECK(p.t.out.segments.empty());
    p.t.advance(1us);
    CHECK(p.t.tcb->stats().rto_events == 1);
    CHECK(p.t.tcb->stats().tlp_probes == 2);
}

TEST_CASE("crescent: the second probe of a tail repeats the last segment; its ACK judges the episode", "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    p.send_segments(4);
    // Nothing is acknowledged: four segments in flight, PTO 2 SRTT.
    p.t.advance(2 * kRtt);
    REQUIRE(p.sent_seq(3000));
    REQUIRE(p.t.tcb->stats().tlp_probes == 1);
    p.t.clear();
    p.t.advance(4 * kRtt);
    INFO(sent(p.t));
    REQUIRE(p.t.out.segments.size() == 1);
    CHECK(p.sent_seq(3000));
    CHECK(p.t.tcb->stats().tlp_probes == 2);
    CHECK(p.t.tcb->stats().retrans_probe == 2);
    // The second probe was the only copy of the tail to arrive: a loss, repaired.
    p.t.clear();
    p.ack(4000);
    p.t.advance(2 * p.t.tcb->stats().srtt);
    p.send_segments(1, 'x');
    p.ack(5000);
    CHECK(p.t.tcb->stats().tlp_recoveries == 1);
    CHECK(p.t.tcb->stats().rto_events == 0);
}

TEST_CASE("crescent: any ACK after a probe stops the second one", "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    cwnd_limited_first_probe(p);
    SECTION("a duplicate ACK (a window update)") {
        TcpRepr a = p.t.seg(ACK, 0, 0);
        a.window = uint16_t(a.window - 1);
        p.t.recv(a);
    }
    SECTION("an ACK that moves snd.una but not past the probe") { p.ack(kMss); }
    p.t.clear();
    p.t.advance(4 * kRtt);
    INFO(sent(p.t));
    CHECK(p.t.tcb->stats().tlp_probes == 1);
    CHECK(p.t.tcb->stats().rto_events == 0);
}

TEST_CASE("RFC 8985 §7.3: a cwnd-limited sender probes with the next new segment after 2 SRTT", "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    const uint32_t cwnd_segs = p.t.tcb->stats().cwnd / kMss;
    for (uint32_t i = 0; i < cwnd_segs + 3; ++i) REQUIRE(p.t.send(std::string(kMss, 'a')) == SendResult::Ok);
    p.t.flush();
    REQUIRE(p.t.out.segments.size() == cwnd_segs);
    p.t.clear();
    p.t.advance(2 * kRtt - 1us);
    CHECK(p.t.out.segments.empty());
    p.t.advance(1us);
    INFO(sent(p.t));
    REQUIRE(p.t.out.segments.size() == 1);
    CHECK(p.t.out.segments[0].repr.seq == rel(int64_t(cwnd_segs) * kMss));
    CHECK(p.t.tcb->stats().tlp_probes == 1);
    CHECK(p.t.tcb->stats().retrans_probe == 0);  // new data: not a retransmission
    CHECK(p.t.tcb->stats().bytes_retransmitted == 0);
    // Everything arrived: new data judges nothing.
    p.t.clear();
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    p.ack(int64_t(cwnd_segs + 1) * kMss);
    CHECK(p.t.tcb->stats().tlp_recoveries == 0);
    CHECK(p.t.tcb->stats().cwnd >= cwnd);
}

TEST_CASE("RFC 8985 §7.2: with more than one segment in flight the PTO is 2 SRTT, floored at tlp_min_pto",
          "[tcp][tlp]") {
    Config c = probing();
    c.tlp_min_pto = 1ms;
    SackPeer p(c, kRtt);
    p.send_segments(3);
    p.t.advance(1ms - 1us);
    CHECK(p.t.out.segments.empty());
    p.t.advance(1us);
    INFO(sent(p.t));
    REQUIRE(p.t.out.segments.size() == 1);
    CHECK(p.t.out.segments[0].repr.seq == rel(2000));
}

TEST_CASE("RFC 8985 §7.2 WCDelAckT, learned: a peer that answers a lone segment at once gets a probe after "
          "2 SRTT plus its own ACK delay and a quarter, not tlp_max_ack_delay",
          "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    CHECK(p.t.tcb->stats().ack_delay == 2ms);  // not known yet: the ceiling
    lone_exchange(p, 20us);
    CHECK(p.t.tcb->stats().ack_delay == 20us);
    const Duration srtt = p.t.tcb->stats().srtt;
    p.send_segments(1, 'b');  // lost
    p.t.advance(2 * srtt + 25us - 1us);
    INFO(sent(p.t));
    CHECK(p.t.out.segments.empty());
    p.t.advance(1us);
    REQUIRE(p.t.out.segments.size() == 1);
    CHECK(p.t.out.segments[0].repr.seq == rel(kMss));
    CHECK(p.t.tcb->stats().tlp_probes == 1);
}

TEST_CASE("RFC 8985 §7.2 WCDelAckT, learned: a longer hold raises the allowance at once, shorter ones bring it "
          "down by 1/8 of the difference each; never from a longer flight",
          "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    lone_exchange(p, 1ms);
    CHECK(p.t.tcb->stats().ack_delay == 1ms);
    lone_exchange(p, 200us, 'b');
    CHECK(p.t.tcb->stats().ack_delay == 900us);  // 1 ms - 800 us / 8
    // Two segments in flight: the peer's ACK for the pair says nothing of its delay.
    p.send_segments(2, 'c');
    p.t.advance(kRtt + 500us);
    p.ack(int64_t(p.t.tcb->stats().bytes_out));
    CHECK(p.t.tcb->stats().ack_delay == 900us);
}

TEST_CASE("RFC 8985 §7.2 WCDelAckT, learned: never above tlp_max_ack_delay", "[tcp][tlp]") {
    // A hold the PTO still waits for (2 SRTT + 500 us > 700 us), longer than the ceiling.
    Config c = probing();
    c.tlp_max_ack_delay = 500us;
    SackPeer q(c, kRtt);
    lone_exchange(q, 700us);
    CHECK(q.t.tcb->stats().tlp_probes == 0);
    CHECK(q.t.tcb->stats().ack_delay == 500us);
}

TEST_CASE("RFC 8985 §7.4 + WCDelAckT: each lone segment's probe found spurious (D-SACK) doubles the allowance, "
          "from at least tlp_min_pto up to tlp_max_ack_delay",
          "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);  // tlp_min_pto 200 us, tlp_max_ack_delay 2 ms
    lone_exchange(p, 10us);
    REQUIRE(p.t.tcb->stats().ack_delay == 10us);
    int64_t off = kMss;
    char c = 'b';
    for (const Duration want : {200us, 400us, 800us, 1600us, 2000us, 2000us}) {
        INFO("allowance to be " << want.count() << " ns");
        p.send_segments(1, c++);  // its ACK is held longer than the probe waits
        const uint64_t probes = p.t.tcb->stats().tlp_probes;
        for (int i = 0; i < 200 && p.t.tcb->stats().tlp_probes == probes; ++i) p.t.advance(50us);
        REQUIRE(p.t.tcb->stats().tlp_probes == probes + 1);
        p.ack(off + kMss);                   // the original's (held) ACK
        p.ack(off + kMss, {{off, off + kMss}});  // the probe, reported duplicate
        CHECK(p.t.tcb->stats().ack_delay == want);
        CHECK(p.t.tcb->stats().tlp_recoveries == 0);
        p.t.clear();
        off += kMss;
    }
}

TEST_CASE("RFC 8985 §7.2: no probe without SACK, or once SACK blocks name a hole (recovery's case)", "[tcp][tlp]") {
    Config c = probing();
    SECTION("no SACK: the RTO") { c.sack = false; }
    SECTION("tlp off: the RTO") { c.tlp = false; }
    SECTION("a SACKed segment above a hole") { c.early_retransmit = false; }
    SackPeer p(c, kRtt);
    p.send_segments(3);
    if (c.sack && c.tlp) p.ack(0, {{1000, 2000}});
    p.to_rto();
    CHECK(p.t.tcb->stats().tlp_probes == 0);
}

TEST_CASE("RFC 5827: the first of three segments lost is retransmitted on the second SACK, not at the RTO",
          "[tcp][tlp][er]") {
    for (bool er : {true, false}) {
        Config c = probing();
        c.early_retransmit = er;
        SackPeer p(c, kRtt);
        p.send_segments(3);
        p.t.advance(kRtt);
        p.ack(0, {{1000, 2000}});
        CHECK_FALSE(p.sent_seq(0));  // one SACKed segment: oseg - 1 = 2 not reached
        p.ack(0, {{1000, 3000}});
        INFO("early retransmit " << er);
        CHECK(p.sent_seq(0) == er);
        CHECK(p.t.tcb->stats().fast_recoveries == (er ? 1u : 0u));
    }
}

TEST_CASE("RFC 5827 §3.1: no early retransmit while new data may go, or with four segments out; with the peer's "
          "window full it applies",
          "[tcp][tlp][er]") {
    SECTION("four outstanding: DupThresh 3") {
        SackPeer p(probing(), kRtt);
        p.send_segments(4);
        p.ack(0, {{1000, 2000}});
        p.ack(0, {{1000, 3000}});
        CHECK_FALSE(p.sent_seq(0));
        p.ack(0, {{1000, 4000}});
        CHECK(p.sent_seq(0));
    }
    SECTION("unsent data the window takes: limited transmit sends it, and then four are out") {
        SackPeer p(probing(), kRtt);
        p.send_segments(3);
        REQUIRE(p.t.send(std::string(kMss, 'z')) == SendResult::Ok);
        p.t.clear();
        p.ack(0, {{1000, 2000}});
        CHECK(p.sent_seq(3000));  // RFC 3042
        p.ack(0, {{1000, 3000}});
        INFO(sent(p.t));
        CHECK_FALSE(p.sent_seq(0));
        CHECK(p.t.tcb->stats().fast_recoveries == 0);
    }
    SECTION("unsent data the peer's window does not take: early retransmit") {
        SackPeer p(probing(), kRtt);
        p.send_segments(3);
        REQUIRE(p.t.send(std::string(kMss, 'z')) == SendResult::Ok);
        // The peer's window ends at 3000: the fourth segment must wait.
        for (int64_t right : {2000, 3000}) {
            TcpRepr a = p.t.seg(ACK, 0, 0, 3000);
            a.opts.sack[a.opts.sack_count++] = SackBlock{rel(1000), rel(right)};
            p.t.recv(a);
        }
        INFO(sent(p.t));
        CHECK(p.sent_seq(0));
        CHECK_FALSE(p.sent_seq(3000));
        CHECK(p.t.tcb->stats().fast_recoveries == 1);
    }
}

TEST_CASE("RFC 5827 without SACK: two duplicate ACKs for three segments", "[tcp][tlp][er]") {
    SackPeer p(probing(false), kRtt);
    p.send_segments(3);
    p.ack(0);
    CHECK_FALSE(p.sent_seq(0));
    p.ack(0);
    CHECK(p.sent_seq(0));
    CHECK(p.t.tcb->stats().retrans_fast == 1);
}

TEST_CASE("RFC 6675 §5: an ACK that advances snd.una and SACKs new data counts as a duplicate for loss detection",
          "[tcp][tlp][sack]") {
    // A receiver that holds its ACKs reports the first segment and the three
    // after the lost second one in a single ACK.
    SackPeer p(probing(), kRtt);
    p.send_segments(6);
    p.t.advance(kRtt);
    p.ack(1000, {{2000, 5000}});
    INFO(sent(p.t));
    CHECK(p.sent_seq(1000));
    CHECK(p.t.tcb->stats().fast_recoveries == 1);
    CHECK(p.t.tcb->stats().retrans_fast == 1);
}

TEST_CASE("RFC 8985 §7.3: the probe ends at snd.max also when SACK blocks for the peer's data shorten it",
          "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    p.send_segments(4);
    p.t.advance(kRtt);
    // The ACK of the first three carries the peer's data past a hole: every
    // segment of ours now carries a SACK block (12 bytes of options).
    TcpRepr a = p.t.seg(ACK | PSH, 1000, 3000);
    p.t.recv(a, std::string(100, 'r'));
    p.t.clear();
    p.t.advance(2 * kRtt + 2ms);
    INFO(sent(p.t));
    REQUIRE(p.t.out.segments.size() == 1);
    const OutSegment& probe = p.t.out.segments[0];
    CHECK(probe.repr.opts.sack_count == 1);
    CHECK(probe.repr.seq == rel(3000 + 12));  // the last 988 bytes: the last byte goes
    CHECK(probe.payload_len() == kMss - 12);
    CHECK(p.t.tcb->stats().tlp_probes == 1);
}

TEST_CASE("crescent: a recovery left with nothing to judge (no SACK block above snd.una, everything sent) is probed "
          "when its ACKs stop; the probe's repair costs the window nothing more",
          "[tcp][tlp]") {
    SackPeer p(probing(), kRtt);
    p.send_segments(10);
    p.t.advance(kRtt);
    p.ack(0, {{1000, 2000}});
    p.ack(0, {{1000, 3000}});
    p.ack(0, {{1000, 4000}});
    REQUIRE(p.t.tcb->stats().fast_recoveries == 1);
    REQUIRE(p.sent_seq(0));
    p.t.clear();
    // The retransmission arrived; the peer's ACK for [4000, 10000) is lost.
    p.t.advance(kRtt);
    p.ack(4000);
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    INFO(sent(p.t));
    REQUIRE(p.t.out.segments.empty());
    p.t.advance(2 * kRtt - 1us);
    CHECK(p.t.out.segments.empty());
    p.t.advance(1us);
    INFO(sent(p.t));
    REQUIRE(p.t.out.segments.size() == 1);
    CHECK(p.sent_seq(9000));
    CHECK(p.t.tcb->stats().tlp_probes == 1);
    CHECK(p.t.tcb->stats().rto_events == 0);
    p.t.clear();
    // Only the probe's copy of the tail arrived: repaired, inside the recovery's one response.
    p.ack(10000);
    p.t.advance(2 * p.t.tcb->stats().srtt);
    p.send_segments(1, 'x');
    p.ack(11000);
    CHECK(p.t.tcb->stats().tlp_recoveries == 1);
    CHECK(p.t.tcb->stats().cwnd >= cwnd);
    CHECK(p.t.tcb->stats().fast_recoveries == 1);
    CHECK(p.t.tcb->stats().rto_events == 0);
}
