// tally — a small key-value and counter service over crescent's RPC layer,
// built outside crescent's tree against the installed library only (public
// headers <crescent/...> and pkg-config; see README.md here).
//
//   tally server [--port 7300] [--bind 127.0.0.1] [--iface IF] [--max-keys N]
//   tally client [--server 127.0.0.1:7300] [--iface IF] [--timeout-ms 3000] COMMAND
//       put KEY VALUE | get KEY | incr KEY [N] | del KEY | stats | selftest [--calls N]
//
// Without --iface both ends run a kernel-only crescent Runtime
// (RuntimeOptions::kernel_only): one engine thread serving kernel TCP sockets
// from its epoll set (rpc::Transport::Kernel), sleeping in epoll_wait when idle
// (KernelWait::Block) — no DPDK device, no hugepages, no root. With --iface IF
// the server also serves the same port over crescent's user-space TCP on that
// interface (AF_XDP, steered) and the client calls over it (root, hugepages).
//
// The service, one rpc::Server on one engine (one store, so every client sees
// the same keys):
//
//   method  request                          reply
//   1 put   meta: key, data: the value       Ok
//   2 get   meta: key                        data: the value | NotFound
//   3 incr  meta: i64 delta (LE) + key       meta: the new value, i64 LE
//   4 del   meta: key                        Ok | NotFound
//   5 stats -                                meta: one line of counters
//
// App statuses: NotFound (1001), Full (1002, --max-keys reached or the zbuf
// arena is empty; the reply's metadata says which). A bad request (empty or
// long key, short incr metadata) is answered BadRequest with a reason.
//
// Buffers (include/crescent/zbuf.hpp): a put's value arrives as slices of
// the arena objs the request was read into. A value of at least kKeepInPlace
// bytes is kept as those very slices (zero-copy: the store holds references
// to the receive buffers); a smaller one is copied into an obj of its own
// size, so that a few bytes do not pin a whole 16 KiB receive buffer. A get
// replies with share()s of the stored slices: the reply is sent from the
// store's memory, and a later put of the same key only drops the store's
// references (the reply in flight keeps its own).
//
// `selftest` drives the service end to end and checks every answer: 1000
// pipelined increments of one counter (32 in flight) must return 1..1000 each
// once; values of 0 B to 300,000 B are put, read back and checked byte for
// byte; a missing key is NotFound; everything it wrote is deleted. One line
// "selftest: ok ..." and exit 0, or the first wrong answer and exit 1.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include <crescent/engine.hpp>
#include <crescent/log.hpp>
#include <crescent/rpc/channel.hpp>
#include <crescent/rpc/histogram.hpp>
#include <crescent/rpc/server.hpp>
#include <crescent/runtime.hpp>
#include <crescent/zbuf.hpp>

namespace {

using namespace crescent;

constexpr uint32_t kPut = 1, kGet = 2, kIncr = 3, kDel = 4, kStats = 5;
constexpr rpc::Status kNotFound = rpc::Status(uint32_t(rpc::Status::kAppStatusBase) + 1);
constexpr rpc::Status kFull = rpc::Status(uint32_t(rpc::Status::kAppStatusBase) + 2);
constexpr size_t kMaxKey = 256;                // bytes
constexpr uint32_t kMaxValue = 1u << 20;       // bytes (the server's request data limit)
constexpr size_t kKeepInPlace = 4096;          // values this big stay in the receive buffers
constexpr size_t kChunk = 16384;               // client request buffers: arena objs of this size
constexpr uint32_t kSelftestDepth = 32;        // selftest: increments in flight

const char* kUsage =
    "usage: tally server [--port P (7300)] [--bind IP (127.0.0.1)] [--iface IF] [--max-keys N (100000)]\n"
    "       tally client [--server IP:PORT (127.0.0.1:7300)] [--iface IF] [--timeout-ms MS (3000)] COMMAND\n"
    "COMMAND: put KEY VALUE | get KEY | incr KEY [N] | del KEY | stats | selftest [--calls N (1000)]\n"
    "Without --iface both ends use kernel TCP from a crescent engine loop (no root, no hugepages).\n";

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "tally: %s\n", msg.c_str());
    std::exit(2);
}

