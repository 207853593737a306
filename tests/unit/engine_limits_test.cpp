// crescent — the engine's limits at their edges and its pools run dry under
// load (issue 11, "Exhaustion and limits"), two engines over net_ring
// (tests/support/ring_bed.hpp):
//
//   - EngineConfig::max_connections: connect() refuses at the limit, SYNs
//     beyond it are dropped and counted, a freed slot is taken by the SYN's
//     retransmission;
//   - EngineConfig::backlog with SYN cookies off (drops, counted, the SYNs'
//     retransmissions get in) and on (cookies, no drop);
//   - ConnOptions::snd_buf / rcv_buf: exactly that many bytes, then
//     WouldBlock / a closed window;
//   - ConnOptions::reassembly_segments: out-of-order data past it dropped
//     and counted, the transfer still byte-exact;
//   - EngineConfig::max_memory: senders see NoMemory, receivers drop and
//     count (rx_no_memory), the engine's zones never pass the cap, and once
//     the receiver reads everything arrives byte-exact and no zbuf leaks;
//   - the mbuf pool empty: segments not built are counted (tx_no_mbuf), the
//     connection recovers when mbufs come back;
//   - a zbuf-backed RX pool held below half by the application: frames are
//     copied (rx_copy_pressure), zero-copy again once the slices go.
//
// Every case ends with the arena's live objs back at their start (LeakCheck).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <crescent/engine.hpp>
#include <crescent/runtime.hpp>
#include <crescent/zbuf.hpp>

#include "tests/support/echo_handlers.hpp"
#include "tests/support/ring_bed.hpp"
#include "tests/support/zbuf_leak.hpp"
#include "zbuf/dpdk.hpp"

using namespace crescent;
using namespace std::chrono_literals;
using test::RingBed;
using zbuf::Zbuf;
using test::RingBedOptions;

namespace {

uint32_t seed_of(uint16_t client_port) { return client_port & 0xff; }

// Client side (inline mode): streams `total` pattern bytes on each connection
// with send_copy(), retrying what was refused (WouldBlock, NoMemory) on the
// next pump(); counts the refusals.
class Source : public Handler {
public:
    struct Stream {
        Conn c;
        uint64_t sent = 0;
    };
    explicit Source(uint64_t total, size_t chunk = 16384) : total_(total), chunk_(chunk) {}
    std::vector<Stream> streams;
    uint64_t connected = 0, closed = 0, would_block = 0, no_memory = 0;

    void on_connected(Conn c) override {
        ++connected;
        streams.push_back({c, 0});
    }
    void on_closed(Conn, CloseReason) override { ++closed; }
    void pump() {
        std::vector<std::byte> buf(chunk_);
        for (Stream& s : streams) {
            while (s.c.valid() && s.sent < total_) {
                const size_t n = size_t(std::min<uint64_t>(chunk_, total_ - s.sent));
                const uint32_t seed = seed_of(s.c.local().port);
                for (size_t i = 0; i < n; ++i) buf[i] = std::byte(test::pattern_byte(s.sent + i, seed));
                SendStatus st = s.c.send_copy(std::span<const std::byte>(buf.data(), n));
                if (st == SendStatus::Ok) {
                    s.sent += n;
                    continue;
                }
                if (st == SendStatus::WouldBlock) ++would_block;
                else if (st == SendStatus::NoMemory) ++no_memory;
                break;
            }
        }
    }
    bool all_sent() const {
        for (const Stream& s : streams)
            if (s.sent < total_) return false;
        return !streams.empty();
    }

private:
    uint64_t total_;
    size_t chunk_;
};

// Server side (batch mode): reads only while `reading`, checks every byte
// against the client's pattern.
class Sink : public Handler {
public:
    struct Got {
        Conn c;
        uint64_t bytes = 0;
    };
    bool reading = true;
    std::vector<Got> got;
    uint64_t connected = 0, closed = 0, mismatches = 0;

