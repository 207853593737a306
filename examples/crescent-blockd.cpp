// crescent-blockd — a block server over crescent RPC: READ / WRITE / FLUSH of
// 4 KiB blocks (examples/blockd/proto.hpp), in memory or on a file.
//
//   crescent-blockd --iface IF [--port 7100] [--kernel-port P] [--size BYTES] [--cores N]
//                   [--file PATH [--allow-buffered] [--queue-depth N]] [--mode inline|batch]
//                   [--no-crc] [--stats]
//   crescent-blockd --eal "ARGS" --ip A.B.C.D/LEN ...      (any DPDK device, static addressing)
//
// In memory (default, --size bytes, 256 MiB): a WRITE's received slices become
// the blocks' contents and a READ replies with references to them — no byte is
// copied either way (examples/blockd/volume.hpp). With --file: O_DIRECT I/O
// through io_uring into zbuf objs; the handler keeps its rpc::Call and replies
// from the loop iteration that reaps the completion (the engine watches the
// ring's eventfd), so the loop never blocks on the disk.
//
// Engines (--cores N, default 1) share nothing. With --file every engine has
// its own io_uring on the same file, so all of them serve one volume (the
// file is the shared state; the kernel orders the I/O). In memory every engine
// serves its OWN volume of --size bytes: a client sees one consistent volume
// only while it talks to a single engine (crescent-blockd-bench
// --server-engines 1, or one kernel connection). The kernel port (--kernel-port)
// is served by engine 0 in memory mode, by every engine (SO_REUSEPORT) with --file.
//
// Unless --no-crc, a WRITE's data is checked against the CRC32C in its metadata
// before it is stored (kCrcMismatch otherwise), and a READ reply carries the
// CRC32C of its data: end-to-end integrity at the price of reading each byte
// once on the CPU (SSE4.2).
//
// --stats: on exit, per engine: the volume's, the server's, the methods' and
// the engine's counters (non-zero ones), one line each. Ctrl-C / SIGTERM stop it.
#include <sys/epoll.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/rpc/server.hpp>
#include <crescent/runtime.hpp>

#include "examples/blockd/crc32c.hpp"
#include "examples/blockd/proto.hpp"
#include "examples/blockd/volume.hpp"
#include "examples/cli.hpp"

