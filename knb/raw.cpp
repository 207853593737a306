// knb raw — frame reflector and pinger over a bed's DPDK device: the packet
// round-trip limit of the bed, no TCP (issue 10). See raw.hpp.
//
// Both sides use crescent's stack/dev layer (dev::Runtime for EAL and the
// port, dev::Queue for the queue pairs, their pools and TX batching) and run
// one loop per queue on its own lcore (the main lcore runs queue 0), each
// touching only its queue (share-nothing; results are merged after the loops
// have returned).
//
// Frame (all of it written by the pinger, checked when it returns):
//   Ethernet  dst = --peer-mac (default broadcast), src = the port's MAC, type 0x88B5
//   RawHdr    magic, queue, slot, length, part/parts, sequence number, TSC at send
//             (host order: both ends run on the same machine)
//   payload   kPattern from offset ((seq + part) mod 256): intact only if every byte is
// The reflector swaps the MACs and changes nothing else. With --touch it
// also reads every byte of every frame it receives first, as any receiver
// that verifies a checksum or reads its data must: on veth the next frames'
// copies into those buffers (the sender's kernel, on the sender's CPU) then
// find the lines in the reflector's cache, which a stream of large frames pays
// for (BENCHMARKS.md, session 42). The pinger checks every byte it receives.
//
// Messages (--split): a --size larger than the bed's largest frame goes as
// `parts` frames of one sequence number, and the reflector holds them until
// the last has arrived and sends them back in one burst, as an RPC server
// answers a request only once all of it is in. That is the round trip a
// multi-frame RPC can reach on the bed: one frame each way (--fit-mtu)
// overstates it, because a reflector that answers each frame as it comes
// overlaps the two directions.
//
// One-way messages (--resp-size N): the reflector answers each message, once
// all of it is in, with one frame of N bytes (the frame that completed it,
// cut to N) and frees the rest, the way a streaming RPC's large request is
// answered by a small response: the limit of a one-way stream on the bed.
//
// Counters: every frame a loop receives is either a round trip, `late` (its
// slot timed out and was reused), `ignored` (not a knb raw frame: e.g. the
// kernel's IPv6 ND on a veth), or an error (wrong queue, unknown sequence,
// wrong length, wrong MAC, damaged payload). Frames that do not come back
// within --timeout-ms are `lost` and replaced. TX that the device refuses
// stays queued in the dev::Queue batch; a frame the batch cannot take is
// freed and counted (tx_dropped) — the reflector does not block.
#include "knb/raw.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <crescent/engine.hpp>
#include <crescent/rpc/histogram.hpp>

#include "stack/dev/runtime.hpp"
#include "stack/wire/wire.hpp"

