// crescent — the RPC server and channel end to end, two engines in one
// process (crescent over DPDK's net_ring, optionally impaired; the kernel
// transport over loopback in the same loops): zero-copy echo at depth,
// deferred and dropped calls, unknown methods, deadlines and late replies,
// queue bounds, a server killed and restarted (in-flight calls fail with the
// cause, the channel reconnects), fail-over to the alternate address, the
// full mesh's port spread, policies at run time, malformed input.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <crescent/rpc/channel.hpp>
#include <crescent/rpc/server.hpp>

#include "rpc/framing.hpp"
#include "tests/support/ring_bed.hpp"
#include "tests/support/zbuf_leak.hpp"
#include "tests/support/rpc_data.hpp"

using namespace crescent;
using namespace std::chrono_literals;
using crescent::test::RingBed;
using crescent::test::RingBedOptions;

namespace {

constexpr uint32_t kEcho = 1, kDefer = 2, kDrop = 3, kNever = 4, kPeerPort = 5;

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }
std::string str_of(std::span<const std::byte> b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

using crescent::test::check_data;
using crescent::test::make_data;
using crescent::test::pattern;

// The test service: echo (zero-copy: the request's slices go back), deferred
// replies from a timer, dropped calls, calls never answered, the peer's port.
struct Service {
    rpc::Server srv;
    std::vector<rpc::Call> held;  // kNever
    uint64_t deferred_done = 0;
    std::set<uint16_t> peer_ports;
    Service(Engine& e, rpc::ServerOptions o = {}) : srv(e, o) {
        REQUIRE(srv.register_method(kEcho, "echo", [](rpc::Call& c) {
            std::vector<std::byte> meta(c.meta().begin(), c.meta().end());
            c.reply(meta, c.data());
        }));
        REQUIRE_FALSE(srv.register_method(kEcho, "again", [](rpc::Call&) {}));
        REQUIRE(srv.register_method(kDefer, "defer", [this, &e](rpc::Call& c) {
            // Reply later, in reverse order of arrival within a few ms.
            auto call = std::make_shared<rpc::Call>(std::move(c));
            Duration after = std::chrono::microseconds(100 + (call->id() * 37) % 3000);
            e.add_timer(after, [this, call] {
                std::string m = "deferred:" + str_of(call->meta());
                call->reply(bytes_of(m), call->data());
                ++deferred_done;
            });
        }));
        REQUIRE(srv.register_method(kDrop, "drop", [](rpc::Call&) {}));
        REQUIRE(srv.register_method(kNever, "never", [this](rpc::Call& c) { held.push_back(std::move(c)); }));
        REQUIRE(srv.register_method(kPeerPort, "peer-port", [this](rpc::Call& c) {
            peer_ports.insert(c.peer().port);
            c.reply();
        }));
    }
};

struct Tally {
    uint64_t ok = 0, bad = 0, done = 0, bad_time = 0;
    std::map<rpc::Status, uint64_t> by_status;
    std::string last_error;
    // A continuation that counts the call's outcome here.
    rpc::Continuation recorder() {
        return [this](rpc::Reply& r) {
            ++done;
            ++by_status[r.status];
            last_error = std::string(r.error);
        };
    }
};

// How the server answers: in the handler, later (the Call moved out), or
// either at random per call (the server reuses an answered Call's vectors for
// the next request, and must not when the Call was moved out).
enum class Answer { Inline, Deferred, Mixed };

// `svc` listening on `port` over `t` (engine b, or loopback for the kernel),
// and the options of a channel from engine a to it.
rpc::ChannelOptions serve(Service& svc, RingBed& bed, rpc::Transport t, uint16_t port, unsigned depth,
                          unsigned conns) {
    const Ipv4 loopback{0x7f000001};
    std::string err;
    REQUIRE(svc.srv.listen(t, port, &err, t == rpc::Transport::Kernel ? loopback : Ipv4{}));
    rpc::ChannelOptions o;
    o.server = {t == rpc::Transport::Crescent ? bed.ip_b : loopback, port};
    o.transport = t;
    o.depth = depth;
    o.conns_per_engine = conns;
    return o;
}

void echo_load(RingBed& bed, rpc::Transport t, uint16_t port, unsigned calls, unsigned depth, size_t max_size,
               Answer answer) {
    Service svc(bed.b());
    rpc::ChannelOptions o = serve(svc, bed, t, port, depth, 2);
    o.deadline = 20s;
    rpc::Channel ch(bed.a(), o);
    // Both connections up first (on an impaired wire a SYN may wait for its RTO).
    REQUIRE(bed.run_until([&] { return ch.connected() == 2; }, 10s));
    Tally tl;
    std::mt19937_64 rng(port);
    unsigned issued = 0;
    auto issue = [&] {
        while (issued < calls && ch.outstanding() < depth * 2) {
            uint64_t id = issued++;
            const bool defer = answer == Answer::Deferred || (answer == Answer::Mixed && rng() % 2 == 0);
            size_t n = rng() % 8 == 0 ? rng() % max_size : rng() % 2048;
            std::string meta = "m" + std::to_string(id);
            auto data = make_data(id, n);
            const Instant sent = bed.a().now();
            rpc::Status st = ch.call(defer ? kDefer : kEcho, bytes_of(meta), data, [&, id, n, meta, defer, sent](rpc::Reply& r) {
                ++tl.done;
                // The reply's time: after the call, no later than now, latency measured to it.
                if (r.at < sent || r.at > bed.a().now() || r.at - r.latency < sent) ++tl.bad_time;
                ++tl.by_status[r.status];
                std::string want = defer ? "deferred:" + meta : meta;
                if (r.status == rpc::Status::Ok && str_of(r.meta) == want && check_data(id, r.data, n)) ++tl.ok;
                else ++tl.bad, tl.last_error = std::string(r.error);
            });
            REQUIRE(st == rpc::Status::Ok);
        }
    };
    REQUIRE(bed.run_until([&] {
        issue();
        return tl.done == calls;
    }, 60s));
    INFO(tl.last_error);
    CHECK(tl.ok == calls);
    CHECK(tl.bad_time == 0);
    CHECK(tl.bad == 0);
    CHECK(ch.stats().calls == calls);
    CHECK(ch.stats().ok == calls);
    CHECK(ch.stats().late_replies == 0);
    CHECK(ch.connected() == 2);
    const rpc::ServerStats& s = svc.srv.stats();
    CHECK(s.requests == calls);
    CHECK(s.replies == calls);
    CHECK(s.connections_accepted == 2);
    uint64_t method_calls = 0, method_ok = 0, method_timed = 0;
    for (const auto& m : svc.srv.method_stats())
        if (m.method == kDefer || m.method == kEcho) {
            method_calls += m.calls;
            method_ok += m.ok;
            method_timed += m.latency.count();
        }
    CHECK(method_calls == calls);
    CHECK(method_ok == calls);
    CHECK(method_timed == calls);
    uint64_t channel_calls = 0, channel_timed = 0;
    for (const auto& m : ch.method_stats()) {
        channel_calls += m.calls;
        channel_timed += m.latency.count();
    }
    CHECK(channel_calls == calls);
    CHECK(channel_timed == calls);
    if (answer == Answer::Deferred) CHECK(svc.deferred_done == calls);
    if (answer == Answer::Mixed) {
        CHECK(svc.deferred_done > calls / 4);
        CHECK(svc.deferred_done < calls * 3 / 4);
    }
    // TCP state through either transport: crescent's Tcb counters or the kernel's TCP_INFO.
    auto cs = ch.connection_stats();
    REQUIRE(cs.size() == 2);
    uint64_t out = 0;
    for (const ConnStats& c : cs) {
        CHECK(c.state == std::string_view("ESTABLISHED"));
        CHECK(c.segs_out > 0);
        CHECK(c.snd_mss > 0);
        out += c.bytes_out;
    }
    CHECK(out >= ch.stats().bytes_out / 2);  // kernel: bytes acked so far
    CHECK(svc.srv.connection_stats().size() == 2);
    ch.close();
    bed.run_for(30ms);
}

} // namespace

