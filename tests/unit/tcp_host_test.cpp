// crescent tests — the sans-IO Host: RST for unknown ports (RFC 9293 §3.10.7.1),
// listen/accept with backlog, SYN cookies (RFC 4987), RFC 6528 ISNs, timers,
// and two Hosts talking to each other through a lossless in-memory wire.
#include <catch2/catch.hpp>

#include <cstring>
#include <deque>
#include <iostream>
#include <functional>
#include <random>
#include <string>

#include "stack/tcp/host.hpp"
#include "tests/support/zbuf_leak.hpp"

using namespace crescent;
using namespace crescent::tcp;
using namespace crescent::wire::tcp_flags;
using namespace std::chrono_literals;

namespace {

constexpr Ipv4Addr kA{0x0a000001}, kB{0x0a000002};

HostConfig host_cfg(Ipv4Addr ip) {
    HostConfig c;
    c.local_ip = ip;
    c.secret = {0x1111, 0x2222};
    return c;
}

TcpRepr syn_to(uint16_t sport, uint16_t dport, uint32_t seq) {
    TcpRepr r;
    r.src_port = sport;
    r.dst_port = dport;
    r.seq = SeqNum(seq);
    r.flags = SYN;
    r.window = 65535;
    r.opts.mss = 1460;
    return r;
}

// A copied segment in flight between two hosts.
struct Wire {
    Ipv4Addr src, dst;
    uint8_t ecn;
    TcpRepr repr;
    Slice payload;
};

Slice copy_payload(zbuf::Arena& arena, const OutSegment& o) {
    uint32_t n = o.payload_len();
    if (n == 0) return Slice();
    Slice s = arena.alloc_slice(n);
    REQUIRE(s);
    size_t off = 0;
    for (auto& v : o.payload()) {
        std::memcpy(s.data() + off, v.data, v.len);
        off += v.len;
    }
    return s;
}

// Two hosts and a lossless, zero-delay wire.
struct Pair {
    explicit Pair(HostConfig ca = host_cfg(kA), HostConfig cb = host_cfg(kB)) : a(ca), b(cb) {}
    crescent::test::ZbufArenaFixture arena{64u << 20};
    Host a, b;
    // Seeded impairments applied to every segment on the wire.
    double loss = 0, reorder = 0;
    std::mt19937_64 rng{42};
    uint64_t dropped = 0, reordered = 0;
    bool trace = getenv("TCP_TRACE") != nullptr;
    std::deque<std::string> trace_log;
    Instant now = Instant::from_nanos(5'000'000'000);
    Actions oa, ob;
    std::deque<Wire> to_a, to_b;
    std::string got_a, got_b;  // bytes the applications read
    std::vector<Event> ev_a, ev_b;

    void collect(Actions& o, std::deque<Wire>& q, std::string& got, Host& h, std::vector<Event>& ev) {
        std::uniform_real_distribution<double> u(0, 1);
        for (auto& s : o.segments) {
            if (trace) {
                char buf[200];
                snprintf(buf, sizeof buf, "t=%.6f %s->%s seq=%u ack=%u fl=%02x len=%u win=%u tsval=%u tsecr=%u\n",
                         now.nanos() / 1e9, s.src == kA ? "a" : "b", s.src == kA ? "b" : "a", s.repr.seq.raw(),
                         s.repr.ack.raw(), s.repr.flags, s.payload_len(), s.repr.window,
                         s.repr.opts.ts ? s.repr.opts.ts->tsval : 0, s.repr.opts.ts ? s.repr.opts.ts->tsecr : 0);
                trace_log.push_back(buf);
                if (trace_log.size() > 80) trace_log.pop_front();
            }
            if (loss > 0 && u(rng) < loss) {
                if (trace) trace_log.back() += "   ^ dropped\n";
                ++dropped;
                continue;
            }
            q.push_back(Wire{s.src, s.dst, s.ip_ecn, s.repr, copy_payload(arena.arena(), s)});
            if (reorder > 0 && q.size() >= 2 && u(rng) < reorder) {
                std::swap(q[q.size() - 1], q[q.size() - 2]);
                ++reordered;
            }
        }
        for (auto& r : o.readable) {
            got.append(reinterpret_cast<const char*>(r.data.data()), r.data.size());
            h.consume(r.conn, uint32_t(r.data.size()));
        }
        for (auto& e : o.events) ev.push_back(e);
        o.clear();
    }

    // Run until nothing is in flight and no deadline falls before `until`.
    void run(Instant until, const std::function<void()>& app = {}) {
        for (int guard = 0; guard < 1'000'000; ++guard) {
            if (app) app();
            a.flush(now, oa);
            b.flush(now, ob);
            collect(oa, to_b, got_a, a, ev_a);
            collect(ob, to_a, got_b, b, ev_b);
            a.flush(now, oa);  // window updates from consume()
            b.flush(now, ob);
            collect(oa, to_b, got_a, a, ev_a);
            collect(ob, to_a, got_b, b, ev_b);
            if (to_a.empty() && to_b.empty()) {
                Instant next = min(a.next_deadline(), b.next_deadline());
                if (next > until) return;
                now = std::max(now, next);
                a.on_timer(now, oa);
                b.on_timer(now, ob);
                continue;
            }
            while (!to_b.empty()) {
                Wire w = std::move(to_b.front());
                to_b.pop_front();
                b.on_segment(w.src, w.dst, w.ecn, w.repr, std::move(w.payload), now, ob);
            }
            while (!to_a.empty()) {
                Wire w = std::move(to_a.front());
                to_a.pop_front();
                a.on_segment(w.src, w.dst, w.ecn, w.repr, std::move(w.payload), now, oa);
            }
            now += 10us;
        }
        FAIL("the exchange did not settle");
    }
};

} // namespace

TEST_CASE("RFC 9293 §3.10.7.1 segments to a closed port get a RST", "[tcp][host]") {
    crescent::test::ZbufArenaFixture arena;
    Host h(host_cfg(kA));
    Actions out;
    Instant now = Instant::from_nanos(1);
    h.on_segment(kB, kA, 0, syn_to(4000, 80, 100), Slice(), now, out);
    REQUIRE(out.segments.size() == 1);
    auto& r = out.segments[0].repr;
    CHECK(r.flags == (RST | ACK));
    CHECK(r.seq == SeqNum(0));
    CHECK(r.ack == SeqNum(101));
    CHECK(r.src_port == 80);
    CHECK(r.dst_port == 4000);
    CHECK(out.segments[0].dst == kB);
    out.clear();
    TcpRepr ack = syn_to(4000, 80, 100);
    ack.flags = ACK;
    ack.ack = SeqNum(777);
    h.on_segment(kB, kA, 0, ack, Slice(), now, out);
    REQUIRE(out.segments.size() == 1);
    CHECK(out.segments[0].repr.flags == RST);
    CHECK(out.segments[0].repr.seq == SeqNum(777));
    out.clear();
    TcpRepr rst = syn_to(4000, 80, 100);
    rst.flags = RST;
    h.on_segment(kB, kA, 0, rst, Slice(), now, out);
    CHECK(out.segments.empty());
    CHECK(h.stats().drop_no_listener == 3);
    h.on_segment(kB, kB, 0, syn_to(4000, 80, 100), Slice(), now, out);
    CHECK(h.stats().drop_wrong_dst == 1);
    // A SYN "from" our own address to a listening port: dropped, never
    // answered (found by fuzz_tcb: the SYN-ACK went to ourselves).
    REQUIRE(h.listen(81, 4) == ListenResult::Ok);
    out.clear();
    h.on_segment(kA, kA, 0, syn_to(81, 81, 100), Slice(), now, out);
    CHECK(out.segments.empty());
    CHECK(h.stats().drop_land == 1);
    CHECK(h.stats().accepted == 0);
}

TEST_CASE("RFC 9293 §3.10.7.2 LISTEN: handshake, accept queue, ESTABLISHED", "[tcp][host]") {
    crescent::test::ZbufArenaFixture arena;
    Host h(host_cfg(kA));
    REQUIRE(h.listen(80, 4) == ListenResult::Ok);
    CHECK(h.listen(80, 4) == ListenResult::AddressInUse);
    Actions out;
    Instant now = Instant::from_nanos(1'000'000);
    h.on_segment(kB, kA, 0, syn_to(4000, 80, 100), Slice(), now, out);
    REQUIRE(out.segments.size() == 1);
    TcpRepr synack = out.segments[0].repr;
    CHECK(synack.flags == (SYN | ACK));
    CHECK(synack.ack == SeqNum(101));
    CHECK(synack.seq == h.isn(Endpoints{kA, kB, 80, 4000}, now));
    CHECK(!h.accept(80));
    out.clear();
    TcpRepr ack;
    ack.src_port = 4000;
    ack.dst_port = 80;
    ack.seq = SeqNum(101);
    ack.ack = synack.seq + 1;
    ack.flags = ACK;
    ack.window = 65535;
    h.on_segment(kB, kA, 0, ack, Slice(), now, out);
    bool acceptable = false;
    for (auto& e : out.events)
        if (e.kind == EventKind::Acceptable && e.port == 80) acceptable = true;
    CHECK(acceptable);
    auto c = h.accept(80);
    REQUIRE(c);
    REQUIRE(h.find(*c));
    CHECK(h.find(*c)->state() == State::Established);
    CHECK(h.lookup(kB, 4000, 80) == c);
    // A RST at RCV.NXT frees the connection; the handle goes stale.
    out.clear();
    TcpRepr rst = ack;
    rst.flags = RST;
    h.on_segment(kB, kA, 0, rst, Slice(), now, out);
    CHECK(h.find(*c) == nullptr);
    CHECK(h.connection_count() == 0);
}

TEST_CASE("RFC 4987 §3.6 SYN cookies when the backlog is full", "[tcp][host][syncookie]") {
    crescent::test::ZbufArenaFixture arena;
    Host h(host_cfg(kA));
    REQUIRE(h.listen(80, 1) == ListenResult::Ok);
    Actions out;
    Instant now = Instant::from_nanos(3'000'000'000);
    h.on_segment(kB, kA, 0, syn_to(4000, 80, 100), Slice(), now, out);  // fills the backlog
    CHECK(h.connection_count() == 1);
    out.clear();
    h.on_segment(kB, kA, 0, syn_to(4001, 80, 9000), Slice(), now, out);
    REQUIRE(out.segments.size() == 1);
    CHECK(h.stats().syn_cookies_sent == 1);
    CHECK(h.connection_count() == 1);  // stateless
    TcpRepr synack = out.segments[0].repr;
    CHECK(synack.flags == (SYN | ACK));
    out.clear();
    // A forged ACK (wrong cookie) gets a RST and no state.
    TcpRepr bad;
    bad.src_port = 4001;
    bad.dst_port = 80;
    bad.seq = SeqNum(9001);
    bad.ack = synack.seq + 2;
    bad.flags = ACK;
    bad.window = 1000;
    h.on_segment(kB, kA, 0, bad, Slice(), now, out);
    CHECK(h.stats().syn_cookies_bad == 1);
    CHECK(h.connection_count() == 1);
    out.clear();
    // The real third ACK, a little later, creates the connection.
    TcpRepr ack = bad;
    ack.ack = synack.seq + 1;
    h.on_segment(kB, kA, 0, ack, Slice(), now + 1s, out);
    CHECK(h.stats().syn_cookies_ok == 1);
    CHECK(h.connection_count() == 2);
    auto c = h.lookup(kB, 4001, 80);
    REQUIRE(c);
    CHECK(h.find(*c)->state() == State::Established);
    CHECK(h.find(*c)->stats().snd_mss == 1460);
}

TEST_CASE("Host: every open takes its MSS from the path (HostConfig::path_mss), cookies too", "[tcp][host][mss]") {
    crescent::test::ZbufArenaFixture arena;
    constexpr Ipv4Addr kC{0x0a000003};
    HostConfig cfg = host_cfg(kA);
    int asked = 0;
    // The route to kB sets an MTU of 1280 (MSS 1240); kC's sets none.
    cfg.path_mss = [&](Ipv4Addr peer) -> uint16_t {
        ++asked;
        return peer == kB ? 1240 : 0;
    };
    Host h(cfg);
    REQUIRE(h.listen(80, 2) == ListenResult::Ok);
    Instant now = Instant::from_nanos(3'000'000'000);
    auto handshake = [&](Ipv4Addr peer, uint16_t sport, uint32_t seq, uint16_t* adv_mss) -> std::optional<ConnId> {
        Actions out;
        h.on_segment(peer, kA, 0, syn_to(sport, 80, seq), Slice(), now, out);
        REQUIRE(out.segments.size() == 1);
        const TcpRepr synack = out.segments[0].repr;
        REQUIRE(synack.opts.mss);
        *adv_mss = *synack.opts.mss;
        out.clear();
        TcpRepr ack;
        ack.src_port = sport;
        ack.dst_port = 80;
        ack.seq = SeqNum(seq + 1);
        ack.ack = synack.seq + 1;
        ack.flags = ACK;
        ack.window = 65535;
        h.on_segment(peer, kA, 0, ack, Slice(), now, out);
        return h.lookup(peer, sport, 80);
    };
    uint16_t adv = 0;
    auto b = handshake(kB, 4000, 100, &adv);
    CHECK(adv == 1240);  // our MSS option: the path's
    REQUIRE(b);
    CHECK(h.find(*b)->stats().snd_mss == 1240);  // and the ceiling of what we send (peer offered 1460)
    auto c = handshake(kC, 4001, 200, &adv);
    CHECK(adv == 1460);  // no route MTU: the interface's
    REQUIRE(c);
    CHECK(h.find(*c)->stats().snd_mss == 1460);
    // The backlog (2) is full of accepted-but-not-taken connections: a SYN cookie.
    auto cookie = handshake(kB, 4002, 300, &adv);
    CHECK(h.stats().syn_cookies_ok == 1);
    CHECK(adv == 1240);
    REQUIRE(cookie);
    CHECK(h.find(*cookie)->stats().snd_mss == 1240);
    // An active open takes it too: the SYN's MSS option.
    Actions out;
    ConnId id;
    REQUIRE(h.connect(kB, 9000, 40000, now, out, &id) == ConnectResult::Ok);
    REQUIRE(out.segments.size() == 1);
    REQUIRE(out.segments[0].repr.opts.mss);
    CHECK(*out.segments[0].repr.opts.mss == 1240);
    CHECK(asked >= 4);
}

TEST_CASE("RFC 6528 ISN: keyed per 4-tuple, advancing with a 4 us clock", "[tcp][host][isn]") {
    Host h1(host_cfg(kA)), h2(host_cfg(kA));
    HostConfig other = host_cfg(kA);
    other.secret = {0x3333, 0x4444};
    Host h3(other);
    Endpoints e1{kA, kB, 80, 4000}, e2{kA, kB, 80, 4001};
    Instant t = Instant::from_nanos(123'456'789);
    CHECK(h1.isn(e1, t) == h2.isn(e1, t));  // deterministic for a seed
    CHECK(h1.isn(e1, t) != h1.isn(e2, t));  // differs per tuple
    CHECK(h1.isn(e1, t) != h3.isn(e1, t));  // differs per secret
    CHECK(h1.isn(e1, t + 4us) - h1.isn(e1, t) == 1);
}

TEST_CASE("two Hosts: connect, transfer both ways, close, TIME-WAIT expires", "[tcp][host][e2e]") {
    Pair p;
    REQUIRE(p.b.listen(9000, 16) == ListenResult::Ok);
    ConnId ca;
    REQUIRE(p.a.connect(kB, 9000, 40000, p.now, p.oa, &ca) == ConnectResult::Ok);
    CHECK(p.a.connect(kB, 9000, 40000, p.now, p.oa, nullptr) == ConnectResult::AddressInUse);
    p.run(p.now + 10ms);
    REQUIRE(p.a.find(ca));
    CHECK(p.a.find(ca)->state() == State::Established);
    auto cb = p.b.accept(9000);
    REQUIRE(cb);

    // 1 MiB from a to b in 4 KiB slices, 64 KiB back, with backpressure.
    const size_t total = 1u << 20;
    std::string expect_b, expect_a;
    size_t sent_ab = 0, sent_ba = 0;
    auto pattern = [](size_t i) { return char('a' + (i * 7 + i / 4096) % 26); };
    auto app = [&] {
        while (sent_ab < total) {
            size_t n = std::min<size_t>(4096, total - sent_ab);
            Slice s = p.arena->alloc_slice(n);
            REQUIRE(s);
            for (size_t i = 0; i < n; ++i) reinterpret_cast<char*>(s.data())[i] = pattern(sent_ab + i);
            if (p.a.send(ca, s) != SendResult::Ok) break;
            for (size_t i = 0; i < n; ++i) expect_b.push_back(pattern(sent_ab + i));
            sent_ab += n;
        }
        while (sent_ba < 65536) {
            Slice s = p.arena->alloc_slice(1000);
            REQUIRE(s);
            std::memset(s.data(), 'z', 1000);
            if (p.b.send(*cb, s) != SendResult::Ok) break;
            expect_a.append(1000, 'z');
            sent_ba += 1000;
        }
    };
    p.run(p.now + 5s, app);
    CHECK(p.got_b.size() == total);
    CHECK(p.got_b == expect_b);
    CHECK(p.got_a == expect_a);
    auto sa = p.a.find(ca)->stats();
    CHECK(sa.retrans_timeout == 0);
    CHECK(sa.fast_path > 0);

    // a closes first (TIME-WAIT), then b.
    p.a.close(ca);
    p.run(p.now + 10ms);
    CHECK(p.b.find(*cb)->state() == State::CloseWait);
    p.b.close(*cb);
    p.run(p.now + 10ms);
    CHECK(p.b.find(*cb) == nullptr);
    CHECK(p.b.connection_count() == 0);
    CHECK(p.a.in_time_wait(ca));
    CHECK(p.a.find(ca) == nullptr);  // a compact record, not a Tcb
    CHECK(p.a.stats().time_wait == 1);
    p.run(p.now + 2s);  // TIME-WAIT (1 s) serviced by Host::on_timer
    CHECK(p.a.find(ca) == nullptr);
    CHECK(p.a.connection_count() == 0);
}

TEST_CASE("Host: connect to a closed port is refused", "[tcp][host][e2e]") {
    Pair p;
    ConnId ca;
    REQUIRE(p.a.connect(kB, 9999, 40001, p.now, p.oa, &ca) == ConnectResult::Ok);
    p.run(p.now + 10ms);
    bool refused = false;
    for (auto& e : p.ev_a)
        if (e.kind == EventKind::Closed && e.reason == CloseReason::Refused) refused = true;
    CHECK(refused);
    CHECK(p.a.connection_count() == 0);
}

TEST_CASE("two Hosts: byte-exact transfer under seeded loss and reordering, each CC, SACK on/off", "[tcp][host][loss]") {
    for (CcAlgo cc : {CcAlgo::NewReno, CcAlgo::Cubic, CcAlgo::Dctcp}) {
        for (bool sack : {true, false}) {
            for (double loss : {0.01, 0.05, 0.2}) {
                HostConfig ca = host_cfg(kA), cb = host_cfg(kB);
                for (HostConfig* c : {&ca, &cb}) {
                    c->tcp.cc = cc;
                    c->tcp.sack = sack;
                    c->tcp.snd_buf = 256u << 10;
                    c->tcp.rcv_buf = 256u << 10;
                    c->tcp.max_retries = 30;
                }
                Pair p(ca, cb);
                p.loss = loss;
                p.reorder = 0.05;
                p.rng.seed(uint64_t(loss * 1000) * 31 + uint64_t(cc) * 7 + sack);
                INFO("cc=" << cc_name(cc) << " sack=" << sack << " loss=" << loss);
                REQUIRE(p.b.listen(9000, 16) == ListenResult::Ok);
                ConnId ca_id;
                REQUIRE(p.a.connect(kB, 9000, 40000, p.now, p.oa, &ca_id) == ConnectResult::Ok);
                std::optional<ConnId> cb_id;
                const size_t total = 512u << 10;
                size_t sent = 0;
                std::string expect;
                bool closed = false;
                auto app = [&] {
                    if (!cb_id) cb_id = p.b.accept(9000);
                    if (cb_id && p.b.find(*cb_id) && p.b.find(*cb_id)->state() == State::CloseWait) p.b.close(*cb_id);
                    if (!p.a.find(ca_id) || p.a.find(ca_id)->state() != State::Established) return;
                    while (sent < total) {
                        size_t n = std::min<size_t>(3000, total - sent);
                        Slice s = p.arena->alloc_slice(n);
                        REQUIRE(s);
                        for (size_t i = 0; i < n; ++i) reinterpret_cast<char*>(s.data())[i] = char('A' + (sent + i) % 53);
                        if (p.a.send(ca_id, s) != SendResult::Ok) return;
                        for (size_t i = 0; i < n; ++i) expect.push_back(char('A' + (sent + i) % 53));
                        sent += n;
                    }
                    if (!closed) {
                        p.a.close(ca_id);
                        closed = true;
                    }
                };
                p.run(p.now + 600s, app);
                bool ok = p.got_b.size() == total && p.a.connection_count() == 0 && p.b.connection_count() == 0;
                for (auto* h : {&p.a, &p.b}) {
                    if (ok) break;  // diagnostics only on failure
                    auto id = h == &p.a ? p.a.lookup(kB, 9000, 40000) : p.b.lookup(kA, 40000, 9000);
                    if (id && h->find(*id)) {
                        auto st = h->find(*id)->stats();
                        std::cerr << (h == &p.a ? "a" : "b") << ": " << state_name(st.state) << " una=" << st.snd_una
                                      << " nxt=" << st.snd_nxt << " rcv_nxt=" << st.rcv_nxt << " rto_us=" << st.rto.count() / 1000
                                      << " rto_events=" << st.rto_events << " cwnd=" << st.cwnd << " wnd=" << st.snd_wnd
                                      << " rcv_wnd=" << st.rcv_wnd << " deadline=" << h->find(*id)->next_deadline().nanos()
                                      << " now=" << p.now.nanos() << " segs_in=" << st.segs_in << " paws=" << st.drop_paws
                                      << " notacc=" << st.drop_not_acceptable << " badack=" << st.drop_bad_ack
                                      << " chack=" << st.challenge_acks << " fast=" << st.fast_path
                                      << " dup=" << st.dupacks << " segs_out=" << st.segs_out << "\n";
                    }
                }
                if (!ok) {
                    for (auto& l : p.trace_log) std::cerr << l;  // with TCP_TRACE=1 in the environment
                    for (auto& e : p.ev_a)
                        if (e.kind == EventKind::Closed) std::cerr << "a closed: " << close_reason_name(e.reason) << "\n";
                    for (auto& e : p.ev_b)
                        if (e.kind == EventKind::Closed) std::cerr << "b closed: " << close_reason_name(e.reason) << "\n";
                }
                CHECK(p.got_b.size() == total);
                CHECK(p.got_b == expect);
                CHECK(p.b.connection_count() == 0);
                CHECK(p.a.connection_count() == 0);
                CHECK(p.dropped > 0);
            }
        }
    }
}

TEST_CASE("RFC 6191 a new SYN above RCV.NXT reuses a TIME-WAIT 4-tuple", "[tcp][host]") {
    Pair p;
    REQUIRE(p.a.listen(7000, 4) == ListenResult::Ok);
    ConnId cb;
    REQUIRE(p.b.connect(kA, 7000, 50000, p.now, p.ob, &cb) == ConnectResult::Ok);
    p.run(p.now + 10ms);
    auto ca = p.a.accept(7000);
    REQUIRE(ca);
    p.a.close(*ca);  // the listener side closes first: TIME-WAIT on a
    p.run(p.now + 10ms);
    const uint32_t rcv_nxt = p.a.find(*ca)->stats().rcv_nxt + 1;  // after b's FIN
    p.b.close(cb);
    p.run(p.now + 10ms);
    REQUIRE(p.a.in_time_wait(*ca));
    Actions out;
    TcpRepr syn = syn_to(50000, 7000, rcv_nxt + 100000);
    p.a.on_segment(kB, kA, 0, syn, Slice(), p.now, out);
    CHECK(p.a.stats().time_wait_reused == 1);
    REQUIRE(out.segments.size() == 1);
    CHECK(out.segments[0].repr.flags == (SYN | ACK));
    auto again = p.a.lookup(kB, 50000, 7000);
    REQUIRE(again);
    CHECK(!(*again == *ca));
    CHECK(p.a.find(*again)->state() == State::SynReceived);
}

TEST_CASE("RFC 9293 §3.10.1 LISTEN -> CLOSED: unlisten resets pending embryos", "[tcp][host]") {
    crescent::test::ZbufArenaFixture arena;
    Host h(host_cfg(kA));
    REQUIRE(h.listen(80, 4) == ListenResult::Ok);
    Actions out;
    Instant now = Instant::from_nanos(1'000'000);
    h.on_segment(kB, kA, 0, syn_to(4000, 80, 100), Slice(), now, out);
    CHECK(h.connection_count() == 1);
    out.clear();
    h.unlisten(80, now, out);
    CHECK(h.connection_count() == 0);
    REQUIRE(out.segments.size() == 1);
    CHECK(out.segments[0].repr.flags == RST);
    out.clear();
    h.on_segment(kB, kA, 0, syn_to(4001, 80, 100), Slice(), now, out);
    REQUIRE(out.segments.size() == 1);
    CHECK(out.segments[0].repr.flags == (RST | ACK));  // closed port now
}

TEST_CASE("Host: RSTs to unknown ports are rate limited when configured", "[tcp][host]") {
    crescent::test::ZbufArenaFixture arena;
    HostConfig c = host_cfg(kA);
    c.rst_rate_limit = 3;
    Host h(c);
    Actions out;
    Instant now = Instant::from_nanos(10'000'000'000);
    for (int i = 0; i < 10; ++i) h.on_segment(kB, kA, 0, syn_to(uint16_t(4000 + i), 81, 1), Slice(), now, out);
    CHECK(out.segments.size() == 3);
    CHECK(h.stats().rst_rate_limited == 7);
    out.clear();
    h.on_segment(kB, kA, 0, syn_to(4000, 81, 1), Slice(), now + 1s, out);
    CHECK(out.segments.size() == 1);
}

TEST_CASE("RFC 9293 §3.10.7.2 LISTEN: SYN+FIN, SYN+RST, Xmas and null segments open nothing", "[tcp][host]") {
    crescent::test::ZbufArenaFixture arena;
    Host h(host_cfg(kA));
    REQUIRE(h.listen(80, 4) == ListenResult::Ok);
    Actions out;
    Instant now = Instant::from_nanos(1);
    const uint8_t odd[] = {SYN | FIN, SYN | RST, uint8_t(FIN | SYN | RST | PSH | ACK | URG), 0, FIN | PSH | URG};
    uint16_t port = 4000;
    for (uint8_t f : odd) {
        TcpRepr s = syn_to(port++, 80, 100);
        s.flags = f;
        h.on_segment(kB, kA, 0, s, Slice(), now, out);
    }
    CHECK(out.segments.empty());  // no SYN-ACK (and no RST: none of them carries an ACK without RST)
    CHECK(h.connection_count() == 0);
    CHECK(h.stats().drop_listen_bad == 5);
    CHECK(h.stats().accepted == 0);
    // A plain SYN still opens.
    h.on_segment(kB, kA, 0, syn_to(port, 80, 100), Slice(), now, out);
    REQUIRE(out.segments.size() == 1);
    CHECK(out.segments[0].repr.flags == (SYN | ACK));
}

TEST_CASE("Host: backlog without cookies drops SYNs beyond the limit", "[tcp][host]") {
    crescent::test::ZbufArenaFixture arena;
    HostConfig c = host_cfg(kA);
    c.syn_cookies = false;
    Host h(c);
    REQUIRE(h.listen(80, 2) == ListenResult::Ok);
    Actions out;
    Instant now = Instant::from_nanos(1);
    for (int i = 0; i < 5; ++i) h.on_segment(kB, kA, 0, syn_to(uint16_t(4000 + i), 80, 1), Slice(), now, out);
    CHECK(h.connection_count() == 2);
    CHECK(h.stats().drop_backlog_full == 3);
    CHECK(out.segments.size() == 2);
}

TEST_CASE("RFC 4987 SYN cookies carry wscale/SACK/ECN through the timestamp echo", "[tcp][host][syncookie]") {
    crescent::test::ZbufArenaFixture arena;
    HostConfig c = host_cfg(kA);
    c.tcp.rcv_buf = 1u << 20;
    Host h(c);
    REQUIRE(h.listen(80, 1) == ListenResult::Ok);
    Actions out;
    Instant now = Instant::from_nanos(3'000'000'000);
    h.on_segment(kB, kA, 0, syn_to(4000, 80, 100), Slice(), now, out);  // fills the backlog
    out.clear();
    TcpRepr syn = syn_to(4001, 80, 9000);
    syn.opts.mss = 1200;
    syn.opts.wscale = 7;
    syn.opts.sack_permitted = true;
    syn.opts.ts = wire::Timestamps{555, 0};
    h.on_segment(kB, kA, 0, syn, Slice(), now, out);
    REQUIRE(out.segments.size() == 1);
    TcpRepr synack = out.segments[0].repr;
    REQUIRE(synack.opts.ts);
    CHECK(synack.opts.ts->tsecr == 555);
    CHECK(synack.opts.sack_permitted);
    CHECK(synack.opts.wscale == 5);  // ours for a 1 MiB buffer
    out.clear();
    TcpRepr ack;
    ack.src_port = 4001;
    ack.dst_port = 80;
    ack.seq = SeqNum(9001);
    ack.ack = synack.seq + 1;
    ack.flags = ACK;
    ack.window = 100;
    ack.opts.ts = wire::Timestamps{556, synack.opts.ts->tsval};
    h.on_segment(kB, kA, 0, ack, Slice(), now + 1ms, out);
    auto id = h.lookup(kB, 4001, 80);
    REQUIRE(id);
    auto st = h.find(*id)->stats();
    CHECK(st.state == State::Established);
    CHECK(st.sack_ok);
    CHECK(st.ts_ok);
    CHECK(st.snd_wscale == 7);
    CHECK(st.rcv_wscale == 5);
    CHECK(st.snd_wnd == 100u << 7);
    CHECK(st.snd_mss == 1200 - 12);
}

TEST_CASE("TIME-WAIT as a compact record: re-ACKs a retransmitted FIN and restarts 2*MSL, ignores a RST "
          "(RFC 1337), answers data with an ACK, then frees the 4-tuple",
          "[tcp][host][time_wait]") {
    Pair p;
    REQUIRE(p.b.listen(7000, 4) == ListenResult::Ok);
    ConnId ca;
    REQUIRE(p.a.connect(kB, 7000, 40007, p.now, p.oa, &ca) == ConnectResult::Ok);
    p.run(p.now + 10ms);
    auto cb = p.b.accept(7000);
    REQUIRE(cb);
    p.a.close(ca);  // a closes first: TIME-WAIT on a
    p.run(p.now + 10ms);
    p.b.close(*cb);
    p.b.flush(p.now, p.ob);
    std::optional<TcpRepr> fin;
    for (auto& s : p.ob.segments)
        if (s.repr.has(FIN)) fin = s.repr;
    REQUIRE(fin);
    p.run(p.now + 10ms);
    REQUIRE(p.a.in_time_wait(ca));
    CHECK(p.a.stats().time_wait == 1);
    const Instant entered = p.now;

    // b's FIN again (as if a's ACK of it was lost): ACKed, 2*MSL restarts.
    p.now = entered + 600ms;
    Actions out;
    p.a.on_segment(kB, kA, 0, *fin, Slice(), p.now, out);
    REQUIRE(out.segments.size() == 1);
    CHECK(out.segments[0].repr.flags == ACK);
    CHECK(out.segments[0].repr.ack == fin->seq + 1);
    CHECK(out.segments[0].repr.opts.ts.has_value());  // timestamps negotiated: still sent
    out.clear();

    // RFC 1337: a RST does not end TIME-WAIT.
    TcpRepr rst = *fin;
    rst.flags = RST;
    rst.seq = fin->seq + 1;
    p.a.on_segment(kB, kA, 0, rst, Slice(), p.now, out);
    CHECK(out.segments.empty());
    CHECK(p.a.in_time_wait(ca));

    // Data cannot be received any more: answered with an ACK, never delivered.
    TcpRepr data = *fin;
    data.flags = ACK | PSH;
    data.seq = fin->seq + 1;
    p.a.on_segment(kB, kA, 0, data, p.arena.arena().alloc_slice(3), p.now, out);
    REQUIRE(out.segments.size() == 1);
    CHECK(out.segments[0].repr.flags == ACK);
    CHECK(out.readable.empty());
    out.clear();

    // A pure ACK below RCV.NXT (a stale one, or the answer of a peer that
    // refuses ours): answered at most once per 500 ms (oow_limit.hpp), where
    // data is answered every time. The FIN's ACK above was for a segment
    // with a FIN, the data's for data: the interval starts here.
    TcpRepr stale = *fin;
    stale.flags = ACK;
    stale.seq = fin->seq - 100;  // (RCV.NXT - 1 would be a keep-alive probe: always answered)
    p.a.on_segment(kB, kA, 0, stale, Slice(), p.now, out);
    CHECK(out.segments.size() == 1);
    p.a.on_segment(kB, kA, 0, stale, Slice(), p.now + 100ms, out);
    CHECK(out.segments.size() == 1);
    p.a.on_segment(kB, kA, 0, data, p.arena.arena().alloc_slice(3), p.now + 100ms, out);
    CHECK(out.segments.size() == 2);
    out.clear();

    // The first 2*MSL would have ended at entered + 1 s; the restart holds it
    // until entered + 1.6 s.
    Actions timers;
    p.a.on_timer(entered + 1200ms, timers);
    CHECK(p.a.in_time_wait(ca));
    p.a.on_timer(entered + 1700ms, timers);
    CHECK_FALSE(p.a.in_time_wait(ca));
    CHECK(p.a.stats().time_wait == 0);
    CHECK(p.a.connection_count() == 0);
    CHECK(timers.segments.empty());
}

TEST_CASE("Host: a train's held ACK goes at the next flush(), one ACK for the train", "[tcp][host][delack]") {
    HostConfig cb = host_cfg(kB);
    cb.tcp.ack_hold = 10us;
    cb.tcp.ack_hold_segments = 4;
    Pair p(host_cfg(kA), cb);
    REQUIRE(p.b.listen(9000, 16) == ListenResult::Ok);
    ConnId ca;
    REQUIRE(p.a.connect(kB, 9000, 40000, p.now, p.oa, &ca) == ConnectResult::Ok);
    p.run(p.now + 10ms);
    auto cb_id = p.b.accept(9000);
    REQUIRE(cb_id);
    const uint32_t mss = p.a.find(ca)->stats().snd_mss;
    REQUIRE(mss > 0);
    // Ten full segments from a, all on the wire before b sees any (one RX burst).
    Slice s = p.arena->alloc_slice(10 * mss);
    REQUIRE(s);
    std::memset(s.data(), 'x', s.size());
    REQUIRE(p.a.send(ca, s) == SendResult::Ok);
    p.a.flush(p.now, p.oa);
    p.collect(p.oa, p.to_b, p.got_a, p.a, p.ev_a);
    REQUIRE(p.to_b.size() == 10);
    CHECK_FALSE(p.b.has_dirty());
    while (!p.to_b.empty()) {
        Wire w = std::move(p.to_b.front());
        p.to_b.pop_front();
        p.b.on_segment(w.src, w.dst, w.ecn, w.repr, std::move(w.payload), p.now, p.ob);
    }
    // Past ack_hold_segments, yet nothing was sent while the burst was handled...
    CHECK(p.ob.segments.empty());
    CHECK(p.b.has_dirty());
    p.ob.readable.clear();  // the application has not read yet
    // ...and the flush at the burst's end sends one ACK for all ten.
    p.b.flush(p.now, p.ob);
    REQUIRE(p.ob.segments.size() == 1);
    CHECK(p.ob.segments[0].payload_len() == 0);
    CHECK(p.ob.segments[0].repr.ack.raw() == p.a.find(ca)->stats().snd_nxt);
    CHECK_FALSE(p.b.has_dirty());
    p.ob.clear();
}
