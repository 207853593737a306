// crescent — micro-benchmark of the RPC layer's own cost (issue 9), each
// figure next to a baseline measured in the same run, and their ratio (the
// machine is shared and noisy: absolute figures move, ratios of back-to-back
// measurements much less). Not a test: prints tables.
//
// 1. Framing (rpc/framing.hpp), one thread, no network, ns per message:
//      encode   Encoder::encode of a 32 B header + 16 B metadata + one data
//               slice (64 B or 4 KiB; the data slice is moved, never copied)
//      decode   Decoder::feed of wire bytes, each message in a slice of its
//               own (as the RX path hands it over: the harness keeps no
//               reference), or 100 messages coalesced in one slice; the sink
//               checks call ids and lengths and takes the data slices
//    baseline: memcpy of the same 48 header+meta bytes (a libc memcpy, length
//    not known at compile time) into a TX block / out of the wire bytes, the
//    least a copying framer does per message; and, for scale, memcpy of the
//    whole message (what a framer that copies data would pay).
// 2. End to end in one process (tests/support/ring_bed.hpp: two engines,
//    inline dispatch, polled alternately by this one thread), crescent TCP
//    over DPDK's net_ring and kernel TCP over 127.0.0.1 in the same engines'
//    epoll sets. Closed loop at depth 1 and 16, 64 B and 4 KiB of data:
//      RPC  rpc::Channel (one connection, `depth` calls in flight) calling an
//           rpc::Server echo method (reply = the request's 16 B meta + its
//           data slices, zero copy); 32+16+N bytes each way
//      raw  the same 32+16+N bytes per exchange through rpc::Stream with no
//           framing: the client sends one fresh zbuf per exchange, the server
//           echoes every delivery with one send; the client corks while it
//           handles a delivery, as rpc::Channel does around continuations
//    calls/s and ns of CPU (process CPU time, client + server + kernel work
//    done in this thread) per call; RPC/raw is the framework's overhead over
//    the bare transport. Rounds alternate raw and RPC (the first side
//    alternating too); the ratio is the median of the per-round ratios.
// 3. --callgrind-mode: a fixed number of depth-1 calls (or --depth D in
//    flight) with 64 B of data (or --size N), or raw exchanges of the same
//    bytes with --raw, over
//    crescent/net_ring and nothing else, for
//    tools/bench-rpc-instructions (valgrind --tool=callgrind instruction
//    counts are repeatable on this machine; wall time is not). With
//    --count-from N1 callgrind counts only calls N1..N: instrumentation
//    starts when the N1-th call completes and stops at the N-th (run under
//    --instr-atstart=no), so EAL start-up and teardown stay out of the count.
//
// 4. --idle-polls N: the loop with nothing to do. Both engines of the bed
//    with an rpc::Channel connected to an rpc::Server and a raw stream open,
//    nothing in flight; N calls of Engine::poll_once() on each, timed (ns per
//    poll, best of 5 rounds), and only those counted by callgrind (run under
//    --instr-atstart=no). A frame that arrives waits on average half an idle
//    iteration before the poll that finds it: on a bed whose round trip is
//    ~1-2 us (memif) an idle iteration's cost is latency on both sides.
//
// --copy-tx (2 and 3): the net_ring ports without MULTI_SEGS, as AF_XDP's, so
// every segment is copied into one frame instead of chained over the zbufs.
//
//   bench_rpc [--seconds S] [--rounds R] [--messages N] [--only framing|e2e]
//             [--transport crescent|kernel|both] [--copy-tx]
//   bench_rpc --callgrind-mode --calls N [--count-from N1] [--raw] [--size N] [--depth D] [--copy-tx]
//   bench_rpc --idle-polls N
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <rte_version.h>
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define CRESCENT_HAVE_CALLGRIND_H 1
#endif

#include <crescent/rpc/channel.hpp>
#include <crescent/rpc/server.hpp>
#include <crescent/rpc/stream.hpp>
#include <crescent/zbuf.hpp>

#include "rpc/framing.hpp"

// tests/support/ring_bed.hpp is written for Catch2 tests; this program links
// no Catch2: skip its header and give the bed a REQUIRE that stops here.
[[noreturn]] static void bench_require_failed(const char* what, const char* file, int line) {
    std::fprintf(stderr, "bench_rpc: set-up failed: %s (%s:%d)\n", what, file, line);
    std::exit(1);
}
#define TWOBLUECUBES_SINGLE_INCLUDE_CATCH_HPP_INCLUDED
#define REQUIRE(...)                                                                  \
    do {                                                                              \
        if (!(__VA_ARGS__)) bench_require_failed(#__VA_ARGS__, __FILE__, __LINE__); \
    } while (0)
#include "tests/support/ring_bed.hpp"

using namespace crescent;
using namespace std::chrono_literals;
using crescent::test::RingBed;

namespace {

constexpr uint32_t kEchoMethod = 1;
constexpr size_t kMetaLen = 16;
constexpr size_t kWireOverhead = rpc::kHeaderSize + kMetaLen;  // 48 B ahead of the data

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "bench_rpc: %s\n", what.c_str());
    std::exit(1);
}

