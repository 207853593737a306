// crescent sim — a deterministic, one-directional simulated link.
//
// Frames are bytes (Ethernet/IPv4/TCP as serialised by the wire layer). The
// link models, in this order: a bandwidth limit with a FIFO transmit queue
// (tail drop beyond `queue_bytes`), ECN CE marking of ECT frames when the
// queue is above `ecn_mark_bytes` (RFC 3168 / RFC 8257 §3.1 step marking),
// random loss, duplication, corruption (one flipped bit inside the TCP
// segment, which the TCP checksum must catch), reordering (extra delay for
// some frames) and propagation delay. Every random decision comes from a
// seeded xoshiro256** generator, so a run is a pure function of its seed and
// its inputs; time is virtual (`Instant`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <vector>

#include <crescent/time.hpp>

namespace crescent::sim {

using Bytes = std::vector<std::byte>;

// xoshiro256** (Blackman & Vigna), seeded through splitmix64: the same
// sequence on every platform (std:: distributions are not portable).
class Rng {
public:
    explicit Rng(uint64_t seed);
    uint64_t next();
    double uniform();                        // [0, 1)
    uint64_t below(uint64_t n);              // [0, n), n > 0
    bool chance(double p) { return p > 0 && uniform() < p; }

private:
    uint64_t s_[4];
};

struct LinkConfig {
    uint64_t seed = 1;
    uint64_t bits_per_sec = 10'000'000'000ull; // 0 = infinitely fast
    Duration delay = std::chrono::microseconds(20); // one-way propagation
    size_t queue_bytes = 1u << 20;            // transmit queue bound (tail drop)
    size_t ecn_mark_bytes = 0;                // mark CE on ECT frames above this backlog (0 = never)
    double loss = 0;                          // probability a frame is lost
    double duplicate = 0;                     // probability a frame is delivered twice
    double corrupt = 0;                       // probability one bit of the TCP segment is flipped
    double reorder = 0;                       // probability a frame is held back
    Duration reorder_delay = std::chrono::microseconds(50); // up to this much extra delay
};

struct LinkStats {
    uint64_t sent = 0;          // frames offered
    uint64_t delivered = 0;     // frames handed out by pop()
    uint64_t lost = 0;
    uint64_t queue_drops = 0;
    uint64_t duplicated = 0;
    uint64_t corrupted = 0;
    uint64_t reordered = 0;
    uint64_t ce_marked = 0;
    uint64_t ect = 0;           // frames offered with ECT(0)/ECT(1)/CE: ECN was negotiated
    uint64_t bytes_sent = 0;
};

class Link {
public:
    explicit Link(const LinkConfig& cfg);

    // Offer a frame at `now`. It is queued, maybe dropped, marked, damaged.
    void send(Instant now, Bytes frame);
    // Arrival time of the next frame, or Instant::never().
    Instant next_arrival() const;
    // The next frame that has arrived by `now`, in arrival order (ties: send order).
    std::optional<Bytes> pop(Instant now);

    const LinkStats& stats() const { return st_; }
    const LinkConfig& config() const { return cfg_; }
    size_t in_flight() const { return q_.size(); }
    // Bytes waiting for the transmitter at `now`.
    size_t backlog(Instant now) const;

    // Change the loss rates mid-run (e.g. to let a teardown finish cleanly).
    void set_loss(double loss) { cfg_.loss = loss; }
    // Called with each frame the random loss takes (a trace of the run).
    void on_lost(std::function<void(Instant, const Bytes&)> f) { on_lost_ = std::move(f); }

private:
    struct InFlight {
        Instant arrival;
        uint64_t order;
        Bytes frame;
        bool operator>(const InFlight& o) const {
            return arrival != o.arrival ? arrival > o.arrival : order > o.order;
        }
    };
    Duration serialisation(size_t bytes) const;
    void schedule(Instant arrival, Bytes frame);

    LinkConfig cfg_;
    std::function<void(Instant, const Bytes&)> on_lost_;
    Rng rng_;
    LinkStats st_;
    Instant tx_free_;          // when the transmitter finishes its queue
    uint64_t order_ = 0;
    std::priority_queue<InFlight, std::vector<InFlight>, std::greater<InFlight>> q_;
};

// Frame surgery used by the link (exposed for tests). Both return false when
// the frame is not Ethernet/IPv4.
// Set the IPv4 ECN field to CE if it is ECT(0)/ECT(1) (fixing the header checksum).
bool mark_ce(Bytes& frame);
// Flip bit `bit` of the IPv4 payload (the TCP segment), counted from its start.
bool flip_l4_bit(Bytes& frame, uint64_t bit);
// The 2-bit IPv4 ECN field of a frame (0 when not Ethernet/IPv4).
uint8_t ecn_of(const Bytes& frame);

} // namespace crescent::sim
