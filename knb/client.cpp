// knb client — the load generator (see client.hpp).
//
// Every engine (--threads) runs one Loader: its own connections to the server
// (rpc: an rpc::Channel meshing with every server thread, --conns per pair;
// echo: --conns x server-threads rpc::Streams), and either a closed loop
// (--iodepth requests in flight per connection, a new one as each response
// arrives) or an open loop (--rate: requests leave at their intended times
// whatever the responses do, and latency counts from the intended time, so a
// slow server cannot hide its queueing: no coordinated omission).
//
// The run: (rpc) engine 0 asks knb.info — the protocol version and the
// server's threads — while the others wait; every engine connects; when the
// last one is up, one shared start time begins the warm-up, then the measured
// window, the same for all engines. Every response is verified (size, and the
// request number at both ends: echoed, or the server's pattern). Any error
// stops every engine; what was measured so far is still reported. (rpc)
// engine 0 asks knb.stats at both ends of the window for the server's CPU
// time, retransmissions and drops.
#include "knb/client.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <crescent/rpc/channel.hpp>
#include <crescent/rpc/histogram.hpp>
#include <crescent/zbuf.hpp>

#include "knb/proto.hpp"
#include "knb/setup.hpp"

namespace knb {

using namespace crescent;
using namespace std::chrono_literals;

namespace {

constexpr size_t kChunk = 16384;          // request buffers: arena objs of this size
constexpr Duration kConnectWait = 5s;     // every connection up within this, or the run fails
constexpr Duration kCallDeadline = 5s;    // a response slower than this is an error, not a sample
constexpr Duration kTick = 5ms;           // phase changes, end of run, progress
constexpr Duration kPace = 20us;          // open loop: how often due requests are sent
constexpr Duration kFinalWait = 3s;       // for the closing knb.stats answer (a loaded server: >1 s in CI once)

int64_t wall_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// The byte a request / response must hold at `p`, or -1 where nothing is
// checked. Requests carry the call number in [0, 8) and (xor 0x5a) in the
// last 8 bytes past those; pre-filled responses carry pattern(). With
// --verify full every byte between is set and checked too (a function of the
// call number and the offset).
int expected(bool echoed, uint64_t n, uint64_t size, uint64_t p, bool full) {
    if (p < 8) return echoed ? uint8_t(n >> (8 * p)) : pattern(p);
    const uint64_t back = size - 1 - p;
    if (back < 8) return echoed ? uint8_t(uint8_t(n >> (8 * back)) ^ 0x5a) : pattern(p);
    if (!full) return -1;
    return echoed ? uint8_t(n * 131 + p * 7) : pattern(p);
}

// Checks bytes [off, off + s.size()) of a message against expected().
bool check_piece(bool echoed, uint64_t n, uint64_t size, uint64_t off, const Slice& s, bool full) {
    if (echoed && !full && size >= 16 && off == 0 && s.size() == size)  // the whole message in one slice
        return ends_match(s.data(), s.data() + size - 8, n);
    auto range = [&](uint64_t from, uint64_t to) {
        const uint64_t a = std::max(from, off), b = std::min(to, off + s.size());
        for (uint64_t p = a; p < b; ++p)
            if (std::to_integer<uint8_t>(s.data()[p - off]) != expected(echoed, n, size, p, full)) return false;
        return true;
    };
    if (full) return range(0, size);
    return range(0, std::min<uint64_t>(8, size)) && range(std::max<uint64_t>(8, size >= 8 ? size - 8 : 0), size);
}

// Fills `req` with a `size`-byte request numbered `n`. false: the arena is empty.
bool build_request(uint64_t n, uint64_t size, std::vector<Slice>& req, bool full) {
    req.clear();
    for (uint64_t off = 0; off < size; off += kChunk) {
        Slice s = zbuf::Arena::current()->alloc_slice(size_t(std::min<uint64_t>(kChunk, size - off)));
        if (!s) return false;
        req.push_back(std::move(s));
    }
    if (!full && size >= 16 && (size - 8) / kChunk == (size - 1) / kChunk) {  // each end within one chunk
        stamp_ends(req.front().data(), req.back().data() + (size - 8) % kChunk, n);
        return true;
    }
    auto put = [&](uint64_t p) {
        req[p / kChunk].data()[p % kChunk] = std::byte(uint8_t(expected(true, n, size, p, full)));
    };
    if (full) {
        for (uint64_t p = 0; p < size; ++p) put(p);
        return true;
    }
    for (uint64_t p = 0; p < std::min<uint64_t>(8, size); ++p) put(p);
    for (uint64_t p = std::max<uint64_t>(8, size >= 8 ? size - 8 : 0); p < size; ++p) put(p);
    return true;
}

struct Shared {
    const Options* o = nullptr;
    Runtime* rt = nullptr;
    unsigned engines = 1;
    std::atomic<bool> abort{false};
    std::atomic<int64_t> abort_at{0};          // engine Instant ns of the first failure
    std::atomic<int> info_state{0};            // 0 asking, 1 known, -1 failed
    ServerInfo info;                           // written by engine 0 before info_state = 1
    unsigned server_threads = 1;               // idem
    std::atomic<unsigned> ready{0};            // engines with every connection up
    std::atomic<int64_t> start{0};             // engine Instant ns the warm-up began (0: not yet)
    std::atomic<int64_t> start_wall{0};        // the same on the steady clock (progress display)
    std::atomic<unsigned> done{0};
    std::mutex mu;
    std::string first_error;