template <class T>
inline void escape(T const& v) {
    asm volatile("" : : "r,m"(v) : "memory");
}

using Clock = std::chrono::steady_clock;

double cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

std::string loadavg() {
    std::ifstream f("/proc/loadavg");
    std::string a, b, c;
    f >> a >> b >> c;
    return a + " " + b + " " + c;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string size_name(size_t n) { return n >= 1024 && n % 1024 == 0 ? std::to_string(n / 1024) + " KiB" : std::to_string(n) + " B"; }

// ---- 1. framing --------------------------------------------------------------------

// Takes every message's data slices (as rpc::Server moves them into a Call)
// and checks the stream: call ids in order, the lengths sent.
struct CheckingSink final : rpc::MessageSink {
    uint64_t next_id = 0, bad = 0;
    uint32_t data_len = 0;
    std::vector<Slice> keep;
    void on_message(rpc::Message& m) override {
        size_t got = 0;
        for (Slice& s : m.data) {
            got += s.size();
            keep.push_back(std::move(s));
        }
        if (m.h.call_id != next_id || m.h.data_len != data_len || got != data_len || m.meta.size() != kMetaLen) ++bad;
        ++next_id;
    }
};

struct FramingResult {
    size_t data = 0;
    double encode = 0, decode_each = 0, decode_100 = 0;    // ns/message
    double copy_enc = 0, copy_dec = 0, copy_whole = 0;     // ns/message, baselines
};

// Best-of-`rounds` ns per message of fn(n).
template <class F>
double best_ns(unsigned rounds, uint64_t n, F&& fn) {
    fn(std::max<uint64_t>(n / 10, 1));  // warm up
    double best = 1e30;
    for (unsigned r = 0; r < rounds; ++r) {
        auto t0 = Clock::now();
        fn(n);
        best = std::min(best, std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(n));
    }
    return best;
}

FramingResult bench_framing(size_t data_len, unsigned rounds, uint64_t msgs) {
    zbuf::Arena* arena = zbuf::Arena::current();
    FramingResult r;
    r.data = data_len;
    const size_t msg_len = kWireOverhead + data_len;
    std::array<std::byte, kMetaLen> meta;
    for (size_t i = 0; i < kMetaLen; ++i) meta[i] = std::byte(0xa0 + i);

    // encode: the data slice goes out with the header slice and comes back for
    // the next message (moves only); dropping the header slice is part of it.
    {
        rpc::Encoder enc;
        Slice data = arena->alloc_slice(data_len);
        if (!data) die("framing: zbuf alloc");
        std::memset(data.data(), 'd', data_len);
        std::vector<Slice> out;
        out.reserve(4);
        uint64_t id = 0;
        r.encode = best_ns(rounds, msgs, [&](uint64_t n) {
            for (uint64_t i = 0; i < n; ++i) {
                rpc::Header h;
                h.kind = rpc::Kind::Request;
                h.method = kEchoMethod;
                h.call_id = id++;
                if (!enc.encode(h, meta, std::span<Slice>(&data, 1), out) || out.size() != 2)
                    die("framing: encode refused");
                data = std::move(out[1]);
                out.clear();
            }
        });
    }

    // The wire bytes of message `id`, written by an Encoder (header+meta slice,
    // then the data) at `dst`.
    rpc::Encoder wenc;
    std::vector<Slice> wout;
    auto write_msg = [&](std::byte* dst, uint64_t id) {
        Slice d = arena->alloc_slice(data_len);
        if (!d) die("framing: zbuf alloc");
        std::memset(d.data(), int(id & 0xff), data_len);
        rpc::Header h;
        h.method = kEchoMethod;
        h.call_id = id;
        wout.clear();
        if (!wenc.encode(h, meta, std::span<Slice>(&d, 1), wout)) die("framing: encode refused");
        size_t off = 0;
        for (const Slice& s : wout) {
            std::memcpy(dst + off, s.data(), s.size());
            off += s.size();
        }
        if (off != msg_len) die("framing: encoded length");
        wout.clear();
    };

    // decode, one message per slice: 64 objs holding one message each, fed
    // with the harness holding no other reference (like an RX buffer); the
    // sink's data slice then holds the obj's last reference and gives it back.
    {
        constexpr size_t kObjs = 64;
        std::vector<Zbuf> objs;
        for (size_t k = 0; k < kObjs; ++k) {
            objs.push_back(arena->alloc(msg_len));
            if (!objs.back()) die("framing: zbuf alloc");
        }
        rpc::Decoder dec(rpc::Limits{});
        CheckingSink sink;
        sink.data_len = uint32_t(data_len);
        sink.keep.reserve(4);
        for (size_t k = 0; k < kObjs; ++k) write_msg(objs[k].data(), k);
        uint64_t id = 0;
        r.decode_each = best_ns(rounds, msgs, [&](uint64_t n) {
            for (uint64_t i = 0; i < n; ++i, ++id) {
                Zbuf& z = objs[id % kObjs];
                std::memcpy(z.data() + 16, &id, 8);  // the call id (header bytes 16..23) the sink expects
                Slice in(std::move(z), 0, msg_len);
                if (dec.feed(std::span<Slice>(&in, 1), sink) != rpc::Decoder::DecodeError::None)
                    die("framing: decode error");
                if (sink.keep.size() != 1) die("framing: a message's data not in one slice");
                z = sink.keep[0].take_buf();
                sink.keep.clear();
            }
        });
        if (sink.bad || dec.messages() != id) die("framing: the decoder delivered wrong messages");
    }

    // decode, 100 messages coalesced in one slice (4 such slices, refilled
    // with the next call ids before each feed outside the timing).
    {
        constexpr size_t kBatch = 100, kSlices = 4;
        std::vector<Zbuf> objs;
        for (size_t k = 0; k < kSlices; ++k) {
            objs.push_back(arena->alloc(kBatch * msg_len));
            if (!objs.back()) die("framing: zbuf alloc for 100 messages (" + std::to_string(kBatch * msg_len) + " B)");
        }
        rpc::Decoder dec(rpc::Limits{});
        CheckingSink sink;
        sink.data_len = uint32_t(data_len);
        sink.keep.reserve(kBatch + 4);
        uint64_t id = 0;
        for (size_t k = 0; k < kSlices; ++k)
            for (size_t j = 0; j < kBatch; ++j) write_msg(objs[k].data() + j * msg_len, k * kBatch + j);
        const uint64_t per_round = std::max<uint64_t>(msgs / kBatch, 1);
        double best = 1e30;
        for (unsigned round = 0; round <= rounds; ++round) {  // round 0: warm-up
            double ns = 0;
            for (uint64_t b = 0; b < per_round; ++b) {
                Zbuf& z = objs[(id / kBatch) % kSlices];
                auto t0 = Clock::now();
                Slice in(z.share(), 0, kBatch * msg_len);
                if (dec.feed(std::span<Slice>(&in, 1), sink) != rpc::Decoder::DecodeError::None)
                    die("framing: decode error");
                sink.keep.clear();
                ns += std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
                // Next time this obj comes round it must carry the ids then due.
                for (size_t j = 0; j < kBatch; ++j) {
                    uint64_t nid = id + kSlices * kBatch + j;
                    std::memcpy(z.data() + j * msg_len + 16, &nid, 8);
                }
                id += kBatch;
            }
            if (round > 0) best = std::min(best, ns / double(per_round * kBatch));
        }
        r.decode_100 = best;
        if (sink.bad || dec.messages() != id) die("framing: the decoder delivered wrong messages (coalesced)");
    }

    // Baselines. The length comes through a volatile, so this is the libc
    // memcpy a framer with variable-length metadata calls.
    {
        volatile size_t vlen = kWireOverhead;
        const size_t hm = vlen;
        volatile size_t vwhole = msg_len;
        const size_t whole = vwhole;
        constexpr size_t kObjs = 64;
        std::vector<std::byte> wire(kObjs * msg_len), copy(kObjs * msg_len);
        for (size_t k = 0; k < kObjs; ++k) write_msg(wire.data() + k * msg_len, k);
        std::vector<std::byte> block(rpc::Encoder::kDefaultBlockSize);
        std::array<std::byte, kWireOverhead> src{}, dst{};
        std::memcpy(src.data(), wire.data(), kWireOverhead);
        size_t used = 0;
        r.copy_enc = best_ns(rounds, msgs, [&](uint64_t n) {
            for (uint64_t i = 0; i < n; ++i) {
                if (block.size() - used < hm) used = 0;
                std::memcpy(block.data() + used, src.data(), hm);
                used += hm;
                escape(block.data());
            }
        });
        r.copy_dec = best_ns(rounds, msgs, [&](uint64_t n) {
            for (uint64_t i = 0; i < n; ++i) {
                std::memcpy(dst.data(), wire.data() + (i % kObjs) * msg_len, hm);
                escape(dst.data());
            }
        });
        r.copy_whole = best_ns(rounds, msgs, [&](uint64_t n) {
            for (uint64_t i = 0; i < n; ++i) {
                const size_t off = (i % kObjs) * msg_len;
                std::memcpy(copy.data() + off, wire.data() + off, whole);
                escape(copy.data());
            }
        });
    }
    return r;
}

int run_framing(unsigned rounds, uint64_t msgs) {
    // An arena of its own (destroyed before the ring bed makes its own): one
    // more size class, 512 KiB, so 100 coalesced 4 KiB messages fit one obj.
    zbuf::Config zc;
    zc.backing = zbuf::Backing::Anonymous;
    zc.bytes = 64u << 20;
    zc.size_classes = {2048, 4096, 16384, 65536, 512u << 10};
    std::string err;
    auto arena = zbuf::Arena::create(zc, &err);
    if (!arena) die("framing: arena: " + err);
    std::vector<FramingResult> res;
    {
        zbuf::CoreScope core(0);
        for (size_t d : {size_t(64), size_t(4096)}) res.push_back(bench_framing(d, rounds, msgs));
        arena->drain_returns();
        if (arena->live() != 0) die("framing: " + std::to_string(arena->live()) + " zbufs leaked");
    }
    arena.reset();

    std::printf("1. framing (rpc::Encoder / rpc::Decoder)\n"
                "   config: one thread, no network; header 32 B + meta %zu B + data; best of %u rounds x %llu messages;\n"
                "   arena anonymous 4 KiB pages; baseline = libc memcpy of the 48 header+meta bytes (runtime length)\n"
                "   into a 2 KiB TX block (encode) / out of the wire bytes (decode)\n\n",
                kMetaLen, rounds, (unsigned long long)msgs);
    std::printf("   %-8s %-38s %10s %14s %8s\n", "data", "operation", "ns/msg", "memcpy ns/msg", "ratio");
    for (const FramingResult& f : res) {
        const std::string d = size_name(f.data);
        auto line = [&](const char* op, double ns, double base) {
            std::printf("   %-8s %-38s %10.1f %14.1f %8.1f\n", d.c_str(), op, ns, base, ns / base);
        };
        line("encode", f.encode, f.copy_enc);
        line("decode, 1 message per slice", f.decode_each, f.copy_dec);
        line("decode, 100 messages per slice", f.decode_100, f.copy_dec);
        line("encode + decode (1 per slice)", f.encode + f.decode_each, f.copy_enc + f.copy_dec);
        line("encode + decode (100 per slice)", f.encode + f.decode_100, f.copy_enc + f.copy_dec);
        std::printf("   %-8s %-38s %10.1f   (memcpy of the whole %zu B message; encode+decode/it: %.2f)\n",
                    d.c_str(), "for scale: copying framer incl. data", f.copy_whole, kWireOverhead + f.data,
                    (f.encode + f.decode_each) / f.copy_whole);
    }
    std::printf("\n");
    return 0;
}

// ---- 2. end to end -------------------------------------------------------------------

// A closed loop of RPCs: `depth` calls in flight, each reply issuing the next
// while running. Checks status, length and the call number in the data.
struct RpcLoad {
    rpc::Channel* ch = nullptr;
    size_t size = 64;
    uint32_t depth = 1;
    bool running = false;
    uint64_t issued = 0, done = 0, bad = 0, limit = UINT64_MAX;
    std::string first_bad;
    std::array<std::byte, kMetaLen> meta{};
    Slice req;

    uint64_t outstanding() const { return issued - done; }
    void issue() {
        const uint64_t n = issued++;
        req = zbuf::Arena::current()->alloc_slice(size);
        if (!req) die("rpc: zbuf arena empty");
        std::memcpy(req.data(), &n, std::min<size_t>(8, size));
        rpc::Status st = ch->call(kEchoMethod, meta, std::span<Slice>(&req, 1), [this, n](rpc::Reply& r) { on_reply(n, r); });
        if (st != rpc::Status::Ok) die("rpc: call refused: " + std::string(rpc::status_name(st)));
    }
    void on_reply(uint64_t n, rpc::Reply& r) {
        ++done;
        size_t got = 0;
        for (const Slice& s : r.data) got += s.size();
        uint64_t echoed = ~n;
        if (!r.data.empty() && r.data[0].size() >= 8) std::memcpy(&echoed, r.data[0].data(), 8);
        if (r.status != rpc::Status::Ok || got != size || r.meta.size() != kMetaLen || (size >= 8 && echoed != n)) {
            if (r.status == rpc::Status::Cancelled && !running) return;  // the channel closing
            if (bad++ == 0)
                first_bad = "call " + std::to_string(n) + ": " + std::string(rpc::status_name(r.status)) + " " +
                            std::string(r.error) + ", " + std::to_string(got) + " B";
            return;
        }
        if (running && issued < limit) issue();
    }
    void start() {
        running = true;
        while (outstanding() < depth && issued < limit) issue();
    }
};

// The same bytes with no framing: exchanges of 32+16+N bytes over a Stream,
// `depth` in flight; the first 8 bytes of each carry its number.
struct RawLoad final : rpc::StreamHandler {
    rpc::Stream* s = nullptr;
    size_t msg = 0;  // 48 + N
    uint32_t depth = 1;
    bool running = false, open = false, closed = false;
    uint64_t issued = 0, done = 0, bad = 0, limit = UINT64_MAX;
    uint64_t at = 0;  // bytes of the current exchange's echo received
    std::string why;

    uint64_t outstanding() const { return issued - done; }
    void issue() {
        const uint64_t n = issued++;
        Slice m = zbuf::Arena::current()->alloc_slice(msg);
        if (!m) die("raw: zbuf arena empty");
        std::memcpy(m.data(), &n, 8);
        if (!s->send(std::move(m))) die("raw: send on a closed stream");
    }
    void start() {
        running = true;
        while (outstanding() < depth && issued < limit) issue();
    }
    void on_open(rpc::Stream& st) override {
        s = &st;
        open = true;
    }
    void on_data(rpc::Stream& st, std::span<Slice> d) override {
        st.cork();  // the next exchanges of this delivery leave together
        for (const Slice& x : d) {
            size_t pos = 0;
            while (pos < x.size()) {
                if (at == 0 && x.size() - pos >= 8) {
                    uint64_t n;
                    std::memcpy(&n, x.data() + pos, 8);
                    if (n != done) ++bad;
                }
                size_t take = std::min<size_t>(msg - at, x.size() - pos);
                pos += take;
                at += take;
                if (at == msg) {
                    at = 0;
                    ++done;
                    if (running && issued < limit) issue();
                }
            }
        }
        st.uncork();
    }
    void on_closed(rpc::Stream&, std::string_view w) override {
        closed = true;
        open = false;
        s = nullptr;
        why = std::string(w);
    }
};

// The raw echo server: every delivery goes back in one send (zero copy).
struct RawEcho final : rpc::StreamHandler {
    void on_data(rpc::Stream& s, std::span<Slice> d) override { s.send(d); }
    void on_peer_closed(rpc::Stream& s) override { s.close(); }
};

struct Sample {
    uint64_t calls = 0;
    double wall_ns = 0, cpu_ns = 0;
};

// Run `load` for `seconds` (or until it has done `limit` calls), then stop
// issuing and drain what is in flight (outside the measurement).
template <class Load>
Sample measure(RingBed& bed, Load& load, double seconds) {
    const uint64_t d0 = load.done;
    const auto t0 = Clock::now();
    const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    const double c0 = cpu_ns();
    load.start();
    for (uint64_t i = 1;; ++i) {
        bed.poll();
        if ((i & 15) == 0 && (Clock::now() >= end || load.done >= load.limit)) break;
    }
    Sample s;
    s.calls = load.done - d0;
    s.cpu_ns = cpu_ns() - c0;
    s.wall_ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    load.running = false;
    if (!bed.run_until([&] { return load.outstanding() == 0; }, 10s)) die("calls still in flight 10 s after the end of a run");
    if (load.bad) die("wrong replies during a run");
    return s;
}

struct E2eConfig {
    rpc::Transport t;
    uint32_t depth;
    size_t size;
};

struct E2eResult {
    E2eConfig c;
    std::vector<Sample> raw, rpc;
};

// Callgrind mode: a burst's output leaves at its end only. The early send of
// EngineConfig::burst_flush_after is timed, and under valgrind every burst
// runs past it, so the count would depend on the emulation's speed.
bool g_callgrind = false;
// --copy-tx (see the top), and how the output names it.
bool g_copy_tx = false;
const char* copy_tx_label() { return g_copy_tx ? " without MULTI_SEGS (every segment copied into one frame)" : ""; }

test::RingBedOptions bed_options() {
    test::RingBedOptions o;
    o.multi_segs = !g_copy_tx;
    // Counted by callgrind, nothing may depend on wall time: the stats
    // publication (every 10 ms by default) would fire every ~100 calls under
    // callgrind and more often the slower the machine, adding hundreds of
    // instructions per call that another run would not count.
    if (g_callgrind)
        o.tune = [](EngineConfig& cfg, bool) {
            cfg.burst_flush_after = Duration::max();
            cfg.stats_interval = std::chrono::hours(1);
        };
    return o;
}

struct Bed {
    RingBed bed{1, bed_options()};
    rpc::Server srv{bed.b()};
    RawEcho echo;
    std::vector<std::unique_ptr<rpc::Acceptor>> raw_acc;
    uint16_t crescent_rpc_port = 7300, crescent_raw_port = 7301;
    uint16_t kernel_rpc_port = 0, kernel_raw_port = 0;
    static constexpr Ipv4 kLoopback{0x7f000001};

    Bed(bool kernel) {
        if (!srv.register_method(kEchoMethod, "echo", [](rpc::Call& c) {
                std::array<std::byte, kMetaLen> m{};
                std::memcpy(m.data(), c.meta().data(), std::min(c.meta().size(), m.size()));
                c.reply(std::span<const std::byte>(m.data(), c.meta().size() == kMetaLen ? kMetaLen : 0), c.data());
            }))
            die("register echo");
        std::string err;
        if (!srv.listen(rpc::Transport::Crescent, crescent_rpc_port, &err)) die("listen crescent: " + err);
        auto a = rpc::listen(bed.b(), rpc::Transport::Crescent, crescent_raw_port, echo, {}, &err);
        if (!a) die("listen crescent raw: " + err);
        raw_acc.push_back(std::move(a));
        if (kernel) {
            // Kernel ports: a pid-dependent pair, the next pairs if taken.
            for (int attempt = 0; attempt < 20 && kernel_raw_port == 0; ++attempt) {
                uint16_t p = uint16_t(20000 + (unsigned(getpid()) * 2 + attempt * 2) % 10000);
                std::string e1;
                if (!srv.listen(rpc::Transport::Kernel, p, &e1, kLoopback)) continue;
                auto k = rpc::listen(bed.b(), rpc::Transport::Kernel, uint16_t(p + 1), echo, {}, &e1, kLoopback);
                if (!k) continue;  // the RPC port stays open unused; the next pair is tried
                kernel_rpc_port = p;
                kernel_raw_port = uint16_t(p + 1);
                raw_acc.push_back(std::move(k));
            }
            if (kernel_raw_port == 0) die("no free pair of kernel ports on 127.0.0.1");
        }
    }
    Endpoint rpc_server(rpc::Transport t) const {
        return t == rpc::Transport::Crescent ? Endpoint{bed.ip_b, crescent_rpc_port} : Endpoint{kLoopback, kernel_rpc_port};
    }
    Endpoint raw_server(rpc::Transport t) const {
        return t == rpc::Transport::Crescent ? Endpoint{bed.ip_b, crescent_raw_port} : Endpoint{kLoopback, kernel_raw_port};
    }
};

// Both clients of one configuration, connected.
struct Clients {
    std::unique_ptr<rpc::Channel> ch;
    RpcLoad rpc;
    RawLoad raw;

    Clients(Bed& b, const E2eConfig& c) {
        rpc::ChannelOptions o;
        o.server = b.rpc_server(c.t);
        o.transport = c.t;
        o.depth = c.depth;
        o.deadline = 10s;
        ch = std::make_unique<rpc::Channel>(b.bed.a(), o);
        rpc.ch = ch.get();
        rpc.size = c.size;
        rpc.depth = c.depth;
        for (size_t i = 0; i < kMetaLen; ++i) rpc.meta[i] = std::byte(i + 1);
        raw.msg = kWireOverhead + c.size;
        raw.depth = c.depth;
        std::string err;
        if (!rpc::connect(b.bed.a(), c.t, b.raw_server(c.t), raw, {}, &err)) die("raw connect: " + err);
        if (!b.bed.run_until([&] { return ch->connected() == 1 && (raw.open || raw.closed); }, 10s) || !raw.open)
            die("connections not up after 10 s (channel: " + ch->last_error() + "; raw: " + raw.why + ")");
    }
    void close(Bed& b) {
        ch->close();
        if (raw.s) raw.s->close();
        b.bed.run_until([&] { return raw.closed; }, 5s);
        ch.reset();
        b.bed.run_for(20ms);
    }
};

E2eResult run_e2e_config(Bed& b, const E2eConfig& c, unsigned rounds, double seconds) {
    E2eResult r;
    r.c = c;
    Clients cl(b, c);
    const double slice = seconds / rounds;
    // Warm-up: caches, pools, TCP windows.
    measure(b.bed, cl.raw, std::min(0.2, slice));
    measure(b.bed, cl.rpc, std::min(0.2, slice));
    for (unsigned i = 0; i < rounds; ++i) {
        if (i % 2 == 0) {
            r.raw.push_back(measure(b.bed, cl.raw, slice));
            r.rpc.push_back(measure(b.bed, cl.rpc, slice));
        } else {
            r.rpc.push_back(measure(b.bed, cl.rpc, slice));
            r.raw.push_back(measure(b.bed, cl.raw, slice));
        }
    }
    cl.close(b);
    return r;
}

// Every zbuf back after the bed is gone (connections closed, engines stopped).
void check_no_leak(const char* where) {
    zbuf::Arena* a = zbuf::Arena::current();
    if (!a) return;
    zbuf::CoreScope core(0);
    a->drain_returns();
    if (a->live() != 0) die(std::string(where) + ": " + std::to_string(a->live()) + " zbufs leaked");
}

int run_e2e(unsigned rounds, double seconds, bool crescent, bool kernel) {
    std::string load0 = loadavg();
    std::vector<E2eResult> res;
    {
        Bed b(kernel);
        std::vector<rpc::Transport> ts;
        if (crescent) ts.push_back(rpc::Transport::Crescent);
        if (kernel) ts.push_back(rpc::Transport::Kernel);
        for (rpc::Transport t : ts)
            for (uint32_t depth : {1u, 16u})
                for (size_t size : {size_t(64), size_t(4096)}) res.push_back(run_e2e_config(b, {t, depth, size}, rounds, seconds));
    }
    check_no_leak("end to end");
    std::string load1 = loadavg();

    std::printf("2. end to end: RPC (rpc::Channel -> rpc::Server echo) vs raw rpc::Stream echo of the same bytes\n"
                "   config: one process, one thread polling two engines alternately (tests/support/ring_bed.hpp),\n"
                "   inline dispatch, burst 32, busy polling; crescent = user-space TCP over DPDK net_ring (MTU 1500,\n"
                "   zero-copy TX chains); kernel = kernel TCP over 127.0.0.1, sockets in the same engines' epoll sets\n"
                "   (TCP_NODELAY, readv into 16 KiB zbufs); one connection per side; closed loop at the depth;\n"
                "   RPC: 32 B header + %zu B meta + N B data each way, echo replies with the request's meta + data\n"
                "   slices; raw: %zu+N B per exchange, one fresh zbuf per exchange, echoed per delivery, client\n"
                "   corked while handling a delivery; %u rounds of %.2f s per side alternating (first side\n"
                "   alternating); CPU = process CPU time (client + server + kernel work in this thread) per call;\n"
                "   calls/s over all rounds; CPU ns = median of rounds; ratio = median of per-round RPC/raw\n"
                "   [min..max]; %s; loadavg %s at start, %s at end\n\n",
                kMetaLen, kWireOverhead, rounds, seconds / rounds, rte_version(), load0.c_str(), load1.c_str());
    std::printf("   %-9s %5s %7s | %11s %11s | %11s %11s | %-20s %8s | %9s\n", "transport", "depth", "data", "raw xchg/s",
                "raw CPU ns", "RPC calls/s", "RPC CPU ns", "RPC/raw CPU ns", "rate", "RPC-raw ns");
    for (const E2eResult& r : res) {
        auto rate = [](const std::vector<Sample>& v) {
            double c = 0, w = 0;
            for (const Sample& s : v) c += double(s.calls), w += s.wall_ns;
            return c / w * 1e9;
        };
        std::vector<double> raw_cpu, rpc_cpu, ratio;
        for (size_t i = 0; i < r.raw.size(); ++i) {
            raw_cpu.push_back(r.raw[i].cpu_ns / double(std::max<uint64_t>(r.raw[i].calls, 1)));
            rpc_cpu.push_back(r.rpc[i].cpu_ns / double(std::max<uint64_t>(r.rpc[i].calls, 1)));
            ratio.push_back(rpc_cpu.back() / raw_cpu.back());
        }
        const double raw_ns = median(raw_cpu), rpc_ns = median(rpc_cpu);
        char rs[64];
        std::snprintf(rs, sizeof rs, "%.2f [%.2f..%.2f]", median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                      *std::max_element(ratio.begin(), ratio.end()));
        std::printf("   %-9s %5u %7s | %11.0f %11.0f | %11.0f %11.0f | %-20s %8.2f | %9.0f\n",
                    std::string(rpc::transport_name(r.c.t)).c_str(), r.c.depth, size_name(r.c.size).c_str(), rate(r.raw),
                    raw_ns, rate(r.rpc), rpc_ns, rs, rate(r.rpc) / rate(r.raw), rpc_ns - raw_ns);
    }
    std::printf("\n   rate = RPC calls/s / raw exchanges/s; RPC-raw ns = the framework's CPU per call over the bare stream\n");
    return 0;
}

// ---- 3. callgrind mode ------------------------------------------------------------------

// Callgrind's instrumentation switched on and off from inside (no-ops outside
// valgrind): the count window of --count-from.
void callgrind_instrument(bool on) {
#ifdef CRESCENT_HAVE_CALLGRIND_H
    if (on) CALLGRIND_START_INSTRUMENTATION;
    else CALLGRIND_STOP_INSTRUMENTATION;
#else
    (void)on;
#endif
}

// N calls (or raw exchanges) at `depth` and nothing else; from the
// `count_from`-th completion on (0: from the start) callgrind counts, until
// the N-th. Returns the frames both engines sent in the whole run.
uint64_t callgrind_calls(uint64_t calls, uint64_t count_from, bool raw, size_t size, uint32_t depth) {
    Bed b(false);
    Clients cl(b, E2eConfig{rpc::Transport::Crescent, depth, size});
    const uint64_t tx0 = b.bed.a().stats().tx_packets + b.bed.b().stats().tx_packets;
    const uint64_t& done = raw ? cl.raw.done : cl.rpc.done;
    bool counting = false;
    auto until_done = [&] {
        if (count_from != 0 && !counting && done >= count_from) {
            callgrind_instrument(true);
            counting = true;
        }
        return done >= calls;
    };
    if (raw) {
        cl.raw.limit = calls;
        cl.raw.start();
    } else {
        cl.rpc.limit = calls;
        cl.rpc.start();
    }
    if (!b.bed.run_until(until_done, 600s)) die("callgrind mode: calls not done");
    if (counting) callgrind_instrument(false);
    if (raw && cl.raw.bad) die("callgrind mode: wrong echo");
    if (!raw && cl.rpc.bad) die("callgrind mode: wrong replies: " + cl.rpc.first_bad);
    const uint64_t frames = b.bed.a().stats().tx_packets + b.bed.b().stats().tx_packets - tx0;
    cl.rpc.running = cl.raw.running = false;
    cl.close(b);
    return frames;
}

int run_callgrind(uint64_t calls, uint64_t count_from, bool raw, size_t size, uint32_t depth) {
    const uint64_t frames = callgrind_calls(calls, count_from, raw, size, depth);
    check_no_leak("callgrind mode");
    std::printf("%s %llu %s, depth %u, %zu B data, crescent over net_ring%s: %.2f frames sent per %s\n", raw ? "raw" : "rpc",
                (unsigned long long)calls, raw ? "exchanges" : "calls", depth, size, copy_tx_label(),
                double(frames) / double(calls),
                raw ? "exchange" : "call");
    return 0;
}

// ---- 4. the idle loop ---------------------------------------------------------------------

int run_idle(uint64_t polls) {
    double best[2];
    uint64_t loops = 0, idle = 0;
    {
        Bed b(false);
        Clients cl(b, E2eConfig{rpc::Transport::Crescent, 1, 64});
        Engine* engines[2] = {&b.bed.a(), &b.bed.b()};
        auto count = [&](uint64_t EngineStats::*field) { return engines[0]->stats().*field + engines[1]->stats().*field; };
        const uint64_t loops0 = count(&EngineStats::loops), idle0 = count(&EngineStats::idle_loops);
        callgrind_instrument(true);
        for (int e = 0; e < 2; ++e)
            best[e] = best_ns(5, polls, [&](uint64_t n) {
                for (uint64_t i = 0; i < n; ++i) engines[e]->poll_once();
            });
        callgrind_instrument(false);
        loops = count(&EngineStats::loops) - loops0;
        idle = count(&EngineStats::idle_loops) - idle0;
        cl.close(b);
    }
    check_no_leak("idle polls");
    // The polls that were not idle ran timers (the server's metrics, the channel's deadlines).
    std::printf("idle poll_once, crescent over net_ring, a connected rpc::Channel and rpc::Server and a raw stream:\n"
                "  client engine %.1f ns, server engine %.1f ns per poll (best of 5 rounds of %llu); %llu polls in all,\n"
                "  %llu of them ran timers\n",
                best[0], best[1], (unsigned long long)polls, (unsigned long long)loops, (unsigned long long)(loops - idle));
    return 0;
}

[[noreturn]] void usage() {
    std::fprintf(stderr,
                 "usage: bench_rpc [--seconds S] [--rounds R] [--messages N] [--only framing|e2e]\n"
                 "                 [--transport crescent|kernel|both] [--copy-tx]\n"
                 "       bench_rpc --callgrind-mode --calls N [--count-from N1] [--raw] [--size N] [--depth D]\n"
                 "                 [--copy-tx]\n"
                 "       bench_rpc --idle-polls N\n");
    std::exit(2);
}

} // namespace