TEST_CASE("rpc: zero-copy echo over crescent at depth 16, inline", "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(11);
    echo_load(bed, rpc::Transport::Crescent, 7100, 3000, 16, 300000, Answer::Inline);
}

TEST_CASE("rpc: echo over crescent, batch dispatch on both sides, impaired wire", "[rpc]") {
    test::LeakCheck leaks;
    RingBedOptions o;
    o.mode_a = o.mode_b = DispatchMode::Batch;
    o.impair = "loss=1,dup=1,reorder=10,seed=11";
    RingBed bed(12, o);
    echo_load(bed, rpc::Transport::Crescent, 7100, 1000, 8, 200000, Answer::Inline);
}

TEST_CASE("rpc: deferred replies out of order, crescent and kernel transports", "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(13);
    echo_load(bed, rpc::Transport::Crescent, 7100, 1000, 32, 100000, Answer::Deferred);
    echo_load(bed, rpc::Transport::Kernel, 31013, 1000, 32, 100000, Answer::Deferred);
    // Answered now or later at random on the same connections.
    echo_load(bed, rpc::Transport::Crescent, 7101, 2000, 16, 100000, Answer::Mixed);
}

TEST_CASE("rpc: zero-copy echo over the kernel transport", "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(14);
    echo_load(bed, rpc::Transport::Kernel, 31014, 3000, 16, 300000, Answer::Inline);
}

