// crescent — the port plan of flow bifurcation (Luna §7.1 "Traffic Split").
//
// The kernel keeps the NIC; crescent takes a reserved range of TCP ports:
//
//   * Client side: the client range (default 61440-65535, the top 4096 ports) is
//     split into contiguous sub-ranges, one per application slot, and inside an
//     application one per engine. An engine picks the local ports of its outgoing
//     connections from its own sub-range, so the destination port of every reply
//     names the RX queue (= engine) that owns the connection [Luna §7.1: "direct
//     dest port between 61440 to 62463 to Thread1 in APP_A"].
//   * Server side: a listening port is steered to its application, and the
//     connections are spread over the application's engines by the low bits of
//     the TCP source port [Luna §7.1: "uses the lowest 2 bits of the TCP source
//     port to hash the packets to the 4 threads"]. For engine counts that are not
//     a power of two we use the fewest rules possible — exactly one
//     (value, mask) rule per engine — chosen so that shares differ by at most a
//     factor of two (a complete binary tree over the low bits, see
//     spread_by_low_bits()).
//
// Every rule is "(dst port value/mask, src port value/mask) -> RX queue", the
// form that rte_flow, ethtool ntuple and the XDP map all consume. Ranges that are
// not aligned power-of-two blocks are decomposed into the minimal set of prefix
// blocks (span_to_matches()).
//
// Pure code: no DPDK, no syscalls. Set-up path only (allocates, may fail with a
// message); nothing here runs per packet.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crescent::bifurcation {

// Inclusive port span [lo, hi], host byte order. Invariant (when valid): lo <= hi.
struct PortSpan {
    uint16_t lo = 0;
    uint16_t hi = 0;

    uint32_t size() const { return lo <= hi ? uint32_t(hi) - lo + 1 : 0; }
    bool contains(uint16_t p) const { return lo <= p && p <= hi; }
    bool overlaps(PortSpan o) const { return lo <= o.hi && o.lo <= hi; }
    bool operator==(const PortSpan&) const = default;
};
std::string to_string(PortSpan s); // "61440-65535" or "80"

// A port matches when (port & mask) == value. Invariant: (value & ~mask) == 0.
// mask == 0 matches every port; mask == 0xffff is an exact match.
struct PortMatch {
    uint16_t value = 0;
    uint16_t mask = 0;

    static constexpr PortMatch any() { return {0, 0}; }
    static constexpr PortMatch exact(uint16_t p) { return {p, 0xffff}; }
    bool matches(uint16_t p) const { return uint16_t(p & mask) == value; }
    bool is_any() const { return mask == 0; }
    bool is_exact() const { return mask == 0xffff; }
    uint32_t size() const; // ports matched: 2^(zero bits in mask)
    bool operator==(const PortMatch&) const = default;
};
std::string to_string(PortMatch m); // "61440/0xf800", "80", "*"

// The minimal set of prefix blocks (mask = high ones, then zeros) whose union
// is exactly `s`, lowest first. Empty for an invalid span.
std::vector<PortMatch> span_to_matches(PortSpan s);

// One (value, mask) rule on the LOW bits of a port per engine, for `engines`
// engines (1..65536): result[e] is engine e's rule. Every port matches exactly
// one rule; each rule covers 1/2^k or 1/2^(k-1) of the ports where
// k = ceil(log2(engines)), so shares differ by at most 2x, and are equal when
// `engines` is a power of two. engines == 1 gives {any}.
std::vector<PortMatch> spread_by_low_bits(unsigned engines);

// A steering rule: TCP/IPv4 packets whose destination and source ports match go
// to RX queue `queue` (engine `engine` of this application).
struct SteerRule {
    enum class Kind : uint8_t {
        Client, // reply to one of our outgoing connections: dst in an engine sub-range
        Server, // to one of our listening ports, spread by src low bits
    };
    Kind kind = Kind::Client;
    uint16_t engine = 0;
    uint16_t queue = 0;
    PortMatch dst;
    PortMatch src; // any() for client rules
    bool matches(uint16_t dst_port, uint16_t src_port) const {
        return dst.matches(dst_port) && src.matches(src_port);
    }
    bool operator==(const SteerRule&) const = default;
};
std::string to_string(const SteerRule& r); // "tcp dst 61440/0xf800 src * -> queue 0 (client, engine 0)"