namespace {

using namespace crescent;
using namespace crescent::blockd;

struct Options {
    RuntimeOptions rt;
    uint16_t port = 7100;
    uint16_t kernel_port = 0;     // 0: no kernel transport
    uint64_t size = 256u << 20;
    bool size_given = false;
    std::string file;             // empty: in memory
    bool allow_buffered = false;
    unsigned queue_depth = 128;
    bool crc = true;
    bool stats = false;
    bool show_plan = false;
    // Policies (rpc::Policies): allow-list rules and rate limits, applied on every engine.
    struct Allow {
        rpc::Prefix prefix;
        std::vector<uint32_t> methods;  // empty: all
    };
    std::vector<Allow> allow;
    double client_rate = 0, client_burst = 0;  // per client address; 0 = none
};

[[noreturn]] void die(const std::string& msg) { examples::fail("crescent-blockd", msg); }

const char* usage =
    "usage: crescent-blockd (--iface IFACE | --eal \"ARGS\" --ip A.B.C.D/LEN [--mac MAC] [--neighbour IP=MAC]...\n"
    "                        [--gateway IP]) [--port P] [--kernel-port P] [--size BYTES] [--cores N]\n"
    "                       [--file PATH [--allow-buffered] [--queue-depth N]] [--mode inline|batch]\n"
    "                       [--no-crc] [--stats] [--show-plan] [--file-prefix P] [--no-huge] [--burst N]\n"
    "                       [--idle-sleep-us N] [--arena-mb N] [--impair loss=P,dup=P,reorder=P,seed=N]\n"
    "                       [--pcap FILE [--pcap-snaplen N] [--pcap-max-mb N]]   (as for crescent-echo)\n"
    "  --port P         crescent RPC port (default 7100)\n"
    "  --kernel-port P  also serve RPC over kernel TCP on port P\n"
    "  --size BYTES     volume size, a multiple of 4096 (default 256 MiB; with --file: the file's\n"
    "                   size if not given)\n"
    "  --file PATH      O_DIRECT file volume through io_uring (replies deferred to the completion)\n"
    "  --allow-buffered use buffered I/O when PATH's filesystem refuses O_DIRECT (instead of failing)\n"
    "  --queue-depth N  io_uring I/Os in flight per engine (default 128)\n"
    "  --no-crc         neither check WRITE CRCs nor compute READ reply CRCs\n"
    "  --allow PREFIX[:METHODS]  allow-list rule (repeatable): clients in PREFIX may call METHODS\n"
    "                   (comma-separated read,write,flush; all when omitted); with any rule, other\n"
    "                   clients are refused when they connect\n"
    "  --client-rate R[/B]  token-bucket limit per client address: R calls/s, burst B (default R)\n"
    "  memory mode: each engine serves its own volume (see the header of crescent-blockd.cpp)\n";

// "10.0.0.0/24" or "10.0.0.7:read,flush".
Options::Allow parse_allow(std::string_view v) {
    Options::Allow a;
    std::string err;
    size_t colon = v.find(':');
    if (!rpc::Prefix::parse(v.substr(0, colon), &a.prefix, &err)) die("--allow: " + err);
    if (colon == std::string_view::npos) return a;
    std::string_view list = v.substr(colon + 1);
    while (!list.empty()) {
        size_t comma = list.find(',');
        std::string_view m = list.substr(0, comma);
        if (m == "read") a.methods.push_back(kRead);
        else if (m == "write") a.methods.push_back(kWrite);
        else if (m == "flush") a.methods.push_back(kFlush);
        else die("--allow: '" + std::string(m) + "' is not a method (read, write, flush)");
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
    if (a.methods.empty()) die("--allow: no method after ':' in '" + std::string(v) + "'");
    return a;
}

// "R" or "R/B": calls per second and burst.
void parse_rate(std::string_view v, double* rate, double* burst) {
    auto num = [&](std::string_view t) {
        std::string s(t);
        char* end = nullptr;
        double d = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !(d > 0) || d > 1e9)
            die("--client-rate: '" + std::string(v) + "' is not RATE or RATE/BURST (positive numbers)");
        return d;
    };
    size_t slash = v.find('/');
    *rate = num(v.substr(0, slash));
    *burst = slash == std::string_view::npos ? *rate : num(v.substr(slash + 1));
}

Options parse(int argc, char** argv) {
    Options o;
    examples::Cli cli("crescent-blockd", argc, argv, usage);
    while (cli.next()) {
        if (cli.runtime_option(o.rt) || cli.engine_option(o.rt) || cli.limit_option(o.rt)) continue;
        std::string_view a = cli.flag();
        if (a == "--port") o.port = uint16_t(cli.number(1, 65535));
        else if (a == "--kernel-port") o.kernel_port = uint16_t(cli.number(1, 65535));
        else if (a == "--size") {
            o.size = cli.number(kBlockSize, uint64_t(1) << 44);
            o.size_given = true;
            if (o.size % kBlockSize) die("--size: " + std::to_string(o.size) + " is not a multiple of 4096");
        } else if (a == "--file") o.file = cli.value();
        else if (a == "--allow-buffered") o.allow_buffered = true;
        else if (a == "--queue-depth") o.queue_depth = unsigned(cli.number(1, 4096));
        else if (a == "--no-crc") o.crc = false;
        else if (a == "--stats") o.stats = true;
        else if (a == "--show-plan") o.show_plan = true;
        else if (a == "--allow") o.allow.push_back(parse_allow(cli.value()));
        else if (a == "--client-rate") parse_rate(cli.value(), &o.client_rate, &o.client_burst);
        else cli.unknown();
    }
    if (o.rt.iface.empty() == o.rt.eal.empty()) die("give exactly one of --iface IFACE or --eal \"ARGS\"");
    if (!o.rt.eal.empty() && o.rt.ip.empty()) die("--eal needs --ip A.B.C.D/LEN (the device has no kernel address)");
    if (o.kernel_port == o.port) die("--kernel-port must differ from --port");
    if (o.file.empty() && o.allow_buffered) die("--allow-buffered only applies to --file");
    o.rt.listen_ports.push_back(o.port);
    // In memory the blocks are the received segments themselves: ~1448 bytes
    // in 2 KiB objs (RX pool objs, or arena copies once the engine copies
    // under RX pool pressure), so a fully written volume holds ~1.4x its size
    // of arena per engine. Grow the arena to that, plus a working set.
    if (o.file.empty()) {
        size_t need = size_t(o.size) * 3 / 2 * o.rt.cores + (64u << 20);
        if (o.rt.arena_bytes < need) o.rt.arena_bytes = need;
    }
    return o;
}

// ---- one engine's server -----------------------------------------------------------

struct Counters {
    uint64_t bad_meta = 0;         // metadata not 16 bytes (BadRequest)
    uint64_t length_mismatch = 0;  // WRITE meta len != data length
    uint64_t crc_mismatch = 0;     // WRITE data does not match its CRC
    uint64_t crc_bytes = 0;        // bytes checksummed (writes checked, reads computed)
    uint64_t deferred = 0;         // replies sent from a later loop iteration (FileVolume)
};

class BlockServer {
public:
    BlockServer(Engine& e, std::unique_ptr<Volume> v, bool crc) : e_(e), vol_(std::move(v)), crc_(crc) {}
    ~BlockServer() {
        vol_.reset();  // FileVolume: waits for the kernel, runs no completions
        pool_.clear(); // unanswered Calls answer Internal (their connections are gone by now)
    }