namespace {

// Segments sent on the one connection of `cs`.
uint64_t segs_out(const std::vector<ConnStats>& cs) {
    REQUIRE(cs.size() == 1);
    return cs[0].segs_out;
}

// Retransmissions: a test thread preempted for longer than the minimum RTO
// (5 ms; a loaded 2-CPU machine running the suite in parallel does that)
// makes a peer resend what it sent, which is timing, not the framing or the
// send path a segment count checks.
uint64_t retransmits(const std::vector<ConnStats>& cs) {
    REQUIRE(cs.size() == 1);
    return cs[0].retrans_timeout + cs[0].retrans_fast + cs[0].retrans_sack;
}
uint64_t segs_sent_once(const std::vector<ConnStats>& cs) { return segs_out(cs) - retransmits(cs); }

// Stream::send calls (Conn::send / writev) on engine `e`'s streams of transport `t`.
uint64_t stream_writes(Engine& e, rpc::Transport t) {
    uint64_t n = 0;
    rpc::for_each_stream(e, [&](rpc::Stream& s) {
        if (s.transport() == t) n += s.stats().writes;
    });
    return n;
}

// The replies to requests that arrive together, and the calls that the
// continuations of replies arriving together make, leave together: a few
// segments per round of 16, not one each, and a few transport sends (one
// writev, one Conn::send) per delivery, not one per message: the RPC layer
// encodes a delivery's messages into one vector and sends it when the
// decoder returns.
void pipelined_rounds(RingBed& bed, rpc::Transport t, uint16_t port) {
    constexpr unsigned kDepth = 16, kRounds = 20;
    Service svc(bed.b());
    rpc::Channel ch(bed.a(), serve(svc, bed, t, port, kDepth, 1));
    REQUIRE(bed.run_until([&] { return ch.connected() == 1; }, 10s));
    const uint64_t client0 = segs_out(ch.connection_stats()), server0 = segs_out(svc.srv.connection_stats());
    const uint64_t cw0 = stream_writes(bed.a(), t), sw0 = stream_writes(bed.b(), t);
    uint64_t done = 0, ok = 0;
    // Each reply of a round issues one call of the next: 16 continuations
    // run in one delivery when the round's replies arrive together.
    std::function<void(uint64_t)> call = [&](uint64_t id) {
        auto data = make_data(id, 64);
        REQUIRE(ch.call(kEcho, {}, data, [&, id](rpc::Reply& r) {
            ++done;
            if (r.status == rpc::Status::Ok && check_data(id, r.data, 64)) ++ok;
            if (id + kDepth < uint64_t(kDepth) * kRounds) call(id + kDepth);
        }) == rpc::Status::Ok);
    };
    for (uint64_t i = 0; i < kDepth; ++i) call(i);  // the first round, before the loop runs
    REQUIRE(bed.run_until([&] { return done == uint64_t(kDepth) * kRounds; }, 20s));
    CHECK(ok == done);
    const uint64_t client = segs_out(ch.connection_stats()) - client0;
    const uint64_t server = segs_out(svc.srv.connection_stats()) - server0;
    INFO(rpc::transport_name(t) << ": " << done << " calls in " << client << " client segments, replies in "
                                << server << " server segments");
    CHECK(client <= kRounds * 4);
    CHECK(server <= kRounds * 4);
    const uint64_t cw = stream_writes(bed.a(), t) - cw0, sw = stream_writes(bed.b(), t) - sw0;
    INFO(rpc::transport_name(t) << ": " << cw << " client sends, " << sw << " server sends");
    CHECK(cw <= kRounds * 4 + kDepth);  // + the first round, one call at a time before the loop runs
    CHECK(sw <= kRounds * 4);
    ch.close();
    bed.run_for(30ms);
}

} // namespace

