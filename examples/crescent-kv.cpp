// crescent-kv — a key-value server that speaks the Redis protocol (RESP2), so
// unmodified clients work: redis-cli, redis-benchmark, redis-py.
//
//   crescent-kv --iface IF [--port 6379] [--kernel-port P] [--mode inline|batch] [--stats]
//   crescent-kv --eal "ARGS" --ip A.B.C.D/LEN [--mac M] [--neighbour IP=MAC]... ...
//
// The pieces are in examples/kv: the incremental request parser (resp.hpp),
// the keyspace with expiry (store.hpp), the command table and reply builder
// (commands.hpp). This file is the server around them: one keyspace per
// engine, a session per connection, both transports through rpc::Stream.
//
// Zero-copy: a request's bytes are the transport's receive buffers (crescent:
// the NIC's RX objs; kernel: arena objs filled by readv); SET keeps the
// received slices as the value (values <= --copy-max bytes are copied into
// shared blocks instead, and the RX objs one keyspace may hold are bounded by
// --rx-pin; see store.hpp), GET sends references to them. All replies of one
// batch of requests leave in one send(), and at once (Stream::send_now()).
//
// Engines and keyspaces: a keyspace belongs to one engine (share-nothing), and
// the crescent transport spreads connections over engines by their source
// port, so with several engines a client would see one of several unrelated
// keyspaces. --cores is therefore 1 by default, and more engines are refused
// unless --shard says that keys partitioned by connection are what you want
// (like a cluster of independent shards without redirection; INFO and DBSIZE
// report the shard the connection landed on). The kernel port (--kernel-port)
// is served by the same engines (SO_REUSEPORT with --shard): with one engine
// both ports reach the same keyspace.
//
// Backpressure: a client whose send backlog is above 4 MiB is not read (its
// pipeline stops being parsed) until the backlog has drained.
//
// Receive ring: 2048 RX descriptors (--rx-ring), twice the library's default.
// Over AF_XDP a frame that arrives while the XSK RX ring is full is dropped
// by the kernel and must be retransmitted by the client: fast retransmits at
// best, a 200 ms+ RTO (1 s for a lost SYN) at worst. Many pipelining clients
// writing large values (redis-benchmark -c 50 -P 16 -d 4096: up to 3.3 MB in
// flight) overflowed 1024 whenever the engine was off its CPU or inside a
// system call for a while; see BENCHMARKS.md, "RPC (issue 9)".
//
// Expiry: lazily on access, plus an active step per engine every 1/--hz
// seconds that removes up to 1000 expired keys in deadline order (again after
// 1 ms while it keeps finding that many).
//
// Ctrl-C / SIGTERM: the engines stop, connections are reset, and the runtime
// removes the XDP program and DPDK's files before exiting.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include <crescent/engine.hpp>
#include <crescent/rpc/stream.hpp>
#include <crescent/runtime.hpp>
#include <crescent/zbuf.hpp>

#include "examples/cli.hpp"
#include "examples/kv/commands.hpp"
#include "examples/kv/resp.hpp"
#include "examples/kv/store.hpp"

