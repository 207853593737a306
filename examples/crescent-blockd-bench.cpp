// crescent-blockd-bench — load and verify a crescent-blockd: writes blocks of
// seeded random contents with their CRC32C in the metadata, reads them back and
// checks the CRC of every read against what it wrote.
//
//   crescent-blockd-bench (--iface IF | --eal "ARGS" --ip A.B.C.D/LEN ...) --server IP [--port 7100]
//       [--transport crescent|kernel] [--server-engines N] [--conns N] [--iodepth N]
//       [--duration SEC | --ops N] [--block-size B] [--region BYTES] [--read-pct P]
//       [--flush-every N] [--seed S] [--no-verify] [--no-server-crc] [--deadline-ms N] [--cores N]
//
// Each client engine owns its own slice of the region (slots of --block-size
// bytes), keeps at most --iodepth operations outstanding on its rpc::Channel,
// and never has two operations on one slot at a time, so the expected contents
// of every slot are known exactly: a slot that was never written is written
// first; then each operation reads it (--read-pct) or writes it anew. Every
// --flush-every operations a FLUSH goes out. After the timed phase, every
// written slot is read once more and verified (unless --no-verify).
//
// A read is correct when its length is the slot's, the CRC32C of the data is
// the one written, and (unless --no-server-crc) the CRC in the reply's
// metadata agrees. Output: the configuration and results as one JSON line on
// stdout (ops/s, MB/s, p50/p99/p99.9 latency from rpc::Histogram, errors,
// mismatches), a summary on stderr. Exit status 0 iff there was no error and
// no mismatch and every engine connected.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/rpc/channel.hpp>
#include <crescent/rpc/histogram.hpp>
#include <crescent/runtime.hpp>

#include "examples/blockd/crc32c.hpp"
#include "examples/blockd/proto.hpp"
#include "examples/cli.hpp"