namespace knb {

namespace {

using namespace crescent;

constexpr uint16_t kEtherType = 0x88B5;      // IEEE 802 local experimental ethertype 1
constexpr uint32_t kMagic = 0x7262'6e6b;     // "knbr"
constexpr uint32_t kMinFrame = 60;           // Ethernet minimum without FCS
constexpr uint32_t kMaxFrame = 9014;         // jumbo MTU + Ethernet header (checked against the port's MTU)
constexpr uint64_t kMaxSizeAsked = 1u << 21; // --size with --fit-mtu or --split (lowered to the port's largest frame)
constexpr uint16_t kBurst = 32;
constexpr unsigned kMaxQueues = 64;
constexpr uint32_t kMaxDepth = 4096;
constexpr uint32_t kMaxParts = 256;          // frames per --split message
constexpr size_t kMaxHeld = 8192;            // reflector: frames of unfinished messages held at most
constexpr uint64_t kLinkWaitMs = 10000;      // ping: the peer's link must come up within this

struct RawHdr {
    uint32_t magic;
    uint16_t queue;  // the pinger's queue that sent it
    uint16_t slot;   // in-flight slot, < iodepth
    uint32_t length; // frame length as sent (Ethernet header included)
    uint16_t part;   // this frame's index in its message, < parts
    uint16_t parts;  // frames in the message (1 without --split)
    uint64_t seq;    // per queue, from 1
    uint64_t tsc;    // rte_rdtsc() when the frame was built
    uint32_t resp;   // --resp-size: the one frame that answers the message (0: every frame comes back)
    uint32_t reserved;
};
static_assert(sizeof(RawHdr) == 40);
constexpr uint32_t kHdrEnd = RTE_ETHER_HDR_LEN + sizeof(RawHdr);
static_assert(kHdrEnd <= kMinFrame);

// The payload pattern: period 256 (7 is odd), read from offset seq % 256.
struct Pattern {
    std::array<uint8_t, 256 + kMaxFrame> b{};
    Pattern() {
        for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(i * 7 + 3);
    }
    const uint8_t* at(uint64_t seq, uint32_t part) const { return b.data() + ((seq + part) & 255); }
};
const Pattern g_pattern;

// ---- options ---------------------------------------------------------------------

enum class Role : uint8_t { Reflect, Ping };

struct RawOptions {
    Role role = Role::Ping;
    std::string iface;
    std::string eal;
    unsigned queues = 1;
    uint64_t size = 64;       // as asked; run_ping() lowers it to the device's largest frame with fit_mtu
    bool fit_mtu = false;
    bool split = false;       // a --size above the largest frame goes as a message of several frames
    uint32_t resp_size = 0;   // the reflector answers each message with one frame of this length (0: echo)
    uint32_t iodepth = 1;
    double duration = 3;      // ping: measured seconds; reflect: 0 = until SIGINT/SIGTERM
    bool duration_given = false;
    double warmup = 1;
    uint32_t timeout_ms = 200;
    std::string json;
    std::string bed;
    std::string file_prefix;
    std::string cpus;
    uint32_t idle_sleep_us = 0;   // 0: spin
    bool touch = false;           // reflect: read every byte of each frame received (ping does anyway)
    rte_ether_addr peer{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
};

const char* kUsage =
    "usage: knb raw reflect (--iface IF | --eal \"ARGS\") [--queues N (1)] [--duration S (until SIGINT/SIGTERM)]\n"
    "                       [--file-prefix P] [--cpus LIST] [--idle-sleep-us N] [--touch]\n"
    "       knb raw ping    (--iface IF | --eal \"ARGS\") [--size N (64)] [--iodepth D (1)] [--queues N (1)]\n"
    "                       [--duration S (3)] [--warmup S (1)] [--timeout-ms T (200)] [--peer-mac M (broadcast)]\n"
    "                       [--fit-mtu | --split] [--bed NAME] [--json FILE] [--file-prefix P] [--cpus LIST]\n"
    "                       [--resp-size N] [--idle-sleep-us N] [--touch]\n"
    "Frames of ethertype 0x88B5 between two DPDK processes, no TCP: the packet round-trip limit of the bed.\n"
    "--size is the frame length with its Ethernet header (60..MTU+14); --fit-mtu lowers a larger --size to\n"
    "MTU+14 (said on stderr; the JSON has size, size_asked and capped); --split sends a larger --size as a\n"
    "message of ceil(size / (MTU+14)) frames that the reflector answers as a whole, in one burst, once the last\n"
    "has arrived (the round trip of a multi-frame RPC; the JSON has frames and message). --resp-size N has the\n"
    "reflector answer each message with one frame of N bytes (60..the message's smallest frame) instead: the\n"
    "limit of a one-way stream of --size messages, each answered by a small response. --iodepth frames (or\n"
    "messages) are kept in flight per queue; memif queue i of one side meets queue i of the other. --iface\n"
    "uses AF_XDP with the PMD's own XDP program (every frame of the queue goes to DPDK). --idle-sleep-us N:\n"
    "after 1000 empty polls each loop naps N us per empty poll (as crescent's engines do), so that busy\n"
    "processes can share CPUs (default: spin). --touch: the reflector reads every byte of every frame it\n"
    "receives before answering, as a receiver that checksums or reads its data must (the pinger checks every\n"
    "byte it receives anyway; it accepts --touch so that one set of flags serves both).\n"
    "Exit: 0 ok, 1 the run failed, 2 bad options.\n";

struct BadArgs {
    std::string msg;
};

bool parse_u64(const char* v, uint64_t lo, uint64_t hi, uint64_t* out) {
    if (v == nullptr || *v == '\0' || *v == '-') return false;
    char* end = nullptr;
    errno = 0;
    unsigned long long x = std::strtoull(v, &end, 10);
    if (errno || *end != '\0' || x < lo || x > hi) return false;
    *out = x;
    return true;
}

bool parse_seconds(const char* v, double lo, double hi, double* out) {
    if (v == nullptr || *v == '\0') return false;
    char* end = nullptr;
    errno = 0;
    double d = std::strtod(v, &end);
    if (errno || *end != '\0' || !(d >= lo && d <= hi)) return false;
    *out = d;
    return true;
}

bool parse_mac(std::string_view s, rte_ether_addr* out) {
    unsigned b[6];
    char tail;
    std::string z(s);
    if (std::sscanf(z.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6)
        return false;
    for (int i = 0; i < 6; ++i) out->addr_bytes[i] = uint8_t(b[i]);
    return true;
}

bool cpu_list_ok(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!(c >= '0' && c <= '9') && c != ',' && c != '-') return false;
    return true;
}

// Fills *o or returns the one line naming the problem.
std::string parse(int argc, char** argv, RawOptions* o) {
    if (argc < 2) return "give reflect or ping (see knb raw --help)";
    std::string_view r = argv[1];
    if (r == "reflect") o->role = Role::Reflect;
    else if (r == "ping") o->role = Role::Ping;
    else return "the first argument must be reflect or ping, not '" + std::string(r) + "'";
    const bool ping = o->role == Role::Ping;
    for (int i = 2; i < argc; ++i) {
        std::string_view f = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        auto need = [&](const char* v) -> std::string {
            return v ? std::string() : std::string(f) + " needs a value";
        };
        uint64_t n = 0;
        const char* v = nullptr;
        if (f == "--iface") {
            if (!(v = value())) return need(v);
            o->iface = v;
        } else if (f == "--eal") {
            if (!(v = value())) return need(v);
            o->eal = v;
        } else if (f == "--queues") {
            if (!(v = value())) return need(v);
            if (!parse_u64(v, 1, kMaxQueues, &n)) return "--queues: '" + std::string(v) + "' is not a number in 1..64";
            o->queues = unsigned(n);
        } else if (f == "--duration") {
            if (!(v = value())) return need(v);
            if (!parse_seconds(v, ping ? 0.1 : 0, 86400, &o->duration))
                return "--duration: '" + std::string(v) + "' is not a number of seconds in " + (ping ? "0.1" : "0") +
                       "..86400";
            o->duration_given = true;
        } else if (f == "--file-prefix") {
            if (!(v = value())) return need(v);
            o->file_prefix = v;
            if (o->file_prefix.empty() || o->file_prefix.find('/') != std::string::npos)
                return "--file-prefix: '" + o->file_prefix + "' must be a non-empty name without '/'";
        } else if (f == "--idle-sleep-us") {
            if (!(v = value())) return need(v);
            if (!parse_u64(v, 1, 1000000, &n))
                return "--idle-sleep-us: '" + std::string(v) + "' is not a number in 1..1000000";
            o->idle_sleep_us = uint32_t(n);
        } else if (f == "--touch") {
            o->touch = true;
        } else if (f == "--cpus") {
            if (!(v = value())) return need(v);
            if (!cpu_list_ok(v)) return "--cpus: '" + std::string(v) + "' is not a CPU list like 0-1 or 2,3";
            o->cpus = v;
        } else if (ping && f == "--size") {
            if (!(v = value())) return need(v);
            if (!parse_u64(v, kMinFrame, kMaxSizeAsked, &n))
                return "--size: '" + std::string(v) + "' is not a frame length in 60..9014";
            o->size = n;
        } else if (ping && f == "--fit-mtu") {
            o->fit_mtu = true;
        } else if (ping && f == "--split") {
            o->split = true;
        } else if (ping && f == "--resp-size") {
            if (!(v = value())) return need(v);
            if (!parse_u64(v, kMinFrame, kMaxFrame, &n))
                return "--resp-size: '" + std::string(v) + "' is not a frame length in 60..9014";
            o->resp_size = uint32_t(n);
        } else if (ping && f == "--iodepth") {
            if (!(v = value())) return need(v);
            if (!parse_u64(v, 1, kMaxDepth, &n)) return "--iodepth: '" + std::string(v) + "' is not a number in 1..4096";
            o->iodepth = uint32_t(n);
        } else if (ping && f == "--warmup") {
            if (!(v = value())) return need(v);
            if (!parse_seconds(v, 0, 3600, &o->warmup))
                return "--warmup: '" + std::string(v) + "' is not a number of seconds in 0..3600";
        } else if (ping && f == "--timeout-ms") {
            if (!(v = value())) return need(v);
            if (!parse_u64(v, 1, 60000, &n)) return "--timeout-ms: '" + std::string(v) + "' is not a number in 1..60000";
            o->timeout_ms = uint32_t(n);
        } else if (ping && f == "--peer-mac") {
            if (!(v = value())) return need(v);
            if (!parse_mac(v, &o->peer)) return "--peer-mac: '" + std::string(v) + "' is not a MAC like 02:00:00:00:00:01";
        } else if (ping && f == "--json") {
            if (!(v = value())) return need(v);
            o->json = v;
            if (o->json.empty()) return "--json needs a file name";
        } else if (ping && f == "--bed") {
            if (!(v = value())) return need(v);
            o->bed = v;
        } else {
            return "unknown option '" + std::string(f) + "' for knb raw " + std::string(r) + " (see --help)";
        }
    }
    if (o->iface.empty() == o->eal.empty()) return "give exactly one of --iface IF or --eal \"ARGS\"";
    if (!ping && !o->duration_given) o->duration = 0;
    if (o->fit_mtu && o->split) return "give one of --fit-mtu (one capped frame) and --split (several frames)";
    if (ping && !o->fit_mtu && !o->split && o->size > kMaxFrame)
        return "--size: '" + std::to_string(o->size) + "' is not a frame length in 60..9014 (or give --fit-mtu or --split)";
    if (ping && uint64_t(o->iodepth) > 65535) return "--iodepth is above 65535";
    if (ping && o->resp_size > o->size)
        return "--resp-size " + std::to_string(o->resp_size) + " is larger than --size " + std::to_string(o->size) +
               ": the reflector answers with a frame of the message, cut";
    return {};
}

std::vector<std::string> split_args(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

std::string mac_str(const rte_ether_addr& a) {
    char b[RTE_ETHER_ADDR_FMT_SIZE];
    rte_ether_format_addr(b, sizeof(b), &a);
    return b;
}

std::string json_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += c;
        else if (uint8_t(c) < 0x20) out += ' ';
        else out += c;
    }
    return out;
}

// ---- per-queue loops -------------------------------------------------------------

std::atomic<bool> g_abort{false};  // a loop failed: every loop stops

bool stopping() { return g_abort.load(std::memory_order_relaxed) || dev::Runtime::stop_requested(); }

// --idle-sleep-us: after kIdleSpin empty polls in a row, every further empty
// poll naps (as crescent's engines do with EngineConfig::idle_spin), so that
// two busy processes can share CPUs. 0: always spin.
constexpr uint32_t kIdleSpin = 1000;
struct IdleNap {
    uint32_t sleep_us = 0;
    uint32_t idle = 0;
    uint64_t naps = 0;
    void after_poll(bool work) {
        if (sleep_us == 0) return;
        if (work) {
            idle = 0;
            return;
        }
        if (++idle < kIdleSpin) return;
        ++naps;
        timespec ts{0, long(sleep_us) * 1000};
        nanosleep(&ts, nullptr);
    }
};

struct ReflectLoop {
    dev::Queue* q = nullptr;
    rte_ether_addr mac{};
    uint64_t end_tsc = 0;    // 0: until stopped
    IdleNap nap;
    uint64_t reflected = 0;  // frames handed to the queue's TX batch
    uint64_t ignored = 0;    // not knb's ethertype: freed
    uint64_t tx_dropped = 0; // the TX batch was full: freed
    uint64_t held_dropped = 0; // frames of messages that never completed, freed to bound `held`
    uint64_t unanswerable = 0; // --resp-size asked for an answer the completing frame cannot carry
    bool touch = false;        // RawOptions::touch
    uint64_t touched = 0;      // frames read in full (--touch)
    uint64_t touch_sum = 0;    // their checksums added (printed, so the reads stay)
    // One iteration that received frames in kPhaseSampleEvery is timed, as
    // crescent's engines time theirs (EngineStats::phase_ns): TSC ticks in the
    // poll that found them, the reflecting, and the flush.
    static constexpr uint32_t kPhaseSampleEvery = crescent::EngineStats::kPhaseSampleEvery;
    uint32_t phase_countdown = 1;
    uint64_t phase_samples = 0;
    std::array<uint64_t, 3> phase_tsc{};

