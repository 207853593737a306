// crescent-rpc-bench — RPC rate and latency over crescent's RPC layer, on
// either transport, with the same binary on both ends (issue 9, Benchmark).
//
//   crescent-rpc-bench server (--iface IF | --eal ARGS --ip A.B.C.D/LEN ...) [--cores N]
//                      [--port 7200] [--kernel-port 7201] [--mode inline|batch] [--stats]
//   crescent-rpc-bench client (--iface IF | --eal ARGS ...) --server IP [--transport crescent|kernel]
//                      [--port P] [--size N] [--resp-size N] [--iodepth D] [--conns C]
//                      [--duration S] [--warmup S] [--server-engines N] [--json FILE] [--label L]
//
// Server: every engine runs an rpc::Server with method 1 "echo", listening on
// the crescent port (user-space TCP, steered to the engine) and on the kernel
// port (a kernel TCP socket per engine, SO_REUSEPORT, in the same engine
// loop's epoll set). The request's 4-byte metadata (u32, little-endian) names
// the response size: when it equals the request's data size the reply is the
// request's own slices (zero-copy echo); otherwise the reply references a
// long-lived pre-filled buffer (kPattern at every offset), shared, never copied.
//
// Client: one rpc::Channel per engine (a connection to each server engine,
// --conns per server engine), closed loop with --iodepth calls outstanding
// per connection. Every request's first and last 8 bytes carry the call
// number (a cheap check: the rest of the buffer is not written); an echoed
// reply must carry them back, a pre-filled one must show kPattern there, and
// every reply must have exactly --resp-size bytes. Latencies after --warmup go
// into an rpc::Histogram; the result is one line (and optionally a JSON line
// appended to --json FILE). Any failed call or wrong byte stops the run: one
// line naming it, exit status 1.
//
// The kernel transport is kernel TCP sockets driven by crescent's busy-polling
// engine loop (non-blocking epoll_wait every iteration, idle_spin 0): "kernel
// TCP with a busy-polling event loop", the fair busy kernel, not a blocking
// server. Its packets also cross the steering XDP program (XDP_PASS) when
// --iface is used, as they would in a mixed deployment.
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/rpc/channel.hpp>
#include <crescent/rpc/histogram.hpp>
#include <crescent/rpc/server.hpp>
#include <crescent/runtime.hpp>
#include <crescent/zbuf.hpp>

#include "examples/cli.hpp"

