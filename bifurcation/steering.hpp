// crescent — choosing and applying a steering backend for a DPDK port.
//
// The device layer calls, in this order:
//
//   Steering s = Steering::prepare(port, rx_queues, forced);   // after probe,
//                                          // BEFORE rte_eth_dev_configure()
//   ... configure, set up queues, start ...
//   s.install(plan, &session, flow_options, &err);             // rules in place
//   ... run ...
//   (destroy s before closing the port; then the Session)
//
// Backends (plan.hpp, choose_backend()):
//   rte_flow    isolated mode in prepare(), then RteFlowRules in install();
//   xdp+ntuple  ethtool ntuple rules on the kernel netdev (the plan's ifname)
//               put each engine's ports on its queue; their locations are
//               recorded in the session so a successor can delete them;
//   xdp         nothing here: the XDP program's port map is filled by
//               bifurcation/xdp (XdpSteer::set_ranges(plan.steered_ranges()));
//   none        nothing.
//
// Set-up / shutdown only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "bifurcation/ntuple.hpp"
#include "bifurcation/plan.hpp"
#include "bifurcation/rte_flow.hpp"
#include "bifurcation/session.hpp"

namespace crescent::bifurcation {

class Steering {
public:
    // Picks the backend from the port's driver (rte_eth_dev_info) and the RX
    // queue count, or `forced`; for rte_flow, requests isolated mode (a refusal
    // is logged and noted in isolated()). Never fails: the choice is logged.
    static Steering prepare(uint16_t port_id, unsigned rx_queues, Backend forced = Backend::Auto);

    Steering(Steering&&) noexcept = default;
    Steering& operator=(Steering&&) = delete;
    Steering(const Steering&) = delete;
    Steering& operator=(const Steering&) = delete;
    ~Steering() = default; // rules removed by the members' destructors

    // Installs the plan with the chosen backend; records backend state in
    // `session` (may be null). 0 or -errno with *err.
    int install(const Plan& plan, Session* session, const FlowOptions& opt, std::string* err);

    Backend backend() const { return choice_.backend; }
    const std::string& reason() const { return choice_.reason; }
    const std::string& driver() const { return driver_; }
    bool isolated() const { return isolated_; }
    const RteFlowRules& flows() const { return flows_; }
    const NtupleRules& ntuple() const { return ntuple_; }

private:
    Steering() = default;
    uint16_t port_id_ = 0;
    std::string driver_;
    BackendChoice choice_;
    bool isolated_ = false;
    RteFlowRules flows_;
    NtupleRules ntuple_;
};

} // namespace crescent::bifurcation