    void fail(std::string why, Instant now) {
        std::lock_guard<std::mutex> g(mu);
        if (first_error.empty()) {
            first_error = std::move(why);
            abort_at.store(now.nanos(), std::memory_order_relaxed);
        }
        abort.store(true, std::memory_order_relaxed);
    }
    bool aborted() const { return abort.load(std::memory_order_relaxed); }
};

// What a loader shows the progress thread.
struct Live {
    std::atomic<uint64_t> completed{0};
    std::atomic<uint64_t> measured{0};
    std::atomic<uint64_t> p99_ns{0};
};

// One line per connection for a failed run: where a stalled connection stood.
std::string describe(unsigned i, const ConnStats& c) {
    char b[320];
    std::snprintf(b, sizeof b,
                  "conn %u: %.*s bytes in %" PRIu64 " out %" PRIu64 " in flight %u cwnd %u ssthresh %u srtt %lld us "
                  "rto %lld us backoff %u retrans %" PRIu64 " (rto %" PRIu64 ") zero-window %" PRIu64,
                  i, int(c.state.size()), c.state.data(), c.bytes_in, c.bytes_out, c.bytes_in_flight, c.cwnd,
                  c.ssthresh, (long long)std::chrono::duration_cast<std::chrono::microseconds>(c.srtt).count(),
                  (long long)std::chrono::duration_cast<std::chrono::microseconds>(c.rto).count(), c.backoff,
                  c.retransmissions(), c.retrans_timeout, c.zero_window_events);
    return b;
}

class Loader {
public:
    virtual ~Loader() = default;

    void start(Engine& eng, Shared& shared, Live& live) {
        e = &eng;
        sh = &shared;
        o = shared.o;
        lv = &live;
        created = e->now();
        echoed = o->resp_size == o->msg_size;
        if (o->rate > 0) gap = Duration(int64_t(1e9 * sh->engines / o->rate));
        phase = begin();
        tick();
    }

    // Results, read by the main thread after run() returned.
    rpc::Histogram hist;                  // ns, responses inside the window
    uint64_t measured = 0, completed = 0, verified = 0, errors = 0;
    uint64_t retrans = 0;
    uint64_t timeouts = 0;                // of those, after an RTO (crescent)
    std::string channel_stats;            // rpc: the channel's counters at the end (--stats)
    std::vector<std::string> conn_lines;  // each connection's TCP state at the end (--stats, failures)
    bool finished = false;
    // Engine 0 (rpc): knb.stats at both ends of the window, and the client's CPU.
    bool have_stats = false;
    std::string stats0, stats1;
    uint64_t cpu0 = 0, cpu1 = 0;
    uint64_t busy0 = 0, busy1 = 0;        // this engine's EngineStats::busy_ns at both ends of the window
    PhaseSums phases0, phases1;           // and its sampled phase times

protected:
    enum class Phase : uint8_t { Info, Connecting, Waiting, Running, Final, Done };