namespace {

using namespace crescent;
using namespace std::chrono_literals;

constexpr const char* kProg = "crescent-rpc-bench";
constexpr uint32_t kEcho = 1;
constexpr size_t kChunk = 16384;              // request / pre-filled buffers: arena objs of this size
constexpr uint64_t kMaxSize = 1u << 20;       // --size / --resp-size bound (and the server's)
constexpr Duration kCallDeadline = 2s;        // a call slower than this is an error, not a sample
constexpr Duration kConnectWait = 5s;         // every connection up within this, or the run fails

// The pre-filled response buffer's byte at offset `off`.
inline uint8_t pattern(uint64_t off) { return uint8_t(off * 7 + 3); }

[[noreturn]] void die(const std::string& msg) { examples::fail(kProg, msg); }

const char* usage =
    "usage: crescent-rpc-bench server (--iface IF | --eal \"ARGS\" --ip A.B.C.D/LEN [--mac M] [--neighbour IP=MAC]...)\n"
    "                          [--cores N] [--port P (7200)] [--kernel-port P (7201)] [--mode inline|batch]\n"
    "                          [--file-prefix P] [--no-huge] [--stats]\n"
    "       crescent-rpc-bench client (--iface IF | --eal \"ARGS\" ...) --server IP [--transport crescent|kernel]\n"
    "                          [--port P (7200 crescent, 7201 kernel)] [--size N (64)] [--resp-size N (= size)]\n"
    "                          [--iodepth D (1)] [--conns C (1)] [--duration S (3)] [--warmup S (1)]\n"
    "                          [--server-engines N (1)] [--cores N] [--mode inline|batch] [--file-prefix P]\n"
    "                          [--json FILE] [--label L] [--stats]\n"
    "The kernel transport is kernel TCP sockets in the same busy-polling engine loop (epoll, idle_spin 0).\n";

struct Options {
    RuntimeOptions rt;
    bool server = false;
    bool stats = false;
    bool show_plan = false;
    // server
    uint16_t port = 7200;
    uint16_t kernel_port = 7201;
    // client
    std::string server_ip;
    rpc::Transport transport = rpc::Transport::Crescent;
    bool port_given = false;
    uint64_t size = 64;
    uint64_t resp_size = 0;
    bool resp_given = false;
    uint32_t iodepth = 1;
    unsigned conns = 1;
    double duration = 3;
    double warmup = 1;
    unsigned server_engines = 1;
    std::string json;
    std::string label;
};

double seconds_arg(examples::Cli& cli, double lo, double hi) {
    const char* v = cli.value();
    char* end = nullptr;
    errno = 0;
    double d = std::strtod(v, &end);
    if (errno || end == v || *end != '\0' || !(d >= lo && d <= hi))
        cli.die(std::string(cli.flag()) + ": '" + v + "' is not a number of seconds in " + std::to_string(int(lo)) +
                ".." + std::to_string(int(hi)));
    return d;
}

Options parse(int argc, char** argv) {
    Options o;
    if (argc < 2) die("give a role: server or client (see --help)");
    std::string_view role = argv[1];
    if (role == "-h" || role == "--help") {
        std::fputs(usage, stdout);
        std::exit(0);
    }
    if (role == "server") o.server = true;
    else if (role != "client") die("the first argument must be server or client, not '" + std::string(role) + "'");
    examples::Cli cli(kProg, argc - 1, argv + 1, usage);
    while (cli.next()) {
        if (cli.runtime_option(o.rt) || cli.engine_option(o.rt)) continue;
        if (cli.is("--stats")) o.stats = true;
        else if (cli.is("--show-plan")) o.show_plan = true;
        else if (cli.is("--port")) o.port = uint16_t(cli.number(1, 65535)), o.port_given = true;
        else if (o.server && cli.is("--kernel-port")) o.kernel_port = uint16_t(cli.number(1, 65535));
        else if (!o.server && cli.is("--server")) o.server_ip = cli.value();
        else if (!o.server && cli.is("--transport")) {
            const char* v = cli.value();
            if (!rpc::parse_transport(v, &o.transport)) cli.die(std::string("--transport: '") + v + "' is not crescent or kernel");
        } else if (!o.server && cli.is("--size")) o.size = cli.number(0, kMaxSize);
        else if (!o.server && cli.is("--resp-size")) o.resp_size = cli.number(0, kMaxSize), o.resp_given = true;
        else if (!o.server && cli.is("--iodepth")) o.iodepth = uint32_t(cli.number(1, 1024));
        else if (!o.server && cli.is("--conns")) o.conns = unsigned(cli.number(1, 256));
        else if (!o.server && cli.is("--duration")) o.duration = seconds_arg(cli, 0.1, 3600);
        else if (!o.server && cli.is("--warmup")) o.warmup = seconds_arg(cli, 0, 3600);
        else if (!o.server && cli.is("--server-engines")) o.server_engines = unsigned(cli.number(1, 64));
        else if (!o.server && cli.is("--json")) o.json = cli.value();
        else if (!o.server && cli.is("--label")) o.label = cli.value();
        else cli.unknown();
    }
    if (o.rt.iface.empty() == o.rt.eal.empty()) die("give exactly one of --iface IFACE or --eal \"ARGS\"");
    if (!o.rt.eal.empty() && o.rt.ip.empty()) die("--eal needs --ip A.B.C.D/LEN (the device has no kernel address)");
    if (o.server) {
        if (o.port == o.kernel_port) die("--port and --kernel-port must differ (crescent and kernel TCP share the address)");
        o.rt.listen_ports.push_back(o.port);
    } else {
        if (o.server_ip.empty()) die("client: --server IP is required");
        if (!o.port_given) o.port = o.transport == rpc::Transport::Crescent ? 7200 : 7201;
        if (!o.resp_given) o.resp_size = o.size;
        if (uint64_t(o.iodepth) * o.conns * o.server_engines * o.rt.cores > 65536)
            die("--iodepth x --conns x --server-engines x --cores is above 65536 calls in flight");
        if (o.label.empty()) o.label = std::string(rpc::transport_name(o.transport));
        // Room for every call in flight twice over (request + reply), beyond the default.
        uint64_t need = 4 * (o.size + o.resp_size + kChunk) * o.iodepth * o.conns * o.server_engines;
        o.rt.arena_bytes = std::max<uint64_t>(o.rt.arena_bytes, std::min<uint64_t>(need, uint64_t(1) << 30));
    }
    // The engine default idle_spin 0 busy-polls: both transports run in a loop that never sleeps (--idle-sleep-us changes that).
    return o;
}

// ---- server -----------------------------------------------------------------------

// One engine's service. Engine-thread only.
struct EchoService {
    std::unique_ptr<rpc::Server> srv;
    std::vector<Slice> prefilled;  // kChunk-sized arena objs holding pattern(), lazily grown
    std::vector<Slice> scratch;    // the reply iovec (moved out by reply())
    uint64_t prefill_failed = 0;