    // Frames of --split messages whose last part has not arrived, in arrival order.
    struct Held {
        rte_mbuf* m;
        uint64_t seq;
        uint16_t queue;
    };
    std::vector<Held> held;

    void send_back(rte_mbuf* m) {
        auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
        eth->dst_addr = eth->src_addr;
        eth->src_addr = mac;
        if (q->tx_enqueue(m) == dev::TxResult::Queued) {
            ++reflected;
        } else {
            ++tx_dropped;
            rte_pktmbuf_free(m);
        }
    }

    // A complete message that asks for one reply frame (RawHdr::resp): `m`,
    // the frame that completed it, cut to that length. The pinger checks that
    // the length fits every frame of the message.
    void answer(rte_mbuf* m, const RawHdr& h) {
        const uint32_t len = rte_pktmbuf_pkt_len(m);
        if (h.resp < kHdrEnd || h.resp > len || rte_pktmbuf_trim(m, uint16_t(len - h.resp)) != 0) {
            ++unanswerable;  // the pinger counts the message lost
            rte_pktmbuf_free(m);
            return;
        }
        send_back(m);
    }

    // A part of a multi-frame message: held until all `parts` of its
    // (queue, seq) are in, then they all go back in arrival order (with
    // RawHdr::resp, the last one alone, as the answer).
    void gather(rte_mbuf* m, const RawHdr& h) {
        held.push_back(Held{m, h.seq, h.queue});
        size_t have = 0;
        for (const Held& x : held) have += x.seq == h.seq && x.queue == h.queue;
        if (have >= h.parts) {
            size_t keep = 0;
            for (const Held& x : held) {
                if (x.seq != h.seq || x.queue != h.queue) held[keep++] = x;
                else if (h.resp == 0) send_back(x.m);
                else if (x.m != m) rte_pktmbuf_free(x.m);
            }
            if (h.resp != 0) answer(m, h);
            held.resize(keep);
        } else if (held.size() > kMaxHeld) {
            rte_pktmbuf_free(held.front().m);  // its message lost a frame long ago
            held.erase(held.begin());
            ++held_dropped;
        }
    }