    Engine* e = nullptr;
    Shared* sh = nullptr;
    const Options* o = nullptr;
    Live* lv = nullptr;
    Phase phase = Phase::Connecting;
    Instant created, warm_end, end, next_send, final_since;
    Duration gap{0};                      // open loop: between this engine's requests
    uint64_t next_call = 0;
    bool echoed = true;
    bool window_stats_sent = false;
    Instant last_p99;

    // Hooks per protocol.
    virtual Phase begin() = 0;                          // first phase (Info or Connecting)
    virtual void info_tick() {}                         // Info phase, engine 0
    virtual void open() = 0;                            // make the connections
    virtual size_t up() const = 0;
    virtual size_t total() const = 0;
    virtual std::string why_down() const = 0;
    virtual void issue_window() = 0;                    // closed loop: the first requests
    virtual void send_one(uint64_t n, Instant intended, void* where) = 0;
    virtual void ask_stats(bool final) { (void)final; }
    virtual bool final_answered() const { return true; }
    virtual void shut() = 0;                            // count retransmissions, close

    void fail(std::string why) {
        ++errors;
        sh->fail(std::move(why), e->now());
    }

    // A verified response to request `n`, sent at (or due at) `intended`,
    // that arrived at `now`.
    void completed_one(Instant intended, void* where, Instant now) {
        ++completed;
        ++verified;
        if (now >= warm_end && now < end) {
            ++measured;
            hist.record(uint64_t(std::max<int64_t>(0, (now - intended).count())));
        }
        if (o->rate == 0 && phase == Phase::Running && now < end && !sh->aborted())
            send_one(next_call++, now, where);
    }

    bool running() const { return phase == Phase::Running; }

    void pace() {
        if (phase != Phase::Running) return;
        const Instant now = e->now();
        while (next_send <= now && next_send < end && phase == Phase::Running && !sh->aborted()) {
            send_one(next_call++, next_send, nullptr);
            next_send += gap;
        }
        if (next_send < end) e->add_timer(kPace, [this] { pace(); });
    }

    void publish(Instant now) {
        lv->completed.store(completed, std::memory_order_relaxed);
        lv->measured.store(measured, std::memory_order_relaxed);
        if (now - last_p99 > 200ms) {
            last_p99 = now;
            lv->p99_ns.store(hist.percentile(99), std::memory_order_relaxed);
        }
    }

    void tick() {
        const Instant now = e->now();
        publish(now);
        if (sh->aborted() && phase != Phase::Final && phase != Phase::Done) {
            phase = Phase::Final;  // an error anywhere: close without waiting for knb.stats
            final_since = Instant::zero();
        }
        switch (phase) {
        case Phase::Info:
            info_tick();
            if (sh->info_state.load(std::memory_order_acquire) == 1) {
                phase = Phase::Connecting;
                created = now;
                open();
            } else if (sh->info_state.load(std::memory_order_acquire) < 0) {
                phase = Phase::Final;
            }
            break;
        case Phase::Connecting:
            if (up() == total()) {
                phase = Phase::Waiting;
                if (sh->ready.fetch_add(1) + 1 == sh->engines) {
                    sh->start_wall.store(wall_ns(), std::memory_order_relaxed);
                    sh->start.store(now.nanos(), std::memory_order_release);
                }
            } else if (now - created > kConnectWait) {
                const std::string why = why_down();
                fail(std::to_string(up()) + " of " + std::to_string(total()) + " connections to " + o->server + ":" +
                     std::to_string(o->port) + " over " + std::string(name(o->stack)) + " up after 5 s" +
                     (why.empty() ? std::string() : ": " + why));
                phase = Phase::Final;
            }
            break;
        case Phase::Waiting:
            if (int64_t s = sh->start.load(std::memory_order_acquire); s != 0) {
                const Instant t0 = Instant::from_nanos(s);
                warm_end = t0 + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o->warmup));
                end = warm_end + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o->duration));
                phase = Phase::Running;
                if (o->rate > 0) {
                    next_send = now;
                    pace();
                } else {
                    issue_window();
                }
            } else if (now - created > kConnectWait + 5s) {
                fail("the other client threads did not connect");
                phase = Phase::Final;
            }
            break;
        case Phase::Running:
            if (now >= warm_end && !window_stats_sent) {
                window_stats_sent = true;
                cpu0 = process_cpu_ns();
                const EngineStats st = e->stats();
                busy0 = st.busy_ns;
                phases0 = PhaseSums::of(st);
                ask_stats(false);
            }
            if (now >= end) {
                phase = Phase::Final;
                final_since = now;
                cpu1 = process_cpu_ns();
                const EngineStats st = e->stats();
                busy1 = st.busy_ns;
                phases1 = PhaseSums::of(st);
                ask_stats(true);
            }
            break;
        case Phase::Final:
            if (final_since != Instant::zero() && !final_answered() && now - final_since < kFinalWait) break;
            phase = Phase::Done;
            shut();
            e->add_timer(20ms, [this] {
                finished = true;
                if (sh->done.fetch_add(1) + 1 == sh->engines) sh->rt->stop();
            });
            return;
        case Phase::Done:
            return;
        }
        e->add_timer(kTick, [this] { tick(); });
    }
};

