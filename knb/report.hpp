// knb — one run's result, and how it is shown: the table, the JSON document
// (everything, the latency CDF and the configuration), the live progress line.
//
// JSON schema, version 1 (checked by tests/unit/knb_report_test):
//   {"knb":1, "kind":"run",
//    "config":{role,stack,proto,mode,kernel_wait,threads,server_threads,conns,msg_size,resp_size,iodepth,
//              duration,warmup,rate,loop:"closed"|"open",verify:"ends"|"full",server,port,cpus:[..],label,device},
//    "server":{stack,mode,kernel_wait,threads,version} | null (echo: an unknown server),
//    "result":{ok,error,seconds,requests,completed,verified,errors,rps,gbit_s,
//              latency_us:{min,mean,p50,p90,p99,p999,max}, cpu_s:{client,server|null},
//              cpu_us_per_rpc:{client,server|null}, busy_us_per_rpc:{client|null,server|null} (crescent),
//              retrans:{client,server|null}, drops:{client|null,server|null},
//              retrans_timeout:{client|null,server|null} (crescent: of retrans, those after an RTO),
//              phase_ns:{client|null,server|null} (crescent: {samples, poll, parse, tcp, app,
//              timers, output, flush, rest}, the mean ns of each phase of the sampled RX
//              iterations in the window, EngineStats::phase_ns; the phases are null when no
//              iteration was sampled)},
//    "cdf":[[latency_us, cumulative_fraction], ...]}
// A sweep writes {"knb":1,"kind":"sweep","bed":..,"runs":[<run documents>...]}.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <crescent/rpc/histogram.hpp>

#include "knb/options.hpp"
#include "knb/setup.hpp"

namespace knb {

// What the server said of itself (knb.info).
struct ServerInfo {
    bool known = false;
    uint64_t version = 0;
    std::string stack, mode, wait;
    unsigned threads = 0;
};

struct Result {
    Options cfg;                          // the client's options
    ServerInfo server;
    unsigned server_threads = 1;          // meshed with
    std::string device;                   // Runtime::describe() of the client
    bool ok = false;
    std::string error;                    // first error ("" when ok)
    double seconds = 0;                   // measured window (shorter when the run failed)
    uint64_t requests = 0;                // responses inside the window
    uint64_t completed = 0;               // all responses, warm-up included
    uint64_t verified = 0;                // responses whose bytes were checked
    uint64_t errors = 0;
    crescent::rpc::Histogram latency;     // ns, responses inside the window
    double client_cpu_s = 0;
    std::optional<double> server_cpu_s;
    // crescent: time its engines spent in loop iterations that found work
    // (EngineStats::busy_ns), the CPU the stack and knb's handlers really
    // used; a polling engine's process CPU is its whole core either way.
    std::optional<double> client_busy_s, server_busy_s;
    // crescent: where those iterations' time went, sampled (EngineStats::phase_ns)
    std::optional<PhaseSums> client_phases, server_phases;
    uint64_t retrans_client = 0;
    std::optional<uint64_t> retrans_server;
    // crescent: of those, the retransmissions after an RTO (what loss cost the most)
    std::optional<uint64_t> timeouts_client, timeouts_server;
    std::optional<uint64_t> drops_client, drops_server;

    double rps() const { return seconds > 0 ? double(requests) / seconds : 0; }
    // Payload in both directions (request + response data), Gbit/s.
    double gbit_s() const { return rps() * double(cfg.msg_size + cfg.resp_size) * 8 / 1e9; }
};

// The run document (see the schema above), one line.
std::string to_json(const Result& r);
// Writes `doc` to `path` (truncating); false + *err on failure.
bool write_file(const std::string& path, const std::string& doc, std::string* err);

// The table: a header (with a line saying what the columns mean) and a row per result.
void print_header(FILE* f);
void print_row(FILE* f, const Result& r);

// "knb  12.0/30 s  431,205 RPC/s  p99 41.3 us" (no newline; the caller
// writes "\r" and clears the line).
std::string progress_line(double elapsed, double total, double rps, double p99_us, bool warmup);

std::string json_escape(std::string_view s);

}  // namespace knb
