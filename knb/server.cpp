// knb server — answers knb clients until SIGINT/SIGTERM, on either stack,
// with either protocol (proto.hpp), one service per thread (engine).
//
// rpc: an rpc::Server per engine with knb.echo / knb.info / knb.stats.
// echo: every received byte goes straight back on the same stream (the
// received slices themselves, zero-copy; copied in --mode copy and on
// kernel sockets).
//
// Ready line (the sweep waits for it): "knb server: ready: ..." on stderr
// once every engine listens. Each engine publishes its retransmissions and
// drops every 100 ms for knb.stats, which any engine answers.
#include "knb/server.hpp"

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <crescent/rpc/server.hpp>
#include <crescent/zbuf.hpp>

#include "knb/proto.hpp"
#include "knb/setup.hpp"

namespace knb {

using namespace crescent;
using namespace std::chrono_literals;

namespace {

constexpr size_t kChunk = 16384;  // pre-filled response buffers: arena objs of this size

struct Shared {
    const Options* o = nullptr;
    std::vector<Published> pub;   // per engine
    std::string info;             // knb.info metadata
    explicit Shared(size_t n) : pub(n) {}
};

// The RFC 862 service: bytes back as they came. Counts how its streams
// ended, by the transport's reason ("normal", "reset-by-peer",
// "keepalive-timeout", ...), for the --stats line.
class EchoHandler final : public rpc::StreamHandler {
public:
    uint64_t bytes = 0;
    std::map<std::string, uint64_t> closed;  // reason -> streams that ended so
    void on_data(rpc::Stream& s, std::span<Slice> data) override {
        for (const Slice& d : data) bytes += d.size();
        s.send(data);
        s.send_now();  // the echo is the delivery's last output (Stream::send_now)
    }
    void on_peer_closed(rpc::Stream& s) override { s.close(); }
    void on_closed(rpc::Stream&, std::string_view why) override { ++closed[std::string(why)]; }
};

// One engine's service. Engine-thread only.
struct Service {
    Engine* e = nullptr;
    Shared* sh = nullptr;
    std::unique_ptr<rpc::Server> srv;          // --proto rpc
    EchoHandler echo;                          // --proto echo
    std::unique_ptr<rpc::Acceptor> acceptor;
    std::vector<Slice> prefilled;              // pattern() at every offset, lazily grown
    std::vector<Slice> scratch;
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

    void on_echo(rpc::Call& c) {
        std::span<const std::byte> m = c.meta();
        if (m.size() != 4) {
            c.fail(rpc::Status::BadRequest, "knb.echo: the metadata must be 4 bytes (the response size, u32 LE)");
            return;
        }
        const uint64_t resp = uint64_t(m[0]) | uint64_t(m[1]) << 8 | uint64_t(m[2]) << 16 | uint64_t(m[3]) << 24;
        if (resp > kMaxMessage) {
            c.fail(rpc::Status::BadRequest, "knb.echo: response size above 1 MiB");
            return;
        }
        if (resp == c.data_bytes()) {  // zero-copy: the request's own slices go back
            c.reply({}, c.data());
            return;
        }
        if (!ensure_prefilled(resp)) {
            ++prefill_failed;
            c.fail(rpc::Status::Internal, "knb.echo: no memory for the response buffer");
            return;
        }
        scratch.clear();
        for (uint64_t off = 0; off < resp; off += kChunk)
            scratch.push_back(prefilled[off / kChunk].sub(0, size_t(std::min<uint64_t>(kChunk, resp - off))));
        c.reply({}, scratch);
        scratch.clear();
    }

    void on_stats(rpc::Call& c) {
        publish();  // this engine's own counters are exact
        uint64_t retrans = 0, timeouts = 0, drops = 0, requests = 0, busy = 0;
        PhaseSums phases;
        for (const Published& p : sh->pub) {
            retrans += p.retrans.load(std::memory_order_relaxed);
            timeouts += p.timeouts.load(std::memory_order_relaxed);
            drops += p.drops.load(std::memory_order_relaxed);
            requests += p.requests.load(std::memory_order_relaxed);
            busy += p.busy_ns.load(std::memory_order_relaxed);
            phases += p.phases();
        }
        std::string m = "cpu_ns=" + std::to_string(process_cpu_ns()) + ";retrans=" + std::to_string(retrans) +
                        ";drops=" + std::to_string(drops) + ";requests=" + std::to_string(requests);
        if (sh->o->stack == Stack::Crescent)
            m += ";timeouts=" + std::to_string(timeouts) + ";busy_ns=" + std::to_string(busy) + ";" + phases.to_kv();
        c.reply(std::as_bytes(std::span(m.data(), m.size())));
    }

    // Copies this engine's counters where knb.stats (any engine) reads them.
    void publish() {
        uint64_t retrans = 0, timeouts = 0;  // of the open connections (a closed one's counters go with it)
        if (srv) {
            for (const ConnStats& c : srv->connection_stats()) {
                retrans += c.retransmissions();
                timeouts += c.retrans_timeout;
            }
        }
        Published& p = sh->pub[e->index()];
        p.retrans.store(retrans, std::memory_order_relaxed);
        p.timeouts.store(timeouts, std::memory_order_relaxed);
        if (sh->o->stack == Stack::Crescent) {
            const EngineStats st = e->stats();
            p.drops.store(engine_drops(st), std::memory_order_relaxed);
            p.busy_ns.store(st.busy_ns, std::memory_order_relaxed);
            p.store_phases(PhaseSums::of(st));
        }
        if (srv) p.requests.store(srv->stats().requests, std::memory_order_relaxed);  // knb.stats: rpc only
    }

