// crescent — starting crescent in a process: DPDK, the port, the control
// plane, the zbuf arena, and one Engine per core.
//
//   crescent::RuntimeOptions o;
//   o.iface = "eth1";             // AF_XDP on a Linux interface, with the
//   o.listen_ports = {7};         //   steering XDP program for these ports
//   o.cores = 2;                  // two engines, queues 0 and 1
//   std::string err;
//   auto rt = crescent::Runtime::start(o, &err);
//   if (!rt) { fprintf(stderr, "%s\n", err.c_str()); return 1; }
//   rt->run([&](crescent::Engine& e) { e.listen(7, handlers[e.index()]); });
//
// Two ways to get a device: `iface` (crescent builds the EAL arguments for
// net_af_xdp and loads its steering program, so the kernel keeps the
// interface, its IP, ARP and every other port; addresses, routes and
// neighbours come from the kernel over netlink), or `eal` (any DPDK device
// from your own EAL arguments; give the address, MAC and neighbours
// statically with ip/mac/neighbours/gateway).
//
// Or no device at all: `kernel_only` gives engines that serve kernel TCP
// sockets only (rpc Transport::Kernel, Engine::add_fd) — the same loop, timer
// wheel, epoll set and zbuf arena, one thread per engine pinned to its own
// CPU, but no DPDK: no EAL, no hugepages, no runtime files, no root. Their
// wait policy is EngineConfig::kernel_wait (busy polling or blocking in
// epoll_wait). listen()/connect() of crescent connections are refused there
// (InvalidArgument / NoRoute) and local_ip() is 0.0.0.0.
//
// Errors are one line naming the cause and what to do. After an error, after
// the Runtime is destroyed, and after SIGINT/SIGTERM (which make run() return),
// nothing is left behind: no XDP program, no hugepage or runtime files.
//
// One Runtime per process (EAL starts once per process; the zbuf arena is
// process-wide). A kernel-only Runtime starts no EAL, so another may start in
// the same process once it is destroyed. This header includes no DPDK header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <crescent/engine.hpp>

namespace crescent {

// What Runtime::start() brings up: the device (an interface, EAL arguments or
// none), the number of engines, the zbuf arena, addressing, the port plan and
// the observability endpoints. Plain data, copied by start(); every field has
// a usable default except the device choice.
struct RuntimeOptions {
    // Exactly one of the two (neither with kernel_only).
    std::string iface;                 // Linux interface (AF_XDP + steering)
    std::string eal;                   // EAL arguments, space-separated ("--vdev=net_tap0 ...")
    // No device: `cores` engines for kernel sockets only (see the header
    // comment). Used with it: cores, arena_bytes (anonymous memory), engine
    // (kernel_wait, epoll_batch); impair is refused; the rest is ignored.
    bool kernel_only = false;

    unsigned cores = 1;                // engines (one queue pair and one lcore each)
    std::string file_prefix;           // DPDK --file-prefix ("" = per process)
    std::vector<uint16_t> listen_ports;// server ports steered to crescent (iface mode)
    bool no_huge = false;              // EAL --no-huge (tests without hugepages)
    size_t arena_bytes = 64u << 20;    // zbuf arena (send_copy, received payloads)
    bool zero_copy_rx = true;          // RX pools in the arena: payloads are not copied
    // RX descriptors per queue (0 = 1024): the frames that can wait for the
    // engine's next poll. With AF_XDP this is the XSK RX ring, and a frame
    // that finds it full is dropped by the kernel (XDP redirect -ENOBUFS,
    // counted in the interface's rx_queue_N_drops), to be retransmitted by
    // the peer. A power of two in 64..4096; the RX pool holds 8 mbufs per
    // descriptor and the arena grows to hold it (4 KiB objs at MTU 1500).
    uint16_t rx_ring = 0;
    std::string log_level = "notice";  // EAL log level

    // Static addressing (eal mode; devices with no kernel netdev):
    std::string ip;                    // "10.0.0.1/24"
    std::string mac;                   // "" = the device's MAC
    std::string gateway;               // optional default gateway
    std::vector<std::string> neighbours;  // "10.0.0.2=02:00:00:00:00:02"

    EngineConfig engine;               // applied to every engine

    // Testing aid: netem-like impairment of every frame crescent receives and
    // sends, "loss=1,dup=1,reorder=25,delay=2ms,seed=7" (for kernels without
    // sch_netem). Empty = none.
    std::string impair;

