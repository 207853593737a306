// crescent tests — a TCB connected to a SACK-capable peer, for the loss
// recovery tests (tcp_undo_test.cpp, tcp_tlp_test.cpp): MSS 1000, NewReno,
// sequence numbers relative to the first data byte, a virtual clock.
#pragma once

#include "tests/unit/tcp_fixture.hpp"

namespace crescent::tcp::test {

constexpr uint32_t kMss = 1000;

inline SeqNum rel(int64_t off) { return SeqNum(uint32_t(kIss + 1 + off)); }

struct SackPeer {
    // Timestamps when `ts`; the fixture's defaults otherwise (no tail loss
    // probe, no early retransmit: the RFC 6675 tests see DupThresh 3).
    explicit SackPeer(bool ts) : SackPeer(config(ts)) {}
    // The handshake takes `rtt` (the first RTT sample, and so SRTT).
    explicit SackPeer(const Config& c, Duration rtt = Duration(0)) : t(c), ts(c.timestamps) {
        t.to_syn_sent();
        if (rtt.count() > 0) t.advance(rtt);
        TcpRepr synack = t.seg(SYN | ACK, -1, 0);
        synack.opts.mss = uint16_t(kMss + (ts ? 12 : 0));  // the timestamp option takes 12 of it
        synack.opts.sack_permitted = true;
        if (ts) synack.opts.ts = wire::Timestamps{next_tsval(), 0};
        t.recv(synack);
        REQUIRE(t.tcb->state() == State::Established);
        REQUIRE(t.tcb->stats().ts_ok == ts);
        t.clear();
    }
    static Config config(bool ts) {
        Config c = TcbFixture::default_config();
        c.sack = true;
        c.timestamps = ts;
        return c;
    }
    uint32_t next_tsval() { return tsval += 10; }

    // Queue n segments of 1000 bytes ('a', 'b', ...) and send them; returns
    // the TSval they carry (0 without timestamps).
    uint32_t send_segments(int n, char first = 'a') {
        for (int i = 0; i < n; ++i) REQUIRE(t.send(std::string(kMss, char(first + i))) == SendResult::Ok);
        t.flush();
        std::string got;
        for (auto& o : t.out.segments) got += t.describe(o) + "\n";
        INFO(got);
        REQUIRE(t.out.segments.size() == size_t(n));
        uint32_t v = ts ? t.out.segments[0].repr.opts.ts->tsval : 0;
        t.clear();
        return v;
    }

    // An ACK of `ack` (relative) with SACK blocks (relative [left, right)),
    // echoing `tsecr` when timestamps are on.
    void ack(int64_t ack, std::initializer_list<std::pair<int64_t, int64_t>> blocks = {}, uint32_t tsecr = 0) {
        TcpRepr a = t.seg(ACK, 0, ack);
        for (auto [l, r] : blocks) a.opts.sack[a.opts.sack_count++] = SackBlock{rel(l), rel(r)};
        if (ts) a.opts.ts = wire::Timestamps{next_tsval(), tsecr};
        t.recv(a);
    }

    // Runs the clock to the first retransmission timeout.
    void to_rto() {
        const uint64_t before = t.tcb->stats().rto_events;
        for (int i = 0; i < 5000 && t.tcb->stats().rto_events == before; ++i) t.advance(std::chrono::microseconds(100));
        REQUIRE(t.tcb->stats().rto_events == before + 1);
    }

    bool sent_seq(int64_t off) const {
        for (auto& o : t.out.segments)
            if (o.repr.seq == rel(off) && o.payload_len() > 0) return true;
        return false;
    }
    uint32_t tsval_of(int64_t off) const {
        for (auto& o : t.out.segments)
            if (o.repr.seq == rel(off) && o.repr.opts.ts) return o.repr.opts.ts->tsval;
        return 0;
    }

    TcbFixture t;
    bool ts;
    uint32_t tsval = 100;
};

// The segments the TCB has emitted since the last clear(), one per line (for INFO()).
inline std::string sent(const TcbFixture& t) {
    std::string s;
    for (auto& o : t.out.segments) s += t.describe(o) + "\n";
    return s;
}

} // namespace crescent::tcp::test