// ---- --proto rpc ---------------------------------------------------------------------

class RpcLoader final : public Loader {
    std::unique_ptr<rpc::Channel> probe, ch;
    std::array<std::byte, 4> meta{};
    std::vector<Slice> req;
    bool probe_sent = false;
    bool info_done = false;
    int stats_pending = 0;

    Phase begin() override {
        const uint32_t r = uint32_t(o->resp_size);
        meta = {std::byte(r), std::byte(r >> 8), std::byte(r >> 16), std::byte(r >> 24)};
        return Phase::Info;
    }

    rpc::ChannelOptions channel_options(unsigned server_engines, unsigned conns, uint32_t depth) const {
        rpc::ChannelOptions co;
        Ipv4 ip;
        Ipv4::parse(o->server, &ip);
        co.server = {ip, o->port};
        co.transport = transport_of(o->stack);
        co.server_engines = server_engines;
        co.conns_per_engine = conns;
        co.depth = depth;
        co.deadline = kCallDeadline;
        co.limits.max_data = uint32_t(kMaxMessage);
        co.stream = stream_options(*o);
        // Open loop: requests beyond the window wait in the channel (a second's worth at most).
        if (o->rate > 0) co.queue_max = uint32_t(std::clamp(o->rate / sh->engines, 4096.0, 1e6));
        return co;
    }

    void info_tick() override {
        if (e->index() != 0) return;
        if (probe && !info_done && probe->stats().protocol_errors > 0) {  // no need to wait for the deadline
            info_done = true;
            fail(o->server + ":" + std::to_string(o->port) + " accepted the connection but does not speak knb's RPC "
                 "(is it a --proto echo or another server?)" +
                 (probe->last_error().empty() ? std::string() : ": " + probe->last_error()));
            sh->info_state.store(-1, std::memory_order_release);
            return;
        }
        if (probe_sent) return;
        probe_sent = true;
        probe = std::make_unique<rpc::Channel>(*e, channel_options(1, 1, 1));
        probe->call(kMethodInfo, {}, {}, [this](rpc::Reply& r) { on_info(r); }, kConnectWait);
    }