    // --touch: every byte of the frame through the stack's own checksum
    // (wire::csum_partial, what crescent's RX runs over each segment).
    void read_all(const rte_mbuf* m) {
        for (const rte_mbuf* s = m; s != nullptr; s = s->next)
            touch_sum += crescent::wire::csum_partial({rte_pktmbuf_mtod(s, const std::byte*), s->data_len});
        ++touched;
    }

    void run() {
        q->bind_to_current_thread();
        std::array<rte_mbuf*, kBurst> pkts;
        uint32_t polls = 0;
        for (;;) {
            if ((++polls & 1023) == 0 && (stopping() || (end_tsc && rte_rdtsc() >= end_tsc))) break;
            const uint64_t polled = rte_rdtsc();
            const uint16_t n = q->rx_burst(pkts.data(), kBurst);
            const bool timed = n != 0 && --phase_countdown == 0;
            uint64_t t1 = 0;
            if (timed) {
                phase_countdown = kPhaseSampleEvery;
                t1 = rte_rdtsc();
            }
            for (uint16_t i = 0; i < n; ++i) {
                rte_mbuf* m = pkts[i];
                auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
                if (m->data_len < RTE_ETHER_HDR_LEN || eth->ether_type != rte_cpu_to_be_16(kEtherType)) {
                    ++ignored;
                    rte_pktmbuf_free(m);
                    continue;
                }
                if (touch) read_all(m);
                RawHdr h;
                if (m->data_len >= kHdrEnd) {
                    std::memcpy(&h, rte_pktmbuf_mtod_offset(m, const uint8_t*, RTE_ETHER_HDR_LEN), sizeof h);
                    if (h.magic == kMagic && h.parts > 1) {
                        gather(m, h);
                        continue;
                    }
                    if (h.magic == kMagic && h.resp != 0) {
                        answer(m, h);
                        continue;
                    }
                }
                send_back(m);
            }
            const uint64_t t2 = timed ? rte_rdtsc() : 0;
            q->flush();
            if (timed) {
                ++phase_samples;
                phase_tsc[0] += t1 - polled;
                phase_tsc[1] += t2 - t1;
                phase_tsc[2] += rte_rdtsc() - t2;
            }
            nap.after_poll(n != 0);
        }
        for (const Held& x : held) rte_pktmbuf_free(x.m);
        held_dropped += held.size();
        held.clear();
    }
};

struct PingLoop {
    struct Slot {
        uint64_t seq = 0;
        uint64_t tsc = 0;
        bool in_flight = false;
        uint32_t back = 0;  // parts of the message returned so far
    };

    // set-up (main thread, before launch)
    dev::Queue* q = nullptr;
    uint16_t index = 0;
    rte_ether_addr mac{}, peer{};
    uint32_t size = 64;       // each frame but a message's last
    uint32_t parts = 1;       // frames per message (--split)
    uint32_t last_size = 64;  // the message's last frame
    uint32_t resp = 0;        // --resp-size: one frame of this length answers a message (0: every frame)
    uint64_t warm_tsc = 0, end_tsc = 0, timeout_tsc = 0, drain_tsc = 0;
    double ns_per_tsc = 1;
    std::vector<Slot> slots;
    IdleNap nap;

    // results (read after the loop returned)
    rpc::Histogram hist;        // ns, round trips completed in [warm_tsc, end_tsc)
    uint64_t round_trips = 0;   // completed in the window
    uint64_t completed = 0;     // all verified round trips
    uint64_t sent = 0;
    uint64_t lost = 0;          // timed out, sent at or after warm_tsc
    uint64_t lost_warmup = 0;   // timed out, sent during the warm-up
    uint64_t late = 0;          // came back after its slot was reused
    uint64_t ignored = 0;       // not a knb raw frame
    uint64_t errors = 0;
    uint64_t tx_nombuf = 0, tx_full = 0;
    uint64_t unanswered = 0;    // still in flight when the drain ended
    std::string first_error;

    std::vector<uint16_t> to_send;  // slots waiting for a frame
    uint64_t next_seq = 1;

