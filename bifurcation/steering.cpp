// crescent — steering backend selection and installation. See steering.hpp.
#include "bifurcation/steering.hpp"

#include <rte_ethdev.h>

#include <cerrno>

#include <fmt/format.h>

#include <crescent/log.hpp>

namespace crescent::bifurcation {

Steering Steering::prepare(uint16_t port_id, unsigned rx_queues, Backend forced) {
    auto lg = log::get("bifurcation");
    Steering s;
    s.port_id_ = port_id;
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(port_id, &info) == 0 && info.driver_name)
        s.driver_ = info.driver_name;
    else
        s.driver_ = "unknown";
    s.choice_ = choose_backend(s.driver_, rx_queues, forced);
    lg->info("port {}: {}", port_id, s.choice_.reason);
    if (s.choice_.backend == Backend::RteFlow) {
        std::string err;
        s.isolated_ = flow_isolate(port_id, &err) == 0;
        if (!s.isolated_)
            lg->warn("{}; traffic the kernel owns may also reach the DPDK queues", err);
    }
    return s;
}

int Steering::install(const Plan& plan, Session* session, const FlowOptions& opt,
                      std::string* err) {
    switch (choice_.backend) {
    case Backend::Auto: // prepare() never leaves Auto; treat as a bug in the caller
        if (err) *err = "crescent: steering backend not chosen (call Steering::prepare)";
        return -EINVAL;
    case Backend::None:
    case Backend::Xdp:
        return 0;
    case Backend::RteFlow:
        return flows_.install(port_id_, plan, opt, err);
    case Backend::XdpNtuple: {
        const std::string& ifname = plan.config().ifname;
        if (int rc = ntuple_.install(ifname, plan, err); rc < 0) return rc;
        if (session) {
            std::string rerr;
            if (!session->record("ntuple_ifname", ifname, &rerr) ||
                !session->record("ntuple_locs", ntuple_.locations_string(), &rerr))
                log::get("bifurcation")
                    ->warn("cannot record ntuple rules for crash recovery: {}", rerr);
        }
        return 0;
    }
    }
    return -EINVAL;
}

} // namespace crescent::bifurcation