namespace {

using namespace crescent;
using namespace crescent::blockd;

struct Options {
    RuntimeOptions rt;
    std::string server;
    uint16_t port = 7100;
    rpc::Transport transport = rpc::Transport::Crescent;
    Ipv4 bind;  // kernel transport: source address (0 = the kernel's choice)
    unsigned server_engines = 1;
    unsigned conns = 1;              // per server engine
    unsigned iodepth = 16;           // per client engine
    double duration = 0;             // seconds (0 with ops = 0: 10 s)
    uint64_t ops = 0;                // total operations of the timed phase (all engines)
    uint32_t block_size = kBlockSize;
    uint64_t region = 16u << 20;     // bytes of the volume used, from offset 0
    unsigned read_pct = 50;
    uint64_t flush_every = 0;
    uint64_t seed = 1;
    bool verify = true;
    bool server_crc = true;
    uint64_t deadline_ms = 5000;
    uint64_t max_errors = 0;         // stop issuing after more errors than this
    bool stats = false;
};

[[noreturn]] void die(const std::string& msg) { examples::fail("crescent-blockd-bench", msg); }

const char* usage =
    "usage: crescent-blockd-bench (--iface IFACE | --eal \"ARGS\" --ip A.B.C.D/LEN [--mac MAC] [--neighbour IP=MAC]...)\n"
    "           --server IP [--port P] [--transport crescent|kernel] [--server-engines N] [--conns N]\n"
    "           [--iodepth N] [--duration SEC | --ops N] [--block-size B] [--region BYTES] [--read-pct P]\n"
    "           [--flush-every N] [--seed S] [--no-verify] [--no-server-crc] [--deadline-ms N] [--max-errors N]\n"
    "           [--cores N] [--file-prefix P] [--no-huge] [--impair loss=P,dup=P,reorder=P,seed=N] [--mode inline|batch]\n"
    "           [--idle-sleep-us N] [--stats]\n"
    "  --server-engines N  engines of the server to reach (crescent: one connection set per engine)\n"
    "  --conns N           connections per server engine (default 1)\n"
    "  --iodepth N         operations outstanding per client engine (default 16)\n"
    "  --block-size B      bytes per READ/WRITE, a multiple of 4096 (default 4096)\n"
    "  --region BYTES      bytes of the volume used from offset 0, split between client engines (16 MiB)\n"
    "  --read-pct P        reads among operations on written slots (default 50)\n"
    "  --flush-every N     a FLUSH every N operations (default 0: none)\n"
    "  --no-verify         skip the final read-back of every written slot\n"
    "  --no-server-crc     do not compare the CRC in READ replies (server started with --no-crc)\n"
    "  --deadline-ms N     per-call deadline (default 5000)\n"
    "  --max-errors N      after more than N errors stop issuing and skip the read-back (default 0)\n"
    "  --bind IP           kernel transport: connect from this local address\n";

Options parse(int argc, char** argv) {
    Options o;
    examples::Cli cli("crescent-blockd-bench", argc, argv, usage);
    while (cli.next()) {
        if (cli.runtime_option(o.rt) || cli.engine_option(o.rt)) continue;
        std::string_view a = cli.flag();
        if (a == "--server") o.server = cli.value();
        else if (a == "--port") o.port = uint16_t(cli.number(1, 65535));
        else if (a == "--transport") {
            const char* v = cli.value();
            if (!rpc::parse_transport(v, &o.transport)) die(std::string("--transport: '") + v + "' is not crescent or kernel");
        } else if (a == "--server-engines") o.server_engines = unsigned(cli.number(1, 64));
        else if (a == "--conns") o.conns = unsigned(cli.number(1, 256));
        else if (a == "--iodepth") o.iodepth = unsigned(cli.number(1, 4096));
        else if (a == "--duration") o.duration = double(cli.number(1, 86400));
        else if (a == "--ops") o.ops = cli.number(1, uint64_t(1) << 40);
        else if (a == "--block-size") {
            o.block_size = uint32_t(cli.number(kBlockSize, 16u << 20));
            if (o.block_size % kBlockSize) die("--block-size: " + std::to_string(o.block_size) + " is not a multiple of 4096");
        } else if (a == "--region") o.region = cli.number(kBlockSize, uint64_t(1) << 44);
        else if (a == "--read-pct") o.read_pct = unsigned(cli.number(0, 100));
        else if (a == "--flush-every") o.flush_every = cli.number(0, uint64_t(1) << 40);
        else if (a == "--seed") o.seed = cli.number(0, ~uint64_t(0));
        else if (a == "--no-verify") o.verify = false;
        else if (a == "--no-server-crc") o.server_crc = false;
        else if (a == "--deadline-ms") o.deadline_ms = cli.number(1, 3600000);
        else if (a == "--max-errors") o.max_errors = cli.number(0, ~uint64_t(0));
        else if (a == "--stats") o.stats = true;
        else if (a == "--bind") {
            const char* v = cli.value();
            if (!Ipv4::parse(v, &o.bind)) die(std::string("--bind: '") + v + "' is not an IPv4 address");
        }
        else cli.unknown();
    }
    if (o.rt.iface.empty() == o.rt.eal.empty()) die("give exactly one of --iface IFACE or --eal \"ARGS\"");
    if (!o.rt.eal.empty() && o.rt.ip.empty()) die("--eal needs --ip A.B.C.D/LEN (the device has no kernel address)");
    if (o.server.empty()) die("--server IP is required");
    if (o.bind.v != 0 && o.transport != rpc::Transport::Kernel) die("--bind applies to --transport kernel only");
    if (o.duration > 0 && o.ops > 0) die("give --duration or --ops, not both");
    if (o.duration == 0 && o.ops == 0) o.duration = 10;
    uint64_t slots = o.region / o.block_size;
    if (slots < uint64_t(o.rt.cores) * o.iodepth)
        die("--region " + std::to_string(o.region) + " holds " + std::to_string(slots) + " blocks of " +
            std::to_string(o.block_size) + ": fewer than --iodepth x --cores slots");
    return o;
}

// xorshift64*: seeded block contents.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) { if (!s) s = 1; }
    uint64_t next() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 0x2545F4914F6CDD1Dull;
    }
};

struct Result {
    bool connected = false;
    bool finished = false;                           // ran to its end (not stopped by a signal)
    uint64_t reads = 0, writes = 0, flushes = 0;     // Ok, timed phase
    uint64_t bytes = 0;                              // read + written, timed phase
    uint64_t verified = 0;                           // reads whose CRC matched (both phases)
    uint64_t errors = 0, mismatches = 0;
    double seconds = 0;                              // timed phase
    rpc::Histogram all, read, write, flush;          // timed phase, ns
    std::string first_error;
    rpc::ChannelStats channel;
};