    void on_info(rpc::Reply& r) {
        if (info_done) return;
        info_done = true;
        const std::string where = o->server + ":" + std::to_string(o->port);
        std::string bad;
        if (r.status == rpc::Status::UnknownMethod) {
            bad = where + " answers crescent RPC but is not a knb server (it does not know knb.info)";
        } else if (probe->stats().protocol_errors > 0 || (r.status == rpc::Status::DeadlineExceeded && probe->stats().connects > 0)) {
            bad = where + " accepted the connection but does not speak knb's RPC (is it a --proto echo or another "
                  "server?): " + (probe->last_error().empty() ? std::string(r.error) : probe->last_error());
        } else if (r.status == rpc::Status::Unavailable || r.status == rpc::Status::DeadlineExceeded) {
            const std::string& le = probe->last_error();
            bad = "cannot reach the knb server at " + where + " over " + std::string(name(o->stack)) + ": " +
                  (le.empty() ? std::string(r.error) : le);
        } else if (r.status != rpc::Status::Ok) {
            bad = where + " does not speak knb's RPC (is it a --proto echo server?): " +
                  std::string(rpc::status_name(r.status)) + (r.error.empty() ? "" : ": " + std::string(r.error));
        } else {
            std::string_view m(reinterpret_cast<const char*>(r.meta.data()), r.meta.size());
            ServerInfo& in = sh->info;
            uint64_t v = 0, threads = 0;
            if (!kv_u64(m, "knb", &v) || !kv_u64(m, "threads", &threads) || threads == 0) {
                bad = where + " sent a knb.info this client cannot read: '" + std::string(m) + "'";
            } else if (v != kVersion) {
                bad = "protocol version mismatch: the server at " + where + " speaks knb protocol " +
                      std::to_string(v) + ", this client " + std::to_string(kVersion);
            } else {
                in.known = true;
                in.version = v;
                in.stack = std::string(kv_get(m, "stack"));
                in.mode = std::string(kv_get(m, "mode"));
                in.wait = std::string(kv_get(m, "wait"));
                in.threads = unsigned(threads);
                sh->server_threads = o->server_threads ? o->server_threads : unsigned(threads);
            }
        }
        // Not from inside the probe's own continuation.
        e->add_timer(Duration(0), [this] { probe.reset(); });
        if (!bad.empty()) {
            fail(bad);
            sh->info_state.store(-1, std::memory_order_release);
            return;
        }
        sh->info_state.store(1, std::memory_order_release);
    }

    void open() override { ch = std::make_unique<rpc::Channel>(*e, channel_options(sh->server_threads, o->conns, o->iodepth)); }
    size_t up() const override { return ch ? ch->connected() : 0; }
    size_t total() const override { return ch ? ch->connections() : 1; }
    std::string why_down() const override { return ch ? ch->last_error() : std::string(); }

    void issue_window() override {
        const uint64_t window = uint64_t(o->iodepth) * ch->connections();
        for (uint64_t i = 0; i < window && running(); ++i) send_one(next_call++, e->now(), nullptr);
    }

    void send_one(uint64_t n, Instant intended, void*) override {
        if (!build_request(n, o->msg_size, req, o->verify_full)) {
            fail("the client's zbuf arena is empty (request " + std::to_string(n) + "); try --arena-mb");
            return;
        }
        rpc::Status st = ch->call(kMethodEcho, meta, req, [this, n, intended](rpc::Reply& r) { on_reply(n, intended, r); });
        req.clear();
        if (st == rpc::Status::QueueFull)
            fail("the server does not keep up with --rate: " + std::to_string(ch->queued()) + " requests queued");
        else if (st != rpc::Status::Ok)
            fail("request refused: " + std::string(rpc::status_name(st)));
    }

    void on_reply(uint64_t n, Instant intended, rpc::Reply& r) {
        if (phase != Phase::Running && phase != Phase::Final) return;
        if (phase == Phase::Final && r.status == rpc::Status::Cancelled) return;  // end-of-run cancellations
        if (r.status != rpc::Status::Ok) {
            if (sh->aborted()) return;  // the consequences of an earlier error
            std::string what = std::string(rpc::status_name(r.status)) + (r.error.empty() ? "" : ": " + std::string(r.error));
            if (r.status == rpc::Status::ConnectionLost)
                fail("the server went away mid-run (request " + std::to_string(n) + "): " + what);
            else
                fail("request " + std::to_string(n) + " failed: " + what);
            return;
        }
        uint64_t got = 0;
        for (const Slice& s : r.data) got += s.size();
        if (got != o->resp_size) {
            fail("response to request " + std::to_string(n) + " has " + std::to_string(got) + " bytes, expected " +
                 std::to_string(o->resp_size));
            return;
        }
        uint64_t off = 0;
        for (const Slice& s : r.data) {
            if (!check_piece(echoed, n, o->resp_size, off, s, o->verify_full)) {
                fail("response to request " + std::to_string(n) + " has wrong bytes (" +
                     (echoed ? "the request number is not echoed" : "not the server's pattern") + ")");
                return;
            }
            off += s.size();
        }
        completed_one(intended, nullptr, r.at);  // the channel's clock read
    }