uint64_t number(std::string_view flag, const char* v, uint64_t lo, uint64_t hi) {
    char* end = nullptr;
    errno = 0;
    unsigned long long n = std::strtoull(v, &end, 10);
    if (errno || end == v || *end != '\0' || n < lo || n > hi)
        die(std::string(flag) + ": '" + v + "' is not a number in " + std::to_string(lo) + ".." + std::to_string(hi));
    return n;
}

std::span<const std::byte> as_bytes(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }
std::string_view as_text(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

void put_i64(std::byte* out, int64_t v) {
    for (int i = 0; i < 8; ++i) out[i] = std::byte(uint64_t(v) >> (8 * i));
}
int64_t get_i64(const std::byte* in) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(in[i]) << (8 * i);
    return int64_t(v);
}

// One engine; SIGINT/SIGTERM make Runtime::run() return.
RuntimeOptions runtime_options(const std::string& iface) {
    RuntimeOptions o;
    if (iface.empty()) {
        o.kernel_only = true;
        o.engine.kernel_wait = KernelWait::Block;  // sleep in epoll_wait when idle
    } else {
        o.iface = iface;
    }
    o.cores = 1;
    o.arena_bytes = 64u << 20;
    return o;
}

// ---- server -----------------------------------------------------------------------

struct ServerOptions {
    uint16_t port = 7300;
    std::string bind = "127.0.0.1";
    std::string iface;
    size_t max_keys = 100000;
};

// The store and its handlers. Engine-thread only.
class Store {
public:
    explicit Store(size_t max_keys) : max_keys_(max_keys) {}

    void put(rpc::Call& c) {
        std::string key;
        if (!key_of(c, c.meta(), &key)) return;
        auto it = values_.find(key);
        if (it == values_.end() && values_.size() + counters_.size() >= max_keys_) {
            ++refused_full_;
            c.reply(as_bytes("store full: --max-keys reached"), {}, kFull);
            return;
        }
        Value v;
        v.bytes = c.data_bytes();
        if (v.bytes >= kKeepInPlace) {
            for (Slice& s : c.data()) v.iov.push_back(std::move(s));  // zero-copy: keep the receive buffers
            ++kept_in_place_;
        } else if (v.bytes > 0) {
            Slice s = zbuf::Arena::current()->alloc_slice(v.bytes);
            if (!s) {
                ++refused_full_;
                c.reply(as_bytes("store full: the zbuf arena is empty"), {}, kFull);
                return;
            }
            size_t off = 0;
            for (const Slice& part : c.data()) {
                std::memcpy(s.data() + off, part.data(), part.size());
                off += part.size();
            }
            v.iov.push_back(std::move(s));
            ++copied_;
        }
        if (it != values_.end()) {
            value_bytes_ -= it->second.bytes;
            it->second = std::move(v);  // drops the old value's references
            value_bytes_ += it->second.bytes;
        } else {
            value_bytes_ += v.bytes;
            values_.emplace(std::move(key), std::move(v));
        }
        c.reply();
    }

    void get(rpc::Call& c) {
        std::string key;
        if (!key_of(c, c.meta(), &key)) return;
        auto it = values_.find(key);
        if (it == values_.end()) {
            ++not_found_;
            c.reply({}, {}, kNotFound);
            return;
        }
        scratch_.clear();
        for (const Slice& s : it->second.iov) scratch_.push_back(s.share());  // the reply's own references
        c.reply({}, scratch_);
        scratch_.clear();
    }