class Client {
public:
    Client(Engine& e, const Options& o, Ipv4 server, uint64_t first_slot, uint64_t nslots, uint64_t ops,
           std::function<void()> on_finished)
        : e_(e), o_(o), first_(first_slot), slots_(nslots), ops_target_(ops), rng_(o.seed * 1000003 + e.index()),
          on_finished_(std::move(on_finished)) {
        rpc::ChannelOptions co;
        co.server = {server, o.port};
        co.transport = o.transport;
        co.server_engines = o.transport == rpc::Transport::Crescent ? o.server_engines : 1;
        co.conns_per_engine = o.transport == rpc::Transport::Crescent ? o.conns : o.conns * o.server_engines;
        co.depth = o.iodepth;  // any one connection may carry all of them
        co.queue_max = o.iodepth * 2;
        co.deadline = std::chrono::milliseconds(o.deadline_ms);
        co.stream.kernel_bind_ip = o.bind;
        ch_ = std::make_unique<rpc::Channel>(e, co);
    }
    // A continuation the channel runs while it is destroyed must not issue more.
    ~Client() {
        phase_ = Phase::Finished;
        ch_.reset();
    }
    Result& result() { return r_; }
    // Stopped from outside (signal): close the timed phase's clock now.
    void interrupted() {
        if (phase_ == Phase::Timed && r_.connected)
            r_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    }

    void start() {
        t_connect_ = std::chrono::steady_clock::now();
        wait_connected();
    }

private:
    enum class Kind : uint8_t { Read, Write, Flush };
    enum class SlotState : uint8_t { Unwritten, Written, Unknown };
    struct Slot {
        uint32_t crc = 0;          // CRC32C of what the server holds (Written)
        uint32_t pending_crc = 0;  // of the write in flight
        SlotState state = SlotState::Unwritten;
        bool busy = false;
        Kind kind = Kind::Read;
    };
    static constexpr uint32_t kFlushSlot = ~0u;