    void on_connected(Conn c) override {
        ++connected;
        got.push_back({c, 0});
    }
    void on_readable(Conn c) override {
        if (reading) drain(c);
    }
    void on_closed(Conn, CloseReason) override { ++closed; }
    void on_peer_closed(Conn c) override {
        if (reading) drain(c);
        c.close();
    }
    void drain_all() {
        for (Got& g : got)
            if (g.c.valid()) drain(g.c);
    }
    uint64_t total() const {
        uint64_t t = 0;
        for (const Got& g : got) t += g.bytes;
        return t;
    }
    size_t queued() const {
        size_t q = 0;
        for (const Got& g : got)
            if (g.c.valid()) q += g.c.readable();
        return q;
    }

private:
    void drain(Conn c) {
        Got* g = nullptr;
        for (Got& x : got)
            if (x.c == c) g = &x;
        if (!g) return;
        const uint32_t seed = seed_of(c.remote().port);
        std::byte buf[16384];
        for (size_t n; (n = c.read(buf, sizeof buf)) != 0;) {
            for (size_t i = 0; i < n; ++i)
                if (buf[i] != std::byte(test::pattern_byte(g->bytes + i, seed))) ++mismatches;
            g->bytes += n;
        }
    }
};

// Client (batch mode) of an echo server: streams `total` pattern bytes per
// connection like Source and, while `reading`, checks every echoed byte.
class EchoClient : public Source {
public:
    explicit EchoClient(uint64_t total) : Source(total) {}
    bool reading = true;
    uint64_t mismatches = 0;
    void on_readable(Conn c) override {
        if (reading) drain(c);
    }
    void drain_all() {
        for (Stream& s : streams)
            if (s.c.valid()) drain(s.c);
    }
    uint64_t sent_total() const {
        uint64_t t = 0;
        for (const Stream& s : streams) t += s.sent;
        return t;
    }
    uint64_t echoed() const {
        uint64_t t = 0;
        for (const auto& [port, n] : got_) t += n;
        return t;
    }

private:
    void drain(Conn c) {
        uint64_t& got = got_[c.local().port];
        const uint32_t seed = seed_of(c.local().port);
        std::byte buf[16384];
        for (size_t n; (n = c.read(buf, sizeof buf)) != 0;) {
            for (size_t i = 0; i < n; ++i)
                if (buf[i] != std::byte(test::pattern_byte(got + i, seed))) ++mismatches;
            got += n;
        }
    }
    std::map<uint16_t, uint64_t> got_;
};

// Counts connections opened by a listener, nothing else (inline mode).
class Acceptor : public Handler {
public:
    std::vector<Conn> conns;
    void on_connected(Conn c) override { conns.push_back(c); }
    void on_peer_closed(Conn c) override { c.close(); }
    size_t live() const {
        size_t n = 0;
        for (const Conn& c : conns) n += c.valid();
        return n;
    }
};

class Counter : public Handler {
public:
    std::vector<Conn> conns;
    uint64_t closed = 0;
    void on_connected(Conn c) override { conns.push_back(c); }
    void on_closed(Conn, CloseReason) override { ++closed; }
};

void close_all_and_settle(RingBed& bed) {
    REQUIRE(bed.run_until([&] { return bed.a().connection_count() == 0 && bed.b().connection_count() == 0; }, 5s));
}

} // namespace

// First in the file: the arena's zones are fewest here (they stay with their
// core for the life of the process), so the caps leave little besides what the
// test uses. Each engine on a core of its own, each capped: a's send queues
// (send_copy) and b's unread receive queues (payloads copied off the ring's
// plain mbufs) each fill their engine's memory.
TEST_CASE("limits: max_memory caps an engine's zones; NoMemory, rx_no_memory, then recovery, byte-exact",
          "[engine][limits]") {
    REQUIRE(test::RingEnv::get().ok);  // the arena, for LeakCheck
    test::LeakCheck leaks;
    zbuf::Arena* arena = zbuf::Arena::current();
    REQUIRE(arena != nullptr);
    const size_t cap_a = size_t(arena->core_usage(0).zones + 3) * zbuf::kZoneSize;
    const size_t cap_b = size_t(arena->core_usage(1).zones + 3) * zbuf::kZoneSize;
    RingBedOptions o;
    o.mode_b = DispatchMode::Batch;
    o.b_own_core = true;
    o.conn.rcv_buf = 4u << 20;
    o.tune = [&](EngineConfig& c, bool is_a) { c.max_memory = is_a ? cap_a : cap_b; };
    {
        RingBed bed(41, o);
        Sink sink;
        sink.reading = false;
        REQUIRE(bed.b().listen(9100, sink) == ListenStatus::Ok);
        const uint64_t total = 6u << 20;
        Source src(total);
        ConnOptions co;
        co.snd_buf = 4u << 20;
        for (int i = 0; i < 6; ++i)
            REQUIRE(bed.a().connect({bed.ip_b, 9100}, src, nullptr, &co) == ConnectStatus::Ok);
        REQUIRE(bed.run_until([&] { return src.connected == 6 && sink.connected == 6; }, 3s));

        uint64_t peak_a = 0, peak_b = 0;
        auto pump = [&] {
            src.pump();
            peak_a = std::max(peak_a, arena->core_usage(0).zones);
            peak_b = std::max(peak_b, arena->core_usage(1).zones);
        };
        REQUIRE(bed.run_until([&] {
            pump();
            return src.no_memory > 0 && bed.b().stats().rx_no_memory > 0;
        }, 10s));
        bed.run_for(200ms);  // held at the caps
        pump();
        const size_t queued = sink.queued();
        INFO("received and held: " << queued << " B; zones a " << peak_a << " of " << cap_a / zbuf::kZoneSize
                                   << ", b " << peak_b << " of " << cap_b / zbuf::kZoneSize);
        CHECK(peak_a <= cap_a / zbuf::kZoneSize);
        CHECK(peak_b <= cap_b / zbuf::kZoneSize);
        CHECK(bed.a().stats().mem_limit_refused > 0);
        CHECK(bed.b().stats().rx_no_memory > 0);  // refused before the cap: the senders' headroom
        CHECK(queued > 0);

        // The receiver reads: memory comes back, the senders go on, every byte arrives.
        sink.reading = true;
        sink.drain_all();
        REQUIRE(bed.run_until([&] {
            pump();
            sink.drain_all();
            return src.all_sent() && sink.total() == 6 * total;
        }, 30s));
        CHECK(sink.mismatches == 0);
        CHECK(peak_a <= cap_a / zbuf::kZoneSize);
        CHECK(peak_b <= cap_b / zbuf::kZoneSize);
        INFO("sender NoMemory " << src.no_memory << ", receiver rx_no_memory " << bed.b().stats().rx_no_memory);
        CHECK(src.no_memory > 0);
        std::printf("max_memory: caps a %zu / b %zu MiB; zones at most a %llu / b %llu; held unread %zu B; "
                    "send_copy NoMemory %llu, rx_no_memory %llu, allocations refused by the caps a %llu / b %llu; "
                    "%llu bytes verified after recovery\n",
                    cap_a >> 20, cap_b >> 20, (unsigned long long)peak_a, (unsigned long long)peak_b, queued,
                    (unsigned long long)src.no_memory, (unsigned long long)bed.b().stats().rx_no_memory,
                    (unsigned long long)bed.a().stats().mem_limit_refused,
                    (unsigned long long)bed.b().stats().mem_limit_refused, (unsigned long long)sink.total());
        for (Source::Stream& s : src.streams) s.c.close();
        REQUIRE(bed.run_until([&] { return sink.closed == 6 && src.closed == 6; }, 5s));
        close_all_and_settle(bed);
    }
    CHECK(arena->core_limit(0) == 0);  // the engines gave their caps back
    CHECK(arena->core_limit(1) == 0);
}