    void incr(rpc::Call& c) {
        std::span<const std::byte> m = c.meta();
        if (m.size() < 8) {
            ++bad_requests_;
            c.fail(rpc::Status::BadRequest, "incr: the metadata is an i64 delta (8 bytes, little-endian) and the key");
            return;
        }
        std::string key;
        if (!key_of(c, m.subspan(8), &key)) return;
        auto it = counters_.find(key);
        if (it == counters_.end()) {
            if (values_.size() + counters_.size() >= max_keys_) {
                ++refused_full_;
                c.reply(as_bytes("store full: --max-keys reached"), {}, kFull);
                return;
            }
            it = counters_.emplace(std::move(key), 0).first;
        }
        it->second = int64_t(uint64_t(it->second) + uint64_t(get_i64(m.data())));  // wraps, no UB
        std::byte out[8];
        put_i64(out, it->second);
        c.reply(out);
    }

    void del(rpc::Call& c) {
        std::string key;
        if (!key_of(c, c.meta(), &key)) return;
        size_t n = counters_.erase(key);
        auto it = values_.find(key);
        if (it != values_.end()) {
            value_bytes_ -= it->second.bytes;
            values_.erase(it);
            ++n;
        }
        if (n == 0) {
            ++not_found_;
            c.reply({}, {}, kNotFound);
            return;
        }
        c.reply();
    }

    void stats(rpc::Call& c, const rpc::ServerStats& s) {
        const std::string line = summary(s);
        c.reply(as_bytes(line));
    }

    std::string summary(const rpc::ServerStats& s) const {
        char buf[512];
        std::snprintf(buf, sizeof buf,
                      "values=%zu counters=%zu value_bytes=%zu kept_in_place=%" PRIu64 " copied=%" PRIu64
                      " not_found=%" PRIu64 " full=%" PRIu64 " bad_requests=%" PRIu64 " requests=%" PRIu64
                      " connections=%" PRIu64,
                      values_.size(), counters_.size(), value_bytes_, kept_in_place_, copied_, not_found_,
                      refused_full_, bad_requests_, s.requests, s.connections_accepted);
        return buf;
    }

private:
    struct Value {
        std::vector<Slice> iov;  // the bytes, in order (references into the arena)
        size_t bytes = 0;        // sum of iov sizes
    };

    // The key in `m`, or a BadRequest answer and false.
    bool key_of(rpc::Call& c, std::span<const std::byte> m, std::string* key) {
        if (m.empty() || m.size() > kMaxKey) {
            ++bad_requests_;
            c.fail(rpc::Status::BadRequest, "the key must be 1.." + std::to_string(kMaxKey) + " bytes");
            return false;
        }
        key->assign(as_text(m));
        return true;
    }

    size_t max_keys_;
    std::unordered_map<std::string, Value> values_;
    std::unordered_map<std::string, int64_t> counters_;
    size_t value_bytes_ = 0;                   // sum of the stored values' bytes
    std::vector<Slice> scratch_;               // a get's reply iovec (moved out by reply())
    uint64_t kept_in_place_ = 0, copied_ = 0;  // puts stored zero-copy / copied (small values)
    uint64_t not_found_ = 0, refused_full_ = 0, bad_requests_ = 0;
};

