// crescent — the port plan as ethtool ntuple (RX classification) rules.
//
// For a kernel-driver NIC used through AF_XDP with several queues, the XDP
// program only sees what arrives on a queue; the NIC must first put each
// engine's traffic on that engine's queue. ethtool's "n-tuple" filters do it:
// SIOCETHTOOL with ETHTOOL_SRXCLSRLINS inserts a struct ethtool_rx_flow_spec
// (include/uapi/linux/ethtool.h): flow type TCP_V4_FLOW, tcp_ip4_spec.pdst /
// psrc with their masks (in the KERNEL interface a mask bit of 1 means "compare
// this bit"; the ethtool CLI shows the inverse), ring_cookie = the RX queue.
// Locations are chosen by the driver (RX_CLS_LOC_ANY) where it supports that,
// else taken from the top of the table downwards.
//
// Devices without RX classification (veth, most virtual NICs) answer
// EOPNOTSUPP: install() then fails with "ntuple not supported on IFACE".
// Rules are deleted on destruction (ETHTOOL_SRXCLSRLDEL) and their locations
// can be recorded in the registry so a restarted process removes the rules of
// a dead one (remove_locations()).
//
// Set-up / shutdown only (ioctl; needs CAP_NET_ADMIN).
#pragma once

#include <linux/ethtool.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bifurcation/plan.hpp"

namespace crescent::bifurcation {

// The ethtool flow spec of one plan rule (location left 0): TCP_V4_FLOW,
// ports and masks in network byte order, ring_cookie = queue.
ethtool_rx_flow_spec ntuple_spec(const SteerRule& r);

class NtupleRules {
public:
    NtupleRules() = default;
    NtupleRules(const NtupleRules&) = delete;
    NtupleRules& operator=(const NtupleRules&) = delete;
    NtupleRules(NtupleRules&& o) noexcept;
    NtupleRules& operator=(NtupleRules&&) = delete;
    ~NtupleRules(); // remove()

    // 0 if `ifname` accepts ntuple rules, -EOPNOTSUPP (with *err "ntuple not
    // supported on IFACE: ...") or another -errno.
    static int probe(const std::string& ifname, std::string* err);

    // Inserts one rule per plan rule. All or nothing: on a failure the rules
    // inserted so far are removed and -errno is returned with *err naming the rule.
    int install(const std::string& ifname, const Plan& plan, std::string* err);
    // Deletes the rules this object inserted. Idempotent.
    int remove(std::string* err);

    const std::vector<uint32_t>& locations() const { return locs_; }
    const std::string& ifname() const { return ifname_; }
    // "1023,1022" — for RegistryEntry::extra["ntuple_locs"].
    std::string locations_string() const;

    // Crash recovery: delete these locations on `ifname` (missing ones ignored).
    static int remove_locations(const std::string& ifname, const std::vector<uint32_t>& locs,
                                std::string* err);

private:
    std::string ifname_;
    std::vector<uint32_t> locs_;
};

} // namespace crescent::bifurcation
