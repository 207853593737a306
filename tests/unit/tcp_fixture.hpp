// crescent tests — smoltcp-style fixture for the sans-IO Tcb.
//
//   TcbFixture t;                 // CLOSED Tcb, seeded ISS, virtual clock at 1 s
//   t.to_established();           // drive it through a handshake
//   t.recv(t.seg(ACK|PSH, 0, 0, "hello"));
//   t.expect_sent({{ACK, 0, 5}}); // exactly these segments, then nothing
//   t.advance(5ms);               // virtual time; runs due timers
//
// Sequence numbers in expectations and in seg() are RELATIVE: local ones to
// ISS+1 (our first data byte), remote ones to IRS+1. The arena fixture checks
// that no zbuf leaked when the test ends.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "stack/tcp/tcb.hpp"
#include "tests/support/zbuf_leak.hpp"

namespace crescent::tcp::test {

using namespace wire::tcp_flags;
using namespace std::chrono_literals;

inline constexpr uint32_t kIss = 1000;    // our ISS
inline constexpr uint32_t kIrs = 50000;   // the peer's ISS

struct Expect {
    uint8_t flags;
    int64_t seq;          // relative to ISS+1 (SYN: -1)
    int64_t ack = 0;      // relative to IRS+1 (only checked when flags has ACK)
    std::string payload = {};
    int32_t window = -1;  // -1: not checked
};

inline std::string flag_str(uint8_t f) {
    std::string s;
    if (f & SYN) s += "S";
    if (f & FIN) s += "F";
    if (f & RST) s += "R";
    if (f & PSH) s += "P";
    if (f & ACK) s += ".";
    if (f & ECE) s += "E";
    if (f & CWR) s += "W";
    return s.empty() ? "-" : s;
}

class TcbFixture {
public:
    explicit TcbFixture(Config c = default_config()) : cfg(c) { reset(); }

    static Config default_config() {
        Config c;
        c.timestamps = false;
        c.sack = false;
        c.window_scale = false;
        c.rcv_buf = 65535;
        c.snd_buf = 65536;
        c.mss = 1460;
        c.delayed_ack_segments = 1;
        c.initial_rto = 1s;
        c.min_rto = 5ms;
        // The RFC 5681 / 6675 / 6298 tests see DupThresh 3 and a bare RTO;
        // tcp_tlp_test.cpp turns these two on.
        c.tlp = false;
        c.early_retransmit = false;
        c.rack = false;
        return c;
    }

    void reset() {
        tcb = std::make_unique<Tcb>(cfg, ConnId{7, 1},
                                    Endpoints{Ipv4Addr{0x0a000001}, Ipv4Addr{0x0a000002}, 5000, 6000});
    }

    // A segment from the peer; seq/ack relative (see file header).
    TcpRepr seg(uint8_t flags, int64_t seq, int64_t ack, uint16_t window = 65535) const {
        TcpRepr r;
        r.src_port = 6000;
        r.dst_port = 5000;
        r.flags = flags;
        r.seq = SeqNum(uint32_t(kIrs + 1 + seq));
        r.ack = SeqNum(uint32_t(kIss + 1 + ack));
        r.window = window;
        return r;
    }

    Slice make_payload(std::string_view data) {
        if (data.empty()) return Slice();
        Slice s = arena->alloc_slice(data.size());
        REQUIRE(s);
        std::memcpy(s.data(), data.data(), data.size());
        return s;
    }

    void recv(const TcpRepr& r, std::string_view data = {}, uint8_t ecn = 0) {
        tcb->on_segment(r, ecn, make_payload(data), now, out);
    }

    SendResult send(std::string_view data) {
        Slice s = make_payload(data);
        return tcb->send(s);
    }

    void flush() { tcb->flush(now, out); }

    void advance(Duration d) {
        Instant end = now + d;
        // Fire every deadline on the way, in order.
        for (int guard = 0; tcb->next_deadline() <= end; ++guard) {
            REQUIRE(guard < 100000);  // a deadline that never moves is a bug
            now = std::max(now, tcb->next_deadline());
            tcb->on_timer(now, out);
        }
        now = end;
    }

    static std::string payload_of(const OutSegment& o) {
        std::string s;
        for (auto& v : o.payload()) s.append(reinterpret_cast<const char*>(v.data), v.len);
        return s;
    }

