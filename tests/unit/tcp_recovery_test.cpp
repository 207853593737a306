// Sans-IO tests of when a SACK sender starts a loss recovery (RFC 6675 §5,
// stack/tcp/tcb_ack.cpp): what counts as a duplicate ACK when both ends send
// data, and which flights may start a new recovery after the last one.
#include "tests/unit/tcp_sack_peer.hpp"

using namespace crescent;
using namespace crescent::tcp;
using namespace crescent::tcp::test;

namespace {

// An ACK of `ack` that also carries `len` bytes of the peer's own data at
// peer offset `seq`, with SACK blocks: what a peer sends while it answers
// (an echo, pipelined RPCs).
void data_ack(SackPeer& p, int64_t seq, uint32_t len, int64_t ack,
              std::initializer_list<std::pair<int64_t, int64_t>> blocks) {
    TcpRepr a = p.t.seg(ACK | PSH, seq, ack);
    for (auto [l, r] : blocks) a.opts.sack[a.opts.sack_count++] = SackBlock{rel(l), rel(r)};
    p.t.recv(a, std::string(len, 'r'));
}

} // namespace

TEST_CASE("RFC 6675 §2: an ACK that carries data and SACKs new data is a duplicate ACK", "[tcp][recovery][sack]") {
    SackPeer p(false);
    p.send_segments(5);  // [0, 5000); the first is lost
    // The peer answers as it receives: each ACK carries 100 bytes of its own
    // and reports one more segment above the hole. RFC 5681's definition
    // (no data) would count none of them; RFC 6675's counts each.
    data_ack(p, 0, 100, 0, {{1000, 2000}});
    data_ack(p, 100, 100, 0, {{1000, 3000}});
    CHECK(p.t.tcb->stats().fast_recoveries == 0);
    CHECK_FALSE(p.sent_seq(0));
    data_ack(p, 200, 100, 0, {{1000, 4000}});
    INFO(sent(p.t));
    CHECK(p.t.tcb->stats().fast_recoveries == 1);
    CHECK(p.t.tcb->stats().retrans_fast == 1);
    CHECK(p.sent_seq(0));
    CHECK(p.t.tcb->stats().rto_events == 0);
}

TEST_CASE("RFC 5681 §2: without SACK a data-carrying ACK is not a duplicate", "[tcp][recovery]") {
    Config c = SackPeer::config(false);
    TcbFixture t(c);
    t.to_established();
    for (int i = 0; i < 5; ++i) REQUIRE(t.send(std::string(kMss, 'a')) == SendResult::Ok);
    t.flush();
    t.clear();
    for (int i = 0; i < 4; ++i) t.recv(t.seg(ACK | PSH, i * 100, 0), std::string(100, 'r'));
    CHECK(t.tcb->stats().fast_recoveries == 0);
    CHECK(t.tcb->stats().dupacks == 0);
}

TEST_CASE("RFC 6675 §5.1: a loss in the flight that begins at `recover` starts a new recovery",
          "[tcp][recovery][sack]") {
    SackPeer p(false);
    p.send_segments(10);  // [0, 10000): the first is lost
    p.ack(0, {{1000, 10000}});
    REQUIRE(p.t.tcb->stats().fast_recoveries == 1);
    REQUIRE(p.sent_seq(0));
    p.t.clear();
    // The retransmission arrives: everything is acknowledged, snd.una is
    // exactly `recover`, and the recovery ends.
    p.ack(10000);
    // The next message: [10000, 14000), its first segment lost too.
    p.send_segments(4);
    p.ack(10000, {{11000, 12000}});
    p.ack(10000, {{11000, 13000}});
    p.ack(10000, {{11000, 14000}});
    INFO(sent(p.t));
    // RFC 6582 §3.2 would want the cumulative ACK past `recover` first, and
    // leave this loss to the RTO; with the scoreboard, RFC 6675 §5.1 allows it.
    CHECK(p.t.tcb->stats().fast_recoveries == 2);
    CHECK(p.sent_seq(10000));
    CHECK(p.t.tcb->stats().rto_events == 0);
}