// A batch echo server (read, then write; no more reading while a write is
// short: the usual epoll server loop) under a small max_memory whose zones
// are held by 2 KiB objs, three in four of them, as received payloads leave
// them (no zone is free to change class): its replies must still go out. They
// did not when write() only took objs of the largest class (limits_test's
// memory_batch case: the server stalled for good). Received copies leave the
// senders headroom, write() takes objs of any class, on_writable() follows a
// refusal.
TEST_CASE("limits: a batch echo server whose zones are held by small objs still replies (no deadlock)",
          "[engine][limits]") {
    REQUIRE(test::RingEnv::get().ok);
    test::LeakCheck leaks;
    zbuf::Arena* arena = zbuf::Arena::current();
    const size_t cap = size_t(arena->core_usage(1).zones + 2) * zbuf::kZoneSize;
    RingBedOptions o;
    o.mode_a = DispatchMode::Batch;
    o.mode_b = DispatchMode::Batch;
    o.b_own_core = true;
    o.tune = [&](EngineConfig& c, bool is_a) {
        if (!is_a) c.max_memory = cap;
    };
    {
        RingBed bed(50, o);
        std::vector<Zbuf> held;
        {
            zbuf::CoreScope b_core(1);
            for (Zbuf z; (z = arena->alloc(2048));) held.push_back(std::move(z));
            for (size_t i = 0; i < held.size(); i += 4) held[i].reset();
        }
        REQUIRE(arena->core_usage(1).zones == cap / zbuf::kZoneSize);
        // Directly: a 64 KiB write of the server's core goes out in 2 KiB objs.
        Acceptor srv;
        Counter cli;
        REQUIRE(bed.b().listen(9801, srv) == ListenStatus::Ok);
        REQUIRE(bed.a().connect({bed.ip_b, 9801}, cli, nullptr) == ConnectStatus::Ok);
        REQUIRE(bed.run_until([&] { return srv.conns.size() == 1; }, 2s));
        {
            std::vector<std::byte> big(65536, std::byte{7});
            zbuf::CoreScope b_core(1);
            CHECK(srv.conns[0].write(big.data(), big.size()) == big.size());
            srv.conns[0].abort();
        }
        bed.b().unlisten(9801);
        REQUIRE(bed.run_until([&] { return cli.closed == 1 && !srv.conns[0].valid(); }, 2s));
        test::EchoServer server;
        REQUIRE(bed.b().listen(9800, server) == ListenStatus::Ok);
        const uint64_t total = 1u << 20;
        EchoClient client(total);
        for (int i = 0; i < 4; ++i)
            REQUIRE(bed.a().connect({bed.ip_b, 9800}, client, nullptr) == ConnectStatus::Ok);
        uint64_t peak = 0;
        const bool done = bed.run_until([&] {
            client.pump();
            client.drain_all();
            peak = std::max(peak, arena->core_usage(1).zones);
            return client.echoed() == 4 * total;
        }, 30s);
        INFO("echoed to the client " << client.echoed() << " of " << 4 * total << ", by the server " << server.echoed
             << "; server live bytes " << arena->core_live_bytes(1) << ", rx_no_memory " << bed.b().stats().rx_no_memory
             << ", refused by the cap " << bed.b().stats().mem_limit_refused << ", sent " << client.sent_total()
             << ", held " << held.size() << ", deferred " << arena->stats().deferred << ", ring full "
             << arena->stats().return_ring_full << ", live 2K core1 " << arena->stats().classes[0].live_per_core[1]);
        REQUIRE(done);
        CHECK(client.mismatches == 0);
        CHECK(peak <= cap / zbuf::kZoneSize);
        std::printf("batch echo, max_memory %zu MiB held 3/4 by 2 KiB objs: a 64 KiB write() went out whole; "
                    "4 x 1 MiB echoed byte-exact; zones at most %llu; rx_no_memory %llu, refused by the cap %llu\n",
                    cap >> 20, (unsigned long long)peak, (unsigned long long)bed.b().stats().rx_no_memory,
                    (unsigned long long)bed.b().stats().mem_limit_refused);
        for (auto& s : client.streams) s.c.close();
        close_all_and_settle(bed);
        zbuf::CoreScope b_core(1);
        held.clear();
    }
}