namespace {

using namespace crescent;
using namespace crescent::kv;

constexpr size_t kBacklogPause = 4u << 20; // stop reading a client above this much unsent reply
constexpr size_t kExpireStepKeys = 1000;   // active expiry: keys per step
constexpr uint16_t kRxRing = 2048;         // RX descriptors (the library's default is 1024; see the header)

struct Options {
    RuntimeOptions rt;
    uint16_t port = 6379;
    uint16_t kernel_port = 0;   // 0: crescent transport only
    std::string kernel_bind;    // kernel port address ("" = any)
    bool shard = false;
    bool stats = false;
    bool show_plan = false;
    unsigned hz = 10;
    unsigned maxclients = 10000;
    StoreConfig store;
    ParserLimits limits;
};

[[noreturn]] void die(const std::string& msg) { examples::fail("crescent-kv", msg); }

const char* usage =
    "usage: crescent-kv (--iface IFACE | --eal \"ARGS\" --ip A.B.C.D/LEN [--mac MAC] [--neighbour IP=MAC]...\n"
    "                    [--gateway IP]) [options]\n"
    "A Redis-protocol (RESP2) key-value server over crescent; redis-cli, redis-benchmark and\n"
    "redis-py work unmodified.\n"
    "  --port P           crescent (user-space TCP) port, default 6379\n"
    "  --kernel-port P    also serve on kernel TCP port P, from the same engines and keyspace\n"
    "  --kernel-bind IP   address of the kernel port (default: any)\n"
    "  --cores N          engines (default 1); N > 1 needs --shard\n"
    "  --shard            with N engines: one keyspace per engine, keys partitioned by connection\n"
    "  --mode inline|batch  engine dispatch mode (default inline)\n"
    "  --arena-mb N       zbuf arena for values, copies and replies (default 64)\n"
    "  --copy-max BYTES   values up to this size are copied into shared blocks (default 128)\n"
    "  --rx-pin N         NIC receive buffers one keyspace may keep as values (default 1024)\n"
    "  --max-bulk BYTES   largest argument accepted (default 536870912, Redis's proto-max-bulk-len)\n"
    "  --maxclients N     connections per engine (default 10000)\n"
    "  --hz N             active expiry steps per second (default 10)\n"
    "  --rx-ring N        RX descriptors of the engine's queue, a power of two in 64..4096 (default 2048)\n"
    "  --stats            print per-engine counters on exit\n"
    "  --show-plan        print the port plan and exit\n"
    "  --file-prefix P, --no-huge, --copy-rx, --burst N, --reply-at-once on|off, --idle-sleep-us N, --impair SPEC,\n"
    "  --app-slot N, --app-slots N, --pcap FILE, --pcap-snaplen N, --pcap-max-mb N: as for crescent-echo\n";

Options parse(int argc, char** argv) {
    Options o;
    o.rt.rx_ring = kRxRing;
    examples::Cli cli("crescent-kv", argc, argv, usage);
    while (cli.next()) {
        if (cli.runtime_option(o.rt) || cli.engine_option(o.rt) || cli.limit_option(o.rt)) continue;
        std::string_view a = cli.flag();
        if (a == "--port") o.port = uint16_t(cli.number(1, 65535));
        else if (a == "--kernel-port") o.kernel_port = uint16_t(cli.number(1, 65535));
        else if (a == "--kernel-bind") o.kernel_bind = cli.value();
        else if (a == "--shard") o.shard = true;
        else if (a == "--copy-max") o.store.copy_max = size_t(cli.number(0, 16384));
        else if (a == "--rx-pin") o.store.rx_pin_budget = size_t(cli.number(0, 1u << 24));
        else if (a == "--max-bulk") o.limits.max_bulk_len = cli.number(1, 512ull << 20);
        else if (a == "--maxclients") o.maxclients = unsigned(cli.number(1, 1000000));
        else if (a == "--hz") o.hz = unsigned(cli.number(1, 500));
        else if (a == "--rx-ring") o.rt.rx_ring = uint16_t(cli.number(64, 4096));
        else if (a == "--copy-rx") o.rt.zero_copy_rx = false;
        else if (a == "--stats") o.stats = true;
        else if (a == "--show-plan") o.show_plan = true;
        else cli.unknown();
    }
    if (o.rt.iface.empty() == o.rt.eal.empty()) die("give exactly one of --iface IFACE or --eal \"ARGS\"");
    if (!o.rt.eal.empty() && o.rt.ip.empty()) die("--eal needs --ip A.B.C.D/LEN (the device has no kernel address)");
    if (o.kernel_port == o.port) die("--kernel-port must differ from --port");
    if (!o.kernel_bind.empty() && !o.kernel_port) die("--kernel-bind needs --kernel-port");
    Ipv4 bind;
    if (!o.kernel_bind.empty() && !Ipv4::parse(o.kernel_bind, &bind))
        die("--kernel-bind: '" + o.kernel_bind + "' is not an IPv4 address");
    if (o.rt.cores > 1 && !o.shard)
        die("--cores " + std::to_string(o.rt.cores) +
            " would give each engine its own keyspace, and connections are spread over engines by source port, "
            "so a client would see one of several unrelated keyspaces; add --shard if keys partitioned by "
            "connection are what you want, or keep --cores 1");
    o.rt.listen_ports.push_back(o.port);
    return o;
}

std::atomic<uint64_t> g_next_client_id{1};

// ---- one engine's keyspace and its connections ---------------------------------------

class Shard final : public rpc::StreamHandler {
public:
    Shard(Engine& e, const Options& o, unsigned engines, std::string transports)
        : e_(e), o_(o), store_(values_, o.store), x_(store_, values_, info_, stats_) {
        info_.tcp_port = o.port;
        info_.hz = o.hz;
        info_.maxclients = o.maxclients;
        info_.run_id = fmt::format("{:016x}{:016x}{:08x}", uint64_t(std::chrono::system_clock::now().time_since_epoch().count()),
                                   uint64_t(reinterpret_cast<uintptr_t>(this)), e.index());
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        info_.executable = n > 0 ? std::string(exe, size_t(n)) : "crescent-kv";
        // Unix µs = engine clock + this offset (sampled once: a wall-clock step does not move TTLs).
        wall_offset_us_ = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count() -
                          e.now().nanos() / 1000;
        info_.start_us = now_us();
        info_.extra = [this, engines, transports](std::string_view section, std::string& out) {
            if (section == "server")
                fmt::format_to(std::back_inserter(out), "crescent_engine:{}\r\ncrescent_engines:{}\r\n"
                               "crescent_transports:{}\r\ncrescent_mode:{}\r\n", e_.index(), engines, transports,
                               o_.rt.engine.mode == DispatchMode::Batch ? "batch" : "inline");
            else if (section == "clients")
                fmt::format_to(std::back_inserter(out), "crescent_clients_crescent:{}\r\ncrescent_clients_kernel:{}\r\n"
                               "paused_clients:{}\r\n", by_transport_[0], by_transport_[1], paused_);
            else if (section == "memory") {
                const zbuf::Arena* a = zbuf::Arena::current();
                fmt::format_to(std::back_inserter(out), "zbuf_arena_bytes:{}\r\nzbuf_live_objs:{}\r\n",
                               a ? a->stats().bytes : 0, a ? a->live() : 0);
            }
        };
        schedule_expiry(std::chrono::milliseconds(1000 / o.hz));
    }
    ~Shard() override { sessions_.clear(); }