TEST_CASE("RFC 6675 §5 step 4.2: a recovery halves FlightSize, not the pipe", "[tcp][recovery][sack]") {
    SackPeer p(false);
    p.send_segments(10);  // FlightSize 10000; the first segment is lost
    p.ack(0, {{1000, 10000}});
    REQUIRE(p.t.tcb->stats().fast_recoveries == 1);
    // The pipe is ~0 here (nine SACKed, one lost): halving it would leave
    // 2 SMSS after every single loss.
    CHECK(p.t.tcb->stats().ssthresh == 5000);
    CHECK(p.t.tcb->stats().cwnd == 5000);
}

// ---- RFC 8985 §6: RACK's reordering window for the hole at snd.una ---------

namespace {

constexpr Duration kRtt = 400us;  // SRTT = min_RTT: the reordering window is 100 us

Config racking(bool rack = true) {
    Config c = SackPeer::config(false);
    c.rack = rack;
    return c;
}

// Ten segments, [0, 10000), of which 0 and 5000 are lost: the first SACK
// starts a recovery that sends both again, 5000 after 0.
void two_holes_resent(SackPeer& p) {
    p.send_segments(10);
    p.ack(0, {{6000, 10000}, {1000, 5000}});
    REQUIRE(p.t.tcb->stats().fast_recoveries == 1);
    REQUIRE(p.sent_seq(0));
    REQUIRE(p.sent_seq(5000));
    p.t.clear();
}

} // namespace

TEST_CASE("RFC 8985 §6: a hole at snd.una with too little SACKed above it is lost after the reordering window",
          "[tcp][recovery][rack]") {
    for (bool rack : {true, false}) {
        INFO("rack " << rack);
        SackPeer p(racking(rack), kRtt);
        p.send_segments(2);        // [0, 2000): the first is lost
        p.ack(0, {{1000, 2000}});  // one segment SACKed: DupThresh (3) is out of reach
        CHECK_FALSE(p.sent_seq(0));
        p.t.advance(99us);
        CHECK_FALSE(p.sent_seq(0));
        p.t.advance(2us);
        INFO(sent(p.t));
        CHECK(p.sent_seq(0) == rack);
        CHECK(p.t.tcb->stats().rack_losses == (rack ? 1u : 0u));
        CHECK(p.t.tcb->stats().fast_recoveries == (rack ? 1u : 0u));
        CHECK(p.t.tcb->stats().rto_events == 0);
    }
}

TEST_CASE("RFC 8985 §6: an original that arrives within the window stops the timer", "[tcp][recovery][rack]") {
    SackPeer p(racking(), kRtt);
    p.send_segments(2);
    p.ack(0, {{1000, 2000}});
    p.t.advance(50us);
    p.ack(2000);  // the first segment was only late
    p.t.advance(1ms);
    CHECK_FALSE(p.sent_seq(0));
    CHECK(p.t.tcb->stats().rack_losses == 0);
    CHECK(p.t.tcb->stats().fast_recoveries == 0);
}

TEST_CASE("RFC 8985 §6.2: a D-SACK widens the reordering window by another min_RTT / 4", "[tcp][recovery][rack]") {
    SackPeer p(racking(), kRtt);
    p.send_segments(2);
    p.ack(0, {{1000, 2000}});
    p.t.advance(101us);
    REQUIRE(p.sent_seq(0));  // declared lost at 100 us ...
    p.t.clear();
    p.ack(2000);               // ... but the original came,
    p.ack(2000, {{0, 1000}});  // and the retransmission is reported duplicate
    p.send_segments(2, 'c');   // [2000, 4000), the first late again
    p.ack(2000, {{3000, 4000}});
    p.t.advance(199us);
    CHECK_FALSE(p.sent_seq(2000));
    p.t.advance(2us);
    INFO(sent(p.t));
    CHECK(p.sent_seq(2000));
    CHECK(p.t.tcb->stats().rack_losses == 2);
}