TEST_CASE("limits: max_connections — connect() refuses at it, SYNs past it are dropped, a freed slot is taken",
          "[engine][limits]") {
    REQUIRE(test::RingEnv::get().ok);  // the arena, for LeakCheck
    test::LeakCheck leaks;
    RingBedOptions o;
    o.tune = [](EngineConfig& c, bool is_a) { c.max_connections = is_a ? 6 : 4; };
    RingBed bed(42, o);
    Acceptor server;
    Counter client;
    REQUIRE(bed.b().listen(9200, server) == ListenStatus::Ok);
    Conn out[6];
    for (Conn& c : out) REQUIRE(bed.a().connect({bed.ip_b, 9200}, client, &c) == ConnectStatus::Ok);
    Conn extra;
    CHECK(bed.a().connect({bed.ip_b, 9200}, client, &extra) == ConnectStatus::TooManyConnections);
    CHECK(bed.a().connection_count() == 6);

    REQUIRE(bed.run_until([&] { return client.conns.size() == 4; }, 2s));
    bed.run_for(300ms);  // the other two SYNs keep being dropped
    CHECK(client.conns.size() == 4);
    CHECK(bed.b().connection_count() == 4);
    CHECK(server.live() == 4);
    CHECK(bed.b().stats().tcp_drop_too_many_conns >= 2);
    std::printf("max_connections 4 (server) / 6 (client): 7th connect() TooManyConnections; 4 of 6 open, "
                "%llu SYNs dropped at the limit\n", (unsigned long long)bed.b().stats().tcp_drop_too_many_conns);

    // The client closes one: the server's side goes (LAST-ACK, then gone; the
    // client keeps the TIME-WAIT), and a pending SYN's retransmission takes the slot.
    client.conns[0].close();
    REQUIRE(bed.run_until([&] { return client.conns.size() == 5; }, 4s));
    CHECK(bed.b().connection_count() == 4);
    CHECK(server.live() == 4);

    for (Conn& c : client.conns) c.abort();
    for (Conn& c : out) c.abort();  // the last SYN-SENT one
    close_all_and_settle(bed);
}

