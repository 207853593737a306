// crescent — user-space side of the XDP steering program: find the attached
// program, open its maps by name, rewrite the port ranges, detach at exit.
#include "bifurcation/xdp/steer.hpp"

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <linux/if_link.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

namespace crescent::bifurcation {

namespace {

struct Fd {
    int fd = -1;
    ~Fd() { if (fd >= 0) ::close(fd); }
    int release() { return std::exchange(fd, -1); }
};

// libbpf returns -errno (libbpf 1.x "strict" mode) but older paths set errno.
int neg_errno(int rc) { return rc < 0 ? rc : -errno; }

uint32_t xdp_mode_flags(uint8_t attach_mode) {
    switch (attach_mode) {
    case XDP_ATTACHED_DRV: return XDP_FLAGS_DRV_MODE;
    case XDP_ATTACHED_SKB: return XDP_FLAGS_SKB_MODE;
    case XDP_ATTACHED_HW: return XDP_FLAGS_HW_MODE;
    default: return 0;
    }
}

} // namespace

int xdp_attached_prog(int ifindex, uint32_t* prog_id, std::string* name) {
    bpf_xdp_query_opts q{};
    q.sz = sizeof(q);
    int rc = bpf_xdp_query(ifindex, 0, &q);
    if (rc < 0) return rc;
    // With several modes attached (rare), prog_id is 0; take whichever exists.
    uint32_t id = q.prog_id ? q.prog_id : (q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id);
    *prog_id = id;
    if (name) {
        name->clear();
        if (id != 0) {
            Fd fd{bpf_prog_get_fd_by_id(id)};
            bpf_prog_info info{};
            uint32_t len = sizeof(info);
            if (fd.fd >= 0 && bpf_obj_get_info_by_fd(fd.fd, &info, &len) == 0) *name = info.name;
        }
    }
    return 0;
}

int xdp_detach_if(int ifindex, uint32_t prog_id) {
    if (prog_id == 0) return 0;
    bpf_xdp_query_opts q{};
    q.sz = sizeof(q);
    int rc = bpf_xdp_query(ifindex, 0, &q);
    if (rc < 0) return rc == -ENODEV ? 0 : rc; // interface gone: nothing attached
    uint32_t flags = 0;
    if (q.drv_prog_id == prog_id) flags = XDP_FLAGS_DRV_MODE;
    else if (q.skb_prog_id == prog_id) flags = XDP_FLAGS_SKB_MODE;
    else if (q.hw_prog_id == prog_id) flags = XDP_FLAGS_HW_MODE;
    else if (q.prog_id == prog_id) flags = xdp_mode_flags(q.attach_mode);
    else return 0; // someone else's program (or none): not ours to remove
    Fd fd{bpf_prog_get_fd_by_id(prog_id)};
    if (fd.fd < 0) return neg_errno(fd.fd);
    bpf_xdp_attach_opts o{};
    o.sz = sizeof(o);
    o.old_prog_fd = fd.fd; // only detach if it is still ours (atomic replace check)
    rc = bpf_xdp_detach(ifindex, flags | XDP_FLAGS_REPLACE, &o);
    return rc < 0 ? rc : 0;
}

XdpSteer::XdpSteer(XdpSteer&& o) noexcept { *this = std::move(o); }

XdpSteer& XdpSteer::operator=(XdpSteer&& o) noexcept {
    if (this != &o) {
        close_fds();
        ifindex_ = std::exchange(o.ifindex_, 0);
        prog_id_ = std::exchange(o.prog_id_, 0);
        prog_fd_ = std::exchange(o.prog_fd_, -1);
        ranges_fd_ = std::exchange(o.ranges_fd_, -1);
        cfg_fd_ = std::exchange(o.cfg_fd_, -1);
        stats_fd_ = std::exchange(o.stats_fd_, -1);
    }
    return *this;
}

XdpSteer::~XdpSteer() { close_fds(); }

void XdpSteer::close_fds() {
    for (int* fd : {&prog_fd_, &ranges_fd_, &cfg_fd_, &stats_fd_}) {
        if (*fd >= 0) ::close(*fd);
        *fd = -1;
    }
}

int XdpSteer::open(int ifindex, std::string* err) {
    close_fds();
    ifindex_ = ifindex;
    uint32_t id = 0;
    int rc = xdp_attached_prog(ifindex, &id);
    if (rc < 0) {
        *err = fmt::format("cannot query the XDP program of ifindex {}: {}", ifindex, std::strerror(-rc));
        return rc;
    }
    if (id == 0) {
        *err = fmt::format("no XDP program is attached to ifindex {}", ifindex);
        return -ENOENT;
    }
    Fd prog{bpf_prog_get_fd_by_id(id)};
    if (prog.fd < 0) {
        rc = neg_errno(prog.fd);
        *err = fmt::format("cannot open XDP program id {}: {}", id, std::strerror(-rc));
        return rc;
    }
    // First call: how many maps; second: their ids.
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if ((rc = bpf_obj_get_info_by_fd(prog.fd, &info, &len)) != 0) {
        rc = neg_errno(rc);
        *err = fmt::format("cannot read XDP program id {} info: {}", id, std::strerror(-rc));
        return rc;
    }
    std::vector<uint32_t> map_ids(info.nr_map_ids);
    uint32_t nr_maps = info.nr_map_ids;
    info = bpf_prog_info{};
    info.nr_map_ids = nr_maps;
    info.map_ids = reinterpret_cast<uint64_t>(map_ids.data());
    len = sizeof(info);
    if ((rc = bpf_obj_get_info_by_fd(prog.fd, &info, &len)) != 0) {
        rc = neg_errno(rc);
        *err = fmt::format("cannot list the maps of XDP program id {}: {}", id, std::strerror(-rc));
        return rc;
    }
    Fd ranges, cfg, stats;
    for (uint32_t map_id : map_ids) {
        Fd m{bpf_map_get_fd_by_id(map_id)};
        if (m.fd < 0) continue;
        bpf_map_info mi{};
        uint32_t mlen = sizeof(mi);
        if (bpf_obj_get_info_by_fd(m.fd, &mi, &mlen) != 0) continue;
        std::string_view name = mi.name;
        if (name == CRESCENT_STEER_MAP_RANGES && mi.value_size == sizeof(crescent_port_range) &&
            mi.max_entries == CRESCENT_STEER_MAX_RANGES)
            ranges.fd = m.release();
        else if (name == CRESCENT_STEER_MAP_CFG && mi.value_size == sizeof(crescent_steer_cfg))
            cfg.fd = m.release();
        else if (name == CRESCENT_STEER_MAP_STATS && mi.value_size == sizeof(uint64_t))
            stats.fd = m.release();
    }
    if (ranges.fd < 0 || cfg.fd < 0) {
        std::string pname;
        xdp_attached_prog(ifindex, &id, &pname);
        *err = fmt::format("the XDP program on ifindex {} (id {}, '{}') is not crescent_steer "
                           "(no {}/{} maps of the expected layout)",
                           ifindex, id, pname, CRESCENT_STEER_MAP_RANGES, CRESCENT_STEER_MAP_CFG);
        return -ENOENT;
    }
    prog_id_ = id;
    prog_fd_ = prog.release();
    ranges_fd_ = ranges.release();
    cfg_fd_ = cfg.release();
    stats_fd_ = stats.release();
    return 0;
}

int XdpSteer::set_ranges(std::span<const PortRange> ranges, std::string* err) {
    if (!is_open()) { *err = "steering maps are not open"; return -EBADF; }
    if (ranges.size() > CRESCENT_STEER_MAX_RANGES) {
        *err = fmt::format("{} port ranges given, the steering program holds at most {}",
                           ranges.size(), CRESCENT_STEER_MAX_RANGES);
        return -E2BIG;
    }
    for (const PortRange& r : ranges) {
        if (r.lo == 0 || r.lo > r.hi) {
            *err = fmt::format("bad port range {}-{} (need 1 <= lo <= hi)", r.lo, r.hi);
            return -EINVAL;
        }
    }
    // Shrinking: publish the smaller count first. Growing: entries, then count.
    uint32_t key = 0;
    crescent_steer_cfg cur{};
    if (bpf_map_lookup_elem(cfg_fd_, &key, &cur) != 0) cur = {};
    crescent_steer_cfg next{};
    next.nr_ranges = uint32_t(ranges.size());
    auto write_cfg = [&](const crescent_steer_cfg& c) {
        int rc = bpf_map_update_elem(cfg_fd_, &key, &c, BPF_ANY);
        if (rc != 0) {
            rc = neg_errno(rc);
            *err = fmt::format("cannot update {}: {}", CRESCENT_STEER_MAP_CFG, std::strerror(-rc));
        }
        return rc;
    };
    // A shrinking plan publishes the smaller count first; a growing one writes
    // the entries first. An entry rewritten in place is an 8-byte value copied
    // by the kernel as a whole: a reader sees the old range or the new one.
    if (next.nr_ranges < cur.nr_ranges) {
        if (int rc = write_cfg(next); rc != 0) return rc;
    }
    for (uint32_t i = 0; i < ranges.size(); i++) {
        crescent_port_range v{};
        v.lo = ranges[i].lo;
        v.hi = ranges[i].hi;
        int rc = bpf_map_update_elem(ranges_fd_, &i, &v, BPF_ANY);
        if (rc != 0) {
            rc = neg_errno(rc);
            *err = fmt::format("cannot update {}[{}]: {}", CRESCENT_STEER_MAP_RANGES, i, std::strerror(-rc));
            return rc;
        }
    }
    return write_cfg(next);
}

std::vector<PortRange> XdpSteer::ranges() const {
    std::vector<PortRange> out;
    if (!is_open()) return out;
    uint32_t key = 0;
    crescent_steer_cfg cfg{};
    if (bpf_map_lookup_elem(cfg_fd_, &key, &cfg) != 0) return out;
    for (uint32_t i = 0; i < cfg.nr_ranges && i < CRESCENT_STEER_MAX_RANGES; i++) {
        crescent_port_range v{};
        if (bpf_map_lookup_elem(ranges_fd_, &i, &v) == 0) out.push_back({v.lo, v.hi});
    }
    return out;
}

SteerStats XdpSteer::stats() const {
    SteerStats s;
    if (stats_fd_ < 0) return s;
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) return s;
    std::vector<uint64_t> per_cpu(size_t(ncpu), 0);
    for (uint32_t i = 0; i < CRESCENT_STEER_STAT_COUNT; i++) {
        if (bpf_map_lookup_elem(stats_fd_, &i, per_cpu.data()) != 0) continue;
        for (uint64_t v : per_cpu) s.counters[i] += v;
    }
    return s;
}

int XdpSteer::detach(std::string* err) {
    if (prog_id_ == 0) return 0;
    int rc = xdp_detach_if(ifindex_, prog_id_);
    if (rc < 0) {
        *err = fmt::format("cannot detach XDP program id {} from ifindex {}: {}", prog_id_, ifindex_,
                           std::strerror(-rc));
        return rc;
    }
    close_fds();
    prog_id_ = 0;
    return 0;
}

} // namespace crescent::bifurcation