    // Packet capture: every frame an engine receives (as received, before
    // TCP processing) and hands to the device (chains whole, TSO frames as
    // handed) is written to `pcap` in the classic pcap format (nanosecond
    // timestamps, Ethernet), read by `tcpdump -r`. One file per engine: `pcap`
    // itself with one engine, "pcap.0", "pcap.1"... with several. Frames are
    // cut to `pcap_snaplen` bytes (0 = 262144: whole frames); the file stops
    // growing at `pcap_max_bytes` (0 = no cap), the frames not written counted
    // in EngineStats::pcap_dropped_cap. Empty = no capture (one branch per
    // burst). A file that cannot be created fails start(). Ignored with
    // kernel_only (no frames).
    std::string pcap;
    uint32_t pcap_snaplen = 0;         // bytes kept of each frame (0 = 262144)
    uint64_t pcap_max_bytes = 0;       // size cap of each file in bytes (0 = none)

    // The port plan (flow bifurcation, Luna §7.1): this application is slot
    // `app_slot` of `app_slots` sharing the client range of the interface;
    // its part is split into one contiguous sub-range per engine, which the
    // engine's connect() draws from (Engine::client_ports()). In iface mode
    // the plan is claimed in a per-interface registry (an overlapping plan of
    // another live process is refused), its client ports are added to
    // net.ipv4.ip_local_reserved_ports (so kernel clients never take them) and
    // steered to crescent with the listening ports; all undone on exit.
    std::string app_name = "crescent";
    uint16_t app_slot = 0;             // this application's slot, < app_slots
    uint16_t app_slots = 1;            // applications splitting the client range
    uint16_t client_port_lo = kClientPortLo;  // client range, first port
    uint16_t client_port_hi = kClientPortHi;  // client range, last port (inclusive)
    bool reserve_ports = true;         // add the plan to ip_local_reserved_ports

    // Serve the control socket crescent-stat reads (counters, connections):
    // `/run/crescent/<pid>.sock`, or $XDG_RUNTIME_DIR/crescent/ or /tmp/crescent/
    // when /run is not writable (the start log line names it); removed at exit.
    // Served from engine 0's epoll set; it never blocks the engine.
    bool control_socket = true;

    // Prometheus endpoint: when metrics_port is not 0, a kernel TCP listener
    // on metrics_bind:metrics_port answers "GET /metrics" with every engine's
    // counters, gauges, zbuf classes and connections per state in the text
    // format 0.0.4 (one request per connection, then close; other paths 404).
    // Served from engine 0's epoll set; it never blocks the engine. A port
    // that cannot be had fails start().
    uint16_t metrics_port = 0;
    std::string metrics_bind = "127.0.0.1";  // IPv4 address the endpoint binds
};

// crescent running in this process: owns DPDK's EAL, the port, the control
// plane, the zbuf arena and the engines (see the header comment). Created by
// start(), one per process; destroying it stops the engines and undoes
// everything start() did. Not copyable or movable.
class Runtime {
public:
    // nullptr + *err (one line) on failure, with everything undone.
    static std::unique_ptr<Runtime> start(const RuntimeOptions& opts, std::string* err);
    ~Runtime();
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    // Runs `setup` on each engine's own core, then its loop, until stop() or
    // SIGINT/SIGTERM. Returns when every loop has returned (open connections
    // are reset and their handlers told EngineStopped).
    void run(const std::function<void(Engine&)>& setup);
    // Any thread, async-signal-safe.
    void stop();
    // True once stop() was called or SIGINT/SIGTERM arrived (any thread).
    static bool stop_requested();

    // The number of engines (RuntimeOptions::cores), indexed 0..count-1.
    unsigned engine_count() const;
    // Engine `i` (< engine_count(), else std::out_of_range), owned by the
    // Runtime. Use it from its own core (inside run()'s setup or its loop).
    Engine& engine(unsigned i);
    // The device's IPv4 address (from the kernel or RuntimeOptions::ip);
    // 0.0.0.0 with kernel_only.
    Ipv4 local_ip() const;
    // One line: device, address, MTU, offloads, link status; kernel_only:
    // "kernel TCP only (no device), N engines, wait busy|block".
    std::string describe() const;
    std::string plan() const;          // the port plan (multi-line; logged at start at info)
    // The port plan these options give, without starting anything ("" + *err
    // when the options are invalid): for a --show-plan option.
    static std::string describe_plan(const RuntimeOptions& opts, std::string* err);

    struct Impl;
private:
    explicit Runtime(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace crescent