    void error(std::string why) {
        ++errors;
        if (first_error.empty()) first_error = "queue " + std::to_string(index) + ": " + std::move(why);
    }

    uint32_t part_size(uint32_t part) const { return part + 1 == parts ? last_size : size; }
    // Frames that answer one message: all of it, or one with --resp-size.
    uint32_t frames_back() const { return resp != 0 ? 1 : parts; }

    // Build and queue the frames of a message for `slot`; false when no mbuf
    // or no TX room for all of them (retried later; nothing is queued then).
    bool send(uint16_t slot) {
        if (q->tx_capacity() - q->tx_pending() < parts) {
            ++tx_full;
            return false;
        }
        std::array<rte_mbuf*, kMaxParts> ms;
        for (uint32_t k = 0; k < parts; ++k) {
            ms[k] = q->alloc_tx();
            if (ms[k] == nullptr) {
                ++tx_nombuf;
                for (uint32_t j = 0; j < k; ++j) rte_pktmbuf_free(ms[j]);
                return false;
            }
        }
        Slot& s = slots[slot];
        s.seq = next_seq;
        s.tsc = rte_rdtsc();
        s.back = 0;
        for (uint32_t k = 0; k < parts; ++k) {
            const uint32_t len = part_size(k);
            auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(ms[k], uint16_t(len)));
            if (p == nullptr) {  // checked against the pool's room before the run: cannot happen
                for (uint32_t j = 0; j < parts; ++j) rte_pktmbuf_free(ms[j]);
                error("a TX mbuf has no room for a frame of " + std::to_string(len) + " bytes");
                g_abort.store(true);
                return false;
            }
            auto* eth = reinterpret_cast<rte_ether_hdr*>(p);
            eth->dst_addr = peer;
            eth->src_addr = mac;
            eth->ether_type = rte_cpu_to_be_16(kEtherType);
            RawHdr h{kMagic, index, slot, len, uint16_t(k), uint16_t(parts), s.seq, s.tsc, resp, 0};
            std::memcpy(p + RTE_ETHER_HDR_LEN, &h, sizeof(h));
            std::memcpy(p + kHdrEnd, g_pattern.at(s.seq, k), len - kHdrEnd);
        }
        for (uint32_t k = 0; k < parts; ++k)
            if (q->tx_enqueue(ms[k]) != dev::TxResult::Queued) {  // room was checked above: cannot happen
                for (uint32_t j = k; j < parts; ++j) rte_pktmbuf_free(ms[j]);
                error("the TX batch refused a frame it had room for");
                g_abort.store(true);
                return false;
            }
        ++next_seq;
        sent += parts;
        s.in_flight = true;
        return true;
    }

    void receive(rte_mbuf* m, uint64_t now) {
        std::array<uint8_t, kMaxFrame> buf;
        const uint32_t len = rte_pktmbuf_pkt_len(m);
        if (len < kHdrEnd) {
            ++ignored;
            return;
        }
        const auto* f = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, std::min<uint32_t>(len, kMaxFrame), buf.data()));
        const auto* eth = reinterpret_cast<const rte_ether_hdr*>(f);
        RawHdr h;
        std::memcpy(&h, f + RTE_ETHER_HDR_LEN, sizeof(h));
        if (eth->ether_type != rte_cpu_to_be_16(kEtherType) || h.magic != kMagic) {
            ++ignored;
            return;
        }
        if (h.queue != index) {
            error("a frame of queue " + std::to_string(h.queue) + " came back on queue " + std::to_string(index));
            return;
        }
        if (h.slot >= slots.size() || h.seq == 0 || h.seq >= next_seq) {
            error("a frame with sequence " + std::to_string(h.seq) + " (slot " + std::to_string(h.slot) +
                  ") that was never sent came back");
            return;
        }
        Slot& s = slots[h.slot];
        if (!s.in_flight || s.seq != h.seq) {
            ++late;  // its slot timed out (counted lost) and was reused
            return;
        }
        // A damaged frame ends its message (counted an error, the slot reused).
        auto fail = [&](std::string why) {
            s.in_flight = false;
            if (now < end_tsc) to_send.push_back(h.slot);
            error("frame " + std::to_string(h.seq) + (parts > 1 ? " part " + std::to_string(h.part) : "") + " " + why);
        };
        if (h.parts != parts || h.part >= parts) {
            fail("came back as part " + std::to_string(h.part) + " of " + std::to_string(h.parts) + ", not of " +
                 std::to_string(parts));
            return;
        }
        // The answer to --resp-size is the frame that completed the message, cut.
        const uint32_t want = resp != 0 ? resp : part_size(h.part);
        if (len != want || h.length != part_size(h.part)) {
            fail("came back with " + std::to_string(len) + " bytes, " + std::to_string(want) + " were sent");
            return;
        }
        if (!rte_is_same_ether_addr(&eth->dst_addr, &mac)) {
            fail("came back to " + mac_str(eth->dst_addr) + ", not to " + mac_str(mac));
            return;
        }
        if (h.tsc != s.tsc) {
            fail("came back with another send time");
            return;
        }
        if (std::memcmp(f + kHdrEnd, g_pattern.at(h.seq, h.part), want - kHdrEnd) != 0) {
            fail("came back with its payload changed");
            return;
        }
        if (++s.back < frames_back()) return;
        s.in_flight = false;
        if (now < end_tsc) to_send.push_back(h.slot);
        ++completed;
        if (now >= warm_tsc && now < end_tsc) {
            ++round_trips;
            hist.record(uint64_t(double(now - h.tsc) * ns_per_tsc));
        }
    }

    void expire(uint64_t now) {
        for (size_t i = 0; i < slots.size(); ++i) {
            Slot& s = slots[i];
            if (!s.in_flight || now < s.tsc + timeout_tsc) continue;
            s.in_flight = false;
            if (s.tsc >= warm_tsc) ++lost;
            else ++lost_warmup;
            if (now < end_tsc) to_send.push_back(uint16_t(i));
        }
    }

    void run() {
        q->bind_to_current_thread();
        for (size_t i = slots.size(); i-- > 0;) to_send.push_back(uint16_t(i));
        std::array<rte_mbuf*, kBurst> pkts;
        const uint64_t scan_every = std::max<uint64_t>(1, rte_get_tsc_hz() / 1000);  // 1 ms
        uint64_t next_scan = rte_rdtsc() + scan_every;
        uint32_t polls = 0;
        for (;;) {
            const uint64_t now = rte_rdtsc();
            const bool sending = now < end_tsc;
            if ((++polls & 255) == 0 && stopping()) break;
            if (!sending) {
                bool any = false;
                for (const Slot& s : slots) any = any || s.in_flight;
                if (!any || now >= drain_tsc) break;
            }
            while (sending && !to_send.empty() && send(to_send.back())) to_send.pop_back();
            q->flush();
            const uint16_t n = q->rx_burst(pkts.data(), kBurst);
            const uint64_t t = n ? rte_rdtsc() : now;
            for (uint16_t i = 0; i < n; ++i) {
                receive(pkts[i], t);
                rte_pktmbuf_free(pkts[i]);
            }
            if (now >= next_scan) {
                expire(rte_rdtsc());  // not `now`: frames sent since carry later stamps
                next_scan = now + scan_every;
            }
            nap.after_poll(n != 0 || (sending && !to_send.empty()));
        }
        for (const Slot& s : slots) unanswered += s.in_flight;
        q->flush();
    }
};