TEST_CASE("limits: listen backlog at its edge — SYN cookies off drops the excess, on answers it with cookies",
          "[engine][limits]") {
    REQUIRE(test::RingEnv::get().ok);  // the arena, for LeakCheck
    test::LeakCheck leaks;
    for (bool cookies : {false, true}) {
        DYNAMIC_SECTION("syn_cookies " << cookies) {
            RingBedOptions o;
            o.tune = [&](EngineConfig& c, bool is_a) {
                if (!is_a) c.backlog = 4, c.syn_cookies = cookies;
            };
            RingBed bed(cookies ? 44 : 43, o);
            Acceptor server;
            Counter client;
            REQUIRE(bed.b().listen(9300, server) == ListenStatus::Ok);
            // Ten SYNs in one burst: four fit the backlog as half-open connections.
            for (int i = 0; i < 10; ++i)
                REQUIRE(bed.a().connect({bed.ip_b, 9300}, client, nullptr) == ConnectStatus::Ok);
            bed.a().poll_once();  // sends the ten SYNs
            bed.b().poll_once();  // takes them in one burst
            const EngineStats s = bed.b().stats();
            if (cookies) {
                CHECK(s.tcp_syn_cookies_sent == 6);
                CHECK(s.tcp_drop_backlog_full == 0);
                REQUIRE(bed.run_until([&] { return client.conns.size() == 10; }, 500ms));  // no retransmission
                CHECK(bed.b().stats().tcp_syn_cookies_ok == 6);
            } else {
                CHECK(s.tcp_drop_backlog_full == 6);
                CHECK(s.tcp_syn_cookies_sent == 0);
                REQUIRE(bed.run_until([&] { return client.conns.size() == 4; }, 500ms));
                bed.run_for(200ms);
                CHECK(client.conns.size() == 4);
                // Their SYN retransmissions (1 s) find the backlog free again.
                REQUIRE(bed.run_until([&] { return client.conns.size() == 10; }, 4s));
            }
            CHECK(server.live() == 10);
            std::printf("backlog 4, cookies %s: 10 SYNs in one burst -> drop_backlog_full %llu, cookies sent %llu, "
                        "cookie ACKs ok %llu; all 10 connected\n", cookies ? "on" : "off",
                        (unsigned long long)bed.b().stats().tcp_drop_backlog_full,
                        (unsigned long long)bed.b().stats().tcp_syn_cookies_sent,
                        (unsigned long long)bed.b().stats().tcp_syn_cookies_ok);
            for (Conn& c : client.conns) c.abort();
            close_all_and_settle(bed);
        }
    }
}

TEST_CASE("limits: snd_buf and rcv_buf at their edges", "[engine][limits]") {
    REQUIRE(test::RingEnv::get().ok);  // the arena, for LeakCheck
    test::LeakCheck leaks;
    RingBedOptions o;
    o.mode_b = DispatchMode::Batch;
    o.conn.rcv_buf = 32768;  // b's accepted connections
    RingBed bed(45, o);
    Sink sink;
    sink.reading = false;
    REQUIRE(bed.b().listen(9400, sink) == ListenStatus::Ok);
    ConnOptions co;
    co.snd_buf = 16384;
    const uint64_t total = 256u << 10;
    Source src(total, 4096);
    Conn c;
    REQUIRE(bed.a().connect({bed.ip_b, 9400}, src, &c, &co) == ConnectStatus::Ok);
    REQUIRE(bed.run_until([&] { return src.connected == 1 && sink.connected == 1; }, 2s));

    CHECK(c.send_space() == 16384);
    std::vector<std::byte> block(16384);
    for (size_t i = 0; i < block.size(); ++i) block[i] = std::byte(test::pattern_byte(i, seed_of(c.local().port)));
    REQUIRE(c.send_copy(std::span<const std::byte>(block)) == SendStatus::Ok);  // exactly snd_buf
    CHECK(c.send_space() == 0);
    const std::byte one{0};
    CHECK(c.send_copy(std::span<const std::byte>(&one, 1)) == SendStatus::WouldBlock);
    src.streams[0].sent = block.size();

    // The receiver does not read: it holds at most rcv_buf, the sender stops with a full queue.
    REQUIRE(bed.run_until([&] {
        src.pump();
        return sink.queued() > 32768 - 1460 && c.send_space() == 0;
    }, 3s));
    bed.run_for(200ms);
    src.pump();
    CHECK(sink.queued() <= 32768);
    CHECK(sink.queued() > 32768 - 1460);
    CHECK(c.stats().snd_wnd < 1460);  // the window is (all but) closed
    CHECK(c.send_space() == 0);
    CHECK(src.would_block > 0);
    std::printf("snd_buf 16384: send_copy(16384) Ok, +1 byte WouldBlock; rcv_buf 32768: %zu B held unread, "
                "peer window %u\n", sink.queued(), c.stats().snd_wnd);

    sink.reading = true;
    sink.drain_all();
    REQUIRE(bed.run_until([&] {
        src.pump();
        sink.drain_all();
        return sink.total() == total;
    }, 10s));
    CHECK(sink.mismatches == 0);
    c.close();
    REQUIRE(bed.run_until([&] { return sink.closed == 1; }, 2s));
    close_all_and_settle(bed);
}

