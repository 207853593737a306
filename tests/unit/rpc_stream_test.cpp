// crescent — rpc::Stream over both transports, driven by two engines in one
// process: crescent connections over DPDK's net_ring (inline and batch
// dispatch, with and without an impaired wire), and kernel TCP sockets on
// loopback in the same engines' epoll sets. An echo handler on one side, a
// verifying sender on the other: byte-exact, in order, every send accepted
// (the backlog absorbs what the transport cannot take yet), pause/resume,
// half-close, refusals reported with their cause, nothing left behind.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <string>
#include <vector>

#include <crescent/rpc/stream.hpp>

#include "tests/support/ring_bed.hpp"
#include "tests/support/zbuf_leak.hpp"

using namespace crescent;
using namespace std::chrono_literals;
using crescent::test::RingBedOptions;

namespace {

// Echoes everything back; can pause reading while its backlog is large.
struct EchoHandler : rpc::StreamHandler {
    size_t pause_above = SIZE_MAX;
    uint64_t opened = 0, closed = 0, pauses = 0, bytes = 0;
    std::string last_why;
    void on_open(rpc::Stream&) override { ++opened; }
    void on_data(rpc::Stream& s, std::span<Slice> d) override {
        for (auto& x : d) bytes += x.size();
        REQUIRE(s.send(d));
        if (s.backlog_bytes() > pause_above && !s.reading_paused()) {
            ++pauses;
            s.pause_reading(true);
        }
    }
    void on_drained(rpc::Stream& s) override { s.pause_reading(false); }
    void on_peer_closed(rpc::Stream& s) override { s.close(); }
    void on_closed(rpc::Stream&, std::string_view why) override {
        ++closed;
        last_why = std::string(why);
    }
};

// Sends `total` bytes of a seeded pattern in random-sized pieces (some far
// larger than the send buffer), checks the echo byte for byte, then closes.
struct Sender : rpc::StreamHandler {
    uint64_t total = 0, sent = 0, received = 0, mismatches = 0;
    uint64_t seed = 1;
    bool opened = false, done = false, closed = false, peer_closed = false;
    std::string why;
    std::mt19937_64 rng{7};
    static uint8_t pattern(uint64_t off, uint64_t seed) { return uint8_t((off * 2654435761u + seed) >> 7); }
    void push(rpc::Stream& s) {
        while (sent < total && s.backlog_bytes() < (8u << 20)) {
            uint64_t n = std::min<uint64_t>(total - sent, 1 + rng() % (rng() % 4 == 0 ? (3u << 20) : 9000));
            std::vector<Slice> iov;
            uint64_t left = n;
            while (left > 0) {
                size_t k = std::min<uint64_t>(left, 16384);
                Slice sl = zbuf::Arena::current()->alloc_slice(k);
                REQUIRE(sl);
                for (size_t i = 0; i < k; ++i) sl.data()[i] = std::byte(pattern(sent + n - left + i, seed));
                iov.push_back(std::move(sl));
                left -= k;
            }
            REQUIRE(s.send(std::span<Slice>(iov)));
            sent += n;
        }
    }
    void on_open(rpc::Stream& s) override {
        opened = true;
        push(s);
    }
    void on_data(rpc::Stream& s, std::span<Slice> d) override {
        for (auto& x : d) {
            for (size_t i = 0; i < x.size(); ++i)
                if (uint8_t(x.data()[i]) != pattern(received + i, seed)) ++mismatches;
            received += x.size();
        }
        if (received == total && !done) {
            done = true;
            s.close();
        }
    }
    void on_drained(rpc::Stream& s) override { push(s); }
    void on_peer_closed(rpc::Stream&) override { peer_closed = true; }
    void on_closed(rpc::Stream&, std::string_view w) override {
        closed = true;
        why = std::string(w);
    }
};

void echo_over(rpc::Transport t, int bed_id, RingBedOptions o, uint64_t total, size_t pause_above = SIZE_MAX) {
    test::LeakCheck leaks;
    {
        test::RingBed bed(bed_id, o);
        EchoHandler echo;
        echo.pause_above = pause_above;
        rpc::StreamOptions so;
        so.kernel_sndbuf = 32768;  // small: the kernel side must backlog and pause too
        so.kernel_rcvbuf = 32768;
        std::string err;
        const uint16_t port = t == rpc::Transport::Crescent ? 7000 : uint16_t(30000 + bed_id);
        auto acc = rpc::listen(bed.b(), t, port, echo, so, &err, t == rpc::Transport::Kernel ? Ipv4{0x7f000001} : Ipv4{});
        INFO(err);
        REQUIRE(acc);
        Sender snd;
        snd.total = total;
        snd.seed = uint64_t(bed_id);
        Endpoint to{t == rpc::Transport::Crescent ? bed.ip_b : Ipv4{0x7f000001}, port};
        rpc::Stream* s = rpc::connect(bed.a(), t, to, snd, so, &err);
        INFO(err);
        REQUIRE(s);
        CHECK(s->transport() == t);
        REQUIRE(bed.run_until([&] { return snd.closed && echo.closed == 1; }, 60s));
        CHECK(snd.opened);
        CHECK(snd.received == total);
        CHECK(snd.mismatches == 0);
        CHECK(echo.opened == 1);
        CHECK(echo.bytes == total);
        if (pause_above != SIZE_MAX) CHECK(echo.pauses > 0);
        CHECK(rpc::live_streams(bed.a()) == 0);
        CHECK(rpc::live_streams(bed.b()) == 0);
        acc.reset();
        bed.run_for(20ms);
    }
}

} // namespace

