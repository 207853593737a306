// crescent tests — the sans-IO Tcb: RFC 9293 state diagram, data transfer,
// retransmission, recovery, flow control, timers, security. Exact segments in,
// exact segments out, virtual time (smoltcp style); see tcp_fixture.hpp.
#include "tests/unit/tcp_fixture.hpp"

using namespace crescent;
using namespace crescent::tcp;
using namespace crescent::tcp::test;

// ---------------------------------------------------------------------------
// RFC 9293 §3.3.2 state diagram: opening

TEST_CASE("RFC 9293 §3.5 active open: CLOSED -> SYN-SENT -> ESTABLISHED", "[tcp][state]") {
    TcbFixture t;
    t.tcb->connect(SeqNum(kIss), t.now, t.out);
    CHECK(t.tcb->state() == State::SynSent);
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.opts.mss == 1460);
    t.expect_sent({{SYN, -1, 0, "", 65535}});
    TcpRepr synack = t.seg(SYN | ACK, -1, 0);
    synack.opts.mss = 1200;
    t.recv(synack);
    CHECK(t.tcb->state() == State::Established);
    CHECK(t.has_event(EventKind::Connected));
    t.expect_sent({{ACK, 0, 0}});
    CHECK(t.tcb->stats().snd_mss == 1200);  // RFC 9293 §3.7.1: min(ours, peer's)
}

TEST_CASE("RFC 9293 §3.7.1 MSS defaults to 536 without the option", "[tcp][mss]") {
    TcbFixture t;
    t.to_syn_sent();
    t.recv(t.seg(SYN | ACK, -1, 0));
    CHECK(t.tcb->stats().snd_mss == 536);
}

TEST_CASE("RFC 9293 §3.5 passive open: SYN-RECEIVED -> ESTABLISHED", "[tcp][state]") {
    TcbFixture t;
    TcpRepr syn = t.seg(SYN, -1, 0);
    t.tcb->accept_syn(syn, 0, SeqNum(kIss), t.now, t.out);
    t.expect_sent({{SYN | ACK, -1, 0}});
    CHECK(t.tcb->state() == State::SynReceived);
    t.recv(t.seg(ACK, 0, 0));
    CHECK(t.tcb->state() == State::Established);
    CHECK(t.has_event(EventKind::Connected));
    t.expect_nothing();
}

TEST_CASE("RFC 9293 §3.10.7.4 SYN-RECEIVED: the third ACK and the first data lost, later data completes the open",
          "[tcp][state]") {
    // Under loss a client's pure ACK and its first data segment can both be
    // dropped: the second segment's ACK completes the handshake, its bytes
    // wait out of order, and the retransmitted first segment delivers both.
    TcbFixture t;
    TcpRepr syn = t.seg(SYN, -1, 0);
    t.tcb->accept_syn(syn, 0, SeqNum(kIss), t.now, t.out);
    t.clear();
    t.recv(t.seg(ACK, 5, 0), "world");
    CHECK(t.tcb->state() == State::Established);
    CHECK(t.has_event(EventKind::Connected));
    CHECK(t.take_readable().empty());
    t.expect_sent({{ACK, 0, 0}});  // a duplicate ACK for the hole at RCV.NXT
    t.clear();
    t.recv(t.seg(ACK, 0, 0), "hello");
    CHECK(t.take_readable() == "helloworld");
    t.expect_sent({{ACK, 0, 10}});
}

TEST_CASE("RFC 9293 §3.5 simultaneous open: SYN-SENT -> SYN-RECEIVED -> ESTABLISHED", "[tcp][state]") {
    TcbFixture t;
    t.to_syn_sent();
    t.recv(t.seg(SYN, -1, 0));
    CHECK(t.tcb->state() == State::SynReceived);
    t.expect_sent({{SYN | ACK, -1, 0}});
    // The peer's SYN-ACK (its SYN is old now): answered with an ACK.
    t.recv(t.seg(SYN | ACK, -1, 0));
    t.expect_sent({{ACK, 0, 0}});
    // The peer's ACK of our SYN completes the open.
    t.recv(t.seg(ACK, 0, 0));
    CHECK(t.tcb->state() == State::Established);
}

TEST_CASE("RFC 9293 §3.10.7.3 SYN-SENT: RST with acceptable ACK refuses the connection", "[tcp][state]") {
    TcbFixture t;
    t.to_syn_sent();
    t.recv(t.seg(RST, 0, -1));  // no ACK bit: ignored
    CHECK(t.tcb->state() == State::SynSent);
    t.recv(t.seg(RST | ACK, 0, 0));
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::Refused);
    t.expect_nothing();
}

TEST_CASE("RFC 9293 §3.10.7.3 SYN-SENT: unacceptable ACK gets <SEQ=SEG.ACK><CTL=RST>", "[tcp][state]") {
    TcbFixture t;
    t.to_syn_sent();
    t.recv(t.seg(SYN | ACK, -1, 10));
    t.expect_sent({{RST, 10}});
    CHECK(t.tcb->state() == State::SynSent);
}

TEST_CASE("RFC 9293 §3.10.7.4 SYN-RECEIVED: RST returns the embryo to CLOSED", "[tcp][state]") {
    TcbFixture t;
    t.to_syn_received();
    t.recv(t.seg(RST, 0, 0));
    CHECK(t.tcb->state() == State::Closed);
    t.expect_nothing();
}

TEST_CASE("RFC 9293 §3.10.7.4 SYN-RECEIVED: bad ACK gets a RST", "[tcp][state]") {
    TcbFixture t;
    t.to_syn_received();
    t.recv(t.seg(ACK, 0, -1));  // acks nothing new (SEG.ACK = ISS)
    t.expect_sent({{RST, -1}});
    CHECK(t.tcb->state() == State::SynReceived);
}

// ---------------------------------------------------------------------------
// closing

TEST_CASE("RFC 9293 §3.6 active close: FIN-WAIT-1 -> FIN-WAIT-2 -> TIME-WAIT -> CLOSED", "[tcp][state]") {
    TcbFixture t;
    t.to_established();
    t.tcb->shutdown_write();
    CHECK(t.tcb->state() == State::FinWait1);
    t.flush();
    t.expect_sent({{FIN | ACK, 0, 0}});
    t.recv(t.seg(ACK, 0, 1));
    CHECK(t.tcb->state() == State::FinWait2);
    t.expect_nothing();
    t.recv(t.seg(FIN | ACK, 0, 1));
    CHECK(t.tcb->state() == State::TimeWait);
    CHECK(t.has_event(EventKind::PeerFin));
    CHECK(t.closed_reason() == CloseReason::Normal);
    t.expect_sent({{ACK, 1, 1}});
    t.advance(999ms);
    CHECK(t.tcb->state() == State::TimeWait);
    t.advance(1ms);  // 2*MSL = Config::time_wait (1 s)
    CHECK(t.tcb->state() == State::Closed);
    t.expect_nothing();
}

TEST_CASE("RFC 9293 §3.6 FIN-WAIT-1 with FIN+ACK goes straight to TIME-WAIT", "[tcp][state]") {
    TcbFixture t;
    t.to_fin_wait1();
    t.recv(t.seg(FIN | ACK, 0, 1));
    CHECK(t.tcb->state() == State::TimeWait);
    t.expect_sent({{ACK, 1, 1}});
}

TEST_CASE("RFC 9293 §3.6 passive close: CLOSE-WAIT -> LAST-ACK -> CLOSED", "[tcp][state]") {
    TcbFixture t;
    t.to_established();
    t.recv(t.seg(FIN | ACK, 0, 0));
    CHECK(t.tcb->state() == State::CloseWait);
    CHECK(t.has_event(EventKind::PeerFin));
    t.expect_sent({{ACK, 0, 1}});
    t.clear();
    t.tcb->shutdown_write();
    CHECK(t.tcb->state() == State::LastAck);
    t.flush();
    t.expect_sent({{FIN | ACK, 0, 1}});
    t.recv(t.seg(ACK, 1, 1));
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::Normal);
}

TEST_CASE("RFC 9293 §3.6 simultaneous close: FIN-WAIT-1 -> CLOSING -> TIME-WAIT", "[tcp][state]") {
    TcbFixture t;
    t.to_fin_wait1();
    t.recv(t.seg(FIN | ACK, 0, 0));  // its FIN does not ack ours
    CHECK(t.tcb->state() == State::Closing);
    t.expect_sent({{ACK, 1, 1}});
    t.recv(t.seg(ACK, 1, 1));
    CHECK(t.tcb->state() == State::TimeWait);
}

TEST_CASE("RFC 9293 §3.10.7.4 TIME-WAIT re-acknowledges a retransmitted FIN and restarts 2MSL", "[tcp][state]") {
    TcbFixture t;
    t.to_time_wait();
    t.advance(900ms);
    t.recv(t.seg(FIN | ACK, 0, 1));
    t.expect_sent({{ACK, 1, 1}});
    t.advance(900ms);
    CHECK(t.tcb->state() == State::TimeWait);  // restarted
    t.advance(100ms);
    CHECK(t.tcb->state() == State::Closed);
}

TEST_CASE("RFC 1337 TIME-WAIT ignores RST", "[tcp][state]") {
    TcbFixture t;
    t.to_time_wait();
    t.recv(t.seg(RST, 1, 0));
    CHECK(t.tcb->state() == State::TimeWait);
}

TEST_CASE("RFC 9293 §3.6 half-close: data still flows to us in FIN-WAIT-2", "[tcp][state]") {
    TcbFixture t;
    t.to_fin_wait2();
    t.recv(t.seg(ACK | PSH, 0, 1), "late data");
    CHECK(t.take_readable() == "late data");
    t.expect_sent({{ACK, 1, 9}});
    CHECK(t.tcb->state() == State::FinWait2);
}

TEST_CASE("RFC 9293 §3.6 half-close: we still send in CLOSE-WAIT", "[tcp][state]") {
    TcbFixture t;
    t.to_close_wait();
    REQUIRE(t.send("reply") == SendResult::Ok);
    t.flush();
    t.expect_sent({{ACK | PSH, 0, 1, "reply"}});
}

TEST_CASE("RFC 9293 §3.10.5 ABORT sends RST and closes", "[tcp][state]") {
    TcbFixture t;
    t.to_established();
    REQUIRE(t.send("queued") == SendResult::Ok);
    t.tcb->abort(t.now, t.out);
    t.expect_sent({{RST, 0}});
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::AbortedLocally);
}

TEST_CASE("RFC 9293 §3.10.7.4 RST at RCV.NXT resets an ESTABLISHED connection", "[tcp][state]") {
    for (auto build : {&TcbFixture::to_established, &TcbFixture::to_fin_wait1, &TcbFixture::to_fin_wait2,
                       &TcbFixture::to_close_wait, &TcbFixture::to_closing, &TcbFixture::to_last_ack}) {
        TcbFixture t;
        (t.*build)();
        int64_t seq = (t.tcb->state() == State::CloseWait || t.tcb->state() == State::Closing ||
                       t.tcb->state() == State::LastAck) ? 1 : 0;
        t.recv(t.seg(RST, seq, 0));
        CHECK(t.tcb->state() == State::Closed);
        CHECK(t.closed_reason() == CloseReason::ResetByPeer);
    }
}

