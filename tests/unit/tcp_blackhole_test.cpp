// Sans-IO tests of path MTU black-hole detection (Config::blackhole_timeouts,
// stack/tcp/tcb_timers.cpp). ICMP "fragmentation needed" stays with the
// kernel, so a path that drops full-sized segments shows only as timeouts
// (RFC 2923 §2.1); after three in a row with more than kBlackholeMss bytes out
// the MSS is halved, after three more halved again, down to kBlackholeMss
// (RFC 4821's search floor, Linux's tcp_mtu_probing=1 step).
#include "tests/unit/tcp_fixture.hpp"

using namespace crescent;
using namespace crescent::tcp;
using namespace crescent::tcp::test;

namespace {

// Sends `n` bytes on an established connection and returns the size of the
// segment at SND.UNA each of `rtos` consecutive timeouts retransmits (the peer
// acknowledges nothing).
std::vector<uint32_t> timeouts(TcbFixture& t, size_t n, int rtos) {
    t.to_established();
    REQUIRE(t.send(std::string(n, 'b')) == SendResult::Ok);
    t.flush();
    REQUIRE(!t.out.segments.empty());
    t.clear();
    std::vector<uint32_t> sizes;
    for (int i = 0; i < rtos; ++i) {
        t.advance(t.tcb->next_deadline() - t.now);
        REQUIRE(!t.out.segments.empty());
        CHECK(t.out.segments[0].repr.seq == SeqNum(kIss + 1));  // go back to SND.UNA
        sizes.push_back(t.out.segments[0].payload_len());
        t.clear();
    }
    return sizes;
}

} // namespace

TEST_CASE("RFC 2923 §2.1 repeated timeouts with full-sized segments out halve the MSS, down to 512",
          "[tcp][rto][blackhole]") {
    TcbFixture t;
    const std::vector<uint32_t> sizes = timeouts(t, 8000, 8);
    CHECK(sizes == std::vector<uint32_t>{1460, 1460, 730, 730, 730, 512, 512, 512});
    CHECK(t.tcb->stats().mss_blackhole == 2);
    CHECK(t.tcb->stats().snd_mss == kBlackholeMss);
    // The path delivers again: the peer acknowledges the first retransmission;
    // the rest leaves in 512-byte segments (slow start from one MSS).
    t.recv(t.seg(ACK, 0, 512));
    t.flush();
    REQUIRE(!t.out.segments.empty());
    for (const OutSegment& s : t.out.segments) CHECK(s.payload_len() <= kBlackholeMss);
    CHECK(t.tcb->stats().backoff == 0);
}

TEST_CASE("Black-hole detection: off, a small flight and a closed window leave the MSS alone",
          "[tcp][rto][blackhole]") {
    SECTION("blackhole_timeouts = 0") {
        Config c = TcbFixture::default_config();
        c.blackhole_timeouts = 0;
        TcbFixture t(c);
        CHECK(timeouts(t, 8000, 7) == std::vector<uint32_t>(7, 1460));
        CHECK(t.tcb->stats().mss_blackhole == 0);
    }
    SECTION("no more than 512 bytes out: a smaller segment would not get through either") {
        TcbFixture t;
        CHECK(timeouts(t, 500, 7) == std::vector<uint32_t>(7, 500));
        CHECK(t.tcb->stats().mss_blackhole == 0);
        CHECK(t.tcb->stats().snd_mss == 1460);
    }
    SECTION("the peer's window closed on data in flight: its timeouts are probes") {
        TcbFixture t;
        t.to_established();
        REQUIRE(t.send(std::string(8000, 'b')) == SendResult::Ok);
        t.flush();
        t.clear();
        t.recv(t.seg(ACK, 0, 0, 0));  // nothing new acknowledged, the window shut
        t.clear();
        for (int i = 0; i < 7; ++i) {
            t.advance(t.tcb->next_deadline() - t.now);
            t.clear();
        }
        CHECK(t.tcb->stats().mss_blackhole == 0);
        CHECK(t.tcb->stats().snd_mss == 1460);
    }
}