    bool ensure_prefilled(uint64_t n) {
        while (prefilled.size() * kChunk < n) {
            Slice s = zbuf::Arena::current()->alloc_slice(kChunk);
            if (!s) return false;
            const uint64_t base = prefilled.size() * kChunk;
            for (size_t i = 0; i < kChunk; ++i) s.data()[i] = std::byte(pattern(base + i));
            prefilled.push_back(std::move(s));
        }
        return true;
    }

    void echo(rpc::Call& c) {
        std::span<const std::byte> m = c.meta();
        if (m.size() != 4) {
            c.fail(rpc::Status::BadRequest, "echo: the metadata must be 4 bytes (the response size, u32 little-endian)");
            return;
        }
        const uint64_t resp = uint64_t(m[0]) | uint64_t(m[1]) << 8 | uint64_t(m[2]) << 16 | uint64_t(m[3]) << 24;
        if (resp > kMaxSize) {
            c.fail(rpc::Status::BadRequest, "echo: response size above 1 MiB");
            return;
        }
        if (resp == c.data_bytes()) {  // zero-copy: the request's own slices go back
            c.reply({}, c.data());
            return;
        }
        if (!ensure_prefilled(resp)) {
            ++prefill_failed;
            c.fail(rpc::Status::Internal, "echo: no memory for the response buffer");
            return;
        }
        scratch.clear();
        for (uint64_t off = 0; off < resp; off += kChunk)
            scratch.push_back(prefilled[off / kChunk].sub(0, size_t(std::min<uint64_t>(kChunk, resp - off))));
        c.reply({}, scratch);
        scratch.clear();
    }
};

int run_server(const Options& o) {
    auto rt = examples::start_or_exit(kProg, o.rt, o.show_plan);
    std::vector<std::unique_ptr<EchoService>> svcs(rt->engine_count());
    std::atomic<bool> failed{false};
    std::string fail_msg;
    rt->run([&](Engine& e) {
        auto svc = std::make_unique<EchoService>();
        rpc::ServerOptions so;
        so.limits.max_data = uint32_t(kMaxSize);
        so.stream.kernel_reuse_port = true;
        svc->srv = std::make_unique<rpc::Server>(e, so);
        EchoService* s = svc.get();
        svc->srv->register_method(kEcho, "echo", [s](rpc::Call& c) { s->echo(c); });
        std::string err;
        if (!svc->srv->listen(rpc::Transport::Crescent, o.port, &err) ||
            !svc->srv->listen(rpc::Transport::Kernel, o.kernel_port, &err)) {
            if (!failed.exchange(true)) fail_msg = "engine " + std::to_string(e.index()) + ": " + err;
            svcs[e.index()] = std::move(svc);
            rt->stop();
            return;
        }
        svcs[e.index()] = std::move(svc);
        if (e.index() == 0)
            std::fprintf(stderr,
                         "%s: serving echo on %s: crescent port %u, kernel port %u (kernel TCP in the same "
                         "busy-polling loop), %s mode, %u engine%s\n",
                         kProg, rt->local_ip().to_string().c_str(), o.port, o.kernel_port,
                         o.rt.engine.mode == DispatchMode::Batch ? "batch" : "inline", rt->engine_count(),
                         rt->engine_count() > 1 ? "s" : "");
    });
    if (o.stats) {
        for (unsigned i = 0; i < rt->engine_count(); ++i) {
            examples::print_engine_stats(rt->engine(i));
            if (!svcs[i] || !svcs[i]->srv) continue;
            const rpc::ServerStats& s = svcs[i]->srv->stats();
            std::fprintf(stderr,
                         "server %u: accepted=%" PRIu64 " requests=%" PRIu64 " replies=%" PRIu64 " errors_sent=%" PRIu64
                         " bytes_in=%" PRIu64 " bytes_out=%" PRIu64 " reads_paused=%" PRIu64 " no_memory=%" PRIu64 "\n",
                         i, s.connections_accepted, s.requests, s.replies, s.errors_sent, s.bytes_in, s.bytes_out,
                         s.reads_paused, s.no_memory);
        }
    }
    // Tear down as each engine's zbuf core (the loops have returned).
    for (unsigned i = 0; i < rt->engine_count(); ++i) {
        zbuf::CoreScope core(rt->engine(i).core());
        svcs[i].reset();
    }
    if (failed) {
        std::fprintf(stderr, "%s: cannot listen: %s\n", kProg, fail_msg.c_str());
        return 1;
    }
    return 0;
}

// ---- client -----------------------------------------------------------------------

std::atomic<bool> g_abort{false};  // an engine hit an error: every engine stops

// One engine's closed loop. Engine-thread only (the main thread reads it after run()).
struct Loader {
    enum class Phase : uint8_t { Connecting, Running, Closing, Done };