TEST_CASE("RFC 9293 §3.10.7.1 a CLOSED Tcb answers with RST", "[tcp][state]") {
    TcbFixture t;
    t.recv(t.seg(ACK, 5, 7));
    t.expect_sent({{RST, 7}});
    t.recv(t.seg(RST, 5, 7));
    t.expect_nothing();
}

// ---------------------------------------------------------------------------
// data transfer

TEST_CASE("RFC 9293 §3.10.7.4 seventh: in-order data is delivered and acknowledged", "[tcp][data]") {
    TcbFixture t;
    t.to_established();
    t.recv(t.seg(ACK | PSH, 0, 0), "hello");
    CHECK(t.take_readable() == "hello");
    t.expect_sent({{ACK, 0, 5, "", 65530}});
    CHECK(t.tcb->stats().fast_path == 1);
    t.tcb->consume(5);
    CHECK(t.tcb->stats().bytes_in == 5);
}

TEST_CASE("fast path: request/response segments whose window moved (SWS-avoiding peer)", "[tcp][data]") {
    // A receiver that keeps its right edge put while RCV.NXT advances (RFC
    // 9293 §3.8.6.2.2, Linux and crescent alike) advertises a different
    // window on nearly every segment of ping-pong traffic: those segments
    // must stay on the fast path and still move SND.WND (§3.10.7.4 fifth).
    Config c = TcbFixture::default_config();
    c.snd_buf = 64;
    TcbFixture t(c);
    t.to_established();
    REQUIRE(t.send("request") == SendResult::Ok);
    t.flush();
    t.expect_sent({{ACK | PSH, 0, 0, "request"}});
    // The reply acknowledges the request, carries data and a smaller window.
    t.recv(t.seg(ACK | PSH, 0, 7, 65528), "reply");
    CHECK(t.take_readable() == "reply");
    CHECK(t.tcb->stats().fast_path == 1);
    // Data at the same ACK with the window moved again: applied, still fast.
    t.recv(t.seg(ACK | PSH, 5, 7, 9), "more");
    CHECK(t.take_readable() == "more");
    CHECK(t.tcb->stats().fast_path == 2);
    t.tcb->consume(9);
    t.out.segments.clear();
    // The peer's window (9 bytes) now holds back a 16-byte write (sender
    // SWS avoidance, §3.8.6.2.1: no tiny segment into a tiny window)...
    REQUIRE(t.send("0123456789abcdef") == SendResult::Ok);
    t.flush();
    CHECK(t.out.segments.empty());
    // ...and a data segment that opens it (same ACK: nothing acknowledged)
    // sends the write at once, from the fast path.
    t.recv(t.seg(ACK | PSH, 9, 7, 100), "x");
    CHECK(t.take_readable() == "x");
    CHECK(t.tcb->stats().fast_path == 3);
    t.expect_sent({{ACK | PSH, 7, 10, "0123456789abcdef"}});
    // A window closing to zero is persist-timer work: the slow path.
    t.recv(t.seg(ACK, 10, 23, 0));
    CHECK(t.tcb->stats().fast_path == 3);
}

TEST_CASE("send queues zero-copy and the ACK drops the references", "[tcp][data]") {
    TcbFixture t;
    t.to_established();
    REQUIRE(t.send("abc") == SendResult::Ok);
    REQUIRE(t.send("defg") == SendResult::Ok);
    t.expect_nothing();  // nothing until flush
    t.flush();
    t.expect_sent({{ACK | PSH, 0, 0, "abcdefg"}});
    uint64_t live_before = t.arena->live();
    t.recv(t.seg(ACK, 0, 3));
    CHECK(t.arena->live() == live_before - 1);  // "abc" released
    t.recv(t.seg(ACK, 0, 7));
    CHECK(t.arena->live() == live_before - 2);
    uint32_t acked = 0;
    for (auto& e : t.out.events)
        if (e.kind == EventKind::Acked) acked += e.bytes;
    CHECK(acked == 7);
    t.expect_nothing();
}

TEST_CASE("send: bytes continuing the queue's tail in the same obj widen it (one view, one reference)", "[tcp][data]") {
    TcbFixture t;
    t.to_established();
    const uint64_t live0 = t.arena->live();
    Slice obj = t.make_payload("abcdefghij");  // one obj, as an encoder's header block
    REQUIRE(t.tcb->send(obj.sub(0, 3)) == SendResult::Ok);
    REQUIRE(t.tcb->send(obj.sub(3, 4)) == SendResult::Ok);
    t.flush();
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].view_count == 1);  // "abc" and "defg" are one entry
    t.expect_sent({{ACK | PSH, 0, 0, "abcdefg"}});
    // Sent up to the tail's end: what widens it next is found at the right place.
    REQUIRE(t.tcb->send(obj.sub(7, 1)) == SendResult::Ok);
    t.flush();
    t.expect_sent({{ACK | PSH, 7, 0, "h"}});
    // A gap in the obj is not a continuation: its own entry.
    REQUIRE(t.tcb->send(obj.sub(9, 1)) == SendResult::Ok);
    REQUIRE(t.tcb->send(obj.sub(8, 1)) == SendResult::Ok);
    t.flush();
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].view_count == 2);
    t.expect_sent({{ACK | PSH, 8, 0, "ji"}});
    obj.reset();
    CHECK(t.arena->live() == live0 + 1);   // the queue still holds the obj
    t.recv(t.seg(ACK, 0, 2));              // a partial ACK trims the widened entry
    CHECK(t.arena->live() == live0 + 1);
    t.recv(t.seg(ACK, 0, 10));
    CHECK(t.arena->live() == live0);       // every reference dropped
    t.expect_nothing();
}

TEST_CASE("send buffer backpressure: WouldBlock then Writable", "[tcp][data]") {
    Config c = TcbFixture::default_config();
    c.snd_buf = 10;
    TcbFixture t(c);
    t.to_established();
    REQUIRE(t.send("0123456789") == SendResult::Ok);
    CHECK(t.send("x") == SendResult::WouldBlock);
    t.flush();
    t.clear();
    t.recv(t.seg(ACK, 0, 10));
    CHECK(t.has_event(EventKind::Writable));
    CHECK(t.send("x") == SendResult::Ok);
}

namespace {
// Established with a peer whose SYN-ACK offered a 3000-byte window and an
// MSS of 1000; `queued` bytes sent: the first 3000 go out as three segments
// (cwnd, RFC 6928's IW, is larger: the window limits).
void fill_window_of_3000(TcbFixture& t, size_t queued) {
    t.to_syn_sent();
    TcpRepr synack = t.seg(SYN | ACK, -1, 0, 3000);
    synack.opts.mss = 1000;
    t.recv(synack);
    t.clear();
    REQUIRE(t.send(std::string(queued, 'a')) == SendResult::Ok);
    t.flush();
    t.expect_sent({{ACK, 0, 0, std::string(1000, 'a')},
                   {ACK, 1000, 0, std::string(1000, 'a')},
                   {ACK, 2000, 0, std::string(1000, 'a')}});
}
} // namespace

TEST_CASE("segmentation at the MSS and the peer window", "[tcp][data]") {
    TcbFixture t;
    fill_window_of_3000(t, 3500);
    t.recv(t.seg(ACK, 0, 3000, 3000));
    t.expect_sent({{ACK | PSH, 3000, 0, std::string(500, 'a')}});
}

// The peer's window is relative to the ACK of the segment that set it. A
// segment with an older SEQ than the last window update fails RFC 9293's
// SND.WL1 test and leaves SND.WND alone even when its ACK acknowledges new
// data: the retransmission that fills a hole, after later out-of-order
// segments updated the window, does exactly that. SND.UNA + SND.WND then
// points past the edge the peer offered; the usable window must end at
// SND.WL2 + SND.WND. (The sim's seed campaign found it: the sender put data
// beyond the edge, and in an echo with both windows nearly closed each side's
// ACKs then fell outside the other's window, until one gave up on RTOs.)
TEST_CASE("RFC 9293 §3.10.7.4 the send window ends where the segment that set it put it", "[tcp][window]") {
    TcbFixture t;
    fill_window_of_3000(t, 6000);
    // The peer's second segment arrives first (its first was lost): it
    // acknowledges 1000 and offers 3000 from there, an edge at 4000.
    t.recv(t.seg(ACK, 100, 1000, 3000), std::string(50, 'b'));
    t.expect_sent({{ACK, 3000, 0, std::string(1000, 'a')}});
    // Its first segment again, filling the hole (SEQ below SND.WL1): it now
    // acknowledges 2000 and offers 2000, the same edge at 4000. Nothing more
    // may go out (SND.UNA + SND.WND would say 5000).
    t.recv(t.seg(ACK, 0, 2000, 2000), std::string(100, 'b'));
    for (const OutSegment& o : t.out.segments)
        CHECK(int32_t(o.repr.seq.raw() + o.payload_len() - (kIss + 1)) <= 4000);
    t.clear();
    // A later segment in order moves the edge (SND.WL1 passes): sending resumes up to it.
    t.recv(t.seg(ACK, 150, 3000, 2000));
    t.expect_sent({{ACK, 4000, 150, std::string(1000, 'a')}});
}

// The same edge seen from the fast path: after the hole-filling segment
// acknowledged everything without a window update, the next in-order ACK
// carries the same window value as SND.WND but from a later ACK — its edge
// moved though its value did not. Comparing values, the fast path skipped
// the update and the sender stayed stuck behind the stale edge with data
// queued (the sim's echo at 5 % loss, seed shift 132: both ends probing each
// other's zero windows for an hour of virtual time).
TEST_CASE("RFC 9293 §3.10.7.4 the fast path takes a window whose edge moved with its value unchanged", "[tcp][window]") {
    TcbFixture t;
    fill_window_of_3000(t, 6000);
    t.recv(t.seg(ACK, 100, 1000, 3000), std::string(50, 'b'));  // edge 4000
    t.expect_sent({{ACK, 3000, 0, std::string(1000, 'a')}});
    // The hole filled: everything acknowledged (SEQ below SND.WL1: no update).
    t.recv(t.seg(ACK, 0, 4000, 1000), std::string(100, 'b'));
    for (const OutSegment& o : t.out.segments) CHECK(o.payload_len() == 0);
    t.clear();
    // In order, nothing in flight, the window field equal to SND.WND: the
    // fast path's case. The edge is 7000 now.
    t.recv(t.seg(ACK, 150, 4000, 3000));
    CHECK(t.tcb->stats().fast_path > 0);
    t.expect_sent({{ACK, 4000, 150, std::string(1000, 'a')}, {ACK | PSH, 5000, 150, std::string(1000, 'a')}});
}