    bool listen(std::string* err) {
        rpc::StreamOptions so;
        so.conn = o_.rt.engine.conn;
        crescent_ = rpc::listen(e_, rpc::Transport::Crescent, o_.port, *this, so, err);
        if (!crescent_) return false;
        if (o_.kernel_port) {
            so.kernel_reuse_port = o_.shard;
            Ipv4 bind;
            if (!o_.kernel_bind.empty()) Ipv4::parse(o_.kernel_bind, &bind);
            kernel_ = rpc::listen(e_, rpc::Transport::Kernel, o_.kernel_port, *this, so, err, bind);
            if (!kernel_) return false;
        }
        return true;
    }

    void print_stats(FILE* f) const {
        const ServerStats& s = stats_;
        const StoreStats& ss = store_.stats();
        std::fprintf(f,
                     "engine %u kv: keys=%zu expires=%zu value_bytes=%llu connections=%llu commands=%llu errors=%llu "
                     "unknown=%llu arity=%llu protocol_errors=%llu refused=%llu reply_oom=%llu hits=%llu misses=%llu "
                     "in=%llu out=%llu expired(lazy/active/now)=%llu/%llu/%llu values(zero_copy/copied_small/copied_rx/"
                     "copy_failed)=%llu/%llu/%llu/%llu rx_pinned=%llu pauses=%llu\n",
                     e_.index(), store_.size(), store_.expires(), (unsigned long long)store_.value_bytes(),
                     (unsigned long long)s.connections_received, (unsigned long long)s.commands,
                     (unsigned long long)s.error_replies, (unsigned long long)s.unknown_commands,
                     (unsigned long long)s.arity_errors, (unsigned long long)s.protocol_errors,
                     (unsigned long long)s.rejected_connections, (unsigned long long)s.reply_oom,
                     (unsigned long long)s.keyspace_hits, (unsigned long long)s.keyspace_misses,
                     (unsigned long long)s.net_input_bytes, (unsigned long long)s.net_output_bytes,
                     (unsigned long long)ss.expired_lazy, (unsigned long long)ss.expired_active,
                     (unsigned long long)ss.expired_now, (unsigned long long)ss.zero_copy,
                     (unsigned long long)ss.copied_small, (unsigned long long)ss.copied_rx,
                     (unsigned long long)ss.copy_failed, (unsigned long long)store_.rx_pinned(),
                     (unsigned long long)pauses_);
    }

private:
    // One connection.
    struct Session {
        explicit Session(const ParserLimits& lim) : parser(lim) {}
        Parser parser;
        Client client;
        std::vector<Slice> out; // replies of the batch being processed
        bool closing = false;   // close() called: nothing more is parsed
        bool paused = false;
    };

