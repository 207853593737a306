// crescent — user-space side of the XDP steering program (crescent_steer.bpf.c).
//
// The af_xdp PMD loads and attaches the program (its `xdp_prog=` argument);
// this class finds the program attached to an interface, opens its maps by
// name (see steer_maps.h) and rewrites the port ranges while the program runs.
// It also detaches the program at shutdown when it is still the one it found,
// so a crescent that exits leaves the interface as it found it.
//
// Threads: set-up / control-plane only (syscalls); not for the data path.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bifurcation/xdp/steer_maps.h"

namespace crescent::bifurcation {

// Inclusive TCP destination-port range, host byte order. Valid: 1 <= lo <= hi.
struct PortRange {
    uint16_t lo = 0;
    uint16_t hi = 0;
    bool operator==(const PortRange&) const = default;
};

struct SteerStats {
    std::array<uint64_t, CRESCENT_STEER_STAT_COUNT> counters{}; // summed over CPUs
    uint64_t redirected() const { return counters[CRESCENT_STEER_REDIRECTED]; }
    uint64_t passed() const {
        return counters[CRESCENT_STEER_PASS_NOT_IP] + counters[CRESCENT_STEER_PASS_NOT_TCP] +
               counters[CRESCENT_STEER_PASS_PORT] + counters[CRESCENT_STEER_PASS_MALFORMED];
    }
};

// The XDP program attached to `ifindex`, if any (0 = none). Returns -errno on
// a failed query. `name` receives the program name when not null.
int xdp_attached_prog(int ifindex, uint32_t* prog_id, std::string* name = nullptr);

class XdpSteer {
public:
    XdpSteer() = default;
    XdpSteer(const XdpSteer&) = delete;
    XdpSteer& operator=(const XdpSteer&) = delete;
    XdpSteer(XdpSteer&& o) noexcept;
    XdpSteer& operator=(XdpSteer&& o) noexcept;
    ~XdpSteer(); // closes the map fds; does not detach (see detach())

    // Find the crescent steering program on `ifindex` and open its maps.
    // Returns 0, or -errno with *err set to a one-line reason.
    int open(int ifindex, std::string* err);
    bool is_open() const { return ranges_fd_ >= 0; }

    // Replace the steered ranges (at most CRESCENT_STEER_MAX_RANGES). Entries are
    // written before the count so the program never reads a half-written range.
    int set_ranges(std::span<const PortRange> ranges, std::string* err);
    std::vector<PortRange> ranges() const;
    SteerStats stats() const;

    uint32_t prog_id() const { return prog_id_; }
    int ifindex() const { return ifindex_; }

    // Detach the XDP program from the interface if it is still prog_id().
    // Returns 0 when nothing of ours remains attached.
    int detach(std::string* err);

private:
    void close_fds();
    int ifindex_ = 0;
    uint32_t prog_id_ = 0;
    int prog_fd_ = -1;
    int ranges_fd_ = -1;
    int cfg_fd_ = -1;
    int stats_fd_ = -1;
};

// Detach prog `prog_id` from `ifindex` if it is the one attached (any mode).
// Usable without an XdpSteer (e.g. from an atexit hook). 0 or -errno.
int xdp_detach_if(int ifindex, uint32_t prog_id);

} // namespace crescent::bifurcation