TEST_CASE("rpc: replies to pipelined requests and calls from continuations share segments, both transports",
          "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(21);
    pipelined_rounds(bed, rpc::Transport::Crescent, 7102);
    pipelined_rounds(bed, rpc::Transport::Kernel, 31015);
}

// A delivery's replies leave in one send, errors among them: requests for an
// unknown method and calls the handler drops (answered by ~Call) are encoded into
// the same batch as the replies around them, so the answers come back in the
// order the requests went, whatever their kind.
void mixed_batch(RingBed& bed, rpc::Transport t, uint16_t port) {
    constexpr unsigned kCalls = 48;
    Service svc(bed.b());
    rpc::Channel ch(bed.a(), serve(svc, bed, t, port, kCalls, 1));
    REQUIRE(bed.run_until([&] { return ch.connected() == 1; }, 10s));
    const uint32_t methods[] = {kEcho, 9999, kEcho, kDrop, kEcho, kEcho};
    const rpc::Status want[] = {rpc::Status::Ok, rpc::Status::UnknownMethod, rpc::Status::Ok,
                                rpc::Status::Internal, rpc::Status::Ok, rpc::Status::Ok};
    std::vector<std::pair<uint64_t, rpc::Status>> got;
    const uint64_t sw0 = stream_writes(bed.b(), t);
    for (uint64_t i = 0; i < kCalls; ++i) {
        auto data = make_data(i, 64);
        REQUIRE(ch.call(methods[i % 6], {}, data, [&, i](rpc::Reply& r) {
            if (r.status == rpc::Status::Ok) CHECK(check_data(i, r.data, 64));
            got.emplace_back(i, r.status);
        }) == rpc::Status::Ok);
    }
    REQUIRE(bed.run_until([&] { return got.size() == kCalls; }, 10s));
    for (uint64_t i = 0; i < kCalls; ++i) {
        INFO(rpc::transport_name(t) << ": answer " << i);
        CHECK(got[i].first == i);
        CHECK(got[i].second == want[i % 6]);
    }
    CHECK(svc.srv.stats().unknown_method == kCalls / 6);
    CHECK(svc.srv.stats().handler_dropped == kCalls / 6);
    const uint64_t sw = stream_writes(bed.b(), t) - sw0;
    INFO(rpc::transport_name(t) << ": " << sw << " server sends for " << kCalls << " answers");
    CHECK(sw <= kCalls / 4);  // a batch per delivery: the requests arrive a few segments at a time
    ch.close();
    bed.run_for(30ms);
}

TEST_CASE("rpc: replies, unknown-method errors and dropped calls of one delivery come back in order", "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(23);
    mixed_batch(bed, rpc::Transport::Crescent, 7104);
    mixed_batch(bed, rpc::Transport::Kernel, 31016);
}