// A peer that filled our window (its first segment lost, the rest ahead of
// the hole) has SND.NXT at our right edge, and its pure ACKs carry that SEQ.
// RFC 9293's acceptability test for a zero-length segment stops one short of
// the edge; Linux and FreeBSD accept it, and so must we, or the ACKs of such
// a peer are dropped with the data they acknowledge.
TEST_CASE("RFC 9293 §3.10.7.4 a pure ACK at the right edge of our window is taken", "[tcp][window]") {
    Config c = TcbFixture::default_config();
    c.rcv_buf = 4000;
    TcbFixture t(c);
    t.to_established();
    REQUIRE(t.send(std::string(1000, 'a')) == SendResult::Ok);
    t.flush();
    t.expect_sent({{ACK | PSH, 0, 0, std::string(1000, 'a'), 4000}});
    // [0,1000) lost; [1000,4000) arrives ahead of the hole: the window's
    // edge stays at 4000 with RCV.NXT at 0.
    t.recv(t.seg(ACK, 1000, 0), std::string(1000, 'b'));
    t.recv(t.seg(ACK, 2000, 0), std::string(1000, 'b'));
    t.recv(t.seg(ACK, 3000, 0), std::string(1000, 'b'));
    t.clear();
    REQUIRE(t.tcb->stats().rcv_wnd == 4000);
    // The peer's ACK of our data, SEQ = its SND.NXT = our right edge.
    t.recv(t.seg(ACK, 4000, 1000));
    CHECK(t.tcb->stats().snd_una == kIss + 1 + 1000);
    CHECK(t.has_event(EventKind::Acked));
}

// A retransmission from SND.UNA asks for one MSS; what lies past SND.MAX is
// new data and must fit the window like any (Linux's tcp_retransmit_skb()
// trims to the window's end too). A peer offering 500 bytes got 500, and
// the RTO sent those again with 500 new ones past its edge.
TEST_CASE("RFC 9293 §3.8.6 a retransmission sends no new data past the window", "[tcp][window]") {
    TcbFixture t;
    t.to_syn_sent();
    TcpRepr synack = t.seg(SYN | ACK, -1, 0, 500);
    synack.opts.mss = 1000;
    t.recv(synack);
    t.clear();
    REQUIRE(t.send(std::string(1000, 'a')) == SendResult::Ok);
    t.flush();
    t.expect_sent({{ACK, 0, 0, std::string(500, 'a')}});
    t.advance(t.tcb->stats().rto);
    t.expect_sent({{ACK, 0, 0, std::string(500, 'a')}});
    // The window opens: the rest goes.
    t.recv(t.seg(ACK, 0, 500, 1000));
    t.expect_sent({{ACK | PSH, 500, 0, std::string(500, 'a')}});
}

// ---------------------------------------------------------------------------
// RFC 6298 retransmission timer

TEST_CASE("RFC 6298 §5.4 RTO retransmits the first unacknowledged segment", "[tcp][rto]") {
    TcbFixture t;
    t.to_established();
    REQUIRE(t.send("data") == SendResult::Ok);
    t.flush();
    t.clear();
    Duration rto = t.tcb->stats().rto;
    t.advance(rto - 1ms);
    t.expect_nothing();
    t.advance(1ms);
    t.expect_sent({{ACK | PSH, 0, 0, "data"}});
    CHECK(t.tcb->stats().retrans_timeout == 1);
}

TEST_CASE("RFC 6298 §5.5 backoff doubles RTO", "[tcp][rto]") {
    TcbFixture t;
    t.to_established();
    Duration rto0 = t.tcb->stats().rto;
    REQUIRE(t.send("x") == SendResult::Ok);
    t.flush();
    t.clear();
    t.advance(rto0);
    t.expect_sent({{ACK | PSH, 0, 0, "x"}});
    CHECK(t.tcb->stats().rto == 2 * rto0);
    t.advance(2 * rto0 - 1ms);
    t.expect_nothing();
    t.advance(1ms);
    t.expect_sent({{ACK | PSH, 0, 0, "x"}});
    CHECK(t.tcb->stats().rto == 4 * rto0);
    CHECK(t.tcb->stats().backoff == 2);  // what ss shows as backoff:2
    // An ACK of new data ends the run of timeouts.
    t.recv(t.seg(ACK, 0, 1));
    CHECK(t.tcb->stats().backoff == 0);
}

TEST_CASE("RFC 6298 §2 RTT sample sets SRTT/RTTVAR and the RTO floor applies", "[tcp][rto]") {
    TcbFixture t;
    t.to_established();  // SYN RTT sample of 0 -> srtt ~ 1 us
    REQUIRE(t.send("x") == SendResult::Ok);
    t.flush();
    t.advance(200us);
    t.recv(t.seg(ACK, 0, 1));
    auto s = t.tcb->stats();
    CHECK(s.rtt_samples >= 1);
    CHECK(s.rto == 5ms);  // min_rto floor (srtt + 4 rttvar is far below)
    t.clear();
    // Slow path: a 100 ms sample raises the RTO above the floor.
    REQUIRE(t.send("y") == SendResult::Ok);
    t.flush();
    t.now += 100ms;
    t.recv(t.seg(ACK, 0, 2));
    CHECK(t.tcb->stats().rto > 100ms);
}

TEST_CASE("RFC 6298 retry limit aborts with RetransmitTimeout", "[tcp][rto]") {
    Config c = TcbFixture::default_config();
    c.max_retries = 3;
    c.max_rto = 4s;
    c.retransmit_give_up = 0s;  // count only
    TcbFixture t(c);
    t.to_established();
    REQUIRE(t.send("x") == SendResult::Ok);
    t.flush();
    t.clear();
    t.advance(60s);
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::RetransmitTimeout);
    CHECK(t.tcb->stats().retrans_timeout == 3);
    REQUIRE(!t.out.segments.empty());
    CHECK(t.out.segments.back().repr.flags == RST);
}

TEST_CASE("RFC 1122 §4.2.3.5 R2: no abort before retransmit_give_up, however many RTOs", "[tcp][rto]") {
    Config c = TcbFixture::default_config();
    c.max_retries = 3;
    c.max_rto = 4s;
    c.retransmit_give_up = 100s;
    TcbFixture t(c);
    t.to_established();
    REQUIRE(t.send("x") == SendResult::Ok);
    t.flush();
    t.clear();
    t.advance(90s);
    CHECK(t.tcb->state() == State::Established);
    CHECK(t.tcb->stats().retrans_timeout > 3);  // still retransmitting past max_retries
    t.advance(20s);
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::RetransmitTimeout);
    REQUIRE(!t.out.segments.empty());
    CHECK(t.out.segments.back().repr.flags == RST);
}

TEST_CASE("RFC 6298 §5 SYN retries exhausted: ConnectTimeout", "[tcp][rto]") {
    Config c = TcbFixture::default_config();
    c.syn_retries = 2;
    TcbFixture t(c);
    t.to_syn_sent();
    t.advance(1s);
    t.expect_sent({{SYN, -1}});
    t.advance(2s);
    t.expect_sent({{SYN, -1}});
    t.advance(4s);
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::ConnectTimeout);
}

TEST_CASE("RFC 6298 §3 Karn: no RTT sample from a retransmitted segment", "[tcp][rto]") {
    TcbFixture t;
    t.to_established();
    uint32_t samples = t.tcb->stats().rtt_samples;
    REQUIRE(t.send("x") == SendResult::Ok);
    t.flush();
    t.advance(1s);  // retransmission
    t.recv(t.seg(ACK, 0, 1));
    CHECK(t.tcb->stats().rtt_samples == samples);
}

// ---------------------------------------------------------------------------
// loss recovery

namespace {
// Established with 1000-byte MSS and `n` segments of 'a'..: in flight.
void send_segments(TcbFixture& t, int n) {
    for (int i = 0; i < n; ++i) REQUIRE(t.send(std::string(1000, char('a' + i))) == SendResult::Ok);
    t.flush();
    REQUIRE(t.out.segments.size() == size_t(n));
    t.clear();
}
void establish_mss1000(TcbFixture& t, bool sack) {
    t.to_syn_sent();
    TcpRepr synack = t.seg(SYN | ACK, -1, 0);
    synack.opts.mss = 1000;
    synack.opts.sack_permitted = sack;
    t.recv(synack);
    t.clear();
}
} // namespace

TEST_CASE("RFC 5681 §3.2 fast retransmit after three duplicate ACKs, RFC 3042 limited transmit", "[tcp][recovery]") {
    TcbFixture t;
    establish_mss1000(t, false);
    send_segments(t, 4);
    REQUIRE(t.send(std::string(2000, 'z')) == SendResult::Ok);  // new data for limited transmit
    t.recv(t.seg(ACK, 0, 0));  // dupack 1
    // RFC 3042: one new segment per of the first two dupacks (cwnd allows 4 here... IW is 10)
    t.clear();
    t.recv(t.seg(ACK, 0, 0));  // dupack 2
    t.clear();
    t.recv(t.seg(ACK, 0, 0));  // dupack 3 -> fast retransmit of segment 0
    REQUIRE(!t.out.segments.empty());
    CHECK(t.out.segments[0].repr.seq == SeqNum(kIss + 1));
    CHECK(TcbFixture::payload_of(t.out.segments[0]) == std::string(1000, 'a'));
    CHECK(t.tcb->stats().retrans_fast == 1);
    CHECK(t.tcb->stats().fast_recoveries == 1);
    CHECK(t.tcb->stats().dupacks == 3);
}

TEST_CASE("RFC 6582 §3.2 NewReno partial ACK retransmits the next hole", "[tcp][recovery]") {
    TcbFixture t;
    establish_mss1000(t, false);
    send_segments(t, 4);
    for (int i = 0; i < 3; ++i) t.recv(t.seg(ACK, 0, 0));
    t.clear();
    // Partial ACK: segment 0 repaired, segment 1 also lost.
    t.recv(t.seg(ACK, 0, 1000));
    REQUIRE(!t.out.segments.empty());
    CHECK(t.out.segments[0].repr.seq == SeqNum(kIss + 1 + 1000));
    CHECK(TcbFixture::payload_of(t.out.segments[0]) == std::string(1000, 'b'));
    t.clear();
    t.recv(t.seg(ACK, 0, 4000));  // full ACK ends recovery
    t.expect_nothing();
    CHECK(t.tcb->stats().bytes_in_flight == 0);
}