int run_server(const ServerOptions& so) {
    Ipv4 bind;
    if (!Ipv4::parse(so.bind, &bind)) die("--bind: '" + so.bind + "' is not an IPv4 address");
    RuntimeOptions ro = runtime_options(so.iface);
    if (!so.iface.empty()) ro.listen_ports = {so.port};
    std::string err;
    auto rt = Runtime::start(ro, &err);
    if (!rt) die(err);

    std::unique_ptr<Store> store;
    std::unique_ptr<rpc::Server> srv;
    bool listening = false;
    rt->run([&](Engine& e) {
        store = std::make_unique<Store>(so.max_keys);
        rpc::ServerOptions opts;
        opts.limits.max_meta = 8 + kMaxKey;
        opts.limits.max_data = kMaxValue;
        srv = std::make_unique<rpc::Server>(e, opts);
        Store* st = store.get();
        rpc::Server* s = srv.get();
        srv->register_method(kPut, "put", [st](rpc::Call& c) { st->put(c); });
        srv->register_method(kGet, "get", [st](rpc::Call& c) { st->get(c); });
        srv->register_method(kIncr, "incr", [st](rpc::Call& c) { st->incr(c); });
        srv->register_method(kDel, "del", [st](rpc::Call& c) { st->del(c); });
        srv->register_method(kStats, "stats", [st, s](rpc::Call& c) { st->stats(c, s->stats()); });
        if (!srv->listen(rpc::Transport::Kernel, so.port, &err, bind) ||
            (!so.iface.empty() && !srv->listen(rpc::Transport::Crescent, so.port, &err))) {
            rt->stop();
            return;
        }
        listening = true;
        std::printf("tally: serving on %s:%u over kernel TCP%s (%s); SIGINT or SIGTERM stops\n", so.bind.c_str(),
                    so.port, so.iface.empty() ? "" : (" and on " + e.local_ip().to_string() + " over crescent").c_str(),
                    rt->describe().c_str());
        std::fflush(stdout);
    });
    int rc = 0;
    if (!listening) {
        std::fprintf(stderr, "tally: cannot listen on port %u: %s\n", so.port, err.c_str());
        rc = 1;
    } else {
        std::printf("tally: stopped: %s\n", store->summary(srv->stats()).c_str());
    }
    // Tear down as the engine's zbuf core (its loop has returned).
    zbuf::CoreScope core(rt->engine(0).core());
    srv.reset();
    store.reset();
    return rc;
}

// ---- client -----------------------------------------------------------------------

struct ClientOptions {
    Endpoint server{Ipv4{0x7f000001}, 7300};
    std::string server_text = "127.0.0.1:7300";
    std::string iface;
    uint64_t timeout_ms = 3000;
    std::vector<std::string> command;
    uint64_t selftest_calls = 1000;
};

// `n` bytes of value(seed, .) in kChunk arena slices; empty vector + false when the arena is empty.
uint8_t value_byte(uint64_t seed, uint64_t off) { return uint8_t((seed * 131 + off * 7 + (off >> 9)) >> 1); }
bool make_value(uint64_t seed, size_t n, std::vector<Slice>* out) {
    out->clear();
    for (size_t off = 0; off < n;) {
        const size_t k = std::min(n - off, kChunk);
        Slice s = zbuf::Arena::current()->alloc_slice(k);
        if (!s) return false;
        for (size_t i = 0; i < k; ++i) s.data()[i] = std::byte(value_byte(seed, off + i));
        out->push_back(std::move(s));
        off += k;
    }
    return true;
}
// Empty when `d` holds exactly n bytes of value(seed, .), else what is wrong.
std::string check_value(uint64_t seed, std::span<Slice> d, size_t n) {
    size_t off = 0;
    for (const Slice& s : d)
        for (size_t i = 0; i < s.size(); ++i, ++off)
            if (off < n && uint8_t(s.data()[i]) != value_byte(seed, off))
                return "byte " + std::to_string(off) + " is " + std::to_string(uint8_t(s.data()[i])) + ", expected " +
                       std::to_string(value_byte(seed, off));
    if (off != n) return std::to_string(off) + " bytes, expected " + std::to_string(n);
    return {};
}

// One command on the client engine. Engine-thread only; the main thread reads
// `rc` after run() has returned.
class Client {
public:
    Client(Runtime& rt, const ClientOptions& o) : rt_(rt), o_(o) {}