    Engine* e = nullptr;
    const Options* o = nullptr;
    std::unique_ptr<rpc::Channel> ch;
    Phase phase = Phase::Connecting;
    Instant created, warm_end, end;
    std::array<std::byte, 4> meta{};
    std::vector<Slice> req;          // the request iovec being built (moved out by call())
    uint64_t next_call = 0;
    uint64_t measured = 0;           // completions inside [warm_end, end)
    uint64_t completed = 0;          // all Ok completions
    uint64_t errors = 0;             // failed calls and wrong replies
    std::string first_error;
    rpc::Histogram hist;             // ns, measured completions only
    rpc::ChannelStats final_stats;
    uint64_t retrans = 0;            // segments the client's connections retransmitted (whole run)
    bool finished = false;           // set when this engine is done (read after run())

    void start(Engine& eng, const Options& opts, const std::function<void()>& all_done) {
        e = &eng;
        o = &opts;
        const uint32_t r = uint32_t(o->resp_size);
        meta = {std::byte(r), std::byte(r >> 8), std::byte(r >> 16), std::byte(r >> 24)};
        Ipv4 ip;
        Ipv4::parse(o->server_ip, &ip);
        rpc::ChannelOptions co;
        co.server = {ip, o->port};
        co.transport = o->transport;
        co.server_engines = o->server_engines;
        co.conns_per_engine = o->conns;
        co.depth = o->iodepth;
        co.deadline = kCallDeadline;
        co.limits.max_data = uint32_t(kMaxSize);
        ch = std::make_unique<rpc::Channel>(eng, co);
        created = eng.now();
        tick(all_done);
    }

    void fail(std::string why) {
        ++errors;
        if (first_error.empty()) first_error = std::move(why);
        g_abort.store(true, std::memory_order_relaxed);
        if (phase == Phase::Running || phase == Phase::Connecting) phase = Phase::Closing;
    }