TEST_CASE("RFC 6675 §5 SACK loss recovery retransmits the lost segment", "[tcp][recovery][sack]") {
    Config c = TcbFixture::default_config();
    c.sack = true;
    TcbFixture t(c);
    establish_mss1000(t, true);
    REQUIRE(t.tcb->stats().sack_ok);
    send_segments(t, 5);
    // Segment 1 (1000..2000) lost; 2, 3, 4 SACKed.
    for (int i = 2; i <= 4; ++i) {
        TcpRepr a = t.seg(ACK, 0, 1000);
        a.opts.sack_count = 1;
        a.opts.sack[0] = SackBlock{SeqNum(kIss + 1 + 2000), SeqNum(kIss + 1 + 1000 * (i + 1))};
        t.recv(a);
    }
    bool retransmitted = false;
    for (auto& o : t.out.segments)
        if (o.repr.seq == SeqNum(kIss + 1 + 1000) && TcbFixture::payload_of(o) == std::string(1000, 'b'))
            retransmitted = true;
    CHECK(retransmitted);
    CHECK(t.tcb->stats().fast_recoveries == 1);
}

TEST_CASE("RFC 6675 §4 NextSeg rule 4: one rescue retransmission of a lost tail instead of waiting for the RTO",
          "[tcp][recovery][sack]") {
    Config c = TcbFixture::default_config();
    c.sack = true;
    TcbFixture t(c);
    establish_mss1000(t, true);
    send_segments(t, 5);  // 'a' .. 'e' at 0, 1000, .., 4000
    // Segment 1 and the tail (4) lost; 2 and 3 SACKed, then three duplicate ACKs.
    for (int right : {3000, 4000, 4000, 4000}) {  // the first also acknowledges segment 0
        TcpRepr a = t.seg(ACK, 0, 1000);
        a.opts.sack_count = 1;
        a.opts.sack[0] = SackBlock{SeqNum(kIss + 1 + 2000), SeqNum(kIss + 1 + uint32_t(right))};
        t.recv(a);
    }
    REQUIRE(t.tcb->stats().fast_recoveries == 1);
    bool hole = false;
    for (auto& o : t.out.segments) hole |= o.repr.seq == SeqNum(kIss + 1 + 1000);
    CHECK(hole);
    t.clear();
    // The hole is filled: everything up to the lost tail is acknowledged. No
    // SACK can ever arrive above the tail: rule 4 sends it now.
    t.recv(t.seg(ACK, 0, 4000));
    REQUIRE(!t.out.segments.empty());
    CHECK(t.out.segments[0].repr.seq == SeqNum(kIss + 1 + 4000));
    CHECK(TcbFixture::payload_of(t.out.segments[0]) == std::string(1000, 'e'));
    CHECK(t.tcb->stats().retrans_rescue == 1);
    t.clear();
    // Once per window: a further ACK without progress sends nothing more.
    t.recv(t.seg(ACK, 0, 4000));
    CHECK(t.tcb->stats().retrans_rescue == 1);
}

// ---------------------------------------------------------------------------
// receive side: reassembly, SACK blocks, delayed ACK

TEST_CASE("RFC 2018 §4 out-of-order data: immediate ACK with SACK block, hole fill delivers in order", "[tcp][sack]") {
    Config c = TcbFixture::default_config();
    c.sack = true;
    TcbFixture t(c);
    t.to_syn_sent();
    TcpRepr synack = t.seg(SYN | ACK, -1, 0);
    synack.opts.sack_permitted = true;
    t.recv(synack);
    t.clear();
    t.recv(t.seg(ACK, 5, 0), "world");
    CHECK(t.take_readable().empty());
    REQUIRE(t.out.segments.size() == 1);
    auto& a = t.out.segments[0].repr;
    CHECK(a.ack == SeqNum(kIrs + 1));
    REQUIRE(a.opts.sack_count == 1);
    CHECK(a.opts.sack[0] == SackBlock{SeqNum(kIrs + 1 + 5), SeqNum(kIrs + 1 + 10)});
    CHECK(t.tcb->stats().ooo_segments == 1);
    t.clear();
    t.recv(t.seg(ACK, 0, 0), "hello");
    CHECK(t.take_readable() == "helloworld");
    t.expect_sent({{ACK, 0, 10}});
}

TEST_CASE("RFC 1122 §4.2.3.2 delayed ACK: every second segment or the timer", "[tcp][delack]") {
    Config c = TcbFixture::default_config();
    c.delayed_ack_segments = 2;
    c.delayed_ack = 1ms;
    TcbFixture t(c);
    t.to_established();
    t.recv(t.seg(ACK, 0, 0), "a");
    t.expect_nothing();
    t.recv(t.seg(ACK, 1, 0), "b");
    t.expect_sent({{ACK, 0, 2}});
    t.recv(t.seg(ACK, 2, 0), "c");
    t.expect_nothing();
    t.advance(1ms);
    t.expect_sent({{ACK, 0, 3}});
    CHECK(t.tcb->stats().delayed_acks == 1);
}

namespace {
// Delayed ACKs every second segment or after 1 ms, count-triggered ACKs held 10 us (as the engine).
Config hold_config() {
    Config c = TcbFixture::default_config();
    c.delayed_ack_segments = 2;
    c.delayed_ack = 1ms;
    c.ack_hold = 10us;
    return c;
}

// Nothing yet; the held ACK of `ack` goes exactly ack_hold (10 us) later.
void expect_held_ack(TcbFixture& t, int32_t ack) {
    t.expect_nothing();
    CHECK(t.tcb->next_deadline() == t.now + 10us);
    t.advance(9us);
    t.expect_nothing();
    t.advance(1us);
    t.expect_sent({{ACK, 0, ack}});
}
} // namespace

TEST_CASE("ack_hold: the count-triggered ACK is held, and a reply sent meanwhile carries it", "[tcp][delack]") {
    Config c = hold_config();
    c.ack_hold_segments = 4;
    TcbFixture t(c);
    t.to_established();
    // A train of three segments: held, then one ACK when the hold ends.
    t.recv(t.seg(ACK, 0, 0), "aa");
    t.recv(t.seg(ACK, 2, 0), "bb");
    t.recv(t.seg(ACK, 4, 0), "cc");
    expect_held_ack(t, 6);
    // A request in two segments answered within the hold: the reply carries the ACK.
    t.recv(t.seg(ACK, 6, 0), "dd");
    t.recv(t.seg(ACK, 8, 0), "ee");
    t.expect_nothing();
    REQUIRE(t.send("reply") == SendResult::Ok);
    t.flush();
    t.expect_sent({{ACK | PSH, 0, 10, "reply"}});
    t.advance(1ms);
    t.expect_nothing();
    // ack_hold_segments unacknowledged: the ACK goes at the next flush (the
    // end of the engine's RX burst), not later, and not while the call runs.
    t.recv(t.seg(ACK, 10, 0), "f");
    t.recv(t.seg(ACK, 11, 0), "g");
    t.recv(t.seg(ACK, 12, 0), "h");
    t.expect_nothing();
    t.recv(t.seg(ACK, 13, 0), "i");
    t.expect_nothing();
    CHECK(t.tcb->has_pending_output());
    CHECK(t.tcb->ack_owed_at_flush());
    t.recv(t.seg(ACK, 14, 0), "j");  // more of the train: still one ACK
    t.expect_nothing();
    t.flush();
    t.expect_sent({{ACK, 5, 15}});
    CHECK_FALSE(t.tcb->ack_owed_at_flush());
    t.flush();
    t.expect_nothing();
    // A reply made before that flush carries the ACK: no pure ACK at all.
    for (uint32_t k = 0; k < 4; ++k) t.recv(t.seg(ACK, 15 + k, 0), "k");
    t.expect_nothing();
    REQUIRE(t.send("r2") == SendResult::Ok);
    t.flush();
    t.expect_sent({{ACK | PSH, 5, 19, "r2"}});
    // Without a flush the hold's timer still sends it.
    for (uint32_t k = 0; k < 4; ++k) t.recv(t.seg(ACK, 19 + k, 0), "m");
    t.expect_nothing();
    t.advance(10us);
    t.expect_sent({{ACK, 7, 23}});
    // Out-of-order data is still acknowledged at once.
    t.recv(t.seg(ACK, 30, 0), "zz");
    t.expect_sent({{ACK, 7, 23}});
}

TEST_CASE("ack_hold: a segment arriving alone without PSH is held, not delayed: its sender is waiting for the ACK",
          "[tcp][delack]") {
    TcbFixture t(hold_config());
    t.to_established();
    // A pushed segment alone (a small request): the delayed-ACK timer, for
    // the answer to carry the ACK.
    t.recv(t.seg(ACK | PSH, 0, 0), "req");
    t.expect_nothing();
    CHECK(t.tcb->next_deadline() == t.now + 1ms);
    t.advance(1ms);
    t.expect_sent({{ACK, 0, 3}});
    // An unpushed one alone (a sender stopped by its window, or the new
    // segment of a tail-loss probe after our last ACK was lost): held for
    // ack_hold like a count-triggered ACK, so the sender waits ~10 us, not 1 ms.
    t.recv(t.seg(ACK, 3, 0), "mid");
    expect_held_ack(t, 6);
    // More of the train within the hold re-arms it, and the pushed end is held too: one ACK.
    t.recv(t.seg(ACK, 6, 0), "x");
    t.advance(5us);
    t.recv(t.seg(ACK | PSH, 7, 0), "y");
    t.advance(9us);
    t.expect_nothing();
    t.advance(1us);
    t.expect_sent({{ACK, 0, 8}});
}

TEST_CASE("ack_hold: a train arriving a few microseconds apart re-arms the hold and gets one ACK", "[tcp][delack]") {
    Config c = hold_config();
    TcbFixture t(c);
    t.to_established();
    // Frames of one message pushed out one by one, 8 us apart: each re-arms
    // the hold, so nothing goes at 10 us after the second.
    uint32_t seq = 0;
    for (int k = 0; k < 6; ++k, seq += 2) {
        t.recv(t.seg(uint8_t(k == 5 ? ACK | PSH : ACK), seq, 0), "mm");
        t.expect_nothing();
        t.advance(8us);
        t.expect_nothing();
    }
    CHECK(t.tcb->next_deadline() == t.now + 2us);
    t.advance(2us);  // the train paused for ack_hold
    t.expect_sent({{ACK, 0, 12}});
    CHECK(t.tcb->stats().delayed_acks == 1);
    // The default ack_hold_segments still ends a long train at the next flush.
    for (uint32_t k = 0; k < c.ack_hold_segments - 1; ++k, ++seq) t.recv(t.seg(ACK, seq, 0), "n");
    t.flush();
    t.expect_nothing();
    t.recv(t.seg(ACK, seq++, 0), "n");
    t.expect_nothing();
    t.flush();
    t.expect_sent({{ACK, 0, int32_t(seq)}});
}

TEST_CASE("ack_hold: the held ACK goes at the next flush once the peer used half the window", "[tcp][delack]") {
    Config c = hold_config();
    c.rcv_buf = 1000;  // below ack_hold_segments full segments: the window binds first
    TcbFixture t(c);
    t.to_established();
    for (uint32_t k = 0; k < 4; ++k) t.recv(t.seg(ACK, k * 100, 0), std::string(100, 'w'));
    t.flush();
    t.expect_nothing();  // 400 of 1000 bytes: the sender has more than half left
    t.recv(t.seg(ACK, 400, 0), std::string(100, 'w'));
    t.expect_nothing();  // not while the call runs: a reply would carry it
    CHECK(t.tcb->ack_owed_at_flush());
    t.flush();
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.ack == SeqNum(kIrs + 1 + 500));
}

