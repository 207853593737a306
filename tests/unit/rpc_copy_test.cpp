// crescent — the copy API under RPC streams (StreamOptions::copy_api: batch
// dispatch reading with Conn::read() and sending with Conn::write(), knb's
// "copy" mode), two engines over DPDK's net_ring: an rpc::Server and an
// rpc::Channel both in batch mode with copy_api, calls of 64 B, 4 KiB and
// 200 KiB (many segments; small send buffers force short writes and the
// backlog) byte-exact, on a clean and a lossy wire, no zbuf leaked. The
// streams' bytes_copied_in/out prove which path ran: every byte on the copy
// path, none without copy_api, none in inline mode (which ignores it).
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include <crescent/rpc/channel.hpp>
#include <crescent/rpc/server.hpp>
#include <crescent/rpc/stream.hpp>

#include "tests/support/ring_bed.hpp"
#include "tests/support/zbuf_leak.hpp"
#include "tests/support/rpc_data.hpp"

using namespace crescent;
using namespace std::chrono_literals;
using crescent::test::RingBed;
using crescent::test::RingBedOptions;
using rpc::StreamStats;

namespace {

constexpr uint32_t kEcho = 1;
constexpr size_t kSizes[] = {64, 4096, 200u << 10};

using crescent::test::check_data;
using crescent::test::make_data;
using crescent::test::pattern;

StreamStats sum_streams(Engine& e) {
    StreamStats t;
    rpc::for_each_stream(e, [&](rpc::Stream& s) {
        const StreamStats& x = s.stats();
        t.bytes_in += x.bytes_in;
        t.bytes_out += x.bytes_out;
        t.reads += x.reads;
        t.writes += x.writes;
        t.backlog_peak = std::max(t.backlog_peak, x.backlog_peak);
        t.bytes_copied_in += x.bytes_copied_in;
        t.bytes_copied_out += x.bytes_copied_out;
        t.copy_no_memory += x.copy_no_memory;
    });
    return t;
}

struct Result {
    StreamStats client, server;  // summed over each side's streams, before they close
    uint64_t payload = 0;        // request data bytes sent (and echoed)
};

// Echo calls cycling through 64 B, 4 KiB and 200 KiB at `depth`, checked byte
// for byte; both sides in `mode`, copy_api on both or neither.
Result echo_calls(int bed_id, DispatchMode mode, bool copy_api, const std::string& impair, unsigned calls) {
    RingBedOptions bo;
    bo.mode_a = bo.mode_b = mode;
    bo.impair = impair;
    bo.conn.snd_buf = 64u << 10;  // the server's replies: 200 KiB take several short writes
    RingBed bed(bed_id, bo);

    rpc::ServerOptions so;
    so.stream.copy_api = copy_api;
    rpc::Server srv(bed.b(), so);
    REQUIRE(srv.register_method(kEcho, "echo", [](rpc::Call& c) {
        std::vector<std::byte> meta(c.meta().begin(), c.meta().end());
        c.reply(meta, c.data());
    }));
    std::string err;
    REQUIRE(srv.listen(rpc::Transport::Crescent, 7200, &err));

    rpc::ChannelOptions co;
    co.server = {bed.ip_b, 7200};
    co.depth = 4;
    co.deadline = 30s;
    co.stream.copy_api = copy_api;
    co.stream.conn.snd_buf = 64u << 10;  // the requests too
    rpc::Channel ch(bed.a(), co);
    REQUIRE(bed.run_until([&] { return ch.connected() == 1; }, 10s));

    Result res;
    uint64_t done = 0, ok = 0;
    std::string last_error;
    unsigned issued = 0;
    auto issue = [&] {
        while (issued < calls && ch.outstanding() < co.depth) {
            const uint64_t id = issued++;
            const size_t n = kSizes[id % 3];
            res.payload += n;
            auto data = make_data(id, n);
            const std::string meta = "m" + std::to_string(id);
            REQUIRE(ch.call(kEcho, std::as_bytes(std::span(meta.data(), meta.size())), data,
                            [&, id, n, meta](rpc::Reply& r) {
                                ++done;
                                const std::string got(reinterpret_cast<const char*>(r.meta.data()), r.meta.size());
                                if (r.status == rpc::Status::Ok && got == meta && check_data(id, r.data, n)) ++ok;
                                else last_error = std::string(r.error);
                            }) == rpc::Status::Ok);
        }
    };
    REQUIRE(bed.run_until([&] {
        issue();
        return done == calls;
    }, 60s));
    INFO(last_error);
    CHECK(ok == calls);
    CHECK(ch.stats().ok == calls);
    CHECK(srv.stats().requests == calls);
    res.client = sum_streams(bed.a());
    res.server = sum_streams(bed.b());
    CHECK(res.client.copy_no_memory == 0);
    CHECK(res.server.copy_no_memory == 0);
    return res;
}

// Both directions carried at least the payload; with `copied`, every byte
// of it went through read()/write(), else none did.
void check_paths(const Result& r, bool copied) {
    for (const StreamStats* s : {&r.client, &r.server}) {
        INFO("bytes in " << s->bytes_in << " out " << s->bytes_out << ", copied in " << s->bytes_copied_in
                         << " out " << s->bytes_copied_out << ", writes " << s->writes << ", backlog peak "
                         << s->backlog_peak << ", payload " << r.payload);
        CHECK(s->bytes_in >= r.payload);
        CHECK(s->bytes_out >= r.payload);
        if (copied) {
            CHECK(s->bytes_copied_in == s->bytes_in);
            CHECK(s->bytes_copied_out == s->bytes_out);
        } else {
            CHECK(s->bytes_copied_in == 0);
            CHECK(s->bytes_copied_out == 0);
        }
    }
}

} // namespace

TEST_CASE("rpc copy API: batch + copy_api, 64 B / 4 KiB / 200 KiB calls byte-exact through read()/write()",
          "[rpc][copy]") {
    test::LeakCheck leaks;
    Result r = echo_calls(41, DispatchMode::Batch, true, "", 150);
    check_paths(r, true);
    // The 200 KiB messages did not fit the 64 KiB send buffers: short
    // writes, the rest waited in the backlog for on_writable().
    CHECK(r.client.backlog_peak > (64u << 10));
    CHECK(r.server.backlog_peak > (64u << 10));
    // Slice by slice: more write() calls than messages.
    CHECK(r.client.writes > 150);
}

TEST_CASE("rpc copy API: batch + copy_api on a lossy, reordering wire", "[rpc][copy]") {
    test::LeakCheck leaks;
    Result r = echo_calls(42, DispatchMode::Batch, true, "loss=2,dup=1,reorder=10,seed=9", 60);
    check_paths(r, true);
}

TEST_CASE("rpc copy API: without copy_api batch stays zero-copy; inline mode ignores copy_api", "[rpc][copy]") {
    test::LeakCheck leaks;
    check_paths(echo_calls(43, DispatchMode::Batch, false, "", 30), false);
    check_paths(echo_calls(44, DispatchMode::Inline, true, "", 30), false);
}
