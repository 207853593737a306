// crescent — ethtool ntuple rules from the port plan. See ntuple.hpp.
#include "bifurcation/ntuple.hpp"

#include <arpa/inet.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include <crescent/log.hpp>

namespace crescent::bifurcation {

namespace {

// One SIOCETHTOOL call on `ifname` with `data`; 0 or -errno.
int ethtool_ioctl(const std::string& ifname, void* data) {
    if (ifname.empty() || ifname.size() >= IFNAMSIZ) return -EINVAL;
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, ifname.data(), ifname.size());
    ifr.ifr_data = static_cast<char*>(data);
    const int rc = ::ioctl(fd, SIOCETHTOOL, &ifr);
    const int e = errno;
    ::close(fd);
    return rc < 0 ? -e : 0;
}

std::string unsupported(const std::string& ifname, int rc) {
    return fmt::format("crescent: ntuple not supported on {}: the driver has no RX flow "
                       "classification ({}); use the XDP backend with one queue",
                       ifname, std::strerror(-rc));
}

bool is_unsupported(int rc) { return rc == -EOPNOTSUPP || rc == -ENOTSUP; }

struct TableInfo {
    uint32_t size = 0;     // rule table size (0 if the driver does not say)
    bool special = false;  // RX_CLS_LOC_ANY & co. accepted
    std::set<uint32_t> used;
};

int table_info(const std::string& ifname, TableInfo* info, std::string* err) {
    ethtool_rxnfc cnt{};
    cnt.cmd = ETHTOOL_GRXCLSRLCNT;
    int rc = ethtool_ioctl(ifname, &cnt);
    if (rc < 0) {
        if (err)
            *err = is_unsupported(rc) ? unsupported(ifname, rc)
                                      : fmt::format("crescent: ntuple on {}: ETHTOOL_GRXCLSRLCNT: {}",
                                                    ifname, std::strerror(-rc));
        return rc;
    }
    info->special = (cnt.data & RX_CLS_LOC_SPECIAL) != 0;
    info->size = uint32_t(cnt.data & ~uint64_t(RX_CLS_LOC_SPECIAL));
    if (cnt.rule_cnt == 0) return 0;
    // The locations in use, to pick free ones when the driver does not.
    std::vector<uint8_t> buf(sizeof(ethtool_rxnfc) + cnt.rule_cnt * sizeof(uint32_t));
    auto* all = reinterpret_cast<ethtool_rxnfc*>(buf.data());
    all->cmd = ETHTOOL_GRXCLSRLALL;
    all->rule_cnt = cnt.rule_cnt;
    rc = ethtool_ioctl(ifname, all);
    if (rc < 0) {
        if (err)
            *err = fmt::format("crescent: ntuple on {}: ETHTOOL_GRXCLSRLALL: {}", ifname,
                               std::strerror(-rc));
        return rc;
    }
    const uint32_t* locs = reinterpret_cast<const uint32_t*>(buf.data() + sizeof(ethtool_rxnfc));
    for (uint32_t i = 0; i < std::min(all->rule_cnt, cnt.rule_cnt); ++i) info->used.insert(locs[i]);
    return 0;
}

int delete_location(const std::string& ifname, uint32_t loc) {
    ethtool_rxnfc del{};
    del.cmd = ETHTOOL_SRXCLSRLDEL;
    del.fs.location = loc;
    return ethtool_ioctl(ifname, &del);
}

} // namespace

ethtool_rx_flow_spec ntuple_spec(const SteerRule& r) {
    ethtool_rx_flow_spec fs{};
    fs.flow_type = TCP_V4_FLOW;
    fs.h_u.tcp_ip4_spec.pdst = htons(r.dst.value);
    fs.m_u.tcp_ip4_spec.pdst = htons(r.dst.mask); // kernel ABI: 1 bits are compared
    fs.h_u.tcp_ip4_spec.psrc = htons(r.src.value);
    fs.m_u.tcp_ip4_spec.psrc = htons(r.src.mask);
    fs.ring_cookie = r.queue;
    return fs;
}

NtupleRules::NtupleRules(NtupleRules&& o) noexcept
    : ifname_(std::move(o.ifname_)), locs_(std::move(o.locs_)) {
    o.locs_.clear();
}

NtupleRules::~NtupleRules() {
    std::string err;
    if (remove(&err) < 0) log::get("bifurcation")->error("{}", err);
}

int NtupleRules::probe(const std::string& ifname, std::string* err) {
    TableInfo info;
    return table_info(ifname, &info, err);
}

int NtupleRules::install(const std::string& ifname, const Plan& plan, std::string* err) {
    if (!locs_.empty()) {
        if (err) *err = fmt::format("crescent: ntuple rules already installed on {}", ifname_);
        return -EBUSY;
    }
    TableInfo info;
    if (int rc = table_info(ifname, &info, err); rc < 0) return rc;
    ifname_ = ifname;
    uint32_t next_free = info.size; // scanning down from the top when no RX_CLS_LOC_ANY

    for (const SteerRule& r : plan.rules()) {
        ethtool_rxnfc ins{};
        ins.cmd = ETHTOOL_SRXCLSRLINS;
        ins.fs = ntuple_spec(r);
        if (info.special) {
            ins.fs.location = RX_CLS_LOC_ANY;
        } else {
            do {
                if (next_free == 0) {
                    if (err)
                        *err = fmt::format("crescent: ntuple on {}: rule table full ({} entries) "
                                           "before \"{}\" ({} plan rules)",
                                           ifname, info.size, to_string(r), plan.rules().size());
                    std::string ignored;
                    remove(&ignored);
                    return -ENOSPC;
                }
                --next_free;
            } while (info.used.count(next_free));
            ins.fs.location = next_free;
        }
        const int rc = ethtool_ioctl(ifname, &ins);
        if (rc < 0) {
            if (err)
                *err = is_unsupported(rc)
                           ? unsupported(ifname, rc)
                           : fmt::format("crescent: ntuple on {} refused \"{}\": {}", ifname,
                                         to_string(r), std::strerror(-rc));
            std::string ignored;
            remove(&ignored);
            return rc;
        }
        locs_.push_back(ins.fs.location);
    }
    log::get("bifurcation")
        ->info("ntuple: {} rule(s) on {} at locations {}", locs_.size(), ifname, locations_string());
    return 0;
}

int NtupleRules::remove(std::string* err) {
    int first_error = 0;
    for (uint32_t loc : locs_) {
        const int rc = delete_location(ifname_, loc);
        if (rc < 0 && rc != -ENOENT && first_error == 0) {
            first_error = rc;
            if (err)
                *err = fmt::format("crescent: ntuple on {}: cannot delete rule {}: {}", ifname_,
                                   loc, std::strerror(-rc));
        }
    }
    locs_.clear();
    return first_error;
}

std::string NtupleRules::locations_string() const {
    std::string out;
    for (uint32_t l : locs_) out += (out.empty() ? "" : ",") + std::to_string(l);
    return out;
}

int NtupleRules::remove_locations(const std::string& ifname, const std::vector<uint32_t>& locs,
                                  std::string* err) {
    int first_error = 0;
    for (uint32_t loc : locs) {
        const int rc = delete_location(ifname, loc);
        if (rc < 0 && rc != -ENOENT && rc != -ENODEV && first_error == 0) {
            first_error = rc;
            if (err)
                *err = fmt::format("crescent: ntuple on {}: cannot delete stale rule {}: {}",
                                   ifname, loc, std::strerror(-rc));
        }
    }
    return first_error;
}

} // namespace crescent::bifurcation