    std::string describe(const OutSegment& o) const {
        std::ostringstream os;
        os << flag_str(o.repr.flags) << " seq=" << int64_t(int32_t(o.repr.seq.raw() - (kIss + 1)));
        if (o.repr.has(ACK)) os << " ack=" << int64_t(int32_t(o.repr.ack.raw() - (kIrs + 1)));
        os << " win=" << o.repr.window << " len=" << o.payload_len();
        return os.str();
    }

    // Exactly these segments were emitted since the last check, then nothing.
    void expect_sent(const std::vector<Expect>& want) {
        std::ostringstream got;
        for (auto& o : out.segments) got << describe(o) << "\n";
        INFO("emitted:\n" << got.str());
        REQUIRE(out.segments.size() == want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            const OutSegment& o = out.segments[i];
            const Expect& w = want[i];
            INFO("segment " << i);
            CHECK(flag_str(o.repr.flags) == flag_str(w.flags));
            CHECK(int64_t(int32_t(o.repr.seq.raw() - (kIss + 1))) == w.seq);
            if (w.flags & ACK) CHECK(int64_t(int32_t(o.repr.ack.raw() - (kIrs + 1))) == w.ack);
            CHECK(payload_of(o) == w.payload);
            if (w.window >= 0) CHECK(o.repr.window == w.window);
            CHECK(o.repr.src_port == 5000);
            CHECK(o.repr.dst_port == 6000);
        }
        out.segments.clear();
    }
    void expect_nothing() { expect_sent({}); }

    std::string take_readable() {
        std::string s;
        for (auto& r : out.readable) s.append(reinterpret_cast<const char*>(r.data.data()), r.data.size());
        out.readable.clear();
        return s;
    }

    bool has_event(EventKind k) const {
        for (auto& e : out.events)
            if (e.kind == k) return true;
        return false;
    }
    std::optional<CloseReason> closed_reason() const {
        for (auto& e : out.events)
            if (e.kind == EventKind::Closed) return e.reason;
        return std::nullopt;
    }
    void clear() { out.clear(); }

    // --- building a TCB in each state (smoltcp style) ---
    void to_syn_sent() {
        tcb->connect(SeqNum(kIss), now, out);
        REQUIRE(tcb->state() == State::SynSent);
        clear();
    }
    void to_syn_received() {
        TcpRepr syn = seg(SYN, -1, 0);
        syn.opts.mss = 1460;
        tcb->accept_syn(syn, 0, SeqNum(kIss), now, out);
        REQUIRE(tcb->state() == State::SynReceived);
        clear();
    }
    void to_established() {
        to_syn_sent();
        TcpRepr synack = seg(SYN | ACK, -1, 0);
        synack.opts.mss = 1460;
        recv(synack);
        REQUIRE(tcb->state() == State::Established);
        clear();
    }
    void to_fin_wait1() {
        to_established();
        tcb->shutdown_write();
        flush();
        REQUIRE(tcb->state() == State::FinWait1);
        clear();
    }
    void to_fin_wait2() {
        to_fin_wait1();
        recv(seg(ACK, 0, 1));
        REQUIRE(tcb->state() == State::FinWait2);
        clear();
    }
    void to_close_wait() {
        to_established();
        recv(seg(FIN | ACK, 0, 0));
        REQUIRE(tcb->state() == State::CloseWait);
        clear();
    }
    void to_last_ack() {
        to_close_wait();
        tcb->shutdown_write();
        flush();
        REQUIRE(tcb->state() == State::LastAck);
        clear();
    }
    void to_closing() {
        to_fin_wait1();
        recv(seg(FIN | ACK, 0, 0));
        REQUIRE(tcb->state() == State::Closing);
        clear();
    }
    void to_time_wait() {
        to_fin_wait2();
        recv(seg(FIN | ACK, 0, 1));
        REQUIRE(tcb->state() == State::TimeWait);
        clear();
    }

    crescent::test::ZbufArenaFixture arena;  // first member: outlives the Tcb
    Config cfg;
    Instant now = Instant::from_nanos(1'000'000'000);
    Actions out;
    std::unique_ptr<Tcb> tcb;
};

} // namespace crescent::tcp::test