    void ask_stats(bool final) override {
        if (e->index() != 0) return;
        ++stats_pending;
        ch->call(kMethodStats, {}, {}, [this, final](rpc::Reply& r) {
            --stats_pending;
            if (r.status != rpc::Status::Ok) return;
            std::string m(reinterpret_cast<const char*>(r.meta.data()), r.meta.size());
            (final ? stats1 : stats0) = std::move(m);
            have_stats = !stats0.empty() && !stats1.empty();
        }, kFinalWait);
    }
    bool final_answered() const override { return stats_pending == 0; }

    void shut() override {
        if (!ch) return;
        unsigned i = 0;
        for (const ConnStats& c : ch->connection_stats()) {
            retrans += c.retransmissions();
            timeouts += c.retrans_timeout;
            conn_lines.push_back(describe(i++, c));
        }
        const rpc::ChannelStats& cs = ch->stats();
        channel_stats = "calls=" + std::to_string(cs.calls) + " ok=" + std::to_string(cs.ok) +
                        " failed=" + std::to_string(cs.failed) + " connects=" + std::to_string(cs.connects) +
                        " disconnects=" + std::to_string(cs.disconnects);
        ch->close();
        e->add_timer(10ms, [this] { ch.reset(); });
    }

public:
    ~RpcLoader() override = default;
};

// ---- --proto echo --------------------------------------------------------------------

class EchoLoader final : public Loader {
    struct Conn final : rpc::StreamHandler {
        EchoLoader* l = nullptr;
        rpc::Stream* s = nullptr;
        bool up = false;
        std::deque<std::pair<uint64_t, Instant>> inflight;  // request number, intended time
        uint64_t off = 0;                                   // bytes of the front response received

        void on_open(rpc::Stream&) override {
            up = true;
            ++l->up_;
        }
        void on_data(rpc::Stream&, std::span<Slice> data) override {
            for (const Slice& piece : data) {
                Slice rest = piece.share();
                while (rest.size() > 0) {
                    if (inflight.empty()) {
                        l->fail("the echo server sent bytes no request asked for");
                        return;
                    }
                    auto [n, intended] = inflight.front();
                    const uint64_t size = l->o->msg_size;
                    const size_t k = size_t(std::min<uint64_t>(size - off, rest.size()));
                    Slice part = rest.sub(0, k);
                    if (!check_piece(true, n, size, off, part, l->o->verify_full)) {
                        l->fail("echoed bytes of request " + std::to_string(n) + " are wrong");
                        return;
                    }
                    rest = rest.sub(k, rest.size() - k);
                    off += k;
                    if (off == size) {
                        off = 0;
                        inflight.pop_front();
                        l->completed_one(intended, this, l->e->now());
                    }
                }
            }
        }
        void on_closed(rpc::Stream&, std::string_view why) override {
            s = nullptr;
            if (up) --l->up_;
            up = false;
            if (l->phase == Phase::Done || l->sh->aborted()) return;
            if (l->phase == Phase::Connecting) l->down_why_ = std::string(why);
            else l->fail("the echo server closed a connection mid-run: " + std::string(why));
        }
    };
    friend struct Conn;

    std::vector<std::unique_ptr<Conn>> conns_;
    size_t up_ = 0;
    size_t rr_ = 0;
    std::string down_why_;
    std::vector<Slice> req;

    Phase begin() override {
        connect_all();
        return Phase::Connecting;
    }
    void open() override {}
    void connect_all() {
        Ipv4 ip;
        Ipv4::parse(o->server, &ip);
        const unsigned n = o->conns * (o->server_threads ? o->server_threads : 1);
        for (unsigned i = 0; i < n; ++i) {
            auto c = std::make_unique<Conn>();
            c->l = this;
            std::string err;
            c->s = rpc::connect(*e, transport_of(o->stack), {ip, o->port}, *c, stream_options(*o), &err);
            if (!c->s) down_why_ = err;
            conns_.push_back(std::move(c));
        }
    }
    size_t up() const override { return up_; }
    size_t total() const override { return conns_.size(); }
    std::string why_down() const override { return down_why_; }

