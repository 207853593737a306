// crescent — the engine clock: TSC ticks as crescent::Instant.
//
// rte_rdtsc() is an unserialised RDTSC (no syscall, a few ns); the conversion
// is one 64x64->128 multiply by a fixed-point ns-per-tick factor computed
// once from rte_get_tsc_hz() — or, in a process without EAL (kernel-only
// engines), from our own measurement (tsc_hz()). Instants of all engines of a
// process share the epoch (the first clock created), so timestamps compare
// across cores.
#pragma once

#include <time.h>

#include <cstdint>

#include <rte_cycles.h>

#include <crescent/time.hpp>

namespace crescent::engine {

// TSC ticks per second: EAL's figure once EAL is up, else measured once per
// process against CLOCK_MONOTONIC_RAW over 10 ms (an error of a few ppm).
inline uint64_t tsc_hz() {
    if (uint64_t hz = rte_get_tsc_hz(); hz != 0) return hz;
    static const uint64_t measured = [] {
        auto ns = [] {
            timespec t;
            clock_gettime(CLOCK_MONOTONIC_RAW, &t);
            return uint64_t(t.tv_sec) * 1'000'000'000u + uint64_t(t.tv_nsec);
        };
        const uint64_t t0 = ns(), c0 = rte_rdtsc();
        timespec nap{0, 10'000'000};
        while (nanosleep(&nap, &nap) != 0) {}
        const uint64_t c1 = rte_rdtsc(), t1 = ns();
        const uint64_t hz = t1 > t0 ? uint64_t((static_cast<unsigned __int128>(c1 - c0) * 1'000'000'000u) / (t1 - t0))
                                    : 0;
        return hz != 0 ? hz : uint64_t(1'000'000'000);
    }();
    return measured;
}

class TscClock {
public:
    TscClock() {
        static const uint64_t epoch = rte_rdtsc();
        const uint64_t hz = tsc_hz();
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