TEST_CASE("RFC 9293 §3.10.7.4 first: unacceptable segment gets an ACK and is dropped", "[tcp][data]") {
    TcbFixture t;
    t.to_established();
    t.recv(t.seg(ACK, 70000, 0), "far");
    t.expect_sent({{ACK, 0, 0}});
    CHECK(t.take_readable().empty());
    CHECK(t.tcb->stats().drop_not_acceptable == 1);
}

// ---------------------------------------------------------------------------
// flow control

TEST_CASE("RFC 9293 §3.8.6.2.2 receive window shrinks with unread data and reopens on consume", "[tcp][window]") {
    Config c = TcbFixture::default_config();
    c.rcv_buf = 4000;
    TcbFixture t(c);
    t.to_established();
    t.recv(t.seg(ACK, 0, 0), std::string(4000, 'x'));
    t.expect_sent({{ACK, 0, 4000, "", 0}});
    CHECK(t.tcb->stats().zero_window_sent >= 1);
    t.take_readable();
    t.tcb->consume(4000);
    CHECK(t.tcb->has_pending_output());
    t.flush();
    t.expect_sent({{ACK, 0, 4000, "", 4000}});
}

TEST_CASE("RFC 9293 §3.8.6.1 zero window: persist timer sends probes with backoff", "[tcp][window]") {
    TcbFixture t;
    t.to_syn_sent();
    t.recv(t.seg(SYN | ACK, -1, 0, 0));  // peer window 0
    t.clear();
    REQUIRE(t.send("blocked") == SendResult::Ok);
    t.flush();
    t.expect_nothing();
    Duration rto = t.tcb->stats().rto;
    t.advance(rto);
    t.expect_sent({{ACK, -1, 0}});  // <SEQ=SND.UNA-1>
    CHECK(t.tcb->stats().zero_window_probes == 1);
    t.advance(rto);
    t.expect_nothing();  // backed off to 2*RTO
    t.advance(rto);
    t.expect_sent({{ACK, -1, 0}});
    // Window opens: data flows.
    t.recv(t.seg(ACK, 0, 0, 1000));
    t.expect_sent({{ACK | PSH, 0, 0, "blocked"}});
}

TEST_CASE("RFC 9293 §3.7.4 Nagle holds a small segment while data is in flight", "[tcp][nagle]") {
    Config c = TcbFixture::default_config();
    c.nagle = true;
    TcbFixture t(c);
    t.to_established();
    REQUIRE(t.send("a") == SendResult::Ok);
    t.flush();
    t.expect_sent({{ACK | PSH, 0, 0, "a"}});
    REQUIRE(t.send("b") == SendResult::Ok);
    t.flush();
    t.expect_nothing();
    t.recv(t.seg(ACK, 0, 1));
    t.expect_sent({{ACK | PSH, 1, 0, "b"}});
}

TEST_CASE("Nagle off (default) sends small segments at once", "[tcp][nagle]") {
    TcbFixture t;
    t.to_established();
    REQUIRE(t.send("a") == SendResult::Ok);
    t.flush();
    REQUIRE(t.send("b") == SendResult::Ok);
    t.flush();
    t.expect_sent({{ACK | PSH, 0, 0, "a"}, {ACK | PSH, 1, 0, "b"}});
}

// ---------------------------------------------------------------------------
// keepalive

TEST_CASE("RFC 1122 §4.2.3.6 keepalive probes, then abort with KeepaliveTimeout", "[tcp][keepalive]") {
    Config c = TcbFixture::default_config();
    c.keepalive = KeepaliveConfig{true, 10s, 1s, 3};
    TcbFixture t(c);
    t.to_established();
    t.advance(10s);
    t.expect_sent({{ACK, -1, 0}});
    t.recv(t.seg(ACK, 0, 0));  // answered: idle restarts
    t.expect_nothing();
    t.advance(9s);
    t.expect_nothing();
    t.advance(1s);
    t.expect_sent({{ACK, -1, 0}});
    t.advance(3s);
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::KeepaliveTimeout);
}

// ---------------------------------------------------------------------------
// RFC 7323

TEST_CASE("RFC 7323 §2 window scale negotiated and applied", "[tcp][rfc7323]") {
    Config c = TcbFixture::default_config();
    c.window_scale = true;
    c.rcv_buf = 1u << 20;
    TcbFixture t(c);
    t.to_syn_sent();
    TcpRepr synack = t.seg(SYN | ACK, -1, 0, 1000);
    synack.opts.wscale = 3;
    t.recv(synack);
    auto s = t.tcb->stats();
    CHECK(s.snd_wscale == 3);
    CHECK(s.rcv_wscale == 5);   // 1 MiB >> 5 fits 16 bits
    CHECK(s.snd_wnd == 1000);   // the SYN-ACK's window is not scaled
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.window == ((1u << 20) >> 5));
    t.clear();
    t.recv(t.seg(ACK, 0, 0, 1000));
    CHECK(t.tcb->stats().snd_wnd == 8000);
}

namespace {
Config ts_config(bool sack = false) {
    Config c = TcbFixture::default_config();
    c.timestamps = true;
    c.sack = sack;
    return c;
}
// ESTABLISHED with timestamps (SACK too when the config offers it); the
// peer's SYN-ACK carried TSval 1000.
void established_ts(TcbFixture& t) {
    t.to_syn_sent();
    TcpRepr synack = t.seg(SYN | ACK, -1, 0);
    synack.opts.ts = wire::Timestamps{1000, 0};
    synack.opts.sack_permitted = true;
    t.recv(synack);
    REQUIRE(t.tcb->stats().ts_ok);
    REQUIRE(t.tcb->stats().sack_ok == t.cfg.sack);
    t.clear();
}
// established_ts(), then three bytes ("new") with TSval 2000: TS.Recent.
void established_ts_2000(TcbFixture& t) {
    established_ts(t);
    TcpRepr d = t.seg(ACK, 0, 0);
    d.opts.ts = wire::Timestamps{2000, 0};
    t.recv(d, "new");
    REQUIRE(t.take_readable() == "new");
    t.clear();
}
} // namespace

TEST_CASE("RFC 7323 §5 PAWS drops an old timestamp", "[tcp][rfc7323]") {
    TcbFixture t(ts_config());
    established_ts_2000(t);
    TcpRepr old = t.seg(ACK, 3, 0);
    old.opts.ts = wire::Timestamps{1500, 0};
    t.recv(old, "old");
    CHECK(t.take_readable().empty());
    CHECK(t.tcb->stats().drop_paws == 1);
    REQUIRE(t.out.segments.size() == 1);  // an ACK answers it
    CHECK(t.out.segments[0].repr.opts.ts->tsecr == 2000);
}

// Linux's TCP_PAWS_WINDOW: one tick of the peer's clock is not "older";
// once the clock's rate shows, a millisecond of it is not either.
TEST_CASE("RFC 7323 §5 PAWS allows a millisecond of the peer's clock", "[tcp][rfc7323]") {
    for (uint32_t per_ms : {1u, 1000u}) {  // a ms clock (Linux), a us clock (crescent)
        INFO(per_ms << " ticks per ms");
        TcbFixture t(ts_config());
        established_ts(t);
        int64_t seq = 0;  // RCV.NXT, relative: each accepted segment carries one byte
        auto send = [&](uint32_t tsval) {
            TcpRepr d = t.seg(ACK, seq, 0);
            d.opts.ts = wire::Timestamps{tsval, 0};
            t.recv(d, "x");
            const bool taken = t.take_readable() == "x";
            seq += taken;
            return taken;
        };
        // Right after the handshake the rate is unknown: one tick passes, two do not.
        CHECK(send(1000 + 10 * per_ms));
        CHECK(send(1000 + 10 * per_ms - 1));
        CHECK_FALSE(send(1000 + 10 * per_ms - 2));
        CHECK(t.tcb->stats().drop_paws == 1);
        // 100 ms later the peer's clock advanced 100 ms of ticks.
        t.advance(100ms);
        const uint32_t now_ts = 1000 + 100 * per_ms;
        CHECK(send(now_ts));
        CHECK(send(now_ts - per_ms));            // a millisecond older: data that was overtaken
        CHECK_FALSE(send(now_ts - per_ms - 2));  // more: an old duplicate
        CHECK(t.tcb->stats().drop_paws == 2);
    }
}

TEST_CASE("RFC 7323 §5 + RFC 2883: an old duplicate that PAWS drops is still reported (D-SACK)", "[tcp][rfc7323]") {
    TcbFixture t(ts_config(true));
    established_ts_2000(t);
    TcpRepr old = t.seg(ACK, 0, 0);
    old.opts.ts = wire::Timestamps{1500, 0};
    t.recv(old, "new");
    CHECK(t.tcb->stats().drop_paws == 1);
    REQUIRE(t.out.segments.size() == 1);
    const TcpRepr& a = t.out.segments[0].repr;
    REQUIRE(a.opts.sack_count >= 1);
    CHECK(a.opts.sack[0].left == SeqNum(kIrs + 1));
    CHECK(a.opts.sack[0].right == SeqNum(kIrs + 4));
    CHECK(t.tcb->stats().dsacks_sent == 1);
}

TEST_CASE("RFC 7323 §5: a duplicate ACK that a newer segment overtook is taken for its SACK blocks (Linux's "
          "tcp_disordered_ack)",
          "[tcp][rfc7323]") {
    TcbFixture t(ts_config(true));
    established_ts_2000(t);
    for (int i = 0; i < 3; ++i) REQUIRE(t.send(std::string(1000, 'a')) == SendResult::Ok);
    t.flush();
    t.clear();
    // A duplicate ACK with a SACK block, its TSval 3 ticks older than TS.Recent (2000).
    TcpRepr dup = t.seg(ACK, 3, 0);
    dup.opts.ts = wire::Timestamps{1997, 0};
    dup.opts.sack[dup.opts.sack_count++] = SackBlock{SeqNum(kIss + 1 + 1000), SeqNum(kIss + 1 + 2000)};
    t.recv(dup);
    CHECK(t.tcb->stats().drop_paws == 0);
    CHECK(t.tcb->stats().dupacks == 1);
    // Data with the same TSval is not an ACK: dropped.
    TcpRepr d = t.seg(ACK, 3, 0);
    d.opts.ts = wire::Timestamps{1997, 0};
    t.recv(d, "zz");
    CHECK(t.tcb->stats().drop_paws == 1);
    CHECK(t.take_readable().empty());
}

