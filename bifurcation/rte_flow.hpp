// crescent — the port plan as rte_flow rules (flow director, mlx5 bifurcated
// driver, DPDK's TAP PMD).
//
// Isolated mode (rte_flow_isolate(), call flow_isolate() BEFORE
// rte_eth_dev_configure()) makes the port receive only what the rules match;
// with a bifurcated driver the rest stays with the kernel netdev [Luna §7.1,
// DPDK "Flow Bifurcation How-to"].
//
// Every plan rule becomes one flow
//
//     pattern ETH / IPV4 / TCP dst_port value&mask [src_port value&mask] / END
//     actions QUEUE index / END
//
// checked with rte_flow_validate() before rte_flow_create(). A device may
// refuse port masks (the TAP PMD, through TC flower, only takes exact ports):
// then a rule covering at most FlowOptions::max_exact_expansion ports is
// installed as that many exact-port flows instead. What still cannot be
// installed is handled by FlowOptions::on_refused:
//
//   * Fail (default): the plan cannot be honoured — packets would reach an
//     engine that does not own their connection — so install() removes every
//     flow it created and returns an error naming the rule and the PMD's reason.
//   * Skip: log "refused: <rule>: <reason>", keep going; refused() lists them
//     and the caller must not rely on those rules (e.g. single-engine servers).
//
// Flows are destroyed by destroy() / the destructor (before the port is closed).
// Set-up / shutdown only; not thread-safe (one control thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bifurcation/plan.hpp"

struct rte_flow;

namespace crescent::bifurcation {

struct FlowOptions {
    enum class OnRefused : uint8_t { Fail, Skip };
    OnRefused on_refused = OnRefused::Fail;
    // A refused masked rule matching at most this many (dst, src) port
    // combinations is retried as exact-port flows.
    uint32_t max_exact_expansion = 256;
    uint32_t priority = 0; // rte_flow_attr::priority of every flow
};

// Put `port_id` in isolated mode. 0, or -errno (e.g. -ENOTSUP) with *err set;
// without isolation the PMD's default rules may still send the kernel's
// traffic to DPDK queues, so callers should warn or stop.
int flow_isolate(uint16_t port_id, std::string* err);

class RteFlowRules {
public:
    RteFlowRules() = default;
    RteFlowRules(const RteFlowRules&) = delete;
    RteFlowRules& operator=(const RteFlowRules&) = delete;
    RteFlowRules(RteFlowRules&& o) noexcept;
    RteFlowRules& operator=(RteFlowRules&&) = delete;
    ~RteFlowRules(); // destroy()

    // Installs the plan's rules on a configured port (queues exist). 0 or -errno
    // with *err set (see the file comment for the refusal policy).
    int install(uint16_t port_id, const Plan& plan, const FlowOptions& opt, std::string* err);
    // Destroys every flow created. Idempotent; the first error is returned.
    int destroy(std::string* err);

    size_t flow_count() const { return flows_.size(); }
    // Plan rules installed as exact-port expansions, and refused ones (Skip).
    size_t expanded() const { return expanded_; }
    const std::vector<std::string>& refused() const { return refused_; }
    // "rte_flow on port 0: 16 flow(s) for 2 plan rule(s), 2 expanded to exact ports, 0 refused"
    std::string report() const;

private:
    uint16_t port_id_ = 0;
    size_t plan_rules_ = 0;
    size_t expanded_ = 0;
    std::vector<rte_flow*> flows_;
    std::vector<std::string> refused_;
};

} // namespace crescent::bifurcation