template <class Loop>
int launch_entry(void* p) {
    static_cast<Loop*>(p)->run();
    return 0;
}

// Runs loops[i] on the i-th lcore (main lcore first) and waits for all.
template <class Loop>
void run_loops(std::vector<std::unique_ptr<Loop>>& loops, const std::vector<unsigned>& lcores) {
    for (size_t i = 1; i < loops.size(); ++i) rte_eal_remote_launch(launch_entry<Loop>, loops[i].get(), lcores[i]);
    loops[0]->run();
    rte_eal_mp_wait_lcore();
}

// ---- the two roles ---------------------------------------------------------------

struct Device {
    std::unique_ptr<dev::Runtime> rt;
    dev::Port* port = nullptr;
    std::vector<unsigned> lcores;
};

// EAL + the port with `queues` queue pairs; "" or the one line naming the problem.
std::string open_device(const RawOptions& o, Device* d) {
    dev::RuntimeConfig rc;
    if (!o.iface.empty()) {
        rc.mode = dev::RuntimeConfig::Mode::Iface;
        rc.iface = o.iface;
        rc.queues = uint16_t(o.queues);
        rc.steer = false;  // the PMD's default program: every frame of the queues to the XSKs
    } else {
        rc.mode = dev::RuntimeConfig::Mode::Eal;
        rc.eal_args = split_args(o.eal);
    }
    rc.cores = o.cpus;
    rc.file_prefix = o.file_prefix.empty() ? "knbraw" + std::to_string(::getpid()) : o.file_prefix;
    if (dev::Status st = dev::Runtime::start(rc, &d->rt); !st) return st.message();
    d->lcores.push_back(rte_get_main_lcore());
    unsigned lc;
    RTE_LCORE_FOREACH_WORKER(lc) d->lcores.push_back(lc);
    if (d->lcores.size() < o.queues)
        return "crescent: " + std::to_string(o.queues) + " queues need " + std::to_string(o.queues) +
               " lcores but EAL has " + std::to_string(d->lcores.size()) + ": pass --cpus with more CPUs";
    dev::PortConfig pc;
    pc.queues = uint16_t(o.queues);
    pc.csum_offload = false;  // not IP: nothing to offload
    pc.tso = false;
    if (dev::Status st = d->rt->open_port(d->rt->default_port(), pc, &d->port); !st) return st.message();
    return {};
}

int fail_run(const char* role, const std::string& msg) {
    std::fprintf(stderr, "knb raw %s: %s\n", role, msg.c_str());
    return 1;
}