TEST_CASE("RFC 7323 §3.2 timestamps reduce the effective MSS", "[tcp][rfc7323]") {
    Config c = TcbFixture::default_config();
    c.timestamps = true;
    TcbFixture t(c);
    t.to_syn_sent();
    TcpRepr synack = t.seg(SYN | ACK, -1, 0);
    synack.opts.mss = 1460;
    synack.opts.ts = wire::Timestamps{1, 0};
    t.recv(synack);
    CHECK(t.tcb->stats().snd_mss == 1448);
}

// ---------------------------------------------------------------------------
// RFC 5961

TEST_CASE("RFC 5961 §3.2 in-window RST triggers challenge ACK", "[tcp][rfc5961]") {
    TcbFixture t;
    t.to_established();
    t.recv(t.seg(RST, 100, 0));
    CHECK(t.tcb->state() == State::Established);
    t.expect_sent({{ACK, 0, 0}});
    CHECK(t.tcb->stats().challenge_acks == 1);
    t.recv(t.seg(RST, 100000, 0));  // out of window: silently dropped
    t.expect_nothing();
}

TEST_CASE("RFC 5961 §4.2 SYN in a synchronized state triggers challenge ACK", "[tcp][rfc5961]") {
    TcbFixture t;
    t.to_established();
    t.recv(t.seg(SYN, 10, 0));
    CHECK(t.tcb->state() == State::Established);
    t.expect_sent({{ACK, 0, 0}});
}

TEST_CASE("RFC 5961 §5.2 ACK validity: ACK of unsent data is answered and dropped", "[tcp][rfc5961]") {
    TcbFixture t;
    t.to_established();
    t.recv(t.seg(ACK | PSH, 0, 500), "data");
    t.expect_sent({{ACK, 0, 0}});
    CHECK(t.take_readable().empty());
    CHECK(t.tcb->stats().drop_bad_ack == 1);
}

TEST_CASE("RFC 5961 §7 challenge ACK rate limit", "[tcp][rfc5961]") {
    Config c = TcbFixture::default_config();
    c.challenge_ack_limit = 2;
    TcbFixture t(c);
    t.to_established();
    for (int i = 0; i < 5; ++i) t.recv(t.seg(SYN, 10, 0));
    CHECK(t.out.segments.size() == 2);
    CHECK(t.tcb->stats().challenge_acks_suppressed == 3);
    t.clear();
    t.now += 1s;
    t.recv(t.seg(SYN, 10, 0));
    CHECK(t.out.segments.size() == 1);
}

TEST_CASE("RFC 1122 §4.2.2.13 data after close() resets the connection", "[tcp][state]") {
    TcbFixture t;
    t.to_established();
    t.tcb->close();
    t.flush();
    t.clear();
    t.recv(t.seg(ACK, 0, 1), "unwanted");
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::AbortedLocally);
    REQUIRE(!t.out.segments.empty());
    CHECK(t.out.segments.back().repr.flags == RST);
}

// ---------------------------------------------------------------------------
// ECN

TEST_CASE("RFC 3168 §6.1.1 ECN negotiated for DCTCP; data is ECT(0); CE echoed (RFC 8257 §3.2)", "[tcp][ecn]") {
    Config c = TcbFixture::default_config();
    c.cc = CcAlgo::Dctcp;
    TcbFixture t(c);
    t.tcb->connect(SeqNum(kIss), t.now, t.out);
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.flags == (SYN | ECE | CWR));
    t.clear();
    t.recv(t.seg(SYN | ACK | ECE, -1, 0));
    REQUIRE(t.tcb->stats().ecn_ok);
    t.clear();
    REQUIRE(t.send("x") == SendResult::Ok);
    t.flush();
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].ip_ecn == 2);
    t.clear();
    t.recv(t.seg(ACK, 0, 1), "ce", 3);
    REQUIRE(!t.out.segments.empty());
    CHECK(t.out.segments.back().repr.has(ECE));
}

TEST_CASE("RFC 3042 limited transmit: one new segment on each of the first two duplicate ACKs", "[tcp][recovery]") {
    TcbFixture t;
    establish_mss1000(t, false);
    uint32_t cwnd = t.tcb->stats().cwnd;
    REQUIRE(cwnd % 1000 == 0);
    int n = int(cwnd / 1000);
    for (int i = 0; i < n; ++i) REQUIRE(t.send(std::string(1000, 'a')) == SendResult::Ok);
    t.flush();
    REQUIRE(t.out.segments.size() == size_t(n));  // cwnd full
    t.clear();
    REQUIRE(t.send(std::string(3000, 'n')) == SendResult::Ok);
    t.flush();
    t.expect_nothing();  // cwnd-limited
    int64_t next = int64_t(n) * 1000;
    t.recv(t.seg(ACK, 0, 0));
    t.expect_sent({{ACK, next, 0, std::string(1000, 'n')}});
    t.recv(t.seg(ACK, 0, 0));
    t.expect_sent({{ACK, next + 1000, 0, std::string(1000, 'n')}});
    t.recv(t.seg(ACK, 0, 0));  // third: fast retransmit of the first segment
    REQUIRE(!t.out.segments.empty());
    CHECK(t.out.segments[0].repr.seq == SeqNum(kIss + 1));
    CHECK(t.tcb->stats().retrans_fast == 1);
}

TEST_CASE("RFC 3168 §6.1 classic ECN: ECE until CWR, sender reduces once and sets CWR", "[tcp][ecn]") {
    Config c = TcbFixture::default_config();
    c.ecn = EcnMode::On;
    TcbFixture t(c);
    t.tcb->connect(SeqNum(kIss), t.now, t.out);
    CHECK(t.out.segments.at(0).repr.flags == (SYN | ECE | CWR));
    t.clear();
    t.recv(t.seg(SYN | ACK | ECE, -1, 0));
    REQUIRE(t.tcb->stats().ecn_ok);
    t.clear();
    // Receiver side: CE -> ECE on every ACK until the peer's CWR.
    t.recv(t.seg(ACK, 0, 0), "a", 3);
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.has(ECE));
    t.clear();
    t.recv(t.seg(ACK, 1, 0), "b", 2);
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.has(ECE));
    t.clear();
    t.recv(t.seg(ACK | CWR, 2, 0), "c", 2);
    REQUIRE(t.out.segments.size() == 1);
    CHECK(!t.out.segments[0].repr.has(ECE));
    t.clear();
    // Sender side: an ECE on an ACK of new data reduces cwnd once; next data carries CWR.
    REQUIRE(t.send(std::string(2000, 'x')) == SendResult::Ok);
    t.flush();
    t.clear();
    uint32_t cwnd = t.tcb->stats().cwnd;
    t.recv(t.seg(ACK | ECE, 3, 1000));
    CHECK(t.tcb->stats().cwnd < cwnd);
    uint32_t reduced = t.tcb->stats().cwnd;
    t.recv(t.seg(ACK | ECE, 3, 2000));  // same window of data: no second reduction
    CHECK(t.tcb->stats().cwnd >= reduced);
    t.clear();
    REQUIRE(t.send("y") == SendResult::Ok);
    t.flush();
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.has(CWR));
    CHECK(t.out.segments[0].ip_ecn == 2);
}

// A connection opened by a SYN cookie starts from the same sequence state as
// any other: its ECN reaction point (and RFC 6582's recover) is the ISS, not
// zero, which for an ISS in the upper half of the space would make the first
// ECE look "older" than the last reaction and leave it unanswered.
TEST_CASE("RFC 3168 §6.1.2 a SYN-cookie connection reduces on its first ECE, whatever its ISS", "[tcp][ecn][syncookie]") {
    for (uint32_t iss : {uint32_t(kIss), 0x90000000u, 0xfffffff0u}) {
        CAPTURE(iss);
        Config c = TcbFixture::default_config();
        c.ecn = EcnMode::On;
        c.cc = CcAlgo::NewReno;
        TcbFixture t(c);
        Tcb::CookieParams p;
        p.iss = SeqNum(iss);
        p.irs = SeqNum(kIrs);
        p.peer_mss = 1460;
        p.ecn_ok = true;
        TcpRepr ack;
        ack.src_port = 6000;
        ack.dst_port = 5000;
        ack.flags = ACK;
        ack.seq = SeqNum(kIrs + 1);
        ack.ack = SeqNum(iss + 1);
        ack.window = 65535;
        t.tcb->accept_cookie(p, ack, t.now, t.out);
        REQUIRE(t.tcb->state() == State::Established);
        REQUIRE(t.tcb->stats().ecn_ok);
        t.clear();
        REQUIRE(t.send(std::string(2000, 'x')) == SendResult::Ok);
        t.flush();
        t.clear();
        const uint32_t cwnd = t.tcb->stats().cwnd;
        TcpRepr ece = ack;
        ece.flags = ACK | ECE;
        ece.ack = SeqNum(iss + 1 + 1000);
        t.recv(ece);
        CHECK(t.tcb->stats().cwnd < cwnd);
    }
}

TEST_CASE("RFC 5961 §5.2 an ACK older than SND.UNA - MAX.SND.WND gets a challenge ACK", "[tcp][rfc5961]") {
    TcbFixture t;
    t.to_established();
    t.recv(t.seg(ACK | PSH, 0, -100000), "data");
    t.expect_sent({{ACK, 0, 0}});
    CHECK(t.take_readable().empty());
    CHECK(t.tcb->stats().challenge_acks == 1);
}

TEST_CASE("RFC 9293 §3.10.7.4 SYN-RECEIVED retransmits the SYN-ACK, then gives up", "[tcp][rto]") {
    Config c = TcbFixture::default_config();
    c.synack_retries = 1;
    TcbFixture t(c);
    t.to_syn_received();
    t.advance(1s);
    t.expect_sent({{SYN | ACK, -1, 0}});
    t.advance(2s);
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::ConnectTimeout);
}

TEST_CASE("a half-open connection goes ~63 s after its SYN (5 SYN-ACK retransmissions, as Linux)", "[tcp][rto]") {
    Config c = TcbFixture::default_config();
    c.initial_rto = 1s;
    TcbFixture t(c);
    t.to_syn_received();
    Duration wait = 1s;
    for (int i = 0; i < 5; ++i) {  // at 1, 3, 7, 15, 31 s
        t.advance(wait);
        t.expect_sent({{SYN | ACK, -1, 0}});
        wait *= 2;
    }
    t.advance(wait - 1ms);  // 62.999 s
    CHECK(t.tcb->state() == State::SynReceived);
    t.advance(1ms);         // 63 s
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::ConnectTimeout);
}

TEST_CASE("RFC 9293 §3.10.4 shutdown during the handshake sends FIN once ESTABLISHED", "[tcp][state]") {
    TcbFixture t;
    t.to_syn_sent();
    REQUIRE(t.send("early") == SendResult::Ok);  // queued before the connection is up
    t.tcb->shutdown_write();
    t.recv(t.seg(SYN | ACK, -1, 0));
    CHECK(t.tcb->state() == State::FinWait1);
    CHECK(t.has_event(EventKind::Connected));
    t.expect_sent({{ACK | PSH | FIN, 0, 0, "early"}});
}

