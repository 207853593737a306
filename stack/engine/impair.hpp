// crescent — a netem-like impairment wrapper around an engine Device.
//
// For tests on kernels without sch_netem (CONFIG_NET_SCH_NETEM unset): every
// frame crescent receives or sends goes through the same model netem uses —
// independent loss, duplication, a fixed delay, and "reorder P%": that share
// of the frames skips the delay and so overtakes the delayed ones. Applied on
// both RX and TX, it impairs both directions of a flow with any peer.
//
// Spec: "loss=1,dup=1,reorder=25,delay=2ms,seed=7" (percentages may be
// fractional; delay in us or ms). Deterministic for a given seed.
// Test aid only: the data path of a production engine never wraps its device.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "stack/engine/clock.hpp"
#include "stack/engine/device.hpp"

namespace crescent::engine {

struct ImpairSpec {
    double loss = 0, dup = 0, reorder = 0;  // probabilities in [0, 1]
    Duration delay{0};
    uint64_t seed = 1;
};
// nullopt + *err on a malformed spec.
std::optional<ImpairSpec> parse_impair(std::string_view s, std::string* err);

class ImpairDevice final : public Device {
public:
    ImpairDevice(std::unique_ptr<Device> inner, const ImpairSpec& spec);
    ~ImpairDevice() override;

    uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) override;
    uint16_t tx_burst(rte_mbuf** pkts, uint16_t n) override;
    bool tx_pending() const override { return !tx_line_.empty() || inner_->tx_pending(); }
    void flush() override;
    const DeviceCaps& caps() const override { return inner_->caps(); }
    rte_mempool* tx_pool() override { return inner_->tx_pool(); }
    wire::MacAddr mac() const override { return inner_->mac(); }

    struct Counters {
        uint64_t dropped = 0, duplicated = 0, reordered = 0, delayed = 0;
    };
    const Counters& counters() const { return ctr_; }

private:
    struct Held {
        rte_mbuf* m;
        Instant release;
    };
    // Runs one frame through the model into `line`.
    void admit(rte_mbuf* m, std::deque<Held>& line, Instant now);
    bool chance(double p) { return p > 0 && uni_(rng_) < p; }

    std::unique_ptr<Device> inner_;
    ImpairSpec spec_;
    TscClock clock_;
    std::mt19937_64 rng_;
    std::uniform_real_distribution<double> uni_{0.0, 1.0};
    std::deque<Held> rx_line_, tx_line_;  // release times non-decreasing except reordered frames at the front
    rte_mbuf* scratch_[64];
    Counters ctr_;
};

} // namespace crescent::engine
