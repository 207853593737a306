// crescent — the public Runtime: stack/dev (EAL, port, steering) + stack/ctrl
// (netlink or static addressing) + the zbuf arena + one Engine per lcore.
//
// Ownership and teardown order (reverse of construction): engines (they free
// their queued mbufs and drop every zbuf reference) -> devices and next-hop
// readers -> the arena (EAL memory) -> the control plane -> dev::Runtime
// (ports, XDP program, rte_eal_cleanup, files).
#include <crescent/runtime.hpp>

#include <net/if.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <crescent/log.hpp>

#include "bifurcation/plan.hpp"
#include "bifurcation/session.hpp"
#include "bifurcation/xdp/steer.hpp"
#include "stack/ctrl/netlink.hpp"
#include "stack/ctrl/static_config.hpp"
#include "stack/dev/runtime.hpp"
#include "stack/engine/control_socket.hpp"
#include "stack/engine/metrics_http.hpp"
#include "stack/engine/ctrl_nexthop.hpp"
#include "stack/engine/engine_impl.hpp"
#include "stack/engine/impair.hpp"
#include "stack/engine/pcap.hpp"
#include "stack/engine/queue_device.hpp"
#include "stack/engine/runtime_kernel.hpp"
#include "zbuf/dpdk.hpp"

namespace crescent {

namespace {
std::atomic<bool> g_stop{false};

std::vector<std::string> split_args(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    std::string w;
    while (in >> w) out.push_back(w);
    return out;
}

std::string with_prefix(std::string m) {
    constexpr std::string_view kPrefix = "crescent: ";
    if (!std::string_view(m).starts_with(kPrefix)) m.insert(0, kPrefix);
    return m;
}

// The port plan (bifurcation/plan.hpp) of these options: the application's
// client sub-range, one contiguous piece per engine, and its listening ports.
std::optional<bifurcation::Plan> make_plan(const RuntimeOptions& o, std::string* err) {
    bifurcation::PlanConfig pc;
    pc.ifname = o.iface.empty() ? std::string("eal") : o.iface;
    pc.app_name = o.app_name;
    pc.client_range = bifurcation::PortSpan{o.client_port_lo, o.client_port_hi};
    pc.app_slots = o.app_slots;
    pc.app_slot = o.app_slot;
    pc.engines = uint16_t(o.cores);
    pc.listen_ports = o.listen_ports;
    return bifurcation::Plan::compute(std::move(pc), err);
}

// Crash recovery: the XDP program a dead crescent left on the interface
// (recorded in its registry entry once attached).
void detach_stale_xdp(const bifurcation::RegistryEntry& e) {
    auto ifx = e.extra.find("xdp_ifindex");
    auto id = e.extra.find("xdp_prog_id");
    if (ifx == e.extra.end() || id == e.extra.end()) return;
    int ifindex = std::atoi(ifx->second.c_str());
    uint32_t prog = uint32_t(std::strtoul(id->second.c_str(), nullptr, 10));
    if (ifindex <= 0 || prog == 0) return;
    int rc = bifurcation::xdp_detach_if(ifindex, prog);
    auto lg = log::get("runtime");
    if (rc < 0)
        lg->error("XDP program {} left by dead pid {} on ifindex {}: detach failed ({})", prog, e.pid, ifindex,
                  std::strerror(-rc));
    else
        lg->warn("detached XDP program {} left by dead pid {} on ifindex {}", prog, e.pid, ifindex);
}
} // namespace

struct Runtime::Impl {
    // Declared first, so destroyed last: after the body below has detached
    // the XDP program, the reserved ports are restored and the entry dropped.
    std::optional<bifurcation::Session> session;           // iface mode
    std::string plan;                                      // Plan::describe()
    RuntimeOptions opt;
    std::unique_ptr<dev::Runtime> dev;
    dev::Port* port = nullptr;
    std::unique_ptr<ctrl::Netlink> nl;                     // iface mode
    std::unique_ptr<ctrl::Rcu<ctrl::Snapshot>> static_rcu; // eal mode
    std::unique_ptr<zbuf::Arena> arena;
    std::vector<std::unique_ptr<engine::Device>> devs;
    std::vector<std::unique_ptr<engine::NextHop>> nexthops;
    std::vector<std::unique_ptr<engine::PcapWriter>> pcaps;  // RuntimeOptions::pcap: one per engine
    std::vector<std::unique_ptr<Engine>> engines;
    std::vector<unsigned> lcores;                          // lcore of engine i
    std::unique_ptr<engine::KernelRuntime> kernel;         // kernel_only: threads, signals
    wire::Ipv4Addr ip;
    std::string describe;
    std::unique_ptr<engine::ControlSocket> control;        // RuntimeOptions::control_socket
    std::unique_ptr<engine::MetricsServer> metrics;        // RuntimeOptions::metrics_port