int main(int argc, char** argv) {
    double seconds = 2.0;
    unsigned rounds = 4;
    uint64_t messages = 200000, calls = 0, count_from = 0, size = 64, depth = 1, idle_polls = 0;
    std::string only, transport = "both";
    bool callgrind = false, raw = false;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        auto val = [&]() -> const char* {
            if (i + 1 >= argc) usage();
            return argv[++i];
        };
        if (a == "--seconds") seconds = std::atof(val());
        else if (a == "--rounds") rounds = unsigned(std::atoi(val()));
        else if (a == "--messages") messages = std::strtoull(val(), nullptr, 0);
        else if (a == "--only") only = val();
        else if (a == "--transport") transport = val();
        else if (a == "--calls") calls = std::strtoull(val(), nullptr, 0);
        else if (a == "--count-from") count_from = std::strtoull(val(), nullptr, 0);
        else if (a == "--callgrind-mode") callgrind = true;
        else if (a == "--raw") raw = true;
        else if (a == "--copy-tx") g_copy_tx = true;
        else if (a == "--size") size = std::strtoull(val(), nullptr, 0);
        else if (a == "--depth") depth = std::strtoull(val(), nullptr, 0);
        else if (a == "--idle-polls") idle_polls = std::strtoull(val(), nullptr, 0);
        else usage();
    }
    if (idle_polls != 0) {
        if (callgrind || idle_polls > 100'000'000) usage();
        return run_idle(idle_polls);
    }
    if (callgrind) {
        if (calls == 0 || count_from >= calls || size < 8 || size > (1u << 20) || depth == 0 || depth > 256) usage();
#ifndef CRESCENT_HAVE_CALLGRIND_H
        // Without the client requests callgrind would count nothing at all.
        if (count_from != 0) die("--count-from: built without <valgrind/callgrind.h> (install valgrind, rebuild)");
#endif
        g_callgrind = true;
        return run_callgrind(calls, count_from, raw, size_t(size), uint32_t(depth));
    }
    if (seconds <= 0 || rounds == 0 || messages < 100 || (only != "" && only != "framing" && only != "e2e") ||
        (transport != "both" && transport != "crescent" && transport != "kernel"))
        usage();
    std::printf("crescent RPC framework cost (micro-benchmark)  %s, g++ %s, %ld CPUs online, loadavg %s%s%s\n\n",
                rte_version(), __VERSION__, sysconf(_SC_NPROCESSORS_ONLN), loadavg().c_str(),
                g_copy_tx ? "; net_ring ports" : "", copy_tx_label());
    if (only != "e2e") run_framing(7, messages);
    if (only != "framing") run_e2e(rounds, seconds, transport != "kernel", transport != "crescent");
    return 0;
}