    void wait_connected() {
        if (ch_->connected() == ch_->connections()) {
            r_.connected = true;
            t0_ = std::chrono::steady_clock::now();
            deadline_ = o_.duration > 0 ? t0_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                    std::chrono::duration<double>(o_.duration))
                                        : std::chrono::steady_clock::time_point::max();
            arm_tick();
            pump();
            return;
        }
        if (std::chrono::steady_clock::now() - t_connect_ > std::chrono::seconds(10)) {
            error("could not connect " + std::to_string(ch_->connections()) + " connection(s) in 10 s: " +
                  ch_->last_error());
            return finish();
        }
        e_.add_timer(std::chrono::milliseconds(2), [this] { wait_connected(); });
    }
    // The duration may pass while nothing completes (a stalled server): check it on a timer.
    void arm_tick() {
        e_.add_timer(std::chrono::milliseconds(20), [this] {
            if (phase_ == Phase::Done || phase_ == Phase::Finished) return;
            if (phase_ == Phase::Timed && std::chrono::steady_clock::now() >= deadline_) pump();
            arm_tick();
        });
    }

    void error(const std::string& what) {
        ++r_.errors;
        if (r_.first_error.empty()) r_.first_error = what;
    }
    void mismatch(const std::string& what) {
        ++r_.mismatches;
        if (r_.first_error.empty()) r_.first_error = what;
    }

    // Issue operations up to the iodepth; move through the phases.
    void pump() {
        if (phase_ == Phase::Timed) {
            auto target_reached = [&] { return ops_target_ && issued_ >= ops_target_; };
            bool over = ops_target_ ? target_reached() : std::chrono::steady_clock::now() >= deadline_;
            over = over || r_.errors > o_.max_errors;
            if (!over) {
                bool stuck = false;
                while (outstanding_ < o_.iodepth && !target_reached())
                    if (!issue_timed()) {
                        stuck = true;
                        break;
                    }
                if (outstanding_ > 0) return;
                // Nothing in flight: the target was reached, or nothing could
                // be issued (every slot unknown after failed writes, arena empty).
                if (stuck && r_.errors == 0) error("no operation could be issued");
            } else if (outstanding_ > 0) {
                return;  // drain
            }
            r_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
            phase_ = o_.verify && r_.errors <= o_.max_errors ? Phase::Verify : Phase::Done;
            verify_next_ = 0;
        }
        if (phase_ == Phase::Verify) {
            if (r_.errors > o_.max_errors) verify_next_ = slots_.size();
            while (outstanding_ < o_.iodepth && verify_next_ < slots_.size()) {
                uint64_t i = verify_next_++;
                if (slots_[i].state == SlotState::Written) issue(Kind::Read, uint32_t(i));
            }
            if (outstanding_ > 0) return;
            phase_ = Phase::Done;
        }
        if (phase_ == Phase::Done && outstanding_ == 0) finish();
    }

    bool issue_timed() {
        ++issued_;
        if (o_.flush_every && issued_ % o_.flush_every == 0) return issue(Kind::Flush, kFlushSlot);
        // A free slot: at most iodepth are busy, so a short probe finds one.
        uint64_t i = rng_.next() % slots_.size();
        for (unsigned probe = 0; slots_[i].busy || slots_[i].state == SlotState::Unknown; ++probe) {
            if (probe > o_.iodepth + 16) return false;
            i = (i + 1) % slots_.size();
        }
        Slot& s = slots_[i];
        bool read = s.state == SlotState::Written && rng_.next() % 100 < o_.read_pct;
        return issue(read ? Kind::Read : Kind::Write, uint32_t(i));
    }

    bool issue(Kind k, uint32_t slot) {
        BlockMeta m;
        std::vector<Slice> data;
        if (k != Kind::Flush) {
            m.offset = (first_ + slot) * uint64_t(o_.block_size);
            m.len = o_.block_size;
        }
        if (k == Kind::Write) {
            // Fresh objs each time: the channel sends them zero-copy and they
            // are read in place until the server acknowledges them.
            uint32_t crc = 0;
            for (uint32_t at = 0; at < o_.block_size;) {
                uint32_t n = std::min<uint32_t>(o_.block_size - at, 65536);
                Slice b = zbuf::Arena::current()->alloc_slice(n);
                if (!b) {
                    error("no zbuf obj for a write buffer (arena exhausted)");
                    return false;
                }
                auto* p = reinterpret_cast<unsigned char*>(b.data());
                for (uint32_t j = 0; j < n; j += 8) {
                    uint64_t v = rng_.next();
                    std::memcpy(p + j, &v, 8);
                }
                crc = crc32c_extend(crc, p, n);
                data.push_back(std::move(b));
                at += n;
            }
            m.crc32c = crc;
            slots_[slot].pending_crc = crc;
        }
        std::byte mb[kMetaSize];
        m.encode(mb);
        uint32_t method = k == Kind::Read ? kRead : k == Kind::Write ? kWrite : kFlush;
        rpc::Status st = ch_->call(method, std::span<const std::byte>(mb, kMetaSize), data,
                                   [this, slot](rpc::Reply& r) { on_reply(slot, r); });
        if (st != rpc::Status::Ok) {
            error(std::string("call refused: ") + std::string(rpc::status_name(st)));
            return false;
        }
        if (slot != kFlushSlot) {
            slots_[slot].busy = true;
            slots_[slot].kind = k;
        } else {
            ++flushes_outstanding_;
        }
        ++outstanding_;
        return true;
    }

    void on_reply(uint32_t slot, rpc::Reply& r) {
        --outstanding_;
        if (phase_ == Phase::Finished) return;  // the channel is going away
        bool timed = phase_ == Phase::Timed;
        Kind k = Kind::Flush;
        if (slot != kFlushSlot) {
            k = slots_[slot].kind;
            slots_[slot].busy = false;
        } else {
            --flushes_outstanding_;
        }
        const char* kname = k == Kind::Read ? "READ" : k == Kind::Write ? "WRITE" : "FLUSH";
        uint64_t off = slot == kFlushSlot ? 0 : (first_ + slot) * uint64_t(o_.block_size);
        if (r.status != rpc::Status::Ok) {
            std::string app = app_status_name(r.status);
            error(std::string(kname) + " at " + std::to_string(off) + ": " +
                  (app.empty() ? std::string(rpc::status_name(r.status)) : app) +
                  (r.error.empty() ? "" : " (" + std::string(r.error) + ")"));
            // A write that failed in transit may or may not have landed.
            if (k == Kind::Write) slots_[slot].state = SlotState::Unknown;
            return pump();
        }
        BlockMeta rm;
        bool meta_ok = BlockMeta::decode(r.meta, &rm);
        Slot* s = slot == kFlushSlot ? nullptr : &slots_[slot];
        switch (k) {
        case Kind::Write:
            if (!meta_ok || rm.offset != off || rm.len != o_.block_size) {
                s->state = SlotState::Unknown;
                error("WRITE at " + std::to_string(off) + ": reply metadata does not echo offset/len");
                break;
            }
            s->crc = s->pending_crc;
            s->state = SlotState::Written;
            if (timed) ++r_.writes, r_.bytes += o_.block_size;
            break;
        case Kind::Read: {
            size_t got = 0;
            for (const Slice& x : r.data) got += x.size();
            uint32_t crc = crc32c(r.data);
            if (got != o_.block_size) {
                mismatch("READ at " + std::to_string(off) + ": " + std::to_string(got) + " bytes, expected " +
                         std::to_string(o_.block_size));
            } else if (crc != s->crc) {
                char b[160];
                std::snprintf(b, sizeof b, "READ at %llu: data CRC32C %08x, wrote %08x",
                              (unsigned long long)off, crc, s->crc);
                mismatch(b);
            } else if (o_.server_crc && (!meta_ok || rm.crc32c != crc)) {
                char b[160];
                std::snprintf(b, sizeof b, "READ at %llu: reply metadata CRC32C %08x, data %08x",
                              (unsigned long long)off, meta_ok ? rm.crc32c : 0, crc);
                mismatch(b);
            } else {
                ++r_.verified;
                if (timed) ++r_.reads, r_.bytes += o_.block_size;
            }
            break;
        }
        case Kind::Flush:
            if (timed) ++r_.flushes;
            break;
        }
        if (timed) {
            uint64_t ns = uint64_t(std::max<int64_t>(0, r.latency.count()));
            r_.all.record(ns);
            (k == Kind::Read ? r_.read : k == Kind::Write ? r_.write : r_.flush).record(ns);
        }
        pump();
    }

    void finish() {
        if (phase_ == Phase::Finished) return;
        phase_ = Phase::Finished;
        r_.finished = true;
        r_.channel = ch_->stats();
        // Not from inside one of the channel's own continuations: next tick.
        e_.add_timer(Duration(0), [this] {
            ch_->close();
            ch_.reset();
            on_finished_();
        });
    }

    enum class Phase : uint8_t { Timed, Verify, Done, Finished };

    Engine& e_;
    const Options& o_;
    uint64_t first_;                    // first slot of this engine in the region
    std::vector<Slot> slots_;           // this engine's slots
    uint64_t ops_target_;               // 0: by time
    Rng rng_;
    std::function<void()> on_finished_;
    std::unique_ptr<rpc::Channel> ch_;
    Phase phase_ = Phase::Timed;
    uint64_t issued_ = 0;
    unsigned outstanding_ = 0;
    unsigned flushes_outstanding_ = 0;
    uint64_t verify_next_ = 0;
    std::chrono::steady_clock::time_point t_connect_, t0_, deadline_;
    Result r_;
};