    void issue_window() override {
        for (auto& c : conns_)
            for (uint32_t i = 0; i < o->iodepth && running(); ++i) send_one(next_call++, e->now(), c.get());
    }

    void send_one(uint64_t n, Instant intended, void* where) override {
        Conn* c = static_cast<Conn*>(where);
        if (!c) c = conns_[rr_++ % conns_.size()].get();
        if (!c->s) {
            fail("an echo connection is gone");
            return;
        }
        if (!build_request(n, o->msg_size, req, o->verify_full)) {
            fail("the client's zbuf arena is empty (request " + std::to_string(n) + "); try --arena-mb");
            return;
        }
        c->inflight.emplace_back(n, intended);
        c->s->send(req);
        req.clear();
    }

    void shut() override {
        for (auto& c : conns_) {
            if (!c->s) continue;
            const ConnStats st = c->s->conn_stats();
            retrans += st.retransmissions();
            timeouts += st.retrans_timeout;
            c->s->abort();  // the echo server may still hold requests: no graceful drain
        }
    }

public:
    ~EchoLoader() override = default;
};

void progress_thread(Shared& sh, std::vector<std::unique_ptr<Live>>& live, std::atomic<bool>& stop) {
    const Options& o = *sh.o;
    uint64_t last = 0;
    int64_t last_t = 0;
    bool shown = false;
    while (!stop.load(std::memory_order_relaxed)) {
        std::this_thread::sleep_for(250ms);
        const int64_t s = sh.start_wall.load(std::memory_order_relaxed);
        if (s == 0) continue;
        const int64_t now = wall_ns();
        uint64_t c = 0, p99 = 0;
        for (auto& l : live) {
            c += l->completed.load(std::memory_order_relaxed);
            p99 = std::max<uint64_t>(p99, l->p99_ns.load(std::memory_order_relaxed));
        }
        const double elapsed = double(now - s) / 1e9;
        const double rps = last_t ? double(c - last) / (double(now - last_t) / 1e9) : 0;
        last = c;
        last_t = now;
        const std::string line = progress_line(elapsed, o.warmup + o.duration, rps, double(p99) / 1e3, elapsed < o.warmup);
        std::fprintf(stderr, "\r%s\033[K", line.c_str());
        shown = true;
    }
    if (shown) std::fprintf(stderr, "\r\033[K");
}

}  // namespace