    int64_t now_us() const { return wall_offset_us_ + e_.now().nanos() / 1000; }

    void on_open(rpc::Stream& s) override {
        ++stats_.connections_received;
        if (stats_.connected_clients >= o_.maxclients) {
            ++stats_.rejected_connections;
            s.send_copy(std::string_view("-ERR max number of clients reached\r\n"));
            s.close();
            return;
        }
        auto sess = std::make_unique<Session>(o_.limits);
        sess->client.id = g_next_client_id.fetch_add(1, std::memory_order_relaxed);
        s.set_user(sess.get());
        sessions_[s.id()] = std::move(sess);
        ++stats_.connected_clients;
        ++by_transport_[s.transport() == rpc::Transport::Kernel];
    }

    void on_data(rpc::Stream& s, std::span<Slice> data) override {
        auto* ss = static_cast<Session*>(s.user());
        if (!ss) {
            for (Slice& d : data) d.reset();
            return;
        }
        ++stats_.reads;
        for (const Slice& d : data) stats_.net_input_bytes += d.size();
        if (ss->closing) {
            for (Slice& d : data) d.reset();
            return;
        }
        ss->parser.feed(data);
        process(s, *ss);
    }

    // Run every complete request, send the replies in one go, apply backpressure.
    void process(rpc::Stream& s, Session& ss) {
        Reply r(ss.out, replies_);
        const int64_t now = now_us();
        bool close = false;
        for (;;) {
            Parser::Status st = ss.parser.next();
            if (st == Parser::Status::NeedMore) break;
            if (st == Parser::Status::Error) {
                ++stats_.protocol_errors;
                r.raw(ss.parser.error_reply());
                close = true;
                break;
            }
            x_.execute(ss.parser.request(), ss.client, r, now);
            if (r.failed()) {
                ++stats_.reply_oom; // no arena obj for the reply text: the reply is cut, so is the connection
                ss.out.clear();
                ss.closing = true;
                s.abort();
                return;
            }
            if (ss.client.close_now || ss.client.close_after_reply) {
                close = true;
                break;
            }
        }
        if (!ss.out.empty()) {
            size_t n = 0;
            for (const Slice& o : ss.out) n += o.size();
            stats_.net_output_bytes += n;
            ++stats_.writes;
            s.send(ss.out);
            ss.out.clear();
            s.send_now();  // every complete request of the delivery is answered: the replies go now
        }
        if (close) {
            ss.closing = true;
            ss.parser.reset();
            s.close(); // the replies drain, then FIN
            return;
        }
        if (!ss.paused && s.backlog_bytes() > kBacklogPause) {
            ss.paused = true;
            ++paused_;
            ++pauses_;
            s.pause_reading(true);
        }
    }