double us(uint64_t ns) { return double(ns) / 1e3; }

} // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    Ipv4 server_ip;
    if (!Ipv4::parse(o.server, &server_ip)) die("--server: '" + o.server + "' is not an IPv4 address");
    auto rt = examples::start_or_exit("crescent-blockd-bench", o.rt, false);
    const unsigned n = rt->engine_count();
    const uint64_t slots_total = o.region / o.block_size;
    std::vector<std::unique_ptr<Client>> clients(n);
    std::atomic<unsigned> engines_finished{0};
    rt->run([&](Engine& e) {
        unsigned i = e.index();
        uint64_t per = slots_total / n;
        uint64_t ops = o.ops ? o.ops / n + (i < o.ops % n ? 1 : 0) : 0;
        clients[i] = std::make_unique<Client>(e, o, server_ip, per * i, per, ops, [&] {
            if (++engines_finished == n) rt->stop();
        });
        clients[i]->start();
    });

    Result total;
    bool connected = true, finished = true;
    for (auto& c : clients) {
        if (!c) { connected = false; continue; }
        c->interrupted();
        Result& r = c->result();
        connected = connected && r.connected;
        finished = finished && r.finished;
        total.reads += r.reads;
        total.writes += r.writes;
        total.flushes += r.flushes;
        total.bytes += r.bytes;
        total.verified += r.verified;
        total.errors += r.errors;
        total.mismatches += r.mismatches;
        total.seconds = std::max(total.seconds, r.seconds);
        total.all.merge(r.all);
        total.read.merge(r.read);
        total.write.merge(r.write);
        total.flush.merge(r.flush);
        if (total.first_error.empty()) total.first_error = r.first_error;
        if (o.stats)
            std::fprintf(stderr,
                         "channel: calls=%llu ok=%llu failed=%llu deadline_exceeded=%llu connection_lost=%llu "
                         "late_replies=%llu connects=%llu disconnects=%llu bytes_out=%llu bytes_in=%llu\n",
                         (unsigned long long)r.channel.calls, (unsigned long long)r.channel.ok,
                         (unsigned long long)r.channel.failed, (unsigned long long)r.channel.deadline_exceeded,
                         (unsigned long long)r.channel.connection_lost, (unsigned long long)r.channel.late_replies,
                         (unsigned long long)r.channel.connects, (unsigned long long)r.channel.disconnects,
                         (unsigned long long)r.channel.bytes_out, (unsigned long long)r.channel.bytes_in);
    }
    if (o.stats)
        for (unsigned i = 0; i < n; ++i) examples::print_engine_stats(rt->engine(i));
    clients.clear();

    uint64_t ops = total.reads + total.writes + total.flushes;
    double secs = total.seconds > 0 ? total.seconds : 1e-9;
    bool ok = connected && finished && total.errors == 0 && total.mismatches == 0 && ops > 0;
    if (!finished && total.first_error.empty()) total.first_error = "stopped before the end (signal)";
    std::string err = total.first_error;
    for (char& ch : err)
        if (ch == '"' || ch == '\\') ch = '\'';
    std::printf("{\"ok\":%s,\"transport\":\"%s\",\"server\":\"%s:%u\",\"server_engines\":%u,\"conns\":%u,"
                "\"client_engines\":%u,\"iodepth\":%u,\"block_size\":%u,\"region\":%llu,\"read_pct\":%u,"
                "\"flush_every\":%llu,\"seed\":%llu,\"impair\":\"%s\",\"seconds\":%.3f,\"ops\":%llu,\"reads\":%llu,"
                "\"writes\":%llu,\"flushes\":%llu,\"ops_s\":%.0f,\"mb_s\":%.2f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
                "\"p999_us\":%.1f,\"read_p50_us\":%.1f,\"read_p99_us\":%.1f,\"write_p50_us\":%.1f,"
                "\"write_p99_us\":%.1f,\"verified\":%llu,\"errors\":%llu,\"mismatches\":%llu%s%s%s}\n",
                ok ? "true" : "false", std::string(rpc::transport_name(o.transport)).c_str(), o.server.c_str(),
                o.port, o.server_engines, o.conns, n, o.iodepth, o.block_size, (unsigned long long)o.region,
                o.read_pct, (unsigned long long)o.flush_every, (unsigned long long)o.seed, o.rt.impair.c_str(),
                total.seconds, (unsigned long long)ops, (unsigned long long)total.reads,
                (unsigned long long)total.writes, (unsigned long long)total.flushes, double(ops) / secs,
                double(total.bytes) / secs / 1e6, us(total.all.percentile(50)), us(total.all.percentile(99)),
                us(total.all.percentile(99.9)), us(total.read.percentile(50)), us(total.read.percentile(99)),
                us(total.write.percentile(50)), us(total.write.percentile(99)),
                (unsigned long long)total.verified, (unsigned long long)total.errors,
                (unsigned long long)total.mismatches, err.empty() ? "" : ",\"error\":\"", err.c_str(),
                err.empty() ? "" : "\"");
    std::fprintf(stderr,
                 "crescent-blockd-bench: %s, %u B blocks, iodepth %u x %u engine(s): %.0f ops/s, %.1f MB/s, "
                 "p50 %.1f us, p99 %.1f us, p99.9 %.1f us; %llu reads verified; %llu errors, %llu mismatches%s%s\n",
                 std::string(rpc::transport_name(o.transport)).c_str(), o.block_size, o.iodepth, n,
                 double(ops) / secs, double(total.bytes) / secs / 1e6, us(total.all.percentile(50)),
                 us(total.all.percentile(99)), us(total.all.percentile(99.9)), (unsigned long long)total.verified,
                 (unsigned long long)total.errors, (unsigned long long)total.mismatches,
                 total.first_error.empty() ? "" : ": first: ", total.first_error.c_str());
    return ok ? 0 : 1;
}