// At depth 1 every delivery is one message: the server's reply and the call the
// client's continuation makes are each the last output of their delivery, and
// leave from inside the callback (Stream::send_now -> Conn::send_now) with the
// ACK of what was delivered riding on them: one segment each way per call.
TEST_CASE("rpc: at depth 1 the reply and the next call leave from inside the callbacks (send_now)", "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(22);
    Service svc(bed.b());
    rpc::Channel ch(bed.a(), serve(svc, bed, rpc::Transport::Crescent, 7103, 1, 1));
    REQUIRE(bed.run_until([&] { return ch.connected() == 1; }, 10s));
    bed.run_for(10ms);
    const uint64_t client0 = segs_sent_once(ch.connection_stats());
    const uint64_t server0 = segs_sent_once(svc.srv.connection_stats());
    const uint64_t now_a0 = bed.a().stats().tx_sent_now, now_b0 = bed.b().stats().tx_sent_now;
    constexpr uint64_t kCalls = 200;
    uint64_t done = 0, ok = 0;
    // Engine::event_time(): a reply is stamped with the poll that brought it,
    // and a call a continuation makes with the same poll, so each chained
    // call's latency is exactly the time between the two polls.
    uint64_t at_poll = 0, chained = 0;
    Instant prev_at{};
    std::function<void(uint64_t)> call = [&](uint64_t id) {
        auto data = make_data(id, 64);
        REQUIRE(ch.call(kEcho, {}, data, [&, id](rpc::Reply& r) {
            ++done;
            if (r.status == rpc::Status::Ok && check_data(id, r.data, 64)) ++ok;
            at_poll += r.at == bed.a().loop_time();
            chained += id > 0 && r.latency == r.at - prev_at;
            prev_at = r.at;
            if (id + 1 < kCalls) call(id + 1);
        }) == rpc::Status::Ok);
    };
    call(0);  // outside any callback: leaves with the loop's output
    REQUIRE(bed.run_until([&] { return done == kCalls; }, 20s));
    CHECK(ok == done);
    CHECK(at_poll == kCalls);
    CHECK(chained == kCalls - 1);
    bed.run_for(10ms);
    CHECK(bed.b().stats().tx_sent_now - now_b0 == kCalls);      // every reply
    CHECK(bed.a().stats().tx_sent_now - now_a0 == kCalls - 1);  // every call a continuation made
    const uint64_t client = segs_sent_once(ch.connection_stats()) - client0;  // see retransmits()
    const uint64_t server = segs_sent_once(svc.srv.connection_stats()) - server0;
    INFO(done << " calls in " << client << " client segments, replies in " << server << " server segments ("
              << retransmits(ch.connection_stats()) << " / " << retransmits(svc.srv.connection_stats())
              << " retransmitted)");
    // The last reply's ACK has no call to ride on, so the client delays it
    // (1 ms); the server, having seen 199 replies acknowledged at once, may
    // probe it (tcb_tlp.cpp: the learned delayed-ACK allowance) — once.
    const uint64_t probes = svc.srv.connection_stats()[0].tlp_probes;
    CHECK(probes <= 1);
    CHECK(server - probes == kCalls);
    CHECK(client <= kCalls + 1);  // + the ACK of the last reply, which no call carries
    ch.close();
    bed.run_for(30ms);
}

TEST_CASE("rpc: unknown methods, dropped calls, deadlines, late replies, queue bounds", "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(15);
    Service svc(bed.b());
    std::string err;
    REQUIRE(svc.srv.listen(rpc::Transport::Crescent, 7100, &err));
    rpc::ChannelOptions o;
    o.server = {bed.ip_b, 7100};
    o.depth = 2;
    o.queue_max = 3;
    rpc::Channel ch(bed.a(), o);
    REQUIRE(bed.run_until([&] { return ch.connected() == 1; }, 5s));

    Tally tl;
    auto record = tl.recorder();
    REQUIRE(ch.call(99, {}, {}, record) == rpc::Status::Ok);
    REQUIRE(bed.run_until([&] { return tl.done == 1; }, 5s));
    CHECK(tl.by_status[rpc::Status::UnknownMethod] == 1);
    CHECK(tl.last_error == "no method 99");
    CHECK(svc.srv.stats().unknown_method == 1);
    // Methods come and go at run time; a re-registered method keeps its counters.
    REQUIRE(svc.srv.register_method(99, "late", [](rpc::Call& c) { c.reply(); }));
    REQUIRE(ch.call(99, {}, {}, record) == rpc::Status::Ok);
    REQUIRE(bed.run_until([&] { return tl.done == 2; }, 5s));
    CHECK(tl.by_status[rpc::Status::Ok] == 1);
    REQUIRE(svc.srv.unregister_method(99));
    REQUIRE_FALSE(svc.srv.unregister_method(99));
    REQUIRE(svc.srv.register_method(99, "later", [](rpc::Call& c) { c.reply(); }));
    REQUIRE(ch.call(99, {}, {}, record) == rpc::Status::Ok);
    REQUIRE(bed.run_until([&] { return tl.done == 3; }, 5s));
    bool seen = false;
    for (const auto& m : svc.srv.method_stats())
        if (m.method == 99) {
            seen = true;
            CHECK(m.name == "later");
            CHECK(m.calls == 2);
            CHECK(m.ok == 2);
        }
    CHECK(seen);
    tl = Tally{};

    REQUIRE(ch.call(kDrop, {}, {}, record) == rpc::Status::Ok);
    REQUIRE(bed.run_until([&] { return tl.done == 1; }, 5s));
    CHECK(tl.by_status[rpc::Status::Internal] == 1);
    CHECK(tl.last_error == "handler dropped the call");
    CHECK(svc.srv.stats().handler_dropped == 1);

    // Two calls the server never answers fill the connection's depth; three
    // more wait in the channel; the sixth is refused at once.
    for (int i = 0; i < 5; ++i) REQUIRE(ch.call(kNever, {}, {}, record, 50ms) == rpc::Status::Ok);
    CHECK(ch.queued() == 3);
    std::vector<Slice> keep = make_data(1, 100);
    CHECK(ch.call(kNever, {}, keep, record) == rpc::Status::QueueFull);
    CHECK(keep.size() == 1);
    CHECK(keep[0].size() == 100);  // refused calls leave the data with the caller
    CHECK(ch.stats().refused_queue_full == 1);
    REQUIRE(bed.run_until([&] { return tl.done == 6; }, 5s));
    CHECK(tl.by_status[rpc::Status::DeadlineExceeded] == 5);
    // The server now answers what it holds: late replies, dropped and counted.
    REQUIRE(svc.held.size() >= 2);
    for (auto& c : svc.held) c.reply();
    svc.held.clear();
    bed.run_for(20ms);
    CHECK(ch.stats().late_replies >= 2);
    CHECK(tl.done == 6);
    ch.close();
    bed.run_for(20ms);
}

