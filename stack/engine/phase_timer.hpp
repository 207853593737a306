// crescent — where a loop iteration's time goes (EngineStats::phase_ns).
//
// Per-phase timing of every iteration would cost a TSC read per boundary on
// the data path, several per round trip; one iteration that received frames
// in EngineStats::kPhaseSampleEvery is timed instead, which gives the same
// means (the choice does not depend on what the iteration holds) at a branch
// per boundary for the others. No PMU needed: these are wall-clock figures,
// which a VM without performance counters can still give.
#pragma once

#include <cstdint>

#include <crescent/engine.hpp>

#include "stack/engine/clock.hpp"

namespace crescent::engine {

// In EngineStats::phase_ns's order (EngineStats::phase_name).
// Parse, Tcp and App repeat for each frame of a burst.
enum class Phase : uint8_t { Poll, Parse, Tcp, App, Timers, Output, Flush, Rest };
static_assert(size_t(Phase::Rest) + 1 == EngineStats::kPhases);

// One iteration's timer: off unless start()ed, until stop(); end(p) credits
// the time since the previous boundary to phase p (also from inside a phase:
// Conn::send_now() builds and sends during `app`, and credits that part to
// `output` and `flush`, so the columns keep their meaning).
class PhaseTimer {
public:
    PhaseTimer(const TscClock& clock, EngineStats& st) : clock_(clock), st_(st) {}

    // The iteration polled at `polled` and its poll has just returned: the
    // poll is the first phase.
    void start(Instant polled) {
        on_ = true;
        left_ = false;
        last_ = polled;
        ++st_.phase_samples;
        end(Phase::Poll);
    }
    void stop() { on_ = false; }
    // Conn::send_now() has sent the burst's output: what the handlers do after
    // it (the RPC layer unwinding, the request released) is off a round
    // trip's path, and goes to `rest` rather than `app`.
    void output_left() { left_ = true; }
    void end(Phase p) {
        if (!on_) [[likely]] return;
        if (p == Phase::App && left_) p = Phase::Rest;
        const Instant t = clock_.now();
        st_.phase_ns[size_t(p)] += uint64_t((t - last_).count());
        last_ = t;
    }

private:
    const TscClock& clock_;
    EngineStats& st_;
    bool on_ = false;
    bool left_ = false;  // output_left()
    Instant last_{};
};

} // namespace crescent::engine