    // Every 5 ms: connection wait, end of the run, another engine's error.
    void tick(const std::function<void()>& all_done) {
        const Instant now = e->now();
        if (phase == Phase::Connecting) {
            if (ch->connected() == ch->connections()) {
                phase = Phase::Running;
                warm_end = now + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o->warmup));
                end = warm_end + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o->duration));
                const uint64_t window = uint64_t(o->iodepth) * ch->connections();
                for (uint64_t i = 0; i < window && phase == Phase::Running; ++i) issue();
            } else if (now - created > kConnectWait || g_abort.load(std::memory_order_relaxed)) {
                if (!g_abort.load(std::memory_order_relaxed)) {
                    const std::string& le = ch->last_error();
                    fail(std::to_string(ch->connected()) + " of " + std::to_string(ch->connections()) +
                         " connections to " + o->server_ip + ":" + std::to_string(o->port) + " over " +
                         std::string(rpc::transport_name(o->transport)) + " up after 5 s" +
                         (le.empty() ? std::string() : ": " + le));
                }
                phase = Phase::Closing;
            }
        }
        if (phase == Phase::Running && (now >= end || g_abort.load(std::memory_order_relaxed))) phase = Phase::Closing;
        if (phase == Phase::Closing) {
            // Outside any continuation: closing cancels the calls in flight (ignored now).
            phase = Phase::Done;
            final_stats = ch->stats();
            // Same counters on both transports: crescent's Tcb, the kernel's TCP_INFO.
            for (const ConnStats& c : ch->connection_stats())
                retrans += c.retrans_timeout + c.retrans_fast + c.retrans_sack + c.retrans_rescue;
            ch->close();
            e->add_timer(20ms, [this, all_done] {
                ch.reset();
                finished = true;
                all_done();
            });
            return;
        }
        if (phase == Phase::Done) return;
        e->add_timer(5ms, [this, all_done] { tick(all_done); });
    }

    void issue() {
        const uint64_t n = next_call++;
        const uint64_t size = o->size;
        req.clear();
        for (uint64_t off = 0; off < size; off += kChunk) {
            Slice s = zbuf::Arena::current()->alloc_slice(size_t(std::min<uint64_t>(kChunk, size - off)));
            if (!s) {
                fail("client: the zbuf arena is empty (request " + std::to_string(n) + ")");
                return;
            }
            req.push_back(std::move(s));
        }
        // Bytes [0, 8): the call number; the last 8 bytes past those: the call number ^ 0x5a.
        for (uint64_t i = 0; i < 8 && i < size; ++i) {
            req[i / kChunk].data()[i % kChunk] = std::byte(uint8_t(n >> (8 * i)));
            if (size >= 9 + i) {
                const uint64_t t = size - 1 - i;
                req[t / kChunk].data()[t % kChunk] = std::byte(uint8_t(n >> (8 * i)) ^ 0x5a);
            }
        }
        Loader* self = this;
        rpc::Status st = ch->call(kEcho, meta, req, [self, n](rpc::Reply& r) { self->on_reply(n, r); });
        req.clear();
        if (st != rpc::Status::Ok)
            fail("client: call refused: " + std::string(rpc::status_name(st)));
    }

    // Byte `off` of the reply counted from the front (or from the back).
    static uint8_t byte_at(std::span<Slice> d, uint64_t off) {
        for (const Slice& s : d) {
            if (off < s.size()) return std::to_integer<uint8_t>(s.data()[off]);
            off -= s.size();
        }
        return 0;
    }
    static uint8_t byte_from_end(std::span<Slice> d, uint64_t back) {
        for (size_t k = d.size(); k-- > 0;) {
            if (back < d[k].size()) return std::to_integer<uint8_t>(d[k].data()[d[k].size() - 1 - back]);
            back -= d[k].size();
        }
        return 0;
    }

    // Empty when the reply is right, else what is wrong.
    std::string check(uint64_t n, std::span<Slice> d) const {
        uint64_t got = 0;
        for (const Slice& s : d) got += s.size();
        const uint64_t want = o->resp_size;
        if (got != want)
            return "reply to call " + std::to_string(n) + " has " + std::to_string(got) + " bytes, expected " +
                   std::to_string(want);
        const bool echoed = o->resp_size == o->size;
        for (uint64_t i = 0; i < 8 && i < want; ++i) {
            const uint8_t want_head = echoed ? uint8_t(n >> (8 * i)) : pattern(i);
            bool good = byte_at(d, i) == want_head;
            if (want >= 9 + i) {
                const uint8_t want_tail = echoed ? uint8_t(uint8_t(n >> (8 * i)) ^ 0x5a) : pattern(want - 1 - i);
                good = good && byte_from_end(d, i) == want_tail;
            }
            if (!good)
                return "reply to call " + std::to_string(n) + " has wrong bytes (" +
                       (echoed ? "the call number is not echoed" : "not the server's pattern") + ")";
        }
        return {};
    }

    void on_reply(uint64_t n, rpc::Reply& r) {
        if (phase != Phase::Running) return;  // the end-of-run cancellations
        if (r.status != rpc::Status::Ok) {
            fail("call " + std::to_string(n) + " failed: " + std::string(rpc::status_name(r.status)) +
                 (r.error.empty() ? std::string() : ": " + std::string(r.error)));
            return;
        }
        if (std::string bad = check(n, r.data); !bad.empty()) {
            fail(std::move(bad));
            return;
        }
        ++completed;
        const Instant now = e->now();
        if (now >= warm_end && now < end) {
            ++measured;
            hist.record(uint64_t(std::max<int64_t>(0, r.latency.count())));
        }
        if (now < end && !g_abort.load(std::memory_order_relaxed)) issue();
    }
};