TEST_CASE("rpc: a server killed and restarted — in-flight calls fail with the cause, the channel reconnects",
          "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(16);
    auto svc = std::make_unique<Service>(bed.b());
    std::string err;
    REQUIRE(svc->srv.listen(rpc::Transport::Crescent, 7100, &err));
    rpc::ChannelOptions o;
    o.server = {bed.ip_b, 7100};
    o.reconnect_min = 5ms;
    o.reconnect_max = 50ms;
    o.deadline = 10s;
    rpc::Channel ch(bed.a(), o);
    REQUIRE(bed.run_until([&] { return ch.connected() == 1; }, 5s));
    Tally tl;
    auto record = tl.recorder();
    for (int i = 0; i < 4; ++i) REQUIRE(ch.call(kNever, {}, {}, record) == rpc::Status::Ok);
    REQUIRE(bed.run_until([&] { return svc->held.size() == 4; }, 5s));
    // Kill: the server's engine resets its connections and goes away.
    svc->held.clear();
    svc.reset();
    bed.stop_b();
    REQUIRE(bed.run_until([&] { return tl.done == 4; }, 5s));
    CHECK(tl.by_status[rpc::Status::ConnectionLost] == 4);
    INFO(tl.last_error);
    CHECK(tl.last_error.find("connection to 10.9.16.2:7100 lost") != std::string::npos);
    CHECK(ch.stats().disconnects == 1);
    // While it is down, calls wait (and reconnects fail: nothing answers).
    Tally t2;
    for (int i = 0; i < 3; ++i)
        REQUIRE(ch.call(kEcho, bytes_of("x"), {}, t2.recorder()) == rpc::Status::Ok);
    bed.run_for(100ms);
    CHECK(t2.done == 0);
    CHECK(ch.queued() == 3);
    // Restart: a new engine and server at the same address.
    bed.start_b();
    svc = std::make_unique<Service>(bed.b());
    REQUIRE(svc->srv.listen(rpc::Transport::Crescent, 7100, &err));
    REQUIRE(bed.run_until([&] { return t2.done == 3; }, 10s));
    CHECK(t2.by_status[rpc::Status::Ok] == 3);
    CHECK(ch.stats().connects == 2);
    ch.close();
    bed.run_for(20ms);
}