TEST_CASE("RFC 8985 §6: a retransmission of snd.una that a later retransmission overtook is sent again",
          "[tcp][recovery][rack]") {
    for (bool rack : {true, false}) {
        INFO("rack " << rack);
        SackPeer p(racking(rack), kRtt);
        two_holes_resent(p);
        // 5000's retransmission arrives; 0's is lost again. The path has
        // shown no reordering: in a recovery the window is zero (§6.2 step 4).
        p.ack(0, {{1000, 10000}});
        p.t.advance(1us);
        INFO(sent(p.t));
        CHECK(p.sent_seq(0) == rack);
        CHECK(p.t.tcb->stats().rack_losses == (rack ? 1u : 0u));
        CHECK(p.t.tcb->stats().rto_events == 0);
        // Sent again once: nothing later has been delivered since.
        p.t.clear();
        p.t.advance(300us);
        CHECK_FALSE(p.sent_seq(0));
    }
}

TEST_CASE("RFC 8985 §6: new data sent after snd.una's retransmission and SACKed shows the retransmission lost",
          "[tcp][recovery][rack]") {
    SackPeer p(racking(), kRtt);
    p.send_segments(4);  // [0, 4000): the first is lost
    p.ack(0, {{1000, 4000}});
    REQUIRE(p.t.tcb->stats().fast_recoveries == 1);
    REQUIRE(p.sent_seq(0));
    p.t.clear();
    // The retransmission is lost too; new data goes after it and arrives.
    REQUIRE(p.t.send(std::string(kMss, 'x')) == SendResult::Ok);
    p.t.flush();
    REQUIRE(p.sent_seq(4000));
    p.t.clear();
    p.ack(0, {{1000, 5000}});
    p.t.advance(1us);  // no reordering seen: the window is zero
    INFO(sent(p.t));
    CHECK(p.sent_seq(0));
    CHECK(p.t.tcb->stats().rack_losses == 1);
    CHECK(p.t.tcb->stats().rto_events == 0);
}

TEST_CASE("RFC 8985 §6 + §7: a retransmission of snd.una with nothing sent after it is probed once after 2 SRTT; "
          "the RTO is left its second loss",
          "[tcp][recovery][rack]") {
    for (bool rack : {true, false}) {
        INFO("rack " << rack);
        SackPeer p(racking(rack), kRtt);
        p.send_segments(4);  // [0, 4000): the first is lost
        p.ack(0, {{1000, 4000}});
        REQUIRE(p.t.tcb->stats().fast_recoveries == 1);
        REQUIRE(p.sent_seq(0));
        p.t.clear();
        // The retransmission is lost as well: no ACK at all.
        const Duration srtt = p.t.tcb->stats().srtt;
        p.t.advance(2 * srtt - 1us);
        CHECK_FALSE(p.sent_seq(0));
        p.t.advance(1us);
        INFO(sent(p.t));
        CHECK(p.sent_seq(0) == rack);
        CHECK(p.t.tcb->stats().tlp_probes == (rack ? 1u : 0u));
        CHECK(p.t.tcb->stats().retrans_probe == (rack ? 1u : 0u));
        CHECK(p.t.tcb->stats().rto_events == 0);
        // Once: the next silence is the RTO's.
        p.t.clear();
        p.t.advance(2 * srtt + 10us);
        CHECK_FALSE(p.sent_seq(0));
        p.to_rto();
        CHECK(p.t.tcb->stats().tlp_probes == (rack ? 1u : 0u));
    }
}

namespace {

// The payload length of the segment sent at `off` (0 when none was).
uint32_t sent_len(const SackPeer& p, int64_t off) {
    for (auto& o : p.t.out.segments)
        if (o.repr.seq == rel(off) && o.payload_len() > 0) return o.payload_len();
    return 0;
}

} // namespace

TEST_CASE("RFC 8985 §6: a lost retransmission goes again whole, though SACK blocks now shorten its segment",
          "[tcp][recovery][rack]") {
    SackPeer p(racking(), kRtt);
    p.send_segments(4);  // [0, 4000): the first is lost
    p.ack(0, {{1000, 4000}});
    REQUIRE(sent_len(p, 0) == kMss);  // a whole segment: nothing to SACK yet
    p.t.clear();
    // The peer's own data now arrives with a hole: every segment of ours
    // carries a SACK block (12 bytes of options) from here on.
    data_ack(p, 1000, 100, 0, {{1000, 4000}});
    p.t.clear();
    // The retransmission is lost; its probe after 2 SRTT sends all of it:
    // 988 bytes, then the 12 that no longer fit.
    const Duration srtt = p.t.tcb->stats().srtt;
    p.t.advance(2 * srtt);
    INFO(sent(p.t));
    CHECK(sent_len(p, 0) == kMss - 12);
    CHECK(sent_len(p, kMss - 12) == 12);
    CHECK(p.t.tcb->stats().tlp_probes == 1);
    // The first part arrives, the 12 bytes do not: snd.una lands inside what
    // was sent again, and that piece has its own probe, not the RTO.
    p.t.clear();
    p.ack(kMss - 12, {{1000, 4000}});
    p.t.advance(2 * srtt);
    INFO(sent(p.t));
    CHECK(sent_len(p, kMss - 12) == 12);
    CHECK(p.t.tcb->stats().tlp_probes == 2);
    CHECK(p.t.tcb->stats().rto_events == 0);
    p.t.clear();
    p.ack(4000);
    CHECK(p.t.tcb->stats().rto_events == 0);
}