TEST_CASE("limits: reassembly_segments 0 drops out-of-order data (counted); the transfer stays byte-exact",
          "[engine][limits]") {
    REQUIRE(test::RingEnv::get().ok);  // the arena, for LeakCheck
    test::LeakCheck leaks;
    for (uint32_t limit : {0u, 256u}) {
        DYNAMIC_SECTION("reassembly_segments " << limit) {
            RingBedOptions o;
            o.mode_b = DispatchMode::Batch;
            o.impair = "loss=2,seed=7";  // each loss leaves the segments behind it out of order
            o.conn.reassembly_segments = limit;
            RingBed bed(limit == 0 ? 46 : 47, o);
            Sink sink;
            REQUIRE(bed.b().listen(9500, sink) == ListenStatus::Ok);
            const uint64_t total = 2u << 20;
            Source src(total);
            REQUIRE(bed.a().connect({bed.ip_b, 9500}, src, nullptr) == ConnectStatus::Ok);
            ConnStats st;
            REQUIRE(bed.run_until([&] {
                src.pump();
                if (!sink.got.empty() && sink.got[0].c.valid()) st = sink.got[0].c.stats();
                return sink.total() == total;
            }, 20s));
            CHECK(sink.mismatches == 0);
            INFO("out-of-order segments queued " << st.ooo_segments << ", dropped for no room " << st.drop_no_room);
            std::printf("reassembly_segments %u, 2%% loss: 2 MiB byte-exact; ooo queued %llu, dropped no room %llu\n",
                        limit, (unsigned long long)st.ooo_segments, (unsigned long long)st.drop_no_room);
            if (limit == 0) {
                CHECK(st.ooo_segments == 0);
                CHECK(st.drop_no_room > 0);
            } else {
                CHECK(st.ooo_segments > 0);
            }
            src.streams[0].c.close();
            REQUIRE(bed.run_until([&] { return sink.closed == 1; }, 2s));
            close_all_and_settle(bed);
        }
    }
}