inline constexpr PortSpan kDefaultClientRange{61440, 65535};

struct PlanConfig {
    std::string ifname;                     // the interface (for messages and the registry)
    std::string app_name = "crescent";      // for messages and the registry
    PortSpan client_range = kDefaultClientRange; // shared by every application on ifname
    uint16_t app_slots = 1;                 // applications sharing client_range (>= 1)
    uint16_t app_slot = 0;                  // ours, < app_slots
    // An explicit sub-range of client_range for this application, instead of
    // the app_slot-th of app_slots equal parts.
    std::optional<PortSpan> app_range;
    uint16_t engines = 1;                   // >= 1; engine e polls RX queue first_queue + e
    uint16_t first_queue = 0;
    std::vector<uint16_t> listen_ports;     // server ports of this application
    uint32_t min_ports_per_engine = 64;     // refuse smaller client sub-ranges
};

class Plan {
public:
    // Validates `cfg` and computes the sub-ranges and rules. On error returns
    // nullopt and sets *err to one line naming the offending value.
    static std::optional<Plan> compute(PlanConfig cfg, std::string* err);

    const PlanConfig& config() const { return cfg_; }
    unsigned engines() const { return cfg_.engines; }
    // The client ports of this application (what goes into
    // ip_local_reserved_ports and into the registry).
    PortSpan app_range() const { return app_range_; }
    // Engine e's local ports: the engine's port allocator must draw from here
    // and nowhere else, or the replies land on another queue.
    PortSpan engine_ports(unsigned engine) const { return engine_ports_.at(engine); }
    uint16_t queue_of(unsigned engine) const { return uint16_t(cfg_.first_queue + engine); }

    // Client rules first (engine order), then server rules (port, engine order).
    const std::vector<SteerRule>& rules() const { return rules_; }
    size_t client_rule_count() const { return client_rules_; }
    // Destination-port ranges to steer to user space at all (XDP map): the
    // application range and each listening port, merged and sorted.
    std::vector<PortSpan> steered_ranges() const;

    // The engine that owns a TCP segment to dst_port from src_port, by the rules
    // (what the NIC will do); nullopt when it stays with the kernel.
    std::optional<unsigned> engine_for(uint16_t dst_port, uint16_t src_port) const;

    // Human-readable, multi-line (for --show-plan and one log line per rule).
    std::string describe() const;

private:
    Plan() = default;
    PlanConfig cfg_;
    PortSpan app_range_;
    std::vector<PortSpan> engine_ports_; // size engines; contiguous, ascending, covering app_range_
    std::vector<SteerRule> rules_;
    size_t client_rules_ = 0;
};

// ---------------------------------------------------------------------------
// Backend selection.

enum class Backend : uint8_t {
    Auto,      // choose from the device (only valid as an option value)
    None,      // no steering: the device is not shared with the kernel
    Xdp,       // AF_XDP + the steering XDP program (one queue)
    XdpNtuple, // AF_XDP on several queues: ntuple rules pick the queue, XDP the socket
    RteFlow,   // rte_flow rules (flow director, mlx5 bifurcated driver, tap)
};
std::string_view backend_name(Backend b);          // "auto", "none", "xdp", "xdp+ntuple", "rte_flow"
std::optional<Backend> parse_backend(std::string_view s); // the names above; "ntuple" = xdp+ntuple

struct BackendChoice {
    Backend backend = Backend::None;
    std::string reason; // one line, for the start-up log
};
// From the DPDK driver name (rte_eth_dev_info::driver_name) and the number of
// RX queues used; `forced` != Auto wins.
BackendChoice choose_backend(std::string_view driver_name, unsigned rx_queues,
                             Backend forced = Backend::Auto);

} // namespace crescent::bifurcation