TEST_CASE("stream: crescent echo, inline, 48 MiB with pieces larger than the send buffer", "[rpc][stream]") {
    echo_over(rpc::Transport::Crescent, 1, {}, 48u << 20);
}

TEST_CASE("stream: crescent echo, batch server (zero-copy read_slices), paused reading", "[rpc][stream]") {
    RingBedOptions o;
    o.mode_b = DispatchMode::Batch;
    o.conn.snd_buf = 64u << 10;  // the echo's replies back up: it must pause
    echo_over(rpc::Transport::Crescent, 2, o, 24u << 20, 1u << 20);
}

TEST_CASE("stream: crescent echo, inline server pausing (held slices), impaired wire", "[rpc][stream]") {
    RingBedOptions o;
    o.impair = "loss=1,dup=1,reorder=10,seed=3";
    o.conn.snd_buf = 64u << 10;
    echo_over(rpc::Transport::Crescent, 3, o, 8u << 20, 256u << 10);
}

TEST_CASE("stream: kernel TCP on loopback in the engines' epoll sets, paused reading", "[rpc][stream]") {
    echo_over(rpc::Transport::Kernel, 4, {}, 48u << 20, 0);
}

TEST_CASE("stream: refused connections name their cause; StreamRef outlives the stream", "[rpc][stream]") {
    test::LeakCheck leaks;
    test::RingBed bed(5);
    rpc::StreamOptions so;
    std::string err;
    for (rpc::Transport t : {rpc::Transport::Crescent, rpc::Transport::Kernel}) {
        Sender snd;
        snd.total = 10;
        // Nobody listens there: crescent answers RST, the kernel ECONNREFUSED.
        Endpoint to{t == rpc::Transport::Crescent ? bed.ip_b : Ipv4{0x7f000001}, 9};
        rpc::Stream* s = rpc::connect(bed.a(), t, to, snd, so, &err);
        REQUIRE(s);
        rpc::StreamRef ref(*s);
        CHECK(ref.valid());
        REQUIRE(bed.run_until([&] { return snd.closed; }, 10s));
        CHECK_FALSE(snd.opened);
        CHECK_FALSE(ref.valid());
        INFO(rpc::transport_name(t) << ": " << snd.why);
        if (t == rpc::Transport::Crescent) CHECK(snd.why == "refused");
        else CHECK(snd.why == "Connection refused");
    }
    {
        // The slot of a stream that is gone is reused by the next one; a
        // StreamRef to the old stream must not find the new one.
        Sender s1, s2;
        rpc::Stream* a = rpc::connect(bed.a(), rpc::Transport::Crescent, Endpoint{bed.ip_b, 9}, s1, so, &err);
        REQUIRE(a);
        const uint64_t old_id = a->id();
        rpc::StreamRef old_ref(*a);
        REQUIRE(bed.run_until([&] { return s1.closed; }, 10s));
        rpc::Stream* b = rpc::connect(bed.a(), rpc::Transport::Crescent, Endpoint{bed.ip_b, 9}, s2, so, &err);
        REQUIRE(b);
        CHECK((b->id() & 0xffffff) == (old_id & 0xffffff));  // the same slot (the case under test)
        CHECK(b->id() != old_id);
        CHECK(old_ref.get() == nullptr);
        CHECK(rpc::StreamRef(*b).get() == b);
        REQUIRE(bed.run_until([&] { return s2.closed; }, 10s));
    }
    // Bad arguments are refused at once with a message.
    Sender snd;
    CHECK(rpc::connect(bed.a(), rpc::Transport::Crescent, Endpoint{Ipv4{0x0b000001}, 7}, snd, so, &err) == nullptr);
    CHECK(err.find("no route") != std::string::npos);
    so.local_port = 80;  // outside the engine's client ports
    CHECK(rpc::connect(bed.a(), rpc::Transport::Crescent, Endpoint{bed.ip_b, 7}, snd, so, &err) == nullptr);
    CHECK(err.find("local port") != std::string::npos);
    // A port already in use.
    EchoHandler echo;
    auto acc = rpc::listen(bed.b(), rpc::Transport::Crescent, 7001, echo, {}, &err);
    REQUIRE(acc);
    CHECK(rpc::listen(bed.b(), rpc::Transport::Crescent, 7001, echo, {}, &err) == nullptr);
    CHECK(err.find("already listening") != std::string::npos);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000001);
    a.sin_port = 0;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    CHECK(rpc::listen(bed.b(), rpc::Transport::Kernel, ntohs(a.sin_port), echo, {}, &err, Ipv4{0x7f000001}) == nullptr);
    CHECK(err.find("Address already in use") != std::string::npos);
    ::close(fd);
}