    bool start(const Options& o, std::string* err) {
        srv_ = std::make_unique<rpc::Server>(e_);
        srv_->register_method(kRead, "read", [this](rpc::Call& c) { on_read(c); });
        srv_->register_method(kWrite, "write", [this](rpc::Call& c) { on_write(c); });
        srv_->register_method(kFlush, "flush", [this](rpc::Call& c) { on_flush(c); });
        if (!o.allow.empty()) {
            auto acl = std::make_unique<rpc::Acl>();
            for (const auto& a : o.allow) acl->allow(a.prefix, a.methods);
            srv_->policies().acl = std::move(acl);
        }
        if (o.client_rate > 0) {
            auto rl = std::make_unique<rpc::RateLimiter>();
            rl->set_client_default(o.client_rate, o.client_burst);
            srv_->policies().rate = std::move(rl);
        }
        if (!srv_->listen(rpc::Transport::Crescent, o.port, err)) return false;
        if (vol_->event_fd() >= 0 &&
            !e_.add_fd(vol_->event_fd(), EPOLLIN, [this](uint32_t) { vol_->on_event(); })) {
            *err = "cannot watch the io_uring eventfd in the engine's epoll set";
            return false;
        }
        return true;
    }
    bool listen_kernel(uint16_t port, std::string* err) { return srv_->listen(rpc::Transport::Kernel, port, err); }