int run_reflect(const RawOptions& o) {
    Device d;
    if (std::string e = open_device(o, &d); !e.empty()) return fail_run("reflect", e);
    const dev::LinkStatus link = d.port->wait_link_up(1000);
    char until[64] = "until SIGINT/SIGTERM";
    if (o.duration > 0) std::snprintf(until, sizeof(until), "for %.1f s", o.duration);
    std::fprintf(stderr, "knb raw reflect: %s (%s) mac %s, %u queue%s, link %s; reflecting ethertype 0x%04X %s\n",
                 d.port->name().c_str(), d.port->driver().c_str(), mac_str(d.port->mac()).c_str(), o.queues,
                 o.queues > 1 ? "s" : "", link.up ? "up" : "down (waiting for the peer)", kEtherType, until);
    g_abort = false;
    const uint64_t t0 = rte_rdtsc();
    std::vector<std::unique_ptr<ReflectLoop>> loops;
    for (unsigned i = 0; i < o.queues; ++i) {
        auto l = std::make_unique<ReflectLoop>();
        l->q = &d.port->queue(i);
        l->mac = d.port->mac();
        l->end_tsc = o.duration > 0 ? t0 + uint64_t(o.duration * double(rte_get_tsc_hz())) : 0;
        l->nap.sleep_us = o.idle_sleep_us;
        l->touch = o.touch;
        loops.push_back(std::move(l));
    }
    run_loops(loops, d.lcores);
    const double secs = double(rte_rdtsc() - t0) / double(rte_get_tsc_hz());
    uint64_t touched = 0, touch_sum = 0;
    for (const auto& l : loops) touched += l->touched, touch_sum += l->touch_sum;
    uint64_t reflected = 0, ignored = 0, dropped = 0, unfinished = 0, unanswerable = 0, samples = 0;
    std::array<uint64_t, 3> phase_tsc{};
    std::string per_queue;
    for (unsigned i = 0; i < o.queues; ++i) {
        samples += loops[i]->phase_samples;
        for (size_t k = 0; k < phase_tsc.size(); ++k) phase_tsc[k] += loops[i]->phase_tsc[k];
        reflected += loops[i]->reflected;
        ignored += loops[i]->ignored;
        dropped += loops[i]->tx_dropped;
        unfinished += loops[i]->held_dropped;
        unanswerable += loops[i]->unanswerable;
        per_queue += (i ? " " : "") + std::to_string(loops[i]->reflected);
    }
    const dev::PortStats ps = d.port->stats();
    std::printf("knb raw reflect: %" PRIu64 " frames reflected in %.1f s (per queue: %s), %" PRIu64
                " ignored (other ethertypes), %" PRIu64 " dropped at a full TX batch, %" PRIu64
                " parts of unfinished messages freed, %" PRIu64 " messages whose --resp-size answer did not fit a "
                "frame; device imissed %" PRIu64 " rx_nombuf %" PRIu64 "\n",
                reflected, secs, per_queue.c_str(), ignored, dropped, unfinished, unanswerable, ps.dev.imissed,
                ps.dev.rx_nombuf);
    if (o.touch)
        std::printf("knb raw reflect: --touch: %" PRIu64 " frames read in full before answering (sum %016" PRIx64 ")\n",
                    touched, touch_sum);
    if (samples != 0) {
        // As crescent's engines' EngineStats::phase_ns: the device's share of a turn, beside the stack's.
        const double ns_per_tsc = 1e9 / double(rte_get_tsc_hz()) / double(samples);
        std::printf("knb raw reflect: iterations that received frames, %" PRIu64 " sampled (1 in %u): poll %.0f ns, "
                    "reflect %.0f ns, flush %.0f ns (means)\n",
                    samples, ReflectLoop::kPhaseSampleEvery, double(phase_tsc[0]) * ns_per_tsc,
                    double(phase_tsc[1]) * ns_per_tsc, double(phase_tsc[2]) * ns_per_tsc);
    }
    std::fflush(stdout);
    return 0;
}