    ~Impl() {
        control.reset();  // removes the socket file
        metrics.reset();
        kernel.reset();  // its signal handler stops the engines: first
        engines.clear();
        pcaps.clear();  // after the engines: their last frames (RSTs of close_all) are in
        devs.clear();
        nexthops.clear();
        if (dev) dev->close_ports();  // RX pools live in the arena: ports -> arena -> EAL
        arena.reset();
        static_rcu.reset();
        nl.reset();
        dev.reset();
    }
    ctrl::Rcu<ctrl::Snapshot>& rcu() { return nl ? nl->rcu() : *static_rcu; }
};

namespace {
// The control socket (a failure only costs crescent-stat: warned, not fatal).
void open_control(Runtime::Impl& im) {
    if (!im.opt.control_socket) return;
    std::string e;
    im.control = engine::ControlSocket::open(&e);
    if (!im.control)
        log::get("runtime")->warn("control socket: {}; crescent-stat cannot attach to this process", e);
    else
        log::get("runtime")->info("{}; control socket {} (crescent-stat {})", im.describe, im.control->path(),
                                  ::getpid());
}
// The Prometheus endpoint (opt-in: a port that cannot be had fails start()).
bool open_metrics(Runtime::Impl& im, std::string* err) {
    if (im.opt.metrics_port == 0) return true;
    im.metrics = engine::MetricsServer::open(im.opt.metrics_bind, im.opt.metrics_port, err);
    if (!im.metrics) return false;
    log::get("runtime")->info("metrics on http://{}:{}/metrics", im.opt.metrics_bind, im.metrics->port());
    return true;
}
} // namespace

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

std::unique_ptr<Runtime> Runtime::start(const RuntimeOptions& o, std::string* err) {
    auto fail = [&](std::string m) {
        if (err) *err = with_prefix(std::move(m));
        return std::unique_ptr<Runtime>();
    };
    if (std::string e; !check_engine_config(o.engine, &e)) return fail(e);
    if (o.kernel_only) {  // no device, no EAL: runtime_kernel.cpp
        auto impl = std::make_unique<Impl>();
        impl->opt = o;
        std::string e;
        impl->kernel = engine::KernelRuntime::start(o, &impl->arena, &impl->engines, &e);
        if (!impl->kernel) return fail(e);
        impl->describe = impl->kernel->describe();
        impl->plan = "kernel TCP only: no port plan (the kernel chooses the client ports)";
        open_control(*impl);
        if (std::string me; !open_metrics(*impl, &me)) return fail(me);
        g_stop.store(false);
        return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
    }
    const bool iface_mode = !o.iface.empty();
    if (iface_mode == !o.eal.empty()) return fail("give exactly one of --iface IFACE or --eal \"ARGS\"");
    if (o.cores == 0 || o.cores > 64) return fail(fmt::format("--cores {} is out of range (1..64)", o.cores));
    if (o.rx_ring != 0 && (o.rx_ring < 64 || o.rx_ring > 4096 || (o.rx_ring & (o.rx_ring - 1)) != 0))
        return fail(fmt::format("RX ring of {} descriptors: give a power of two in 64..4096", o.rx_ring));
    const uint32_t rx_ring = o.rx_ring != 0 ? o.rx_ring : 1024;

    auto impl = std::make_unique<Impl>();
    impl->opt = o;
    std::optional<engine::ImpairSpec> impair;
    if (!o.impair.empty()) {
        std::string e;
        impair = engine::parse_impair(o.impair, &e);
        if (!impair) return fail(e);
    }

    // Static addressing first: a bad option fails before anything starts.
    ctrl::StaticConfig sc;
    if (!iface_mode) {
        std::string e;
        if (o.ip.empty()) return fail("--eal needs a static address: --ip A.B.C.D/LEN (and --neighbour IP=MAC)");
        if (!ctrl::apply_static_option(sc, "ip", o.ip, &e)) return fail(e);
        if (!o.mac.empty() && !ctrl::apply_static_option(sc, "mac", o.mac, &e)) return fail(e);
        if (!o.gateway.empty() && !ctrl::apply_static_option(sc, "gw", o.gateway, &e)) return fail(e);
        for (const std::string& n : o.neighbours)
            if (!ctrl::apply_static_option(sc, "neigh", n, &e)) return fail(e);
    }

    // The port plan; in iface mode, claim it on the interface (registry:
    // overlapping plans of live processes are refused, a dead one's leftovers
    // undone) and reserve the client ports from kernel clients, before
    // anything is attached.
    std::optional<bifurcation::Plan> plan;
    {
        std::string e;
        plan = make_plan(o, &e);
        if (!plan) return fail(e);
        impl->plan = plan->describe();
        if (iface_mode) {
            // Nothing is claimed or reserved for an interface that is not there.
            if (if_nametoindex(o.iface.c_str()) == 0)
                return fail(fmt::format("no network interface '{}' in this network namespace (see `ip link`)", o.iface));
            // ... nor by a process that could not attach to it (the registry
            // and the reserved-ports sysctl would only fail with EACCES).
            if (dev::Status st = dev::require_root_for_iface(o.iface); !st) return fail(st.message());
            bifurcation::SessionOptions so;
            so.reserve_ports = o.reserve_ports;
            so.extra_cleanup = detach_stale_xdp;
            std::optional<bifurcation::Session> s = bifurcation::Session::open(*plan, so, &e);
            if (!s) return fail(e);
            impl->session.emplace(std::move(*s));
        }
        auto lg = log::get("runtime");
        std::istringstream lines(impl->plan);
        for (std::string line; std::getline(lines, line);) lg->info("{}", line);
    }

    // dev: EAL + the port.
    dev::RuntimeConfig dc;
    if (iface_mode) {
        dc.mode = dev::RuntimeConfig::Mode::Iface;
        dc.iface = o.iface;
        dc.queues = uint16_t(o.cores);
        for (bifurcation::PortSpan s : plan->steered_ranges()) dc.steer_ports.push_back(dev::PortRange{s.lo, s.hi});
    } else {
        dc.mode = dev::RuntimeConfig::Mode::Eal;
        dc.eal_args = split_args(o.eal);
    }
    dc.file_prefix = o.file_prefix;
    dc.no_huge = o.no_huge;
    dc.log_level = o.log_level;
    if (dev::Status st = dev::Runtime::start(dc, &impl->dev); !st) return fail(st.message());

    // The zbuf arena in EAL memory, before the port: its RX pools are laid
    // over arena zones, so received payloads are zbuf slices in place
    // (Luna §6.2 step 1) and the engine hands them on without a copy.
    {
        zbuf::Config zc;
        // + RX pool zones per queue: 8 mbufs of 4 KiB per descriptor and room
        // to spare, 40 KiB per descriptor (40 MiB at the default 1024).
        zc.bytes = o.arena_bytes + size_t(o.cores) * size_t(std::max<uint32_t>(rx_ring, 1024)) * (40u << 10);
        std::string e;
        impl->arena = zbuf::dpdk::create_arena(zc, &e);
        if (!impl->arena) return fail(fmt::format("zbuf arena of {} MiB: {}", zc.bytes >> 20, e));
    }

    dev::PortConfig pc;
    pc.queues = uint16_t(o.cores);
    pc.rx_desc = uint16_t(rx_ring);
    pc.rx_arena = o.zero_copy_rx ? impl->arena.get() : nullptr;
    if (dev::Status st = impl->dev->open_port(impl->dev->default_port(), pc, &impl->port); !st)
        return fail(st.message());
    const dev::LinkStatus link = impl->port->wait_link_up(2000);
    const std::string link_str = !link.up            ? std::string("down")
                                 : link.speed_mbps == 0 ? std::string("up")
                                                        : fmt::format("up {} Mbit/s{}", link.speed_mbps,
                                                                      link.full_duplex ? " full-duplex" : "");
    if (!link.up)
        log::get("dev")->warn("port {} ({}): link still down after 2 s; starting anyway (nothing is sent or "
                              "received until it comes up)", impl->port->name(), impl->port->driver());

    // Control plane.
    wire::MacAddr mac;
    {
        rte_ether_addr a = impl->port->mac();
        for (int i = 0; i < 6; ++i) mac.b[i] = a.addr_bytes[i];
    }
    if (iface_mode) {
        std::string e;
        impl->nl = ctrl::Netlink::open(o.iface, &e);
        if (!impl->nl) return fail(e);
        const ctrl::InterfaceInfo& ii = impl->nl->snapshot().iface();
        if (ii.addrs.empty())
            return fail(fmt::format("interface '{}' has no IPv4 address: add one with `ip addr add A.B.C.D/LEN dev {}`",
                                    o.iface, o.iface));
        impl->ip = ii.addrs.front().addr;
    } else {
        if (!sc.mac) sc.mac = mac;
        sc.mtu = impl->port->mtu();
        std::string e;
        if (!ctrl::validate_static_config(sc, &e)) return fail(e);
        impl->static_rcu = std::make_unique<ctrl::Rcu<ctrl::Snapshot>>(sc.snapshot());
        impl->ip = sc.addr->addr;
    }

    // lcores: the main lcore runs engine 0, workers the others.
    impl->lcores.push_back(rte_get_main_lcore());
    unsigned lc;
    RTE_LCORE_FOREACH_WORKER(lc) impl->lcores.push_back(lc);
    if (impl->lcores.size() < o.cores)
        return fail(fmt::format("{} engines need {} lcores but EAL has {}: pass a longer -l list", o.cores, o.cores,
                                impl->lcores.size()));

    // Let a successor undo our XDP program should we die (detach_stale_xdp).
    if (impl->session && impl->dev->steering()) {
        const bifurcation::XdpSteer& xs = *impl->dev->steering();
        std::string e;
        if (!impl->session->record("xdp_ifindex", std::to_string(xs.ifindex()), &e) ||
            !impl->session->record("xdp_prog_id", std::to_string(xs.prog_id()), &e))
            return fail(e);
    }

    std::random_device rd;
    std::array<uint64_t, 2> secret{(uint64_t(rd()) << 32) | rd(), (uint64_t(rd()) << 32) | rd()};
    for (unsigned i = 0; i < o.cores; ++i) {
        dev::Queue& q = impl->port->queue(i);
        std::unique_ptr<engine::Device> d = std::make_unique<engine::QueueDevice>(*impl->port, q);
        if (impair) {
            engine::ImpairSpec sp = *impair;
            sp.seed += i;
            d = std::make_unique<engine::ImpairDevice>(std::move(d), sp);
        }
        impl->devs.push_back(std::move(d));
        auto reader = impl->rcu().register_reader();
        if (!reader) return fail("too many engines for the control-plane readers");
        std::unique_ptr<ctrl::NeighbourResolver> res;
        if (iface_mode) {
            std::string e;
            res = ctrl::NeighbourResolver::open(impl->nl->ifindex(), &e);
            if (!res) return fail(e);
        }
        impl->nexthops.push_back(std::make_unique<engine::CtrlNextHop>(std::move(*reader), std::move(res)));
        engine::EngineParams ep;
        ep.cfg = o.engine;
        ep.index = i;
        ep.count = o.cores;
        ep.core = i;
        ep.ip = impl->ip;
        ep.dev = impl->devs.back().get();
        ep.nexthop = impl->nexthops.back().get();
        ep.arena = impl->arena.get();
        ep.secret = secret;
        ep.client_port_lo = plan->engine_ports(i).lo;  // replies come back to this engine's queue
        ep.client_port_hi = plan->engine_ports(i).hi;
        if (!o.pcap.empty()) {
            std::string e;
            auto w = engine::PcapWriter::open(engine::pcap_path(o.pcap, i, o.cores), o.pcap_snaplen,
                                              o.pcap_max_bytes, engine::TscClock().now(), &e);
            if (!w) return fail(e);
            ep.pcap = w.get();
            impl->pcaps.push_back(std::move(w));
        }
        impl->engines.push_back(engine::make_engine(ep));
    }
    const dev::Offloads& off = impl->port->offloads();
    impl->describe = fmt::format("{} ({}) {} mac {} mtu {} engines {} offloads [{}] link {}", impl->port->name(),
                                 impl->port->driver(), ctrl::to_string(impl->ip), ctrl::to_string(mac),
                                 impl->port->mtu(), o.cores, off.describe(), link_str);
    open_control(*impl);
    if (std::string me; !open_metrics(*impl, &me)) return fail(me);
    g_stop.store(false);
    return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
}

namespace {
struct LaunchArg {
    Engine* engine;
    const std::function<void(Engine&)>* setup;
};

int engine_main(void* p) {
    auto* a = static_cast<LaunchArg*>(p);
    zbuf::CoreScope core(a->engine->core());
    (*a->setup)(*a->engine);
    a->engine->run();
    return 0;
}
} // namespace

void Runtime::run(const std::function<void(Engine&)>& user_setup) {
    Impl& im = *impl_;
    // Engine 0 serves the control socket from its epoll set (detached at its stop).
    const std::function<void(Engine&)> setup = [&im, &user_setup](Engine& e) {
        if (im.control && e.index() == 0) {
            std::vector<Engine*> all;
            for (auto& x : im.engines) all.push_back(x.get());
            if (!im.control->attach(e, std::move(all)))
                log::get("runtime")->warn("control socket {}: not watched by engine 0 ({}); crescent-stat cannot "
                                          "attach to this process", im.control->path(), std::strerror(errno));
        }
        if (im.metrics && e.index() == 0) {
            std::vector<Engine*> all;
            for (auto& x : im.engines) all.push_back(x.get());
            if (!im.metrics->attach(e, std::move(all)))
                log::get("runtime")->warn("metrics port {}: not watched by engine 0 ({}); no /metrics",
                                          im.metrics->port(), std::strerror(errno));
        }
        user_setup(e);
    };
    if (im.kernel) {  // stop() and signals wake the engines themselves: no watcher
        im.kernel->run(im.engines, setup);
        return;
    }
    std::vector<LaunchArg> args(im.engines.size());
    for (size_t i = 0; i < im.engines.size(); ++i) args[i] = LaunchArg{im.engines[i].get(), &setup};
    Engine& e0 = *im.engines[0];
    // Engine 0 owns the netlink socket: kernel updates arrive through its epoll.
    if (im.nl) {
        ctrl::Netlink* nl = im.nl.get();
        e0.add_fd(nl->fd(), EPOLLIN, [nl](uint32_t) { nl->process(); });
    }
    // Engine 0 watches for stop requests (signals, stop()) and stops everyone.
    std::function<void()> watch;
    watch = [&im, &e0, &watch] {
        if (g_stop.load(std::memory_order_relaxed) || dev::Runtime::stop_requested()) {
            for (auto& e : im.engines) e->stop();
            return;
        }
        e0.add_timer(std::chrono::milliseconds(20), watch);
    };
    e0.add_timer(std::chrono::milliseconds(20), watch);
    for (size_t i = 1; i < im.engines.size(); ++i)
        rte_eal_remote_launch(engine_main, &args[i], im.lcores[i]);
    engine_main(&args[0]);
    for (auto& e : im.engines) e->stop();
    rte_eal_mp_wait_lcore();
    if (im.nl) e0.remove_fd(im.nl->fd());
}

void Runtime::stop() {
    g_stop.store(true, std::memory_order_relaxed);
    for (auto& e : impl_->engines) e->stop();
}

bool Runtime::stop_requested() {
    return g_stop.load(std::memory_order_relaxed) || dev::Runtime::stop_requested() ||
           engine::KernelRuntime::signalled();
}
unsigned Runtime::engine_count() const { return unsigned(impl_->engines.size()); }
Engine& Runtime::engine(unsigned i) { return *impl_->engines.at(i); }
Ipv4 Runtime::local_ip() const { return Ipv4{impl_->ip.v}; }
std::string Runtime::describe() const { return impl_->describe; }
std::string Runtime::plan() const { return impl_->plan; }

std::string Runtime::describe_plan(const RuntimeOptions& opts, std::string* err) {
    std::string e;
    std::optional<bifurcation::Plan> p = make_plan(opts, &e);
    if (!p) {
        if (err) *err = with_prefix(std::move(e));
        return {};
    }
    return p->describe();
}

} // namespace crescent
