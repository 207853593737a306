// Sans-IO tests of the TCB's reordering and undo (stack/tcp/tcb_undo.cpp):
// a DupThresh that follows the reordering the path showed (RFC 6675 §2,
// RFC 4653), D-SACK detection of spurious retransmissions (RFC 2883 §4,
// RFC 3708), Eifel detection with timestamps (RFC 3522) and the Eifel
// response (RFC 4015), each against a real loss that must not be undone.
#include "tests/unit/tcp_sack_peer.hpp"

using namespace crescent;
using namespace crescent::tcp;
using namespace crescent::tcp::test;

namespace {

using Peer = SackPeer;

// Segment 0 of five is held back: SACKs for 1..3 arrive first and the third
// triggers a fast retransmission of 0. Returns the TSval the retransmission
// carries (0 without timestamps).
uint32_t spurious_fast_retransmit(Peer& p, uint32_t tsecr = 0) {
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    p.ack(0, {{1000, 2000}}, tsecr);
    p.ack(0, {{1000, 3000}}, tsecr);
    REQUIRE(p.t.tcb->stats().fast_recoveries == 0);
    p.ack(0, {{1000, 4000}}, tsecr);
    REQUIRE(p.t.tcb->stats().fast_recoveries == 1);
    REQUIRE(p.sent_seq(0));
    REQUIRE(p.t.tcb->stats().cwnd < cwnd);
    const uint32_t v = p.tsval_of(0);
    p.t.clear();
    return v;
}

// The first test's exchange: a spurious fast retransmission that a D-SACK
// proves, leaving the reordering degree at 4 and snd.una at 5000.
void reordered_by_4(Peer& p) {
    p.send_segments(5);
    spurious_fast_retransmit(p);
    p.ack(5000);
    p.ack(5000, {{0, 1000}});
    REQUIRE(p.t.tcb->stats().undo_recoveries == 1);
    REQUIRE(p.t.tcb->stats().reordering == 4);
}

} // namespace

TEST_CASE("RFC 3708: a D-SACK for every retransmission of a recovery undoes its cwnd reduction", "[tcp][undo][sack]") {
    Peer p(false);
    p.send_segments(5);
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    const uint32_t ssthresh = p.t.tcb->stats().ssthresh;
    spurious_fast_retransmit(p);
    // The held-back original arrives: everything is acknowledged, the
    // recovery ends with cwnd deflated.
    p.ack(5000);
    CHECK(p.t.tcb->stats().cwnd < cwnd);
    CHECK(p.t.tcb->stats().undo_recoveries == 0);
    // Then the retransmission arrives too, and the receiver reports it duplicate.
    p.ack(5000, {{0, 1000}});
    CHECK(p.t.tcb->stats().undo_recoveries == 1);
    CHECK(p.t.tcb->stats().cwnd == cwnd);
    CHECK(p.t.tcb->stats().ssthresh == ssthresh);
    // The original came 4 segments late: the next hole needs more than 3 SACKed.
    CHECK(p.t.tcb->stats().reordering == 4);
}

TEST_CASE("RFC 3708: a D-SACK for data that was not retransmitted (a network duplicate) undoes nothing",
          "[tcp][undo][sack]") {
    Peer p(false);
    p.send_segments(5);
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    spurious_fast_retransmit(p);
    p.ack(5000);
    const uint32_t reduced = p.t.tcb->stats().cwnd;
    p.ack(5000, {{2000, 3000}});  // segment 2 twice: the network duplicated it
    CHECK(p.t.tcb->stats().undo_recoveries == 0);
    CHECK(p.t.tcb->stats().cwnd == reduced);
    CHECK(reduced < cwnd);
    CHECK(p.t.tcb->stats().reordering == kDupThresh);
}

TEST_CASE("RFC 3522 Eifel: a recovery whose ACKs echo the originals' TSval is undone when it ends", "[tcp][undo][ts]") {
    Peer p(true);
    const uint32_t v0 = p.send_segments(5);
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    p.t.advance(100us);
    const uint32_t v1 = spurious_fast_retransmit(p, v0);
    REQUIRE(int32_t(v1 - v0) > 0);
    // The full ACK echoes v0: the receiver's left edge moved on the original.
    p.ack(5000, {}, v0);
    CHECK(p.t.tcb->stats().undo_recoveries == 1);
    CHECK(p.t.tcb->stats().cwnd == cwnd);
    CHECK(p.t.tcb->stats().reordering == 4);
}

TEST_CASE("RFC 3522 Eifel: an ACK echoing the retransmission's TSval (a real loss) keeps the reduction",
          "[tcp][undo][ts]") {
    Peer p(true);
    const uint32_t v0 = p.send_segments(5);
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    p.t.advance(100us);
    const uint32_t v1 = spurious_fast_retransmit(p, v0);
    p.ack(5000, {}, v1);  // the retransmission filled the hole
    CHECK(p.t.tcb->stats().undo_recoveries == 0);
    CHECK(p.t.tcb->stats().cwnd < cwnd);
    // A late D-SACK for something else changes nothing either.
    p.ack(5000, {{3000, 4000}}, v1);
    CHECK(p.t.tcb->stats().undo_recoveries == 0);
    CHECK(p.t.tcb->stats().reordering == kDupThresh);
}

TEST_CASE("RFC 6675 §2: after reordering of 4 segments, 3 SACKed segments above a hole are not a loss",
          "[tcp][undo][sack]") {
    Peer p(false);
    reordered_by_4(p);
    // The next window: eight segments, the first held back again.
    p.send_segments(8, 'k');
    p.t.clear();
    p.ack(5000, {{6000, 7000}});
    p.ack(5000, {{6000, 8000}});
    p.ack(5000, {{6000, 9000}});
    CHECK(p.t.tcb->stats().fast_recoveries == 1);  // 3 SACKed: reordering, still
    CHECK_FALSE(p.sent_seq(5000));
    p.ack(5000, {{6000, 10000}});                   // 4 SACKed: more than the path reorders
    CHECK(p.t.tcb->stats().fast_recoveries == 2);
    CHECK(p.sent_seq(5000));
}