std::string json_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += c;
        else if (uint8_t(c) < 0x20) out += ' ';
        else out += c;
    }
    return out;
}

int run_client(const Options& o) {
    Ipv4 ip;
    if (!Ipv4::parse(o.server_ip, &ip)) die("--server: '" + o.server_ip + "' is not an IPv4 address");
    auto rt = examples::start_or_exit(kProg, o.rt, o.show_plan);
    const unsigned engines = rt->engine_count();
    std::vector<std::unique_ptr<Loader>> loaders;
    for (unsigned i = 0; i < engines; ++i) loaders.push_back(std::make_unique<Loader>());
    std::atomic<unsigned> done{0};
    Runtime* rtp = rt.get();
    std::function<void()> all_done = [&done, engines, rtp] {
        if (++done == engines) rtp->stop();
    };
    rt->run([&](Engine& e) { loaders[e.index()]->start(e, o, all_done); });

    rpc::Histogram hist;
    uint64_t measured = 0, errors = 0, calls = 0, retrans_sum = 0;
    bool all_finished = true;
    std::string first_error;
    for (auto& l : loaders) {
        hist.merge(l->hist);
        measured += l->measured;
        errors += l->errors;
        calls += l->completed;
        retrans_sum += l->retrans;
        all_finished = all_finished && l->finished;
        if (first_error.empty() && !l->first_error.empty()) first_error = l->first_error;
    }
    if (o.stats)
        for (unsigned i = 0; i < engines; ++i) {
            examples::print_engine_stats(rt->engine(i));
            const rpc::ChannelStats& s = loaders[i]->final_stats;
            std::fprintf(stderr,
                         "channel %u: calls=%" PRIu64 " ok=%" PRIu64 " failed=%" PRIu64 " connects=%" PRIu64
                         " disconnects=%" PRIu64 " queued_peak=%" PRIu64 " late_replies=%" PRIu64 "\n",
                         i, s.calls, s.ok, s.failed, s.connects, s.disconnects, s.queued_peak, s.late_replies);
        }
    // Anything still alive (interrupted run) goes as its engine's zbuf core.
    for (unsigned i = 0; i < engines; ++i) {
        zbuf::CoreScope core(rt->engine(i).core());
        loaders[i].reset();
    }
    if (!all_finished && errors == 0) {
        std::fprintf(stderr, "%s: interrupted before the run ended\n", kProg);
        return 130;
    }

    const double secs = o.duration;
    const double rps = double(measured) / secs;
    const double gbit = rps * double(o.size + o.resp_size) * 8 / 1e9;
    auto us = [&](double p) { return double(hist.percentile(p)) / 1e3; };
    const double p50 = us(50), p90 = us(90), p99 = us(99), p999 = us(99.9), mx = double(hist.max()) / 1e3;
    const long long retrans = all_finished ? (long long)retrans_sum : -1;
    const std::string tname(rpc::transport_name(o.transport));
    const std::string retrans_s = retrans >= 0 ? std::to_string(retrans) : "-";

    const bool ok = errors == 0 && measured > 0;
    if (!o.json.empty()) {
        FILE* f = std::fopen(o.json.c_str(), "a");
        if (!f) {
            std::fprintf(stderr, "%s: cannot open --json %s: %s\n", kProg, o.json.c_str(), std::strerror(errno));
            return 1;
        }
        std::fprintf(f,
                     "{\"label\":\"%s\",\"transport\":\"%s\",\"size\":%" PRIu64 ",\"resp_size\":%" PRIu64
                     ",\"iodepth\":%u,\"conns\":%u,\"server_engines\":%u,\"engines\":%u,\"seconds\":%.3f,"
                     "\"warmup\":%.3f,\"calls\":%" PRIu64 ",\"measured\":%" PRIu64 ",\"rps\":%.1f,\"gbit_s\":%.4f,"
                     "\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,\"max_us\":%.2f,"
                     "\"mean_us\":%.2f,\"errors\":%" PRIu64 ",\"retrans\":%s,\"ok\":%s%s%s%s}\n",
                     json_escape(o.label).c_str(), tname.c_str(), o.size, o.resp_size, o.iodepth, o.conns,
                     o.server_engines, engines, o.duration, o.warmup, calls, measured, rps, gbit, p50, p90, p99, p999,
                     mx, hist.mean() / 1e3, errors, retrans >= 0 ? std::to_string(retrans).c_str() : "null",
                     ok ? "true" : "false", first_error.empty() ? "" : ",\"error\":\"",
                     json_escape(first_error).c_str(), first_error.empty() ? "" : "\"");
        std::fclose(f);
    }
    if (errors) {
        std::fprintf(stderr, "%s: %s (%" PRIu64 " error%s)\n", kProg, first_error.c_str(), errors, errors > 1 ? "s" : "");
        return 1;
    }
    if (measured == 0) {
        std::fprintf(stderr, "%s: no call completed in the %.1f s measurement window\n", kProg, o.duration);
        return 1;
    }
    std::printf("# %s: closed loop, %u call%s in flight per connection, %u connection%s per server engine x %u "
                "server engine%s x %u client engine%s; %.1f s after %.1f s warm-up. transport crescent = user-space "
                "TCP; kernel = kernel TCP sockets driven by the same busy-polling engine loop (epoll, idle_spin 0). "
                "Gbit/s counts request + response data; retrans = segments the client's connections retransmitted "
                "(crescent's TCP counters or the kernel's TCP_INFO)\n",
                kProg, o.iodepth, o.iodepth > 1 ? "s" : "", o.conns, o.conns > 1 ? "s" : "", o.server_engines,
                o.server_engines > 1 ? "s" : "", engines, engines > 1 ? "s" : "", o.duration, o.warmup);
    std::printf("# %-20s %-9s %7s %7s %7s %12s %8s %8s %8s %8s %8s %9s %6s %7s\n", "label", "transport", "size", "resp",
                "iodepth", "RPC/s", "Gbit/s", "p50us", "p90us", "p99us", "p99.9us", "maxus", "errors", "retrans");
    std::printf("  %-20s %-9s %7" PRIu64 " %7" PRIu64 " %7u %12.0f %8.3f %8.1f %8.1f %8.1f %8.1f %9.1f %6" PRIu64
                " %7s\n",
                o.label.c_str(), tname.c_str(), o.size, o.resp_size, o.iodepth, rps, gbit, p50, p90, p99, p999, mx,
                errors, retrans_s.c_str());
    std::fflush(stdout);

    return 0;
}

} // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    return o.server ? run_server(o) : run_client(o);
}
