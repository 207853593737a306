// knb sweep's internals shared by its two files: the options (Sweep), the
// result of each run (Point, RawPoint), and the end-of-sweep report
// (sweep_report.cpp: the JSON document and the comparison tables) that
// sweep.cpp's runner calls once every run has ended.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <crescent/engine.hpp>

#include "knb/options.hpp"

#ifndef KNB_SOURCE_ROOT
#define KNB_SOURCE_ROOT "."
#endif

namespace knb::sweep {

// The server variant of --kernel-client's control: the busy kernel server
// on a veth whose other flows crescent's steering program takes.
inline constexpr const char* kKernelBehindXdp = "kernel/busy+xdp";
// Its port: beside the crescent server's (kDefaultPort), which is steered.
inline constexpr uint16_t kBehindXdpPort = kDefaultPort + 1;

struct Sweep {
    std::string bed;
    std::string json;
    std::vector<Stack> stacks{Stack::Crescent, Stack::Kernel};
    std::vector<Mode> modes{Mode::Inline};
    std::vector<Wait> waits{Wait::Busy, Wait::Block};
    std::vector<uint64_t> sizes{64, 4096};
    uint64_t resp_size = 0;  // 0: each response as large as its request
    std::vector<uint64_t> iodepths{1, 16};
    std::vector<uint64_t> threads{1};
    unsigned conns = 1;
    Proto proto = Proto::Rpc;
    double duration = 3, warmup = 1;
    std::string server_cpus, client_cpus;
    std::string out;
    std::string probe;
    std::string bed_script = std::string(KNB_SOURCE_ROOT) + "/tools/knb-bed";
    std::string knb_path;
    std::string server_args, client_args;
    bool raw = false;
    bool kernel_client = false;  // --kernel-client
    unsigned repeat = 1;         // --repeat: rounds of the whole grid
    std::string raw_args;
    double loss = 0;              // --loss: percent of frames lost each way (0: none)
    unsigned kernel_rto_min = 0;  // --kernel-rto-min: ms on the bed's route for kernel runs (0: the kernel's)
};

struct Point {
    Stack stack;
    Mode mode;
    Wait wait;
    uint64_t threads, size, iodepth;
    unsigned round = 1;  // of Sweep::repeat
    bool ok = false;
    std::string error;
    std::string doc;  // the client's run document ("" when it wrote none)
    double rps = 0, p50 = 0, p99 = 0;
    // --kernel-client: a busy kernel client's run against this server
    // variant ("crescent/inline", or kKernelBehindXdp); "" for the rest.
    std::string served_by;
    // --loss: how this run lost its frames, a JSON object for its document
    // ({"pct":..,"impair":..} for crescent, {"pct":..,"frames":..,"dropped":..}
    // for kernel TCP, counted by the bed's nftables rules); "" without --loss.
    std::string loss_json;
};

// One `knb raw ping` against the bed's reflector, for the RPC point (size, iodepth, threads).
struct RawPoint {
    uint64_t size, iodepth, threads;
    unsigned round = 1;          // of Sweep::repeat
    uint64_t frame_wanted = 0;   // the RPC request's frame
    uint64_t frame = 0;          // what ran (the bed's MTU + 14 when the request needs several)
    uint64_t frames = 1;         // frames per message each way
    uint64_t raw_iodepth = 0;    // messages in flight per queue
    uint64_t resp_frame = 0;     // --resp-size: the one frame that answers a message (0: the message comes back)
    bool ok = false;
    std::string error;
    std::string doc;             // knb raw ping --json ("" when it wrote none)
    double rps = 0;
};

// "166" for one frame, "1514x3" for a message of three, "1514x44/166" for
// one answered by a 166 B frame (--resp-size).
std::string frame_label(const RawPoint& r);
// "crescent/inline", "kernel/busy"; "kernel>crescent/inline" for a
// --kernel-client run.
std::string variant(const Point& p);
// The number after "key": at its first occurrence after "after": (a run
// document's own layout, see report.cpp; from the start when `after` is "").
std::optional<double> json_number(const std::string& doc, const std::string& key, const std::string& after = "");

// The end of a sweep: everything that ran, in the order it ended.
struct Results {
    std::vector<Point> points;
    std::vector<RawPoint> raws;
    std::vector<std::string> probes;  // JSON objects
    // --raw: each reflector's own phase split ("1 queue(s): poll .. ns, reflect .. ns,
    // flush .. ns (means)", from its log), beside crescent's EngineStats::phase_ns.
    std::vector<std::string> raw_phases;
};
// A run document's result.phase_ns means for `side` ("client", "server"):
// poll, parse, tcp, app, timers, output, flush, rest; nullopt when the side
// has none.
std::optional<std::array<double, crescent::EngineStats::kPhases>> phase_means(const std::string& doc,
                                                                              const std::string& side);
void write_document(const Sweep& sw, const Results& r);
void print_comparison(const Sweep& sw, const Results& r);
void print_raw_comparison(const Sweep& sw, const Results& r);
void print_kernel_client_comparison(const Sweep& sw, const Results& r);

}  // namespace knb::sweep