    void start(Engine& e) {
        rpc::ChannelOptions co;
        co.server = o_.server;
        co.transport = o_.iface.empty() ? rpc::Transport::Kernel : rpc::Transport::Crescent;
        co.deadline = std::chrono::milliseconds(o_.timeout_ms);
        co.limits.max_data = kMaxValue;
        ch_ = std::make_unique<rpc::Channel>(e, co);
        const std::vector<std::string>& c = o_.command;
        const std::string& verb = c[0];
        if (verb == "put") {
            std::vector<Slice> v;
            if (!c[2].empty()) {
                Slice s = zbuf::Arena::current()->alloc_slice(c[2].size());
                if (!s) return finish(1, "put: no memory for the value");
                std::memcpy(s.data(), c[2].data(), c[2].size());
                v.push_back(std::move(s));
            }
            call(kPut, as_bytes(c[1]), std::move(v), [this](rpc::Reply&) { finish(0, "OK"); });
        } else if (verb == "get") {
            call(kGet, as_bytes(c[1]), {}, [this](rpc::Reply& r) {
                std::string out;
                for (const Slice& s : r.data) out.append(reinterpret_cast<const char*>(s.data()), s.size());
                finish(0, out);
            });
        } else if (verb == "incr") {
            std::string meta(8, '\0');
            put_i64(reinterpret_cast<std::byte*>(meta.data()), c.size() > 2 ? std::strtoll(c[2].c_str(), nullptr, 10) : 1);
            meta += c[1];
            call(kIncr, as_bytes(meta), {}, [this](rpc::Reply& r) {
                if (r.meta.size() != 8) return finish(1, "incr: a reply of " + std::to_string(r.meta.size()) + " bytes, expected 8");
                finish(0, std::to_string(get_i64(r.meta.data())));
            });
        } else if (verb == "del") {
            call(kDel, as_bytes(c[1]), {}, [this](rpc::Reply&) { finish(0, "OK"); });
        } else if (verb == "stats") {
            call(kStats, {}, {}, [this](rpc::Reply& r) { finish(0, std::string(as_text(r.meta))); });
        } else {
            selftest();
        }
    }

    // After run(): tear down as the engine's zbuf core.
    void stop() { ch_.reset(); }
    int rc() const { return rc_; }

private:
    using Done = std::function<void(rpc::Reply&)>;

    // A call whose non-Ok replies end the command (NotFound / Full / errors),
    // except for the statuses in `accept`, which go to `done` too.
    void call(uint32_t method, std::span<const std::byte> meta, std::vector<Slice> data, Done done,
              rpc::Status accept = rpc::Status::Ok) {
        std::vector<Slice> iov = std::move(data);
        rpc::Status st = ch_->call(method, meta, iov, [this, done = std::move(done), accept](rpc::Reply& r) {
            if (finished_) return;
            if (r.status != rpc::Status::Ok && r.status != accept) return fail_reply(r);
            hist_.record(uint64_t(r.latency.count()));
            done(r);
        });
        if (st != rpc::Status::Ok) finish(1, "call refused: " + std::string(rpc::status_name(st)));
    }

    void fail_reply(const rpc::Reply& r) {
        const std::string& verb = o_.command[0];
        if (r.status == kNotFound)
            return finish(1, verb + ": " + (verb == "selftest" ? "an unexpected NotFound" : o_.command[1] + ": not found"));
        if (r.status == kFull) return finish(1, verb + ": " + std::string(as_text(r.meta)));
        std::string why(r.error);
        if (r.status == rpc::Status::Unavailable || r.status == rpc::Status::DeadlineExceeded ||
            r.status == rpc::Status::ConnectionLost) {
            const std::string& le = ch_->last_error();
            why = "cannot reach " + o_.server_text + " over " +
                  std::string(rpc::transport_name(o_.iface.empty() ? rpc::Transport::Kernel : rpc::Transport::Crescent)) +
                  " TCP: " + std::string(rpc::status_name(r.status)) + (le.empty() ? "" : " (" + le + ")");
        }
        finish(1, verb + ": " + (why.empty() ? std::string(rpc::status_name(r.status)) : why));
    }

    // Print the result (stdout) or the error (stderr) and stop the runtime.
    void finish(int rc, const std::string& text) {
        if (finished_) return;
        finished_ = true;
        rc_ = rc;
        std::fprintf(rc == 0 ? stdout : stderr, rc == 0 ? "%s\n" : "tally: %s\n", text.c_str());
        std::fflush(rc == 0 ? stdout : stderr);
        rt_.stop();
    }

    // ---- selftest: increments, values, a miss, clean-up -------------------------

    void selftest() {
        counter_ = "selftest.hits." + std::to_string(::getpid());
        // A counter left by an earlier run of this pid is gone either way.
        call(kDel, as_bytes(counter_), {}, [this](rpc::Reply&) { incr_more(); }, kNotFound);
    }

