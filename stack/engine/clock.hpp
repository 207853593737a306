// crescent — the engine clock: TSC ticks as crescent::Instant.
//
// rte_rdtsc() is an unserialised RDTSC (no syscall, a few ns); the conversion
// is one 64x64->128 multiply by a fixed-point ns-per-tick factor computed
// once from rte_get_tsc_hz(). Instants of all engines of a process share the
// epoch (the first clock created), so timestamps compare across cores.
#pragma once

#include <cstdint>

#include <rte_cycles.h>

#include <crescent/time.hpp>

namespace crescent::engine {

class TscClock {
public:
    TscClock() {
        static const uint64_t epoch = rte_rdtsc();
        uint64_t hz = rte_get_tsc_hz();
        if (hz == 0) hz = 1'000'000'000;  // EAL not initialised: treat ticks as ns
        tsc0_ = epoch;
        mult_ = uint64_t((static_cast<unsigned __int128>(1'000'000'000) << 32) / hz);
    }
    Instant now() const { return from_tsc(rte_rdtsc()); }
    Instant from_tsc(uint64_t tsc) const {
        uint64_t d = tsc - tsc0_;
        return Instant::from_nanos(int64_t((static_cast<unsigned __int128>(d) * mult_) >> 32));
    }

private:
    uint64_t tsc0_ = 0;
    uint64_t mult_ = 0;  // ns per tick << 32
};

} // namespace crescent::engine