TEST_CASE("limits: the mbuf pool runs dry — unbuilt segments counted (tx_no_mbuf), recovery when it refills",
          "[engine][limits]") {
    REQUIRE(test::RingEnv::get().ok);  // the arena, for LeakCheck
    test::LeakCheck leaks;
    rte_mempool* pool = rte_pktmbuf_pool_create("limits_small", 2047, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    REQUIRE(pool != nullptr);
    {
        RingBedOptions o;
        o.mode_b = DispatchMode::Batch;
        o.pool = pool;
        RingBed bed(48, o);
        Sink sink;
        REQUIRE(bed.b().listen(9600, sink) == ListenStatus::Ok);
        const uint64_t total = 4u << 20;
        Source src(total);
        REQUIRE(bed.a().connect({bed.ip_b, 9600}, src, nullptr) == ConnectStatus::Ok);
        REQUIRE(bed.run_until([&] { return src.connected == 1 && sink.connected == 1; }, 2s));
        REQUIRE(bed.run_until([&] {
            src.pump();
            return sink.total() > (256u << 10);
        }, 5s));

        // Take every free mbuf: neither side can build a frame.
        std::vector<rte_mbuf*> held;
        for (rte_mbuf* m; (m = rte_pktmbuf_alloc(pool)) != nullptr;) held.push_back(m);
        const uint64_t before = bed.a().stats().tx_no_mbuf + bed.b().stats().tx_no_mbuf;
        bed.run_for(100ms);
        src.pump();
        for (rte_mbuf* m; (m = rte_pktmbuf_alloc(pool)) != nullptr;) held.push_back(m);  // what the rings gave back
        bed.run_for(200ms);
        const uint64_t during = bed.a().stats().tx_no_mbuf + bed.b().stats().tx_no_mbuf;
        INFO("mbufs held " << held.size() << ", tx_no_mbuf " << before << " -> " << during);
        CHECK(during > before);
        CHECK(bed.a().connection_count() == 1);
        std::printf("mbuf pool: %zu of 2047 mbufs held for 300 ms: tx_no_mbuf +%llu; ", held.size(),
                    (unsigned long long)(during - before));

        for (rte_mbuf* m : held) rte_pktmbuf_free(m);
        REQUIRE(bed.run_until([&] {
            src.pump();
            return sink.total() == total;
        }, 20s));
        CHECK(sink.mismatches == 0);
        std::printf("released: 4 MiB byte-exact\n");
        src.streams[0].c.close();
        REQUIRE(bed.run_until([&] { return sink.closed == 1; }, 2s));
        close_all_and_settle(bed);
    }
    rte_mempool_free(pool);
}

TEST_CASE("limits: out-of-range limits are refused with a message naming them", "[engine][limits]") {
    std::string err;
    EngineConfig ok;
    CHECK(check_engine_config(ok, &err));
    struct Bad {
        std::function<void(EngineConfig&)> set;
        const char* says;
    };
    const Bad bad[] = {
        {[](EngineConfig& c) { c.backlog = 0; }, "listen backlog 0"},
        {[](EngineConfig& c) { c.max_connections = 0; }, "connection limit 0"},
        {[](EngineConfig& c) { c.max_memory = 1u << 20; }, "below one 2 MiB zone"},
        {[](EngineConfig& c) { c.burst = 513; }, "burst 513"},
        {[](EngineConfig& c) { c.conn.snd_buf = 100; }, "connection defaults: send buffer of 100 bytes"},
        {[](EngineConfig& c) { c.conn.rcv_buf = 2u << 30; }, "receive buffer of 2147483648 bytes"},
        {[](EngineConfig& c) { c.conn.reassembly_segments = 70000; }, "reassembly limit of 70000 segments"},
        {[](EngineConfig& c) { c.conn.keepalive = true, c.conn.keepalive_count = 0; }, "keepalive needs"},
        {[](EngineConfig& c) { c.conn.max_rto = std::chrono::milliseconds(500); }, "maximum RTO of 500 ms"},
        {[](EngineConfig& c) { c.conn.max_rto = std::chrono::seconds(121); }, "maximum RTO of 121000 ms"},
        {[](EngineConfig& c) { c.stats_interval = std::chrono::microseconds(999); }, "stats interval of 999 us"},
        {[](EngineConfig& c) { c.stats_interval = std::chrono::hours(2); }, "stats interval of 7200000000 us"},
    };
    for (const Bad& b : bad) {
        EngineConfig c;
        b.set(c);
        err.clear();
        CHECK_FALSE(check_engine_config(c, &err));
        INFO(err);
        CHECK(err.find(b.says) != std::string::npos);
    }
    // Engine::connect() refuses such ConnOptions without opening anything.
    REQUIRE(test::RingEnv::get().ok);
    test::LeakCheck leaks;
    RingBed bed(49);
    Counter client;
    ConnOptions co;
    co.snd_buf = 1;
    CHECK(bed.a().connect({bed.ip_b, 9700}, client, nullptr, &co) == ConnectStatus::InvalidArgument);
    CHECK(bed.a().connection_count() == 0);
    // ... and Runtime::start() the EngineConfig, before touching any device.
    RuntimeOptions ro;
    ro.kernel_only = true;
    ro.engine.max_memory = 4096;
    err.clear();
    CHECK(Runtime::start(ro, &err) == nullptr);
    CHECK(err.find("memory limit of 4096 bytes") != std::string::npos);
}

// Inline mode, receive backpressure: a handler that keeps the slices and holds
// their bytes in the window (Conn::hold_window) stops the peer at rcv_buf;
// releasing them (release_window) lets the rest through, byte-exact.
class Keeper : public Handler {
public:
    bool hold = true;
    bool in_window = true;  // kept bytes also held in the window (hold_window)
    std::deque<Slice> kept;
    Conn conn;
    uint64_t got = 0, mismatches = 0;
    void on_connected(Conn c) override { conn = c; }
    void on_data(Conn c, std::span<Slice> data) override {
        const uint32_t seed = seed_of(c.remote().port);
        for (Slice& s : data) {
            for (size_t i = 0; i < s.size(); ++i)
                if (s.data()[i] != std::byte(test::pattern_byte(got + i, seed))) ++mismatches;
            got += s.size();
            if (hold) kept.push_back(std::move(s));
        }
        if (hold && in_window) c.hold_window();
    }
    void release() {
        size_t n = 0;
        for (const Slice& s : kept) n += s.size();
        kept.clear();
        conn.release_window(n);
    }
    void on_peer_closed(Conn c) override { c.close(); }
};

TEST_CASE("limits: inline receive backpressure — hold_window() keeps kept bytes in the window",
          "[engine][limits]") {
    REQUIRE(test::RingEnv::get().ok);
    test::LeakCheck leaks;
    RingBedOptions o;
    o.conn.rcv_buf = 32768;
    {
        RingBed bed(51, o);
        Keeper keeper;
        REQUIRE(bed.b().listen(9900, keeper) == ListenStatus::Ok);
        const uint64_t total = 1u << 20;
        Source src(total, 4096);
        REQUIRE(bed.a().connect({bed.ip_b, 9900}, src, nullptr) == ConnectStatus::Ok);
        REQUIRE(bed.run_until([&] { return src.connected == 1 && keeper.conn.valid(); }, 2s));
        bed.run_until([&] { src.pump(); return false; }, 300ms);
        INFO("held " << keeper.conn.held_window() << " B in " << keeper.kept.size() << " slices");
        CHECK(keeper.got <= 32768);
        CHECK(keeper.got > 32768 - 1460);
        CHECK(keeper.conn.held_window() == keeper.got);
        CHECK(keeper.conn.stats().rcv_wnd < 1460);
        const uint64_t stopped_at = keeper.got;
        keeper.hold = false;
        keeper.release();
        CHECK(keeper.conn.held_window() == 0);
        REQUIRE(bed.run_until([&] { src.pump(); return keeper.got == total; }, 10s));
        CHECK(keeper.mismatches == 0);
        std::printf("inline hold_window, rcv_buf 32768: the peer stopped at %llu B held; released: 1 MiB byte-exact\n",
                    (unsigned long long)stopped_at);
        src.streams[0].c.close();
        close_all_and_settle(bed);
    }
}

// Inline mode over a zbuf-backed RX pool (as on AF_XDP and memif): a payload
// is its RX mbuf's own obj while the pool is more than half free. A handler
// that keeps every slice (a Keeper that leaves the window open) takes the pool
// below half; from then on frames are copied into the arena
// (rx_copy_pressure) and their mbufs go straight back, so the pool cannot run
// dry under the kept data; once the slices are dropped, frames are zero-copy
// again.
TEST_CASE("limits: slices kept past half the zbuf RX pool — frames copied (rx_copy_pressure), zero-copy again "
          "once they go",
          "[engine][limits]") {
    REQUIRE(test::RingEnv::get().ok);
    zbuf::dpdk::PoolConfig pc;
    pc.name = "limits_zrx";
    pc.mbufs = 1024;
    pc.obj_size = 4096;
    pc.cache_size = 0;
    std::string err;
    std::unique_ptr<zbuf::dpdk::MbufPool> zp = zbuf::dpdk::MbufPool::create(*test::RingEnv::get().arena, pc, &err);
    INFO(err);
    REQUIRE(zp);
    rte_mempool* pool = zp->mempool();
    {
        test::LeakCheck leaks;
        RingBedOptions o;
        o.pool = pool;         // a's frames are built in it, so b receives its mbufs
        o.multi_segs = false;  // one mbuf per frame
        RingBed bed(53, o);
        Keeper h;
        h.in_window = false;
        REQUIRE(bed.b().listen(9910, h) == ListenStatus::Ok);
        const uint64_t total = 8u << 20;
        Source src(total);
        // a's TX frames come from the same pool: its flight (snd_buf, ~180
        // frames) must fit what b's kept slices leave, or a counts tx_no_mbuf.
        ConnOptions co;
        co.snd_buf = 256u << 10;
        REQUIRE(bed.a().connect({bed.ip_b, 9910}, src, nullptr, &co) == ConnectStatus::Ok);
        REQUIRE(bed.run_until([&] { return src.connected == 1 && h.conn.valid(); }, 2s));

        // Kept: the pool falls below half, and frames start being copied.
        REQUIRE(bed.run_until([&] {
            src.pump();
            return bed.b().stats().rx_copy_pressure > 0;
        }, 10s));
        const EngineStats s1 = bed.b().stats();
        const unsigned size = pool->size;
        INFO("pool " << size << ", free " << rte_mempool_avail_count(pool) << ", kept slices " << h.kept.size());
        CHECK(s1.rx_zero_copy > size / 3);
        CHECK(rte_mempool_avail_count(pool) <= size / 2 + 64);  // found low within a check or two

        // Still kept: the rest is copied, its mbufs freed at once; the pool
        // holds, and neither side runs out of frames.
        const uint64_t got1 = h.got;
        REQUIRE(bed.run_until([&] {
            src.pump();
            return h.got >= got1 + (2u << 20);
        }, 10s));
        const EngineStats s2 = bed.b().stats();
        const uint64_t copied = (s2.rx_packets - s1.rx_packets) - (s2.rx_zero_copy - s1.rx_zero_copy);
        CHECK(copied > 1000);
        CHECK(s2.rx_copy_pressure > s1.rx_copy_pressure + 10);  // bursts
        CHECK(s2.rx_zero_copy - s1.rx_zero_copy <= 64);
        CHECK(rte_mempool_avail_count(pool) > size / 4);
        CHECK(bed.a().stats().tx_no_mbuf == 0);

        // Dropped: zero-copy again, and everything arrives byte-exact.
        h.hold = false;
        h.kept.clear();
        REQUIRE(bed.run_until([&] {
            src.pump();
            return h.got == total;
        }, 20s));
        const EngineStats s3 = bed.b().stats();
        CHECK(s3.rx_zero_copy > s2.rx_zero_copy + 1000);
        CHECK(h.mismatches == 0);
        std::printf("zbuf RX pool of %u: copying after %llu zero-copy frames kept; %llu frames copied while kept, "
                    "%llu zero-copy after; 8 MiB byte-exact\n",
                    size, (unsigned long long)s1.rx_zero_copy, (unsigned long long)copied,
                    (unsigned long long)(s3.rx_zero_copy - s2.rx_zero_copy));
        src.streams[0].c.close();
        close_all_and_settle(bed);
    }
    CHECK(rte_mempool_avail_count(pool) == pool->size);
}