    void incr_more() {
        const uint64_t n = o_.selftest_calls;
        while (!finished_ && incr_issued_ < n && ch_->outstanding() < kSelftestDepth) {
            ++incr_issued_;
            std::string meta(8, '\0');
            put_i64(reinterpret_cast<std::byte*>(meta.data()), 1);
            meta += counter_;
            call(kIncr, as_bytes(meta), {}, [this, n](rpc::Reply& r) {
                const int64_t v = r.meta.size() == 8 ? get_i64(r.meta.data()) : -1;
                if (v < 1 || uint64_t(v) > n || seen_[size_t(v)])
                    return finish(1, "selftest: increment returned " + std::to_string(v) + ", expected each of 1.." +
                                         std::to_string(n) + " once");
                seen_[size_t(v)] = true;
                if (++incr_done_ == n) return put_values();
                incr_more();
            });
        }
    }

    static constexpr size_t kSizes[] = {0, 1, 100, kKeepInPlace - 1, kKeepInPlace, kChunk, 65536 + 7, 300000};
    static constexpr size_t kValues = sizeof kSizes / sizeof kSizes[0];
    std::string value_key(size_t i) const { return "selftest.v" + std::to_string(i) + "." + std::to_string(::getpid()); }

    void put_values() {
        for (size_t i = 0; i < kValues; ++i) {
            std::vector<Slice> v;
            if (!make_value(i, kSizes[i], &v)) return finish(1, "selftest: no memory for a value");
            call(kPut, as_bytes(value_key(i)), std::move(v), [this](rpc::Reply&) {
                if (++puts_done_ == kValues) get_values();
            });
        }
    }

    void get_values() {
        for (size_t i = 0; i < kValues; ++i)
            call(kGet, as_bytes(value_key(i)), {}, [this, i](rpc::Reply& r) {
                std::string bad = check_value(i, r.data, kSizes[i]);
                if (!bad.empty()) return finish(1, "selftest: get " + value_key(i) + ": " + bad);
                if (++gets_done_ == kValues) miss();
            });
    }

    void miss() {
        const std::string absent = "selftest.absent." + std::to_string(::getpid());
        call(kGet, as_bytes(absent), {}, [this](rpc::Reply& r) {
            if (r.status != kNotFound)
                return finish(1, "selftest: get of a missing key answered " + std::string(rpc::status_name(r.status)));
            clean_up();
        }, kNotFound);
    }

    void clean_up() {
        for (size_t i = 0; i <= kValues; ++i)
            call(kDel, as_bytes(i < kValues ? value_key(i) : counter_), {}, [this](rpc::Reply&) {
                if (++dels_done_ == kValues + 1) report();
            });
    }

    void report() {
        char buf[256];
        std::snprintf(buf, sizeof buf,
                      "selftest: ok: %" PRIu64 " increments (1..%" PRIu64 " each once), %zu values of 0..%zu bytes "
                      "put and read back byte for byte, 1 miss, %zu deletes; %" PRIu64
                      " calls, latency p50 %.0f us p99 %.0f us",
                      incr_done_, o_.selftest_calls, kValues, kSizes[kValues - 1], kValues + 1, hist_.count(),
                      double(hist_.percentile(50)) / 1e3, double(hist_.percentile(99)) / 1e3);
        finish(0, buf);
    }

    Runtime& rt_;
    const ClientOptions& o_;
    std::unique_ptr<rpc::Channel> ch_;
    rpc::Histogram hist_;   // ns, every successful call
    bool finished_ = false;
    int rc_ = 1;
    // selftest
    std::string counter_;
    uint64_t incr_issued_ = 0, incr_done_ = 0;
    std::vector<bool> seen_ = std::vector<bool>(o_.selftest_calls + 1);
    size_t puts_done_ = 0, gets_done_ = 0, dels_done_ = 0;
};