TEST_CASE("rpc: fail-over to the alternate address after failed connects; Unavailable without a server", "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(17);
    Service svc(bed.b());
    std::string err;
    REQUIRE(svc.srv.listen(rpc::Transport::Crescent, 7101, &err));
    rpc::ChannelOptions o;
    o.server = {bed.ip_b, 7100};  // nobody listens: refused
    o.alternate = Endpoint{bed.ip_b, 7101};
    o.failover_after = 2;
    o.reconnect_min = 1ms;
    o.reconnect_max = 5ms;
    rpc::Channel ch(bed.a(), o);
    Tally tl;
    REQUIRE(ch.call(kEcho, bytes_of("hi"), {}, tl.recorder()) == rpc::Status::Ok);
    REQUIRE(bed.run_until([&] { return tl.done == 1; }, 5s));
    CHECK(tl.by_status[rpc::Status::Ok] == 1);
    CHECK(ch.stats().failovers == 1);
    CHECK(ch.stats().connect_failures >= 2);
    CHECK(ch.current_server().port == 7101);

    // No server at all: the call's deadline reports Unavailable with the cause.
    rpc::ChannelOptions o2;
    o2.server = {bed.ip_b, 7200};
    o2.reconnect_min = 1ms;
    rpc::Channel none(bed.a(), o2);
    Tally t2;
    REQUIRE(none.call(kEcho, {}, {}, t2.recorder(), 30ms) == rpc::Status::Ok);
    REQUIRE(bed.run_until([&] { return t2.done == 1; }, 5s));
    CHECK(t2.by_status[rpc::Status::Unavailable] == 1);
    INFO(t2.last_error);
    CHECK(t2.last_error.find("no connection to 10.9.17.2:7200") != std::string::npos);
    CHECK(t2.last_error.find("refused") != std::string::npos);
    ch.close();
    none.close();
    bed.run_for(20ms);
}

TEST_CASE("rpc: the full mesh takes local ports that the server's steering spreads over its engines", "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(18);
    Service svc(bed.b());
    std::string err;
    REQUIRE(svc.srv.listen(rpc::Transport::Crescent, 7100, &err));
    rpc::ChannelOptions o;
    o.server = {bed.ip_b, 7100};
    o.server_engines = 4;
    o.lb = rpc::LoadBalance::RoundRobin;
    rpc::Channel ch(bed.a(), o);
    REQUIRE(ch.connections() == 4);
    REQUIRE(bed.run_until([&] { return ch.connected() == 4; }, 5s));
    unsigned done = 0;
    for (int i = 0; i < 8; ++i) REQUIRE(ch.call(kPeerPort, {}, {}, [&](rpc::Reply&) { ++done; }) == rpc::Status::Ok);
    REQUIRE(bed.run_until([&] { return done == 8; }, 5s));
    std::set<unsigned> low;
    for (uint16_t p : svc.peer_ports) low.insert(p & 3);
    CHECK(svc.peer_ports.size() == 4);
    CHECK(low == std::set<unsigned>{0, 1, 2, 3});
    ch.close();
    bed.run_for(20ms);
}

