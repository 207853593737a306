// crescent — rte_flow backend of the port plan. See rte_flow.hpp.
#include "bifurcation/rte_flow.hpp"

#include <rte_byteorder.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>

#include <cerrno>

#include <fmt/format.h>

#include <crescent/log.hpp>

namespace crescent::bifurcation {

namespace {

std::string flow_error(int rc, const rte_flow_error& e) {
    return fmt::format("{} (error type {}, errno {}: {})", e.message ? e.message : "no message",
                       int(e.type), -rc, rte_strerror(-rc));
}

// One flow: ETH / IPV4 / TCP (ports value&mask) -> QUEUE.
struct FlowSpec {
    rte_flow_attr attr{};
    rte_flow_item_tcp tcp_spec{};
    rte_flow_item_tcp tcp_mask{};
    rte_flow_action_queue queue{};
    rte_flow_item pattern[4]{};
    rte_flow_action actions[2]{};

    FlowSpec(PortMatch dst, PortMatch src, uint16_t queue_index, uint32_t priority) {
        attr.ingress = 1;
        attr.priority = priority;
        tcp_spec.hdr.dst_port = rte_cpu_to_be_16(dst.value);
        tcp_mask.hdr.dst_port = rte_cpu_to_be_16(dst.mask);
        tcp_spec.hdr.src_port = rte_cpu_to_be_16(src.value);
        tcp_mask.hdr.src_port = rte_cpu_to_be_16(src.mask);
        queue.index = queue_index;
        pattern[0].type = RTE_FLOW_ITEM_TYPE_ETH;
        pattern[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
        pattern[2].type = RTE_FLOW_ITEM_TYPE_TCP;
        pattern[2].spec = &tcp_spec;
        pattern[2].mask = &tcp_mask;
        pattern[3].type = RTE_FLOW_ITEM_TYPE_END;
        actions[0].type = RTE_FLOW_ACTION_TYPE_QUEUE;
        actions[0].conf = &queue;
        actions[1].type = RTE_FLOW_ACTION_TYPE_END;
    }
    FlowSpec(const FlowSpec&) = delete; // items point into the object
    FlowSpec& operator=(const FlowSpec&) = delete;
};

// The exact ports a partial mask stands for (any and exact stay as they are).
std::vector<PortMatch> expand(PortMatch m) {
    if (m.is_any() || m.is_exact()) return {m};
    std::vector<PortMatch> out;
    for (uint32_t p = 0; p < 65536; ++p)
        if (m.matches(uint16_t(p))) out.push_back(PortMatch::exact(uint16_t(p)));
    return out;
}

uint64_t expansion_size(const SteerRule& r) {
    auto n = [](PortMatch m) -> uint64_t { return m.is_any() || m.is_exact() ? 1 : m.size(); };
    return n(r.dst) * n(r.src);
}

} // namespace

int flow_isolate(uint16_t port_id, std::string* err) {
    rte_flow_error fe{};
    const int rc = rte_flow_isolate(port_id, 1, &fe);
    if (rc != 0 && err)
        *err = fmt::format("crescent: rte_flow isolated mode refused on port {}: {}", port_id,
                           flow_error(rc, fe));
    return rc;
}

RteFlowRules::RteFlowRules(RteFlowRules&& o) noexcept
    : port_id_(o.port_id_), plan_rules_(o.plan_rules_), expanded_(o.expanded_),
      flows_(std::move(o.flows_)), refused_(std::move(o.refused_)) {
    o.flows_.clear();
}

RteFlowRules::~RteFlowRules() {
    std::string err;
    if (destroy(&err) != 0) log::get("bifurcation")->error("{}", err);
}

int RteFlowRules::install(uint16_t port_id, const Plan& plan, const FlowOptions& opt,
                          std::string* err) {
    auto lg = log::get("bifurcation");
    if (!flows_.empty()) {
        if (err) *err = fmt::format("crescent: rte_flow rules already installed on port {}", port_id_);
        return -EBUSY;
    }
    port_id_ = port_id;
    plan_rules_ = plan.rules().size();
    expanded_ = 0;
    refused_.clear();

    // Validate then create one flow; 0 or -errno with *why.
    auto place = [&](PortMatch dst, PortMatch src, uint16_t queue, std::string* why) -> int {
        FlowSpec f(dst, src, queue, opt.priority);
        rte_flow_error fe{};
        int rc = rte_flow_validate(port_id, &f.attr, f.pattern, f.actions, &fe);
        if (rc != 0) {
            *why = "validate: " + flow_error(rc, fe);
            return rc;
        }
        fe = rte_flow_error{};
        rte_flow* flow = rte_flow_create(port_id, &f.attr, f.pattern, f.actions, &fe);
        if (!flow) {
            rc = -rte_errno;
            *why = "create: " + flow_error(rc ? rc : -EINVAL, fe);
            return rc ? rc : -EINVAL;
        }
        flows_.push_back(flow);
        return 0;
    };

    for (const SteerRule& r : plan.rules()) {
        std::string why;
        int rc = place(r.dst, r.src, r.queue, &why);
        if (rc != 0 && (!r.dst.is_exact() || !r.src.is_any()) &&
            expansion_size(r) > 1 && expansion_size(r) <= opt.max_exact_expansion) {
            // Masks refused: the same ports one by one.
            const size_t before = flows_.size();
            std::string why_exact;
            rc = 0;
            for (PortMatch d : expand(r.dst)) {
                for (PortMatch s : expand(r.src))
                    if ((rc = place(d, s, r.queue, &why_exact)) != 0) break;
                if (rc != 0) break;
            }
            if (rc == 0) {
                ++expanded_;
                lg->debug("rte_flow port {}: {} as {} exact-port flows (mask refused: {})",
                          port_id, to_string(r), flows_.size() - before, why);
                continue;
            }
            why += "; as exact ports: " + why_exact;
        } else if (rc != 0 && expansion_size(r) > opt.max_exact_expansion) {
            why += fmt::format("; not expanded: {} exact flows > limit {}", expansion_size(r),
                               opt.max_exact_expansion);
        }
        if (rc == 0) {
            lg->debug("rte_flow port {}: {}", port_id, to_string(r));
            continue;
        }
        const std::string msg =
            fmt::format("rte_flow on port {} refused \"{}\": {}", port_id, to_string(r), why);
        if (opt.on_refused == FlowOptions::OnRefused::Skip) {
            lg->warn("refused: {} (continuing without it: the plan is not fully honoured)", msg);
            refused_.push_back(msg);
            continue;
        }
        if (err)
            *err = fmt::format("crescent: {}; the port plan cannot be honoured on this device "
                               "(use fewer engines, the XDP backend, or on_refused=skip)",
                               msg);
        std::string ignored;
        destroy(&ignored);
        return rc < 0 ? rc : -EINVAL;
    }
    lg->info("{}", report());
    return 0;
}

int RteFlowRules::destroy(std::string* err) {
    int first = 0;
    // Newest first, the reverse of creation.
    for (auto it = flows_.rbegin(); it != flows_.rend(); ++it) {
        rte_flow_error fe{};
        const int rc = rte_flow_destroy(port_id_, *it, &fe);
        if (rc != 0 && first == 0) {
            first = rc;
            if (err)
                *err = fmt::format("crescent: rte_flow_destroy on port {}: {}", port_id_,
                                   flow_error(rc, fe));
        }
    }
    flows_.clear();
    return first;
}

std::string RteFlowRules::report() const {
    return fmt::format("rte_flow on port {}: {} flow(s) for {} plan rule(s), {} expanded to "
                       "exact ports, {} refused",
                       port_id_, flows_.size(), plan_rules_, expanded_, refused_.size());
}

} // namespace crescent::bifurcation