TEST_CASE("stream: a chosen local port reaches the server from that port", "[rpc][stream]") {
    test::LeakCheck leaks;
    test::RingBed bed(6);
    EchoHandler echo;
    std::string err;
    auto acc = rpc::listen(bed.b(), rpc::Transport::Crescent, 7002, echo, {}, &err);
    REQUIRE(acc);
    struct Probe : rpc::StreamHandler {
        Endpoint seen_local;
        bool closed = false;
        void on_open(rpc::Stream& s) override { seen_local = s.local(); s.close(); }
        void on_data(rpc::Stream&, std::span<Slice>) override {}
        void on_closed(rpc::Stream&, std::string_view) override { closed = true; }
    } probe;
    rpc::StreamOptions so;
    so.local_port = uint16_t(bed.a().client_ports().first + 5);
    REQUIRE(rpc::connect(bed.a(), rpc::Transport::Crescent, Endpoint{bed.ip_b, 7002}, probe, so, &err));
    REQUIRE(bed.run_until([&] { return probe.closed && echo.closed == 1; }, 10s));
    CHECK(probe.seen_local.port == so.local_port);
}

TEST_CASE("stream: kernel streams close with the engine (at_stop): handlers told, sockets and objs released",
          "[rpc][stream]") {
    test::LeakCheck leaks;
    test::RingBed bed(7);
    EchoHandler echo;
    std::string err;
    auto acc = rpc::listen(bed.b(), rpc::Transport::Kernel, 30007, echo, {}, &err, Ipv4{0x7f000001});
    REQUIRE(acc);
    Sender snd;
    snd.total = 1u << 30;  // still sending when the server's engine stops
    REQUIRE(rpc::connect(bed.a(), rpc::Transport::Kernel, Endpoint{Ipv4{0x7f000001}, 30007}, snd, {}, &err));
    REQUIRE(bed.run_until([&] { return echo.bytes > (1u << 20); }, 10s));
    acc.reset();
    bed.stop_b();  // runs the engine's stop hooks on this thread
    CHECK(echo.closed == 1);
    CHECK(echo.last_why == "engine stopped");
    // The client sees its peer go away.
    REQUIRE(bed.run_until([&] { return snd.closed; }, 10s));
    CHECK(snd.received < snd.total);
    INFO(snd.why);
    CHECK((snd.why == "Connection reset by peer" || snd.why == "closed" || snd.why == "Broken pipe"));
    CHECK(rpc::live_streams(bed.a()) == 0);
}

TEST_CASE("stream: cork/uncork hands a batch of sends to the transport at once, both transports",
          "[rpc][stream]") {
    test::LeakCheck leaks;
    test::RingBed bed(8);
    for (rpc::Transport t : {rpc::Transport::Crescent, rpc::Transport::Kernel}) {
        EchoHandler echo;
        std::string err;
        const uint16_t port = t == rpc::Transport::Crescent ? 7008 : 30008;
        const Ipv4 ip = t == rpc::Transport::Crescent ? bed.ip_b : Ipv4{0x7f000001};
        auto acc = rpc::listen(bed.b(), t, port, echo, {}, &err, t == rpc::Transport::Kernel ? ip : Ipv4{});
        REQUIRE(acc);
        struct Batch : rpc::StreamHandler {
            rpc::Stream* s = nullptr;
            uint64_t received = 0;
            bool closed = false;
            void on_open(rpc::Stream& st) override { s = &st; }
            void on_data(rpc::Stream&, std::span<Slice> d) override {
                for (auto& x : d) received += x.size();
            }
            void on_closed(rpc::Stream&, std::string_view) override { closed = true; }
        } b;
        REQUIRE(rpc::connect(bed.a(), t, Endpoint{ip, port}, b, {}, &err));
        REQUIRE(bed.run_until([&] { return b.s != nullptr; }, 5s));
        const uint64_t writes = b.s->stats().writes;
        b.s->cork();
        for (int i = 0; i < 100; ++i) REQUIRE(b.s->send_copy(std::string(64, char('a' + i % 26))));
        CHECK(b.s->stats().writes == writes);  // nothing handed over while corked
        CHECK(b.s->backlog_bytes() == 6400);
        b.s->uncork();
        CHECK(b.s->stats().writes == writes + 1);  // one write for all hundred
        CHECK(b.s->backlog_bytes() == 0);
        REQUIRE(bed.run_until([&] { return b.received == 6400; }, 5s));
        b.s->close();
        REQUIRE(bed.run_until([&] { return b.closed && echo.closed == 1; }, 10s));
    }
}