TEST_CASE("RFC 8985 §6: a hole above the first keeps its retransmission's record when snd.una reaches it",
          "[tcp][recovery][rack]") {
    SackPeer p(racking(), kRtt);
    two_holes_resent(p);
    // 0's retransmission arrives, 5000's is lost too. Nothing was sent after
    // it: it is probed after 2 SRTT, as a retransmission at snd.una is.
    p.ack(5000, {{6000, 10000}});
    const Duration srtt = p.t.tcb->stats().srtt;
    p.t.advance(2 * srtt - 1us);
    CHECK_FALSE(p.sent_seq(5000));
    p.t.advance(1us);
    INFO(sent(p.t));
    CHECK(p.sent_seq(5000));
    CHECK(p.t.tcb->stats().tlp_probes == 1);
    CHECK(p.t.tcb->stats().rto_events == 0);
}

TEST_CASE("RFC 8985 §6: a retransmission of snd.una is lost once one sent after it is cumulatively acknowledged",
          "[tcp][recovery][rack]") {
    SackPeer p(racking(), kRtt);
    two_holes_resent(p);
    // 0's retransmission is lost; after its probe (sent later than 5000's)
    // arrives, snd.una is at 5000, whose retransmission went before that
    // probe and is still missing: lost, without waiting for a probe of its own.
    const Duration srtt = p.t.tcb->stats().srtt;
    p.t.advance(2 * srtt);
    REQUIRE(p.sent_seq(0));
    REQUIRE(p.t.tcb->stats().tlp_probes == 1);
    p.t.clear();
    p.ack(5000, {{6000, 10000}});
    p.t.advance(1us);  // no reordering seen: the window is zero
    INFO(sent(p.t));
    CHECK(p.sent_seq(5000));
    CHECK(p.t.tcb->stats().tlp_probes == 1);
    CHECK(p.t.tcb->stats().rack_losses == 1);
    CHECK(p.t.tcb->stats().rto_events == 0);
}

TEST_CASE("RFC 2883 §4: an ACK whose only news is a D-SACK is not a duplicate ACK, even at early retransmit's "
          "threshold of one",
          "[tcp][recovery][sack]") {
    Config c = SackPeer::config(false);
    c.early_retransmit = true;  // as the engine runs it (the fixture's default is off)
    SackPeer p(c);
    p.send_segments(1);  // [0, 1000)
    p.ack(1000);
    // The next message: two segments, nothing left to send, so RFC 5827's
    // early retransmit starts a recovery at one duplicate ACK.
    p.send_segments(2);  // [1000, 3000)
    p.t.clear();
    // The peer got [0, 1000) a second time (a tail-loss probe that was not
    // needed) and says so: a pure ACK at snd.una with a D-SACK below it.
    p.ack(1000, {{0, 1000}});
    INFO(sent(p.t));
    CHECK(p.t.tcb->stats().dupacks == 0);
    CHECK(p.t.tcb->stats().fast_recoveries == 0);
    CHECK_FALSE(p.sent_seq(1000));
    // A pure duplicate ACK without it still counts (RFC 5681 §2), and at this
    // threshold starts the recovery: the line above is the D-SACK's doing.
    p.ack(1000);
    CHECK(p.t.tcb->stats().dupacks == 1);
    CHECK(p.t.tcb->stats().fast_recoveries == 1);
    CHECK(p.sent_seq(1000));
}