    void print_stats(FILE* f) const {
        unsigned i = e_.index();
        std::fprintf(f, "engine %u volume:", i);
        vol_->stats().for_each([&](std::string_view n, uint64_t v) {
            if (v) std::fprintf(f, " %.*s=%llu", int(n.size()), n.data(), (unsigned long long)v);
        });
        std::fprintf(f, "\nengine %u blockd: bad_meta=%llu length_mismatch=%llu crc_mismatch=%llu crc_bytes=%llu "
                        "deferred=%llu\n",
                     i, (unsigned long long)n_.bad_meta, (unsigned long long)n_.length_mismatch,
                     (unsigned long long)n_.crc_mismatch, (unsigned long long)n_.crc_bytes,
                     (unsigned long long)n_.deferred);
        const rpc::ServerStats& s = srv_->stats();
        std::fprintf(f,
                     "engine %u server: accepted=%llu refused=%llu refused_acl=%llu refused_rate=%llu "
                     "requests=%llu replies=%llu errors_sent=%llu "
                     "unknown_method=%llu bad_magic=%llu truncated_at_close=%llu replies_dropped=%llu "
                     "handler_dropped=%llu no_memory=%llu reads_paused=%llu bytes_in=%llu bytes_out=%llu\n",
                     i, (unsigned long long)s.connections_accepted, (unsigned long long)s.connections_refused,
                     (unsigned long long)s.refused_acl, (unsigned long long)s.refused_rate,
                     (unsigned long long)s.requests, (unsigned long long)s.replies,
                     (unsigned long long)s.errors_sent, (unsigned long long)s.unknown_method,
                     (unsigned long long)s.bad_magic, (unsigned long long)s.truncated_at_close,
                     (unsigned long long)s.replies_dropped, (unsigned long long)s.handler_dropped,
                     (unsigned long long)s.no_memory, (unsigned long long)s.reads_paused,
                     (unsigned long long)s.bytes_in, (unsigned long long)s.bytes_out);
        for (const rpc::MethodStats& m : srv_->method_stats()) {
            if (m.calls == 0) continue;
            uint64_t errs = 0;
            for (uint64_t x : m.errors_by_status) errs += x;
            std::fprintf(f, "engine %u method %s: calls=%llu ok=%llu errors=%llu p50=%.1fus p99=%.1fus p99.9=%.1fus\n",
                         i, m.name.c_str(), (unsigned long long)m.calls, (unsigned long long)m.ok,
                         (unsigned long long)errs, double(m.latency.percentile(50)) / 1e3,
                         double(m.latency.percentile(99)) / 1e3, double(m.latency.percentile(99.9)) / 1e3);
        }
    }
    const Volume& volume() const { return *vol_; }

private:
    // A request waiting for its volume completion; the cookie of the Completion.
    struct Pending {
        BlockServer* self = nullptr;
        rpc::Call call;
        BlockMeta meta;
        bool sync = false;   // the volume completed inside the handler's own call
    };

    Pending* take(rpc::Call& c, const BlockMeta& m) {
        Pending* p;
        if (free_.empty()) {
            pool_.push_back(std::make_unique<Pending>());
            p = pool_.back().get();
            p->self = this;
        } else {
            p = free_.back();
            free_.pop_back();
        }
        p->call = std::move(c);
        p->meta = m;
        p->sync = true;
        return p;
    }
    void give_back(Pending* p) {
        p->call = rpc::Call();
        free_.push_back(p);
    }

    bool parse_meta(rpc::Call& c, BlockMeta* m, bool allow_empty = false) {
        if (allow_empty && c.meta().empty()) return true;
        if (BlockMeta::decode(c.meta(), m)) return true;
        ++n_.bad_meta;
        c.fail(rpc::Status::BadRequest, "block metadata is not 16 bytes {u64 offset, u32 len, u32 crc32c}");
        return false;
    }

    static void reply_meta(rpc::Call& c, const BlockMeta& m, std::span<Slice> data = {},
                           rpc::Status st = rpc::Status::Ok) {
        std::byte b[kMetaSize];
        m.encode(b);
        c.reply(std::span<const std::byte>(b, kMetaSize), data, st);
    }

    void on_read(rpc::Call& c) {
        BlockMeta m;
        if (!parse_meta(c, &m)) return;
        Pending* p = take(c, m);
        vol_->read(m.offset, m.len, Completion{&BlockServer::read_done, p});
        p->sync = false;
    }
    static void read_done(void* cookie, VolStatus st, std::span<Slice> data) {
        auto* p = static_cast<Pending*>(cookie);
        BlockServer* s = p->self;
        if (!p->sync) ++s->n_.deferred;
        if (st != VolStatus::Ok) {
            reply_meta(p->call, p->meta, {}, app_status(st));
        } else {
            BlockMeta r = p->meta;
            r.crc32c = 0;
            if (s->crc_) {
                r.crc32c = crc32c(data);
                s->n_.crc_bytes += r.len;
            }
            reply_meta(p->call, r, data);  // zero-copy: the volume's slices go to TX
        }
        s->give_back(p);
    }