    void on_drained(rpc::Stream& s) override {
        auto* ss = static_cast<Session*>(s.user());
        if (!ss || !ss->paused) return;
        ss->paused = false;
        --paused_;
        s.pause_reading(false);
    }

    void on_peer_closed(rpc::Stream& s) override {
        // Redis answers what it read before the EOF, then closes: so do we.
        auto* ss = static_cast<Session*>(s.user());
        if (ss && !ss->closing) {
            ss->closing = true;
            s.close();
        } else if (!ss) {
            s.close();
        }
    }

    void on_closed(rpc::Stream& s, std::string_view) override {
        auto* ss = static_cast<Session*>(s.user());
        s.set_user(nullptr);
        if (!ss) return;
        if (ss->paused) --paused_;
        --stats_.connected_clients;
        --by_transport_[s.transport() == rpc::Transport::Kernel];
        sessions_.erase(s.id());
    }

    void schedule_expiry(Duration after) {
        e_.add_timer(after, [this] {
            size_t n = store_.expire_step(now_us() / 1000, kExpireStepKeys);
            // Still finding a full step's worth: come back soon, else at the regular pace.
            schedule_expiry(n == kExpireStepKeys ? Duration(std::chrono::milliseconds(1))
                                                 : Duration(std::chrono::milliseconds(1000 / o_.hz)));
        });
    }

    Engine& e_;
    const Options& o_;
    Carver values_{16384};  // INCR results and copied small values
    Carver replies_{16384}; // reply text of every connection of this engine (see commands.hpp)
    ServerInfo info_;
    ServerStats stats_;
    Store store_;
    Executor x_;
    int64_t wall_offset_us_ = 0;
    std::unordered_map<uint64_t, std::unique_ptr<Session>> sessions_; // by stream id
    uint64_t by_transport_[2] = {0, 0};
    uint64_t paused_ = 0, pauses_ = 0;
    std::unique_ptr<rpc::Acceptor> crescent_, kernel_;
};

} // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    auto rt = examples::start_or_exit("crescent-kv", o.rt, o.show_plan);
    const unsigned n = rt->engine_count();
    std::string transports = fmt::format("crescent:{}", o.port);
    if (o.kernel_port) transports += fmt::format(",kernel:{}", o.kernel_port);

    std::vector<std::unique_ptr<Shard>> shards(n);
    std::vector<std::string> errors(n);
    rt->run([&](Engine& e) {
        const unsigned i = e.index();
        shards[i] = std::make_unique<Shard>(e, o, n, transports);
        std::string err;
        if (!shards[i]->listen(&err)) {
            errors[i] = err;
            rt->stop();
            return;
        }
        std::fprintf(stderr, "crescent-kv: engine %u serving %s:%u%s (%s mode%s)\n", i,
                     rt->local_ip().to_string().c_str(), o.port,
                     o.kernel_port ? fmt::format(" and kernel port {}", o.kernel_port).c_str() : "",
                     o.rt.engine.mode == DispatchMode::Batch ? "batch" : "inline",
                     n > 1 ? ", its own keyspace (--shard)" : "");
    });
    int rc = 0;
    for (unsigned i = 0; i < n; ++i)
        if (!errors[i].empty()) {
            std::fprintf(stderr, "crescent-kv: engine %u: %s\n", i, errors[i].c_str());
            rc = 1;
        }
    if (o.stats)
        for (unsigned i = 0; i < n; ++i) {
            if (shards[i]) shards[i]->print_stats(stderr);
            examples::print_engine_stats(rt->engine(i));
        }
    // Values, blocks and sessions go before the runtime (and its arena), each
    // engine's freed on that engine's zbuf core (its thread has returned), so
    // the objs go straight back to their zones rather than to return rings
    // nobody drains any more.
    for (unsigned i = 0; i < n; ++i) {
        zbuf::CoreScope core(rt->engine(i).core());
        shards[i].reset();
    }
    return rc;
}