int run_client(const ClientOptions& co) {
    // A command-line client: crescent's own log lines (the runtime's start-up
    // line at info) only from warnings up, unless CRESCENT_LOG asks for more.
    log::set_level("warn");
    log::init_from_env();
    std::string err;
    auto rt = Runtime::start(runtime_options(co.iface), &err);
    if (!rt) die(err);
    Client client(*rt, co);
    rt->run([&](Engine& e) { client.start(e); });
    zbuf::CoreScope core(rt->engine(0).core());
    client.stop();
    return client.rc();
}

bool parse_endpoint(const std::string& s, Endpoint* out) {
    const size_t colon = s.rfind(':');
    if (colon == std::string::npos) return false;
    char* end = nullptr;
    errno = 0;
    unsigned long port = std::strtoul(s.c_str() + colon + 1, &end, 10);
    if (errno || *end != '\0' || end == s.c_str() + colon + 1 || port == 0 || port > 65535) return false;
    out->port = uint16_t(port);
    return Ipv4::parse(s.substr(0, colon), &out->ip);
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h") {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const std::string_view role = argv[1];
    auto value = [&](int& i) -> const char* {
        if (i + 1 >= argc) die(std::string(argv[i]) + " needs a value");
        return argv[++i];
    };
    if (role == "server") {
        ServerOptions so;
        for (int i = 2; i < argc; ++i) {
            const std::string_view a = argv[i];
            if (a == "--port") so.port = uint16_t(number(a, value(i), 1, 65535));
            else if (a == "--bind") so.bind = value(i);
            else if (a == "--iface") so.iface = value(i);
            else if (a == "--max-keys") so.max_keys = number(a, value(i), 1, 100000000);
            else die("server: unknown option '" + std::string(a) + "' (see --help)");
        }
        return run_server(so);
    }
    if (role != "client") die("the first argument must be server or client, not '" + std::string(role) + "' (see --help)");
    ClientOptions co;
    int i = 2;
    for (; i < argc && argv[i][0] == '-'; ++i) {
        const std::string_view a = argv[i];
        if (a == "--server") {
            co.server_text = value(i);
            if (!parse_endpoint(co.server_text, &co.server)) die("--server: '" + co.server_text + "' is not IP:PORT");
        } else if (a == "--iface") co.iface = value(i);
        else if (a == "--timeout-ms") co.timeout_ms = number(a, value(i), 1, 3600000);
        else die("client: unknown option '" + std::string(a) + "' (see --help)");
    }
    for (; i < argc; ++i) co.command.emplace_back(argv[i]);
    if (co.command.empty()) die("client: give a command: put, get, incr, del, stats or selftest (see --help)");
    const std::string& verb = co.command[0];
    const size_t args = co.command.size() - 1;
    if (verb == "selftest") {
        if (args == 2 && co.command[1] == "--calls") co.selftest_calls = number("--calls", co.command[2].c_str(), 1, 1000000);
        else if (args != 0) die("client: selftest takes only [--calls N]");
    } else if ((verb == "put" && args != 2) || ((verb == "get" || verb == "del") && args != 1) ||
               (verb == "incr" && args != 1 && args != 2) || (verb == "stats" && args != 0)) {
        die("client: wrong arguments for " + verb + " (see --help)");
    } else if (verb != "put" && verb != "get" && verb != "del" && verb != "incr" && verb != "stats") {
        die("client: unknown command '" + verb + "' (see --help)");
    }
    if (verb != "selftest" && verb != "stats" && (co.command[1].empty() || co.command[1].size() > kMaxKey))
        die("client: the key must be 1.." + std::to_string(kMaxKey) + " bytes");
    if (verb == "put" && co.command[2].size() > kMaxValue) die("client: the value is above 1 MiB");
    if (verb == "incr" && args == 2) {
        const char* v = co.command[2].c_str();
        char* end = nullptr;
        errno = 0;
        (void)std::strtoll(v, &end, 10);
        if (errno || end == v || *end != '\0') die("incr: '" + co.command[2] + "' is not an integer");
    }
    return run_client(co);
}