    void tick() {
        publish();
        e->add_timer(100ms, [this] { tick(); });
    }

    bool start(Engine& eng, Shared& shared, std::string* err) {
        e = &eng;
        sh = &shared;
        const Options& o = *sh->o;
        const rpc::Transport t = transport_of(o.stack);
        if (o.proto == Proto::Rpc) {
            rpc::ServerOptions so;
            so.limits.max_data = uint32_t(kMaxMessage);
            so.stream = stream_options(o);
            srv = std::make_unique<rpc::Server>(eng, so);
            srv->register_method(kMethodEcho, "knb.echo", [this](rpc::Call& c) { on_echo(c); });
            srv->register_method(kMethodInfo, "knb.info", [this](rpc::Call& c) {
                c.reply(std::as_bytes(std::span(sh->info.data(), sh->info.size())));
            });
            srv->register_method(kMethodStats, "knb.stats", [this](rpc::Call& c) { on_stats(c); });
            if (!srv->listen(t, o.port, err)) return false;
        } else {
            acceptor = rpc::listen(eng, t, o.port, echo, stream_options(o), err);
            if (!acceptor) return false;
        }
        tick();
        return true;
    }
};

}  // namespace

int run_server(const Options& o) {
    std::string err;
    auto rt = start_runtime(o, &err);
    if (!rt) {
        std::fprintf(stderr, "knb server: %s\n", err.c_str());
        return 1;
    }
    const unsigned n = rt->engine_count();
    Shared sh(n);
    sh.o = &o;
    sh.info = "knb=" + std::to_string(kVersion) + ";stack=" + std::string(name(o.stack)) +
              ";mode=" + std::string(name(o.mode)) + ";threads=" + std::to_string(n) +
              ";wait=" + std::string(name(o.kernel_wait)) + ";proto=" + std::string(name(o.proto));
    std::vector<std::unique_ptr<Service>> svcs(n);
    std::atomic<unsigned> ready{0};
    std::atomic<bool> failed{false};
    std::string fail_msg;
    Runtime* rtp = rt.get();
    rt->run([&](Engine& e) {
        auto svc = std::make_unique<Service>();
        std::string why;
        const bool ok = svc->start(e, sh, &why);
        svcs[e.index()] = std::move(svc);
        if (!ok) {
            if (!failed.exchange(true)) fail_msg = "thread " + std::to_string(e.index()) + ": " + why;
            rtp->stop();
            return;
        }
        if (++ready == n)
            std::fprintf(stderr, "knb server: ready: %s over %s on %s port %u, %u thread%s, %s\n",
                         std::string(name(o.proto)).c_str(), std::string(name(o.stack)).c_str(),
                         o.stack == Stack::Kernel ? "any address" : rtp->local_ip().to_string().c_str(), o.port, n,
                         n > 1 ? "s" : "",
                         o.stack == Stack::Kernel ? ("kernel-wait " + std::string(name(o.kernel_wait))).c_str()
                                                  : ("mode " + std::string(name(o.mode))).c_str());
    });
    if (o.stats) {
        for (unsigned i = 0; i < n; ++i) {
            Engine& e = rt->engine(i);
            std::fprintf(stderr, "engine %u:", i);
            e.stats().for_each([](std::string_view k, uint64_t v) {
                if (v) std::fprintf(stderr, " %.*s=%" PRIu64, int(k.size()), k.data(), v);
            });
            std::fprintf(stderr, "\n");
            if (svcs[i] && svcs[i]->srv) {
                const rpc::ServerStats& s = svcs[i]->srv->stats();
                std::fprintf(stderr,
                             "server %u: accepted=%" PRIu64 " requests=%" PRIu64 " replies=%" PRIu64
                             " errors_sent=%" PRIu64 " bytes_in=%" PRIu64 " bytes_out=%" PRIu64 "\n",
                             i, s.connections_accepted, s.requests, s.replies, s.errors_sent, s.bytes_in, s.bytes_out);
            } else if (svcs[i] && svcs[i]->acceptor) {
                // closed_<reason>=N: how the streams ended (those open at shutdown included).
                std::string closed;
                for (const auto& [why, count] : svcs[i]->echo.closed)
                    closed += " closed_" + why + "=" + std::to_string(count);
                std::fprintf(stderr, "server %u: accepted=%" PRIu64 " echoed_bytes=%" PRIu64 "%s\n", i,
                             svcs[i]->acceptor->accepted(), svcs[i]->echo.bytes, closed.c_str());
            }
        }
    }
    for (unsigned i = 0; i < n; ++i) {
        zbuf::CoreScope core(rt->engine(i).core());
        svcs[i].reset();
    }
    if (failed) {
        std::fprintf(stderr, "knb server: cannot listen: %s\n", fail_msg.c_str());
        return 1;
    }
    return 0;
}

}  // namespace knb