    void on_write(rpc::Call& c) {
        BlockMeta m;
        if (!parse_meta(c, &m)) return;
        if (m.len != c.data_bytes()) {
            ++n_.length_mismatch;
            return reply_meta(c, m, {}, app_status(kLengthMismatch));
        }
        if (crc_) {
            n_.crc_bytes += m.len;
            if (crc32c(c.data()) != m.crc32c) {
                ++n_.crc_mismatch;
                return reply_meta(c, m, {}, app_status(kCrcMismatch));
            }
        }
        Pending* p = take(c, m);
        // MemoryVolume moves the received slices into the blocks; FileVolume
        // copies them into aligned objs before write() returns.
        vol_->write(m.offset, p->call.data(), Completion{&BlockServer::done_plain, p});
        p->sync = false;
    }

    void on_flush(rpc::Call& c) {
        BlockMeta m;
        if (!parse_meta(c, &m, true)) return;
        Pending* p = take(c, m);
        vol_->flush(Completion{&BlockServer::done_plain, p});
        p->sync = false;
    }
    static void done_plain(void* cookie, VolStatus st, std::span<Slice>) {
        auto* p = static_cast<Pending*>(cookie);
        BlockServer* s = p->self;
        if (!p->sync) ++s->n_.deferred;
        reply_meta(p->call, p->meta, {}, st == VolStatus::Ok ? rpc::Status::Ok : app_status(st));
        s->give_back(p);
    }

    Engine& e_;
    std::unique_ptr<Volume> vol_;
    bool crc_;
    std::unique_ptr<rpc::Server> srv_;
    std::vector<std::unique_ptr<Pending>> pool_;  // every Pending made (grows to the most outstanding)
    std::vector<Pending*> free_;
    Counters n_;
};

} // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    auto rt = examples::start_or_exit("crescent-blockd", o.rt, o.show_plan);
    const unsigned n = rt->engine_count();
    std::vector<std::unique_ptr<BlockServer>> servers(n);
    std::vector<std::string> errors(n);
    rt->run([&](Engine& e) {
        unsigned i = e.index();
        std::string err;
        std::unique_ptr<Volume> vol;
        std::string what;
        if (o.file.empty()) {
            vol = MemoryVolume::create(o.size, &err);
            what = "in memory, " + std::to_string(o.size) + " bytes" + (n > 1 ? " (this engine's own volume)" : "");
        } else {
            FileOptions fo;
            fo.path = o.file;
            fo.size = o.size_given ? o.size : 0;
            fo.allow_buffered = o.allow_buffered;
            fo.queue_depth = o.queue_depth;
            auto fv = FileVolume::open(fo, &err);
            if (fv) what = fv->describe();
            vol = std::move(fv);
        }
        if (!vol) {
            errors[i] = err;
            rt->stop();
            return;
        }
        servers[i] = std::make_unique<BlockServer>(e, std::move(vol), o.crc);
        if (!servers[i]->start(o, &err) ||
            (o.kernel_port && (i == 0 || !o.file.empty()) && !servers[i]->listen_kernel(o.kernel_port, &err))) {
            errors[i] = err;
            rt->stop();
            return;
        }
        std::fprintf(stderr, "crescent-blockd: engine %u serving %s:%u%s (%s mode, crc %s): %s\n", i,
                     rt->local_ip().to_string().c_str(), o.port,
                     o.kernel_port && (i == 0 || !o.file.empty())
                         ? (" and kernel port " + std::to_string(o.kernel_port)).c_str()
                         : "",
                     o.rt.engine.mode == DispatchMode::Batch ? "batch" : "inline", o.crc ? "on" : "off",
                     what.c_str());
    });
    int rc = 0;
    for (unsigned i = 0; i < n; ++i)
        if (!errors[i].empty()) {
            std::fprintf(stderr, "crescent-blockd: engine %u: %s\n", i, errors[i].c_str());
            rc = 1;
        }
    if (o.stats) {
        for (unsigned i = 0; i < n; ++i) {
            if (servers[i]) servers[i]->print_stats(stderr);
            examples::print_engine_stats(rt->engine(i));
        }
    }
    servers.clear();  // before the runtime (and its arena) goes
    return rc;
}