TEST_CASE("RFC 4653 §3.1: while the raised threshold waits, each duplicate ACK sends new data", "[tcp][undo][sack]") {
    Peer p(false);
    reordered_by_4(p);
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    // A full window in flight, more queued.
    const int inflight = int(cwnd / kMss);
    p.send_segments(inflight, 'A');
    for (int i = 0; i < 4; ++i) REQUIRE(p.t.send(std::string(kMss, 'z')) == SendResult::Ok);
    p.t.flush();
    p.t.expect_nothing();  // cwnd full
    const int64_t base = 5000, next = base + int64_t(inflight) * kMss;
    p.ack(base, {{base + 1000, base + 2000}});
    p.ack(base, {{base + 1000, base + 3000}});
    p.ack(base, {{base + 1000, base + 4000}});  // the third duplicate: below the threshold of 4
    CHECK(p.t.tcb->stats().fast_recoveries == 1);
    CHECK(p.sent_seq(next));
    CHECK(p.sent_seq(next + 1000));
    CHECK(p.sent_seq(next + 2000));
}

TEST_CASE("RFC 4015: a spurious RTO (Eifel) restores cwnd and goes on with new data, not back N", "[tcp][undo][rto]") {
    Peer p(true);
    const uint32_t v0 = p.send_segments(4);
    for (int i = 0; i < 2; ++i) REQUIRE(p.t.send(std::string(kMss, 'n')) == SendResult::Ok);
    p.t.flush();
    p.t.clear();  // what cwnd allowed beyond the four (IW 10: both)
    const uint32_t cwnd = p.t.tcb->stats().cwnd;
    p.to_rto();
    REQUIRE(p.sent_seq(0));
    REQUIRE(p.t.tcb->stats().cwnd == kMss);
    p.t.clear();
    // The ACK of the first original, delayed, not lost.
    p.ack(1000, {}, v0);
    CHECK(p.t.tcb->stats().undo_rtos == 1);
    CHECK(p.t.tcb->stats().cwnd == cwnd);
    // Nothing of 1000..6000 goes again: it is still in flight.
    for (auto& o : p.t.out.segments) CHECK(o.repr.seq - rel(6000) >= 0);
    CHECK(p.t.tcb->stats().snd_nxt == rel(6000).raw());
}

TEST_CASE("RFC 3522: after a real RTO (the ACK echoes the retransmission) the sender goes back N", "[tcp][undo][rto]") {
    Peer p(true);
    p.send_segments(4);
    p.to_rto();
    const uint32_t v1 = p.tsval_of(0);
    REQUIRE(v1 != 0);
    p.t.clear();
    p.ack(1000, {}, v1);
    CHECK(p.t.tcb->stats().undo_rtos == 0);
    CHECK(p.sent_seq(1000));  // slow start again from the hole
    CHECK(p.t.tcb->stats().cwnd < 4 * kMss);
}

TEST_CASE("an RTO with DupThresh segments SACKed lowers a raised reordering degree", "[tcp][undo][rto]") {
    Peer p(false);
    reordered_by_4(p);
    p.send_segments(8, 'k');
    p.ack(5000, {{6000, 9000}});  // 3 SACKed: under the raised threshold
    CHECK(p.t.tcb->stats().fast_recoveries == 1);
    p.to_rto();  // nothing more comes
    CHECK(p.t.tcb->stats().reordering == kDupThresh);
}

TEST_CASE("SeqRangeSet: merge on add, split on remove, trim, and the bound", "[tcp][undo]") {
    SeqRangeSet s;
    s.add(rel(0), rel(1000));
    s.add(rel(2000), rel(3000));
    s.add(rel(1000), rel(2000));  // adjacent on both sides: one range
    CHECK(s.contains(rel(0)));
    CHECK(s.contains(rel(2999)));
    CHECK_FALSE(s.contains(rel(3000)));
    CHECK(s.remove(rel(1000), rel(1500)) == 500);  // splits it
    CHECK(s.contains(rel(999)));
    CHECK_FALSE(s.contains(rel(1200)));
    CHECK(s.contains(rel(1500)));
    CHECK(s.remove(rel(1000), rel(1500)) == 0);    // reported before
    CHECK(s.remove(rel(500), rel(2500)) == 1500);  // across the gap: 500 + 1000
    s.trim_below(rel(2600));
    CHECK_FALSE(s.contains(rel(2599)));
    CHECK(s.contains(rel(2600)));
    CHECK(s.remove(rel(0), rel(5000)) == 400);
    CHECK(s.empty());
    CHECK_FALSE(s.overflowed());
    // Wrapping sequence numbers are ranges like any other.
    const SeqNum top(0xffffff00u);
    s.add(top, top + 0x200);
    CHECK(s.contains(SeqNum(0x50)));
    CHECK(s.remove(SeqNum(0), SeqNum(0x100)) == 0x100);
    CHECK(s.contains(SeqNum(0xffffff80u)));
    CHECK_FALSE(s.contains(SeqNum(0x80)));
    s.clear();
    for (uint32_t i = 0; i < SeqRangeSet::kMaxRanges; ++i) s.add(rel(2000 * i), rel(2000 * i + 1000));
    CHECK_FALSE(s.overflowed());
    s.add(rel(2000 * 100), rel(2000 * 100 + 1000));  // one range too many: forgotten, and said so
    CHECK(s.overflowed());
    CHECK_FALSE(s.contains(rel(2000 * 100)));
}