int run_client(const Options& o, Result* out) {
    Result& res = *out;
    res.cfg = o;
    std::string err;
    auto rt = start_runtime(o, &err);
    if (!rt) {
        res.error = err;
        std::fprintf(stderr, "knb client: %s\n", err.c_str());
        return 1;
    }
    res.device = rt->describe();
    const unsigned n = rt->engine_count();
    Shared sh;
    sh.o = &o;
    sh.rt = rt.get();
    sh.engines = n;
    std::vector<std::unique_ptr<Loader>> loaders;
    std::vector<std::unique_ptr<Live>> live;
    for (unsigned i = 0; i < n; ++i) {
        if (o.proto == Proto::Rpc) loaders.push_back(std::make_unique<RpcLoader>());
        else loaders.push_back(std::make_unique<EchoLoader>());
        live.push_back(std::make_unique<Live>());
    }
    if (o.proto == Proto::Echo) sh.server_threads = o.server_threads ? o.server_threads : 1;
    const bool show = o.progress == 1 || (o.progress < 0 && isatty(STDERR_FILENO));
    std::atomic<bool> stop_progress{false};
    std::thread progress;
    if (show) progress = std::thread([&] { progress_thread(sh, live, stop_progress); });
    rt->run([&](Engine& e) {
        Loader& l = *loaders[e.index()];
        l.start(e, sh, *live[e.index()]);
    });
    stop_progress = true;
    if (progress.joinable()) progress.join();

    // Merge.
    bool all_finished = true;
    for (auto& l : loaders) {
        res.latency.merge(l->hist);
        res.requests += l->measured;
        res.completed += l->completed;
        res.verified += l->verified;
        res.errors += l->errors;
        res.retrans_client += l->retrans;
        all_finished = all_finished && l->finished;
    }
    if (o.stack == Stack::Crescent) {
        uint64_t d = 0;
        for (unsigned i = 0; i < n; ++i) d += engine_drops(rt->engine(i).stats());
        res.drops_client = d;
        uint64_t t = 0;
        for (auto& l : loaders) t += l->timeouts;
        res.timeouts_client = t;
    }
    res.server = sh.info;
    res.server_threads = sh.server_threads;
    res.error = sh.first_error;
    Loader& l0 = *loaders[0];
    if (l0.cpu1 > l0.cpu0) res.client_cpu_s = double(l0.cpu1 - l0.cpu0) / 1e9;
    if (o.stack == Stack::Crescent) {
        uint64_t busy = 0;
        for (auto& l : loaders) busy += l->busy1 >= l->busy0 ? l->busy1 - l->busy0 : 0;
        res.client_busy_s = double(busy) / 1e9;
        PhaseSums ph;
        for (auto& l : loaders) ph += l->phases1.since(l->phases0);
        res.client_phases = ph;
    }
    if (l0.have_stats) {
        uint64_t c0 = 0, c1 = 0, r1 = 0, d1 = 0;
        if (kv_u64(l0.stats0, "cpu_ns", &c0) && kv_u64(l0.stats1, "cpu_ns", &c1) && c1 >= c0)
            res.server_cpu_s = double(c1 - c0) / 1e9;
        if (kv_u64(l0.stats0, "busy_ns", &c0) && kv_u64(l0.stats1, "busy_ns", &c1) && c1 >= c0)
            res.server_busy_s = double(c1 - c0) / 1e9;
        if (PhaseSums p0, p1; p0.from_kv(l0.stats0) && p1.from_kv(l0.stats1)) res.server_phases = p1.since(p0);
        if (kv_u64(l0.stats1, "retrans", &r1)) res.retrans_server = r1;
        if (kv_u64(l0.stats1, "timeouts", &r1)) res.timeouts_server = r1;
        if (sh.info.stack == "crescent" && kv_u64(l0.stats1, "drops", &d1)) res.drops_server = d1;
    }
    // The window: whole, or up to the first failure.
    const double window = o.duration;
    res.seconds = window;
    if (sh.aborted()) {
        const int64_t s = sh.start.load();
        if (s == 0) {
            res.seconds = 0;
        } else {
            const double warm_end = double(s) / 1e9 + o.warmup;
            res.seconds = std::clamp(double(sh.abort_at.load()) / 1e9 - warm_end, 0.0, window);
        }
    }
    std::vector<std::string> channels(n);
    std::vector<std::vector<std::string>> conns(n);
    for (unsigned i = 0; i < n; ++i) {
        channels[i] = loaders[i]->channel_stats;
        conns[i] = std::move(loaders[i]->conn_lines);
        zbuf::CoreScope core(rt->engine(i).core());
        loaders[i].reset();
    }
    if (o.stats)
        for (unsigned i = 0; i < n; ++i) {
            std::fprintf(stderr, "engine %u:", i);
            rt->engine(i).stats().for_each([](std::string_view k, uint64_t v) {
                if (v) std::fprintf(stderr, " %.*s=%" PRIu64, int(k.size()), k.data(), v);
            });
            std::fprintf(stderr, "\n");
            if (!channels[i].empty()) std::fprintf(stderr, "channel %u: %s\n", i, channels[i].c_str());
            for (const std::string& c : conns[i]) std::fprintf(stderr, "%s\n", c.c_str());
        }
    if (!sh.aborted() && !all_finished) {
        res.error = "interrupted before the run ended";
        std::fprintf(stderr, "knb client: %s\n", res.error.c_str());
        return 130;
    }
    res.ok = !sh.aborted() && res.requests > 0;
    if (!sh.aborted() && res.requests == 0) res.error = "no response arrived in the measured window";
    if (!res.ok) {
        std::fprintf(stderr, "knb client: %s\n", res.error.c_str());
        if (!o.stats)  // where each connection stood (with --stats, printed above)
            for (unsigned i = 0; i < n; ++i)
                for (const std::string& c : conns[i]) std::fprintf(stderr, "knb client: engine %u: %s\n", i, c.c_str());
        return 1;
    }
    return 0;
}

}  // namespace knb
