// knb — what both sides share: starting the runtime a stack needs (crescent's
// engines on a device, or device-less engines that drive kernel sockets), the
// CPU pinning, the transport and stream options of a mode, and the counters
// knb reports from a stack.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/rpc/stream.hpp>
#include <crescent/runtime.hpp>

#include "knb/options.hpp"

namespace knb {

// Pins the process to --cpus (the runtime's threads take them in order);
// then starts the runtime. nullptr + *err (one line) on failure.
std::unique_ptr<crescent::Runtime> start_runtime(const Options& o, std::string* err);

crescent::rpc::Transport transport_of(Stack s);
// Stream options for a mode: the copy API for Mode::Copy, SO_REUSEPORT for
// kernel listeners (one per thread on one port).
crescent::rpc::StreamOptions stream_options(const Options& o);

// Frames and segments the stack dropped (every EngineStats drop counter).
uint64_t engine_drops(const crescent::EngineStats& s);

// EngineStats' sampled phase times (phase_samples, phase_ns) summed over
// engines; the difference of two readings is a window's.
struct PhaseSums {
    uint64_t samples = 0;
    std::array<uint64_t, crescent::EngineStats::kPhases> ns{};

    static PhaseSums of(const crescent::EngineStats& s);
    PhaseSums& operator+=(const PhaseSums& o);
    // "phase_samples=..;phase_poll_ns=..;..." (the knb.stats reply's fields).
    std::string to_kv() const;
    // Reads what to_kv() wrote; false when a field is missing.
    bool from_kv(std::string_view kv);
    // this - earlier, field by field (0 where a counter went backwards).
    PhaseSums since(const PhaseSums& earlier) const;
};

// Counters an engine publishes for other threads (engine thread writes, any
// thread reads; relaxed: a report, not a synchronisation).
struct Published {
    std::atomic<uint64_t> retrans{0};
    std::atomic<uint64_t> timeouts{0};  // retransmissions after an RTO (crescent)
    std::atomic<uint64_t> drops{0};
    std::atomic<uint64_t> requests{0};
    std::atomic<uint64_t> busy_ns{0};  // EngineStats::busy_ns (crescent)
    std::atomic<uint64_t> phase_samples{0};  // EngineStats::phase_samples and phase_ns (crescent)
    std::array<std::atomic<uint64_t>, crescent::EngineStats::kPhases> phase_ns{};

    void store_phases(const PhaseSums& p);
    PhaseSums phases() const;
};

// Process CPU time (user + system), ns.
uint64_t process_cpu_ns();

}  // namespace knb