TEST_CASE("rpc: policies — ACL at connection set-up and per method, rate limits, changed at run time", "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(19);
    Service svc(bed.b());
    std::string err;
    REQUIRE(svc.srv.listen(rpc::Transport::Crescent, 7100, &err));
    rpc::Prefix client, other;
    REQUIRE(rpc::Prefix::parse("10.9.19.1/32", &client, &err));
    REQUIRE(rpc::Prefix::parse("10.8.0.0/16", &other, &err));

    // 1. An ACL that does not know this client: refused at set-up.
    svc.srv.policies().acl = std::make_unique<rpc::Acl>();
    svc.srv.policies().acl->allow(other, {});
    rpc::ChannelOptions o;
    o.server = {bed.ip_b, 7100};
    o.reconnect_min = 200ms;
    o.reconnect_max = 200ms;
    {
        rpc::Channel ch(bed.a(), o);
        bed.run_for(50ms);
        CHECK(ch.connected() == 0);
        CHECK(svc.srv.stats().connections_refused >= 1);
        ch.close();
    }
    // 2. Known, but only for kEcho.
    svc.srv.policies().acl->allow(client, {kEcho});
    rpc::Channel ch(bed.a(), o);
    REQUIRE(bed.run_until([&] { return ch.connected() == 1; }, 5s));
    Tally tl;
    auto record = tl.recorder();
    REQUIRE(ch.call(kEcho, {}, {}, record) == rpc::Status::Ok);
    REQUIRE(ch.call(kPeerPort, {}, {}, record) == rpc::Status::Ok);
    REQUIRE(bed.run_until([&] { return tl.done == 2; }, 5s));
    CHECK(tl.by_status[rpc::Status::Ok] == 1);
    CHECK(tl.by_status[rpc::Status::PermissionDenied] == 1);
    CHECK(tl.last_error == "10.9.19.1 may not call peer-port");
    CHECK(svc.srv.stats().refused_acl == 1);
    // 3. Removed at run time: everything allowed again.
    svc.srv.policies().acl.reset();
    // 4. A method rate of 10/s with a burst of 5: of 20 calls at once, 5 pass.
    svc.srv.policies().rate = std::make_unique<rpc::RateLimiter>();
    svc.srv.policies().rate->set_method(kPeerPort, 10, 5);
    tl = Tally{};
    for (int i = 0; i < 20; ++i) REQUIRE(ch.call(kPeerPort, {}, {}, record) == rpc::Status::Ok);
    REQUIRE(bed.run_until([&] { return tl.done == 20; }, 5s));
    CHECK(tl.by_status[rpc::Status::Ok] == 5);
    CHECK(tl.by_status[rpc::Status::RateLimited] == 15);
    CHECK(svc.srv.stats().refused_rate == 15);
    svc.srv.policies().rate.reset();
    tl = Tally{};
    for (int i = 0; i < 20; ++i) REQUIRE(ch.call(kPeerPort, {}, {}, record) == rpc::Status::Ok);
    REQUIRE(bed.run_until([&] { return tl.done == 20; }, 5s));
    CHECK(tl.by_status[rpc::Status::Ok] == 20);
    ch.close();
    bed.run_for(20ms);
}

TEST_CASE("rpc: malformed input closes the connection and is counted; truncation at close too", "[rpc]") {
    test::LeakCheck leaks;
    RingBed bed(20);
    rpc::ServerOptions so;
    so.limits.max_data = 1000;
    Service svc(bed.b(), so);
    std::string err;
    REQUIRE(svc.srv.listen(rpc::Transport::Crescent, 7100, &err));
    struct Raw : rpc::StreamHandler {
        std::string payload;
        bool closed = false, half = false;
        std::string why;
        void on_open(rpc::Stream& s) override {
            s.send_copy(payload);
            if (half) s.close();
        }
        void on_data(rpc::Stream&, std::span<Slice>) override {}
        void on_closed(rpc::Stream&, std::string_view w) override {
            closed = true;
            why = std::string(w);
        }
    };
    auto header = [](uint32_t magic, uint8_t version, uint32_t meta, uint32_t data) {
        rpc::Header h;
        h.magic = magic;
        h.version = version;
        h.method = kEcho;
        h.meta_len = meta;
        h.data_len = data;
        std::string s(rpc::kHeaderSize, '\0');
        h.encode(reinterpret_cast<std::byte*>(s.data()));
        return s;
    };
    struct Case {
        std::string bytes;
        bool half;
        uint64_t rpc::ServerStats::*counter;
    } cases[] = {
        {header(0x12345678, rpc::kVersion, 0, 0), false, &rpc::ServerStats::bad_magic},
        {header(rpc::kMagic, 9, 0, 0), false, &rpc::ServerStats::bad_version},
        {header(rpc::kMagic, rpc::kVersion, 0, 1001), false, &rpc::ServerStats::data_too_large},
        {header(rpc::kMagic, rpc::kVersion, 100000, 0), false, &rpc::ServerStats::meta_too_large},
        {header(rpc::kMagic, rpc::kVersion, 4, 10) + "abcd12", true, &rpc::ServerStats::truncated_at_close},
    };
    for (auto& c : cases) {
        Raw raw;
        raw.payload = c.bytes;
        raw.half = c.half;
        const uint64_t before = svc.srv.stats().*c.counter;
        REQUIRE(rpc::connect(bed.a(), rpc::Transport::Crescent, Endpoint{bed.ip_b, 7100}, raw, {}, &err));
        REQUIRE(bed.run_until([&] { return raw.closed && svc.srv.connections() == 0; }, 5s));
        CHECK(svc.srv.stats().*c.counter == before + 1);
    }
    CHECK(svc.srv.stats().requests == 0);
}