TEST_CASE("RFC 9293 §3.10.7.4 eighth: out-of-order FIN waits for the hole", "[tcp][state]") {
    TcbFixture t;
    t.to_established();
    t.recv(t.seg(ACK | FIN, 3, 0), "def");
    CHECK(t.tcb->state() == State::Established);
    CHECK(t.take_readable().empty());
    t.clear();
    t.recv(t.seg(ACK, 0, 0), "abc");
    CHECK(t.take_readable() == "abcdef");
    CHECK(t.tcb->state() == State::CloseWait);
    CHECK(t.has_event(EventKind::PeerFin));
    t.expect_sent({{ACK, 0, 7}});
}

TEST_CASE("RFC 9293 §3.8.6.2.1 sender SWS avoidance holds a tiny segment for a small window", "[tcp][window]") {
    TcbFixture t;
    t.to_syn_sent();
    TcpRepr synack = t.seg(SYN | ACK, -1, 0, 4000);
    synack.opts.mss = 1460;
    t.recv(synack);
    t.clear();
    REQUIRE(t.send(std::string(4500, 'q')) == SendResult::Ok);
    t.flush();
    // The last 1080 bytes of window: < MSS, < max_wnd/2 and not all the data: held.
    t.expect_sent({{ACK, 0, 0, std::string(1460, 'q')}, {ACK, 1460, 0, std::string(1460, 'q')}});
    t.recv(t.seg(ACK, 0, 2920, 100));  // everything acked, but only 100 bytes of window
    t.expect_nothing();
    // Nothing in flight: the override timeout (persist timer) forces it out.
    t.advance(t.tcb->stats().rto);
    t.expect_sent({{ACK, 2920, 0, std::string(100, 'q')}});
}

TEST_CASE("orphaned FIN-WAIT-2 after close() times out", "[tcp][state]") {
    Config c = TcbFixture::default_config();
    c.fin_wait2_timeout = 30s;
    TcbFixture t(c);
    t.to_established();
    t.tcb->close();
    t.flush();
    t.expect_sent({{FIN | ACK, 0, 0}});
    t.recv(t.seg(ACK, 0, 1));
    CHECK(t.tcb->state() == State::FinWait2);
    t.advance(29s);
    CHECK(t.tcb->state() == State::FinWait2);
    t.advance(1s);
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::FinWait2Timeout);
}

TEST_CASE("half-closed FIN-WAIT-2 after shutdown_write() waits for the peer indefinitely", "[tcp][state]") {
    TcbFixture t;
    t.to_fin_wait2();
    t.advance(600s);
    CHECK(t.tcb->state() == State::FinWait2);
    t.expect_nothing();
}

TEST_CASE("RFC 9293 §3.10.5 ABORT in SYN-SENT closes without a RST", "[tcp][state]") {
    TcbFixture t;
    t.to_syn_sent();
    t.tcb->abort(t.now, t.out);
    t.expect_nothing();
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::AbortedLocally);
    CHECK(t.tcb->next_deadline() == Instant::never());
}

TEST_CASE("RFC 9293 §3.10.4 CLOSE in SYN-RECEIVED: FIN-WAIT-1 once the SYN is acknowledged", "[tcp][state]") {
    TcbFixture t;
    t.to_syn_received();
    t.tcb->close();
    t.flush();
    t.expect_nothing();  // nothing before the handshake completes
    t.recv(t.seg(ACK, 0, 0));
    CHECK(t.tcb->state() == State::FinWait1);
    t.expect_sent({{FIN | ACK, 0, 0}});
    t.recv(t.seg(ACK, 0, 1));
    CHECK(t.tcb->state() == State::FinWait2);
}

TEST_CASE("RFC 9293 §3.4 sequence numbers wrap around 2^32", "[tcp][data]") {
    // A peer whose ISS is just below 2^32: its data crosses the wrap.
    TcbFixture t;
    t.to_syn_sent();
    TcpRepr synack = t.seg(SYN | ACK, -1, 0);
    synack.seq = SeqNum(0xfffffff0u);
    t.recv(synack);
    REQUIRE(t.tcb->state() == State::Established);
    t.clear();
    TcpRepr d = synack;
    d.flags = ACK;
    d.seq = SeqNum(0xfffffff1u);
    t.recv(d, std::string(40, 'w'));
    CHECK(t.take_readable() == std::string(40, 'w'));
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.ack == SeqNum(0xfffffff1u + 40));
    CHECK(t.tcb->stats().rcv_nxt == 0x19u);
}

TEST_CASE("SYN-RECEIVED answers a retransmitted SYN with the SYN-ACK at once", "[tcp][state]") {
    TcbFixture t;
    t.to_syn_received();
    t.recv(t.seg(SYN, -1, 0));
    t.expect_sent({{SYN | ACK, -1, 0}});
    CHECK(t.tcb->state() == State::SynReceived);
    t.recv(t.seg(ACK, 0, 0));
    CHECK(t.tcb->state() == State::Established);
}

TEST_CASE("ESTABLISHED answers a retransmitted SYN-ACK (our ACK was lost) with an ACK", "[tcp][state]") {
    TcbFixture t;
    t.to_established();
    t.recv(t.seg(SYN | ACK, -1, 0));
    t.expect_sent({{ACK, 0, 0}});
    CHECK(t.tcb->state() == State::Established);
}

TEST_CASE("RFC 9293 §3.10.7.4 reassembly queue limits bound out-of-order memory", "[tcp][security]") {
    Config c = TcbFixture::default_config();
    c.reassembly.max_segments = 2;
    TcbFixture t(c);
    t.to_established();
    t.recv(t.seg(ACK, 10, 0), "a");
    t.recv(t.seg(ACK, 20, 0), "b");
    t.recv(t.seg(ACK, 30, 0), "c");  // refused: the sender will retransmit it
    CHECK(t.tcb->stats().ooo_segments == 2);
    CHECK(t.tcb->stats().drop_no_room == 1);
    CHECK(t.out.segments.size() == 3);  // each out-of-order segment is ACKed at once
}

TEST_CASE("RFC 9293 §3.10.7.4 data beyond the window is trimmed", "[tcp][window]") {
    Config c = TcbFixture::default_config();
    c.rcv_buf = 10;
    TcbFixture t(c);
    t.to_established();
    t.recv(t.seg(ACK | FIN, 0, 0), "0123456789abcdef");
    CHECK(t.take_readable() == "0123456789");
    CHECK(t.tcb->state() == State::Established);  // the FIN was beyond the window
    t.expect_sent({{ACK, 0, 10, "", 0}});
}

TEST_CASE("RFC 1122 §4.2.2.17 zero-window probing gives up on a silent peer", "[tcp][window]") {
    Config c = TcbFixture::default_config();
    c.max_retries = 3;
    TcbFixture t(c);
    t.to_syn_sent();
    t.recv(t.seg(SYN | ACK, -1, 0, 0));
    t.clear();
    REQUIRE(t.send("blocked") == SendResult::Ok);
    t.flush();
    for (int i = 0; i < 6; ++i) {  // more probes than max_retries, each answered
        t.advance(t.tcb->next_deadline() - t.now);
        t.expect_sent({{ACK, -1, 0}});
        t.recv(t.seg(ACK, 0, 0, 0));  // alive, window still closed
    }
    CHECK(t.tcb->state() == State::Established);
    t.advance(3600s);  // then it goes silent
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::RetransmitTimeout);
}

// ---------------------------------------------------------------------------
// zero windows on both sides: the crescent <-> crescent echo deadlock, piece by piece

namespace {

// Our window (4000 B) filled by the peer while our "ping" is still unacknowledged.
void close_window_on_unacked_ping(TcbFixture& t) {
    t.to_established();
    REQUIRE(t.send("ping") == SendResult::Ok);
    t.flush();
    t.expect_sent({{ACK | PSH, 0, 0, "ping"}});
    t.recv(t.seg(ACK, 0, 0), std::string(4000, 'x'));
    t.expect_sent({{ACK, 4, 4000, "", 0}});
    CHECK(t.take_readable().size() == 4000);
}

Config rcv_buf_4000() {
    Config c = TcbFixture::default_config();
    c.rcv_buf = 4000;
    return c;
}

} // namespace

TEST_CASE("RFC 9293 §3.10.7.4 first: with RCV.WND = 0 a segment at RCV.NXT still delivers its ACK",
          "[tcp][window]") {
    TcbFixture t(rcv_buf_4000());
    close_window_on_unacked_ping(t);
    // The peer's next data segment also acknowledges "ping": the text cannot
    // be taken, the acknowledgment must be.
    t.recv(t.seg(ACK | PSH, 4000, 4), "more");
    CHECK(t.tcb->stats().snd_una == kIss + 1 + 4);
    CHECK(t.has_event(EventKind::Acked));
    CHECK(t.take_readable().empty());
    CHECK(t.tcb->stats().drop_no_room == 1);
    CHECK(t.tcb->stats().drop_not_acceptable == 0);
    t.expect_sent({{ACK, 4, 4000, "", 0}});
    // Anywhere else it is still unacceptable.
    t.recv(t.seg(ACK | PSH, 4001, 4), "ore");
    CHECK(t.tcb->stats().drop_not_acceptable == 1);
    t.expect_sent({{ACK, 4, 4000, "", 0}});
}

// Both windows closed on data in flight both ways, and the two ACKs crossed:
// each side's pure ACK carries SEQ = its SND.UNA, which the other has passed.
// Refused there as out of window, each would be answered by an ACK the other
// refuses in turn, at the link's round-trip rate, for ever (session 37's CI:
// ~2.5M frames each way in 123 s, a connection stalled until its user
// timeout). The ACK field of such a segment is valid and is taken.
TEST_CASE("RFC 9293 §3.10.7.4 first: with RCV.WND = 0 a pure ACK below RCV.NXT still delivers a valid ACK (no ACK loop)",
          "[tcp][window]") {
    TcbFixture t(rcv_buf_4000());
    close_window_on_unacked_ping(t);
    // The peer's ACK of "ping", sent before ours reached it: SEQ 0, below RCV.NXT.
    t.recv(t.seg(ACK, 0, 4, 0));
    CHECK(t.tcb->stats().snd_una == kIss + 1 + 4);
    CHECK(t.has_event(EventKind::Acked));
    CHECK(t.tcb->stats().drop_not_acceptable == 1);
    // Still answered (the peer must learn RCV.NXT), now at a SEQ it accepts.
    t.expect_sent({{ACK, 4, 4000, "", 0}});
    // An ACK of data never sent, or one that acknowledges nothing new, is
    // taken from nowhere — and, a pure segment refused within 500 ms of the
    // last one answered, not answered either (oow_limit.hpp).
    t.recv(t.seg(ACK, 0, 9, 0));
    CHECK(t.tcb->stats().snd_una == kIss + 1 + 4);
    CHECK(t.tcb->stats().drop_not_acceptable == 2);
    CHECK(t.tcb->stats().oow_acks_suppressed == 1);
    t.expect_nothing();
    t.advance(500ms);
    t.recv(t.seg(ACK, 0, 9, 0));
    CHECK(t.tcb->stats().snd_una == kIss + 1 + 4);
    t.expect_sent({{ACK, 4, 4000, "", 0}});
}

