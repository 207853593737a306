// crescent — DPDK start-up from the application (issue 4, "stack/dev").
//
// Two ways to get ports:
//   * Iface: crescent builds the EAL arguments for AF_XDP on a Linux interface
//       --no-pci --vdev=net_af_xdp0,iface=IF,start_queue=0,queue_count=N,
//                       xdp_prog=crescent_steer.bpf.o
//     plus a per-process --file-prefix, --in-memory (no hugepage files at
//     all), -l and --log-level. The steering program (bifurcation/xdp) sends
//     only the reserved TCP ports to DPDK and XDP_PASSes ARP, ICMP and every
//     other port to the kernel, which keeps sharing the interface and its IP.
//     Its port ranges live in a BPF map, rewritten without reloading.
//   * Eal: the user's own EAL arguments (PCI NICs, net_af_packet, net_memif,
//     net_tap, net_ring, ...); crescent adds only a --file-prefix if none is given.
//
// Errors come back as a one-line `Status` (see status.hpp) naming the cause
// and the fix: unknown interface, no hugepages, not root, EAL failure (quoting
// EAL), interface or prefix already in use. After an error, after the Runtime
// is destroyed, and after SIGINT/SIGTERM (which only set stop_requested(): the
// application's loop returns and destroys the Runtime), nothing is left behind:
// no XDP program on the interface, no hugepage or runtime files of the prefix.
// A process killed with SIGKILL cannot clean up; the next start reports the
// stale XDP program as "in use" with the command that removes it.
//
// One Runtime per process (EAL can be initialised once). Set-up only: none of
// this is on the data path.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bifurcation/xdp/steer.hpp"
#include "stack/dev/port.hpp"
#include "stack/dev/status.hpp"

namespace crescent::dev {

using bifurcation::PortRange;

struct RuntimeConfig {
    enum class Mode : uint8_t { Iface, Eal };
    Mode mode = Mode::Iface;

    // --- Iface mode ---
    std::string iface;                 // Linux netdev (in the current network namespace)
    uint16_t queues = 1;               // queue pairs = engines, bound to queues 0..queues-1
    bool steer = true;                 // load crescent_steer; false = the PMD's default
                                       // program (EVERY frame of the queues goes to DPDK)
    std::vector<PortRange> steer_ports;// TCP destination ports steered to DPDK
    std::string xdp_prog;              // "" = $CRESCENT_XDP_PROG, build tree, install dir

    // --- Eal mode ---
    std::vector<std::string> eal_args; // as on a DPDK command line, without argv[0]

    // --- both ---
    std::string cores;                 // EAL -l list; "" = the first `queues` allowed CPUs
    std::string log_level = "notice";  // EAL --log-level
    std::string file_prefix;           // "" = "crescent<pid>"
    bool in_memory = true;             // --in-memory: no hugepage files (Iface mode)
    bool no_huge = false;              // --no-huge: plain memory (tests without hugepages)
    unsigned memory_mb = 0;            // -m; 0 = EAL's dynamic allocation
    bool handle_signals = true;        // SIGINT/SIGTERM -> stop_requested(); a second one kills
};

class Runtime {
public:
    // Start EAL (and, in Iface mode, probe the AF_XDP port). On error *out is
    // left empty and everything done so far is undone.
    static Status start(const RuntimeConfig& cfg, std::unique_ptr<Runtime>* out);
    ~Runtime(); // closes every port, detaches the XDP program, rte_eal_cleanup, removes files
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    // Configure and start a port (one queue pair per engine). The Runtime
    // owns it: *out stays valid until the Runtime is destroyed. In Iface mode,
    // the steering maps are opened and filled once the port has started
    // (the PMD attaches the program when it creates the first XSK).
    Status open_port(uint16_t port_id, const PortConfig& cfg, Port** out);
    // Iface mode: the AF_XDP port. Eal mode: the first available port.
    uint16_t default_port() const { return default_port_; }
    std::vector<uint16_t> ports() const; // every available ethdev
    // Stop and close every opened port now (Port pointers become invalid):
    // for callers whose RX pools live in a zbuf arena that must go before EAL
    // (ports -> arena -> Runtime). The destructor does it otherwise.
    void close_ports();

    // Iface mode with steering: rewrite the steered TCP port ranges (no reload).
    Status set_steer_ports(std::span<const PortRange> ranges);
    const bifurcation::XdpSteer* steering() const { return steer_.is_open() ? &steer_ : nullptr; }

    const RuntimeConfig& config() const { return cfg_; }
    const std::string& file_prefix() const { return prefix_; }
    int ifindex() const { return ifindex_; }
    const std::vector<std::string>& eal_argv() const { return argv_; }

    // Set by SIGINT/SIGTERM (when handle_signals) or request_stop().
    static bool stop_requested();
    static void request_stop();

    // The XDP object the Iface mode would load (for tools and tests).
    static std::string default_xdp_prog();

private:
    Runtime() = default;
    void shutdown();
    Status attach_steering();

    RuntimeConfig cfg_;
    std::string prefix_;
    std::vector<std::string> argv_;
    int ifindex_ = 0;
    uint16_t default_port_ = 0;
    std::vector<std::unique_ptr<Port>> ports_;
    bifurcation::XdpSteer steer_;
    uint32_t steer_prog_id_ = 0; // the program we must not leave behind
    bool eal_up_ = false;
};

// Iface mode needs root (AF_XDP sockets, XDP programs, hugepages): a NotRoot
// status naming `iface` and the fix when this process is not root, else ok.
// Runtime::start checks it; callers that claim anything for the interface
// before starting the Runtime check it first.
Status require_root_for_iface(const std::string& iface);

// Remove what a DPDK primary with file prefix `prefix` may leave: hugepage
// files "<prefix>map_*" on every hugetlbfs mount and /var/run/dpdk/<prefix>.
void remove_dpdk_files(const std::string& prefix);

} // namespace crescent::dev