int run_ping(const RawOptions& o) {
    Device d;
    if (std::string e = open_device(o, &d); !e.empty()) return fail_run("ping", e);
    const uint32_t max_frame = uint32_t(d.port->mtu()) + RTE_ETHER_HDR_LEN;
    const uint32_t room = rte_pktmbuf_data_room_size(d.port->queue(0).tx_pool()) - RTE_PKTMBUF_HEADROOM;
    const uint32_t largest = std::min({max_frame, room, kMaxFrame});
    uint32_t size = uint32_t(std::min<uint64_t>(o.size, kMaxFrame));
    const bool capped = o.size > largest && !o.split;
    uint32_t parts = 1;
    if (o.split && o.size > largest) {
        const uint64_t n = (o.size + largest - 1) / largest;
        if (n > kMaxParts) {
            std::fprintf(stderr, "knb raw ping: --split: a %" PRIu64 " B message needs %" PRIu64 " frames of %u B; "
                         "at most %u per message\n", o.size, n, largest, kMaxParts);
            return 2;
        }
        parts = uint32_t(n);
        size = largest;
    }
    if (capped && !o.fit_mtu) {
        std::fprintf(stderr, "knb raw ping: --size %" PRIu64 " is above what %s carries (MTU %u: frames up to %u bytes; "
                     "or give --fit-mtu or --split)\n",
                     o.size, d.port->name().c_str(), d.port->mtu(), largest);
        return 2;
    }
    if (capped) {
        size = largest;
        std::fprintf(stderr, "knb raw ping: --size %" PRIu64 " capped at %u bytes (%s MTU %u + 14)\n", o.size, size,
                     d.port->name().c_str(), d.port->mtu());
    }
    // A --split message: full frames, then the rest (at least the Ethernet minimum).
    const uint32_t last_size =
        parts > 1 ? std::max<uint32_t>(kMinFrame, uint32_t(o.size - uint64_t(parts - 1) * size)) : size;
    const uint64_t message = uint64_t(parts - 1) * size + last_size;
    if (o.resp_size > std::min(size, last_size)) {
        std::fprintf(stderr, "knb raw ping: --resp-size %u is larger than the message's smallest frame (%u B): the "
                     "reflector answers with a frame of the message, cut\n", o.resp_size, std::min(size, last_size));
        return 2;
    }
    const dev::LinkStatus link = d.port->wait_link_up(kLinkWaitMs);
    if (!link.up)
        return fail_run("ping", "the link of " + d.port->name() + " (" + d.port->driver() + ") is still down after " +
                                    std::to_string(kLinkWaitMs / 1000) + " s: is the reflector running?");
    std::string bed = o.bed;
    if (bed.empty()) {
        bed = d.port->driver();
        if (bed.rfind("net_", 0) == 0) bed = bed.substr(4);
    }
    const double hz = double(rte_get_tsc_hz());
    g_abort = false;
    const uint64_t t0 = rte_rdtsc();
    std::vector<std::unique_ptr<PingLoop>> loops;
    for (unsigned i = 0; i < o.queues; ++i) {
        auto l = std::make_unique<PingLoop>();
        l->q = &d.port->queue(i);
        l->index = uint16_t(i);
        l->mac = d.port->mac();
        l->peer = o.peer;
        l->size = size;
        l->parts = parts;
        l->last_size = last_size;
        l->resp = o.resp_size;
        l->warm_tsc = t0 + uint64_t(o.warmup * hz);
        l->end_tsc = l->warm_tsc + uint64_t(o.duration * hz);
        l->timeout_tsc = uint64_t(double(o.timeout_ms) * hz / 1e3);
        l->drain_tsc = l->end_tsc + std::min<uint64_t>(l->timeout_tsc, uint64_t(0.1 * hz));
        l->ns_per_tsc = 1e9 / hz;
        l->nap.sleep_us = o.idle_sleep_us;
        l->slots.resize(o.iodepth);
        loops.push_back(std::move(l));
    }
    run_loops(loops, d.lcores);

    rpc::Histogram hist;
    uint64_t rt = 0, lost = 0, lost_warm = 0, late = 0, ignored = 0, errors = 0, sent = 0, unanswered = 0,
             nombuf = 0, full = 0;
    std::string first_error, per_queue;
    for (unsigned i = 0; i < o.queues; ++i) {
        const PingLoop& l = *loops[i];
        hist.merge(l.hist);
        rt += l.round_trips;
        lost += l.lost;
        lost_warm += l.lost_warmup;
        late += l.late;
        ignored += l.ignored;
        errors += l.errors;
        sent += l.sent;
        unanswered += l.unanswered;
        nombuf += l.tx_nombuf;
        full += l.tx_full;
        per_queue += (i ? " " : "") + std::to_string(l.round_trips);
        if (first_error.empty()) first_error = l.first_error;
    }
    const bool interrupted = dev::Runtime::stop_requested() && !g_abort.load();
    const double rps = double(rt) / o.duration;
    auto us = [](uint64_t ns) { return double(ns) / 1e3; };
    const double p50 = us(hist.percentile(50)), p90 = us(hist.percentile(90)), p99 = us(hist.percentile(99)),
                 p999 = us(hist.percentile(99.9)), mx = us(hist.max()), mn = us(hist.min()), mean = hist.mean() / 1e3;
    const bool ok = errors == 0 && rt > 0 && !interrupted;

    std::string what = parts > 1 ? std::to_string(message) + " B messages of " + std::to_string(parts) + " frames (" +
                                       std::to_string(size) + " B, last " + std::to_string(last_size) + " B)"
                                 : std::to_string(size) + " B";
    if (o.resp_size != 0) what += " answered by one " + std::to_string(o.resp_size) + " B frame";
    std::printf("knb raw ping: %s (%s) %s iodepth %u x %u queue%s, %.1f s after %.1f s warm-up: %.0f round trips/s "
                "(%" PRIu64 "; per queue %s), latency us min %.1f p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f, "
                "lost %" PRIu64 " (+%" PRIu64 " in warm-up), late %" PRIu64 ", errors %" PRIu64 "\n",
                bed.c_str(), d.port->driver().c_str(), what.c_str(), o.iodepth, o.queues, o.queues > 1 ? "s" : "",
                o.duration, o.warmup, rps, rt, per_queue.c_str(), mn, p50, p90, p99, p999, mx, lost, lost_warm, late,
                errors);
    std::fflush(stdout);

    int rc = 0;
    if (!o.json.empty()) {
        FILE* f = std::fopen(o.json.c_str(), "w");
        if (!f) {
            std::fprintf(stderr, "knb raw ping: cannot write --json %s: %s\n", o.json.c_str(), std::strerror(errno));
            rc = 1;
        } else {
            std::fprintf(f,
                         "{\"kind\":\"raw\",\"bed\":\"%s\",\"driver\":\"%s\",\"size\":%u,\"iodepth\":%u,\"queues\":%u,"
                         "\"size_asked\":%" PRIu64 ",\"capped\":%s,\"frames\":%u,\"message\":%" PRIu64 ",\"resp_size\":%u,\"mtu\":%u,\"seconds\":%.3f,\"warmup\":%.3f,\"round_trips\":%" PRIu64 ",\"rps\":%.1f,\"min_us\":%.2f,"
                         "\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,\"max_us\":%.2f,"
                         "\"mean_us\":%.2f,\"lost\":%" PRIu64 ",\"lost_warmup\":%" PRIu64 ",\"late\":%" PRIu64
                         ",\"errors\":%" PRIu64 ",\"sent\":%" PRIu64 ",\"unanswered\":%" PRIu64 ",\"ignored\":%" PRIu64
                         ",\"ok\":%s%s%s%s}\n",
                         json_escape(bed).c_str(), json_escape(d.port->driver()).c_str(), size, o.iodepth, o.queues,
                         o.size, capped ? "true" : "false", parts, message, o.resp_size, unsigned(d.port->mtu()), o.duration, o.warmup, rt, rps, mn, p50, p90, p99, p999, mx, mean, lost, lost_warm, late,
                         errors, sent, unanswered, ignored, ok ? "true" : "false", first_error.empty() ? "" : ",\"error\":\"",
                         json_escape(first_error).c_str(), first_error.empty() ? "" : "\"");
            if (std::fclose(f) != 0) {
                std::fprintf(stderr, "knb raw ping: cannot write --json %s: %s\n", o.json.c_str(), std::strerror(errno));
                rc = 1;
            }
        }
    }
    if (errors) return fail_run("ping", first_error + " (" + std::to_string(errors) + " error" + (errors > 1 ? "s" : "") + ")");
    if (interrupted) return fail_run("ping", "interrupted before the run ended");
    if (rt == 0)
        return fail_run("ping", "no frame came back in the " + std::to_string(o.duration) + " s window (" +
                                    std::to_string(sent) + " sent, " + std::to_string(lost) + " lost; tx no mbuf " +
                                    std::to_string(nombuf) + ", tx full " + std::to_string(full) +
                                    "): is the reflector running on the other side?");
    return rc;
}

} // namespace

int raw_main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
            std::fputs(kUsage, stdout);
            return 0;
        }
    RawOptions o;
    if (std::string e = parse(argc, argv, &o); !e.empty()) {
        std::fprintf(stderr, "knb raw: %s\n", e.c_str());
        return 2;
    }
    return o.role == Role::Reflect ? run_reflect(o) : run_ping(o);
}

} // namespace knb