// Two ends that refuse each other's segments answer each answer: an ACK
// loop at the link's round-trip rate. Linux (tcp_oow_rate_limited) answers
// a refused pure segment at most once per 500 ms; data and probes always.
TEST_CASE("ACK loops: a refused pure segment is answered at most once per 500 ms; data and probes always are",
          "[tcp][ackloop]") {
    TcbFixture t;
    t.to_established();
    t.recv(t.seg(ACK | PSH, 0, 0), "hello");
    CHECK(t.take_readable() == "hello");
    t.clear();

    // An ACK of data never sent (RFC 5961 §5.2): answered once...
    t.recv(t.seg(ACK, 5, 100));
    t.expect_sent({{ACK, 0, 5}});
    CHECK(t.tcb->stats().drop_bad_ack == 1);
    // ...then, were the peer to answer our answer with the same, held back.
    t.recv(t.seg(ACK, 5, 100));
    t.expect_nothing();
    // So is any other refused pure segment in the interval: beyond the window,
    // below RCV.NXT.
    t.recv(t.seg(ACK, 5 + 1'000'000, 0));
    t.expect_nothing();
    t.recv(t.seg(ACK, 2, 0));
    t.expect_nothing();
    CHECK(t.tcb->stats().oow_acks_suppressed == 3);

    // Data is always answered: "hello" again is reported as a duplicate each time.
    for (int i = 0; i < 3; ++i) {
        t.recv(t.seg(ACK | PSH, 0, 0), "hello");
        t.expect_sent({{ACK, 0, 5}});
    }
    CHECK(t.tcb->stats().oow_acks_suppressed == 3);
    // So is a probe (SEQ = RCV.NXT - 1, no text): the prober waits for its answer.
    for (int i = 0; i < 3; ++i) {
        t.recv(t.seg(ACK, 4, 0));
        t.expect_sent({{ACK, 0, 5}});
    }

    // 500 ms after the last answer to a pure segment, the next is answered.
    t.advance(499ms);
    t.recv(t.seg(ACK, 2, 0));
    t.expect_nothing();
    t.advance(1ms);
    t.recv(t.seg(ACK, 2, 0));
    t.expect_sent({{ACK, 0, 5}});
    CHECK(t.tcb->stats().oow_acks_suppressed == 4);
    CHECK(t.tcb->state() == State::Established);
}

TEST_CASE("an ACK's SEQ stays inside the peer's window once it closed on data in flight (Linux tcp_acceptable_seq)",
          "[tcp][window]") {
    TcbFixture t;
    t.to_established();
    REQUIRE(t.send(std::string(3000, 'd')) == SendResult::Ok);
    t.flush();
    REQUIRE(t.out.segments.size() == 3);
    t.clear();
    // The peer dropped all three (no room) and now advertises a zero window.
    t.recv(t.seg(ACK, 0, 0, 0));
    t.expect_nothing();
    // Its data is acknowledged at SEQ = SND.UNA + SND.WND (its RCV.NXT), not
    // SND.MAX, which a zero-window receiver would discard with the ACK.
    t.recv(t.seg(ACK | PSH, 0, 0, 0), "hi");
    t.expect_sent({{ACK, 0, 2}});
    CHECK(t.take_readable() == "hi");
    // Window open again: SND.MAX is inside it and back in use.
    t.recv(t.seg(ACK | PSH, 2, 0, 8000), "yo");
    REQUIRE(!t.out.segments.empty());
    CHECK(t.out.segments.back().repr.flags == ACK);
    CHECK(t.out.segments.back().repr.seq.raw() == kIss + 1 + 3000);
}

TEST_CASE("RFC 1122 §4.2.2.17 an RTO into a zero window probes and never times out a peer that answers",
          "[tcp][window][rto]") {
    Config c = TcbFixture::default_config();
    c.max_retries = 3;
    TcbFixture t(c);
    t.to_established();
    REQUIRE(t.send("data") == SendResult::Ok);
    t.flush();
    t.clear();
    t.recv(t.seg(ACK, 0, 0, 0));  // "data" dropped by the peer, its window closed
    for (int i = 0; i < 8; ++i) {  // well past max_retries, each retransmission answered
        t.advance(t.tcb->next_deadline() - t.now);
        REQUIRE(!t.out.segments.empty());
        CHECK(t.payload_of(t.out.segments.front()) == "data");
        t.clear();
        t.recv(t.seg(ACK, 0, 0, 0));
        t.clear();
    }
    CHECK(t.tcb->state() == State::Established);
    // The window opens: the data goes and is acknowledged.
    t.recv(t.seg(ACK, 0, 0, 1000));
    t.recv(t.seg(ACK, 0, 4, 1000));
    CHECK(t.tcb->stats().snd_una == kIss + 1 + 4);
    t.clear();
    // A peer that goes silent with its window shut is timed out after all.
    REQUIRE(t.send("more") == SendResult::Ok);
    t.flush();
    t.recv(t.seg(ACK, 0, 4, 0));
    t.advance(3600s);
    CHECK(t.tcb->state() == State::Closed);
    CHECK(t.closed_reason() == CloseReason::RetransmitTimeout);
}

// ---------------------------------------------------------------------------
// TCP segmentation offload

TEST_CASE("TSO: new data leaves in whole-MSS super-segments; an RTO retransmits one MSS", "[tcp][tso]") {
    Config c = TcbFixture::default_config();
    c.tso_max = 10000;  // 6 x 1460 = 8760 per OutSegment
    TcbFixture t(c);
    t.to_established();
    REQUIRE(t.send(std::string(20000, 's')) == SendResult::Ok);
    t.flush();
    REQUIRE(!t.out.segments.empty());
    uint32_t sent = 0;
    for (const OutSegment& o : t.out.segments) {
        INFO(t.describe(o));
        CHECK(o.repr.seq.raw() == kIss + 1 + sent);
        CHECK(o.payload_len() % 1460 == 0);
        CHECK(o.payload_len() <= 8760);
        CHECK(o.tso_segsz == (o.payload_len() > 1460 ? 1460 : 0));
        CHECK((o.repr.flags & PSH) == 0);  // more data follows
        sent += o.payload_len();
    }
    CHECK(t.out.segments.front().payload_len() == 8760);
    CHECK(sent == t.tcb->stats().bytes_in_flight);  // as much as cwnd allows, in whole segments
    t.clear();
    t.advance(t.tcb->next_deadline() - t.now);  // RTO
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].payload_len() == 1460);
    CHECK(t.out.segments[0].tso_segsz == 0);
    CHECK(t.out.segments[0].repr.seq.raw() == kIss + 1);
}

TEST_CASE("TSO: the end of the data may be a partial segment, with PSH; a mid-stream tail waits", "[tcp][tso]") {
    Config c = TcbFixture::default_config();
    c.tso_max = 60000;
    TcbFixture t(c);
    t.to_established();
    REQUIRE(t.send(std::string(3000, 'e')) == SendResult::Ok);  // 2 x 1460 + 80
    t.flush();
    t.expect_sent({{ACK | PSH, 0, 0, std::string(3000, 'e')}});
    // (expect_sent cleared them; the segment was one TSO request)
    t.recv(t.seg(ACK, 0, 3000));
    t.clear();
    // The peer's window cuts the data mid-segment: whole segments go, the
    // 40-byte remainder inside the window waits (sender SWS avoidance).
    REQUIRE(t.send(std::string(5000, 'f')) == SendResult::Ok);
    t.recv(t.seg(ACK, 0, 3000, 4420));  // 3 x 1460 + 40
    t.flush();
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].payload_len() == 4380);
    CHECK(t.out.segments[0].tso_segsz == 1460);
    CHECK((t.out.segments[0].repr.flags & PSH) == 0);
}

// ---------------------------------------------------------------------------
// RFC 2883 D-SACK

namespace {
void to_established_sack(TcbFixture& t) {
    t.to_syn_sent();
    TcpRepr synack = t.seg(SYN | ACK, -1, 0);
    synack.opts.mss = 1460;
    synack.opts.sack_permitted = true;
    t.recv(synack);
    REQUIRE(t.tcb->stats().sack_ok);
    t.clear();
}
SackBlock rel(int64_t l, int64_t r) {
    return SackBlock{SeqNum(uint32_t(kIrs + 1 + l)), SeqNum(uint32_t(kIrs + 1 + r))};
}
} // namespace

TEST_CASE("RFC 2883 §4 D-SACK: a duplicate below RCV.NXT is the first SACK block of the next ACK, once",
          "[tcp][sack][dsack]") {
    Config c = TcbFixture::default_config();
    c.sack = true;
    TcbFixture t(c);
    to_established_sack(t);
    t.recv(t.seg(ACK | PSH, 0, 0), "hello");
    t.expect_sent({{ACK, 0, 5}});
    t.recv(t.seg(ACK | PSH, 0, 0), "hello");  // spurious retransmission
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.opts.sack_count == 1);
    CHECK(t.out.segments[0].repr.opts.sack[0] == rel(0, 5));
    t.clear();
    t.recv(t.seg(ACK | PSH, 3, 0), "lo, world");  // overlaps: "lo" duplicate
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.opts.sack_count == 1);
    CHECK(t.out.segments[0].repr.opts.sack[0] == rel(3, 5));
    t.clear();
    t.recv(t.seg(ACK | PSH, 12, 0), "!");  // new data: no SACK block at all
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.opts.sack_count == 0);
    CHECK(t.tcb->stats().dsacks_sent == 2);
}

TEST_CASE("RFC 2883 §4 D-SACK: a duplicate above RCV.NXT comes first, then the block that holds it",
          "[tcp][sack][dsack]") {
    Config c = TcbFixture::default_config();
    c.sack = true;
    TcbFixture t(c);
    to_established_sack(t);
    t.recv(t.seg(ACK | PSH, 10, 0), "0123456789");  // out of order
    REQUIRE(t.out.segments.size() == 1);
    CHECK(t.out.segments[0].repr.opts.sack_count == 1);
    CHECK(t.out.segments[0].repr.opts.sack[0] == rel(10, 20));
    t.clear();
    t.recv(t.seg(ACK | PSH, 12, 0), "234");  // a duplicate inside the queued block
    REQUIRE(t.out.segments.size() == 1);
    const wire::TcpOptions& o = t.out.segments[0].repr.opts;
    REQUIRE(o.sack_count == 2);
    CHECK(o.sack[0] == rel(12, 15));
    CHECK(o.sack[1] == rel(10, 20));
}
