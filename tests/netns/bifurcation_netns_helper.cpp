// netns tests of flow bifurcation (bifurcation/): each mode runs in a network
// namespace of its own (unshare(CLONE_NEWNET) at start, so it disappears with
// the process whatever happens) and needs root; without root it prints
// "SKIP: needs root" and exits 77 (meson's skip code).
//
//   reserved        ip_local_reserved_ports written, merged and restored in a
//                   fresh netns; a kernel client's ephemeral ports never fall
//                   in the reserved range (and do without the reservation).
//   recovery        a crescent killed with SIGKILL leaves its reserved ports; the
//                   next one cleans them through the registry; a live plan
//                   refuses an overlapping one from another process.
//   ntuple_veth     ethtool ntuple rules on a veth: a clean "not supported".
//   rte_flow_refuse DPDK TAP PMD: the backend chosen from the driver is rte_flow;
//                   a plan the device cannot honour fails cleanly (no flow left
//                   behind), or is reported rule by rule (skip).
//   rte_flow_steer  DPDK TAP PMD, 2 queues, isolated: a 2-engine plan's rules are
//                   created, SYNs to each engine's sub-range arrive on its queue,
//                   SYNs to other ports reach no DPDK queue. Needs TC flower,
//                   multiq and skbedit in the kernel (the TAP PMD implements
//                   rte_flow with them): SKIP (77) when the kernel lacks them.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "bifurcation/ntuple.hpp"
#include "bifurcation/plan.hpp"
#include "bifurcation/rte_flow.hpp"
#include "bifurcation/session.hpp"
#include "bifurcation/steering.hpp"

using namespace crescent::bifurcation;

namespace {

int failures = 0;

#define EXPECT(cond, ...)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            ++failures;                                                                    \
            std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            std::fprintf(stderr, __VA_ARGS__);                                             \
            std::fprintf(stderr, "\n");                                                    \
        }                                                                                  \
    } while (0)

const char* kSysctl = "/proc/sys/net/ipv4/ip_local_reserved_ports";

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

bool put(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::trunc);
    f << text;
    f.flush();
    return bool(f);
}

std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

bool sh(const std::string& cmd) {
    const int rc = std::system(cmd.c_str());
    if (rc != 0) std::fprintf(stderr, "command failed (%d): %s\n", rc, cmd.c_str());
    return rc == 0;
}

bool own_netns() {
    if (::unshare(CLONE_NEWNET) != 0) {
        std::fprintf(stderr, "unshare(CLONE_NEWNET): %s\n", std::strerror(errno));
        return false;
    }
    return sh("ip link set lo up");
}

std::string temp_dir() {
    char tmpl[] = "/tmp/crescent-bifurcation-netns-XXXXXX";
    if (!::mkdtemp(tmpl)) return {};
    return tmpl;
}

sockaddr_in addr4(const char* ip, uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

// ---------------------------------------------------------------------------
// reserved

// Connects `n` kernel clients to 127.0.0.1:port (ephemeral local ports), and
// returns their local ports; stops at the first failure (its errno in *err_no).
std::vector<uint16_t> connect_many(int listener, uint16_t port, int n, int* err_no) {
    std::vector<uint16_t> ports;
    std::vector<int> fds;
    *err_no = 0;
    for (int i = 0; i < n; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a = addr4("127.0.0.1", port);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            *err_no = errno;
            ::close(fd);
            break;
        }
        sockaddr_in local{};
        socklen_t len = sizeof local;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
        ports.push_back(ntohs(local.sin_port));
        fds.push_back(fd);
        const int srv = ::accept(listener, nullptr, nullptr);
        if (srv >= 0) fds.push_back(srv);
    }
    // RST on close: no TIME_WAIT, the ports are free again at once.
    linger lg{1, 0};
    for (int fd : fds) {
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        ::close(fd);
    }
    return ports;
}

int mode_reserved() {
    if (!own_netns()) return 1;
    EXPECT(trimmed(slurp(kSysctl)).empty(), "fresh netns has reserved ports \"%s\"",
           slurp(kSysctl).c_str());
    // A small ephemeral range that overlaps the client range: 61400-61439 are
    // free, 61440-61600 are ours once reserved.
    if (!put("/proc/sys/net/ipv4/ip_local_port_range", "61400 61600\n")) {
        std::fprintf(stderr, "cannot set ip_local_port_range\n");
        return 1;
    }
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = addr4("127.0.0.1", 5000);
    if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener, 1024) != 0) {
        std::fprintf(stderr, "listen: %s\n", std::strerror(errno));
        return 1;
    }

    // Control: without the reservation the kernel does pick ports in the range
    // (otherwise the check below could not fail).
    int e = 0;
    std::vector<uint16_t> ports = connect_many(listener, 5000, 60, &e);
    EXPECT(ports.size() == 60, "control: only %zu connections (%s)", ports.size(), std::strerror(e));
    size_t in_range = 0;
    for (uint16_t p : ports) in_range += p >= 61440;
    EXPECT(in_range > 0, "control: no ephemeral port fell in 61440-65535 without reservation");
    std::printf("control: %zu of %zu ephemeral ports in 61440-65535 without reservation\n",
                in_range, ports.size());

    {
        ReservedPorts rp(kSysctl);
        std::string err;
        EXPECT(rp.reserve(PortSpan{61440, 65535}, &err), "reserve: %s", err.c_str());
        EXPECT(trimmed(slurp(kSysctl)) == "61440-65535", "sysctl reads \"%s\"",
               trimmed(slurp(kSysctl)).c_str());
        // 40 ports are left (61400-61439): the connections use them (the kernel's
        // search may skip one), then the next finds no port (EADDRNOTAVAIL)
        // instead of taking one of the 161 reserved ones.
        ports = connect_many(listener, 5000, 60, &e);
        EXPECT(ports.size() >= 30 && ports.size() <= 40, "with reservation: %zu connections, then %s",
               ports.size(), std::strerror(e));
        EXPECT(e == EADDRNOTAVAIL, "after %zu connections: %s", ports.size(), std::strerror(e));
        for (uint16_t p : ports) EXPECT(p < 61440, "ephemeral port %u is reserved", p);
        std::printf("with reservation: %zu connections, all below 61440; next: %s\n",
                    ports.size(), std::strerror(e));
    }
    EXPECT(trimmed(slurp(kSysctl)).empty(), "not restored: \"%s\"", trimmed(slurp(kSysctl)).c_str());

    // Merge with what an admin reserved, and restore exactly that.
    EXPECT(put(kSysctl, "1000,2000-2010\n"), "write sysctl");
    {
        ReservedPorts rp(kSysctl);
        std::string err;
        EXPECT(rp.reserve(PortSpan{61440, 65535}, &err), "reserve: %s", err.c_str());
        EXPECT(trimmed(slurp(kSysctl)) == "1000,2000-2010,61440-65535", "merged: \"%s\"",
               trimmed(slurp(kSysctl)).c_str());
    }
    EXPECT(trimmed(slurp(kSysctl)) == "1000,2000-2010", "restored: \"%s\"",
           trimmed(slurp(kSysctl)).c_str());
    ::close(listener);
    return 0;
}

// ---------------------------------------------------------------------------
// recovery

std::optional<Plan> lo_plan(const char* app) {
    PlanConfig c;
    c.ifname = "lo";
    c.app_name = app;
    c.engines = 2;
    c.listen_ports = {7000};
    std::string err;
    auto p = Plan::compute(c, &err);
    if (!p) std::fprintf(stderr, "%s\n", err.c_str());
    return p;
}

int mode_recovery() {
    if (!own_netns()) return 1;
    const std::string dir = temp_dir();
    if (dir.empty()) return 1;
    SessionOptions opt;
    opt.registry_dir = dir + "/lo";
    EXPECT(put(kSysctl, "22\n"), "write sysctl");

    // 1. A crescent that dies by SIGKILL: nothing of its destructors runs.
    int pfd[2];
    if (::pipe(pfd) != 0) return 1;
    pid_t child = ::fork();
    if (child == 0) {
        std::string err;
        auto plan = lo_plan("victim");
        auto s = plan ? Session::open(*plan, opt, &err) : std::nullopt;
        const char ok = s ? 'y' : 'n';
        if (!s) std::fprintf(stderr, "child: %s\n", err.c_str());
        if (::write(pfd[1], &ok, 1) != 1) ::_exit(2);
        ::raise(SIGKILL);
        ::_exit(3);
    }
    char ok = 0;
    EXPECT(::read(pfd[0], &ok, 1) == 1 && ok == 'y', "child could not open its session");
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT(WIFSIGNALED(status), "child did not die by signal");
    EXPECT(trimmed(slurp(kSysctl)) == "22,61440-65535", "dead child left \"%s\"",
           trimmed(slurp(kSysctl)).c_str());
    EXPECT(Registry::list(opt.registry_dir).size() == 1, "dead child's entry missing");

    // 2. The next crescent cleans up and takes the same ports.
    {
        std::string err;
        auto plan = lo_plan("successor");
        auto s = plan ? Session::open(*plan, opt, &err) : std::nullopt;
        EXPECT(s.has_value(), "successor: %s", err.c_str());
        if (s) {
            EXPECT(s->registry().entry().reserved_added == "61440-65535",
                   "successor recorded \"%s\"", s->registry().entry().reserved_added.c_str());
            const auto entries = Registry::list(opt.registry_dir);
            EXPECT(entries.size() == 1 && entries[0].pid == ::getpid(),
                   "registry holds %zu entries", entries.size());
        }
        EXPECT(trimmed(slurp(kSysctl)) == "22,61440-65535", "while running: \"%s\"",
               trimmed(slurp(kSysctl)).c_str());
    }
    EXPECT(trimmed(slurp(kSysctl)) == "22", "after successor: \"%s\"", trimmed(slurp(kSysctl)).c_str());
    EXPECT(Registry::list(opt.registry_dir).empty(), "registry not empty after exit");

    // 3. A live crescent refuses an overlapping plan from another process; its
    // normal exit restores the sysctl.
    int go[2];
    if (::pipe(go) != 0) return 1;
    int ready[2];
    if (::pipe(ready) != 0) return 1;
    child = ::fork();
    if (child == 0) {
        std::string err;
        auto plan = lo_plan("holder");
        char r = 'n';
        {
            auto s = plan ? Session::open(*plan, opt, &err) : std::nullopt;
            r = s ? 'y' : 'n';
            if (::write(ready[1], &r, 1) != 1) ::_exit(2);
            char c;
            if (::read(go[0], &c, 1) != 1) ::_exit(2);
        }
        ::_exit(r == 'y' ? 0 : 1);
    }
    char r = 0;
    EXPECT(::read(ready[0], &r, 1) == 1 && r == 'y', "holder could not open its session");
    {
        std::string err;
        auto plan = lo_plan("intruder");
        auto s = plan ? Session::open(*plan, opt, &err) : std::nullopt;
        EXPECT(!s.has_value(), "overlapping plan accepted");
        EXPECT(err.find("overlaps application \"holder\"") != std::string::npos,
               "message: %s", err.c_str());
        std::printf("overlap refused: %s\n", err.c_str());
        EXPECT(trimmed(slurp(kSysctl)) == "22,61440-65535", "refused plan changed sysctl: \"%s\"",
               trimmed(slurp(kSysctl)).c_str());
    }
    const char c = 'x';
    EXPECT(::write(go[1], &c, 1) == 1, "signal holder");
    ::waitpid(child, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "holder failed");
    EXPECT(trimmed(slurp(kSysctl)) == "22", "after holder exit: \"%s\"", trimmed(slurp(kSysctl)).c_str());
    std::filesystem::remove_all(dir);
    return 0;
}

// ---------------------------------------------------------------------------
// ntuple on veth

int mode_ntuple_veth() {
    if (!own_netns()) return 1;
    if (!sh("ip link add bfnt0 type veth peer name bfnt1 && ip link set bfnt0 up && "
            "ip link set bfnt1 up"))
        return 1;
    std::string err;
    int rc = NtupleRules::probe("bfnt0", &err);
    EXPECT(rc == -EOPNOTSUPP, "probe returned %d (%s)", rc, err.c_str());
    EXPECT(err.find("ntuple not supported on bfnt0") != std::string::npos, "message: %s", err.c_str());
    std::printf("probe: %s\n", err.c_str());

    PlanConfig c;
    c.ifname = "bfnt0";
    c.engines = 2;
    c.listen_ports = {7000};
    auto plan = Plan::compute(c, &err);
    EXPECT(plan.has_value(), "%s", err.c_str());
    if (plan) {
        NtupleRules rules;
        err.clear();
        rc = rules.install("bfnt0", *plan, &err);
        EXPECT(rc == -EOPNOTSUPP, "install returned %d (%s)", rc, err.c_str());
        EXPECT(err.find("ntuple not supported on bfnt0") != std::string::npos, "message: %s",
               err.c_str());
        EXPECT(rules.locations().empty(), "locations recorded after a failure");
    }
    err.clear();
    rc = NtupleRules::probe("bfnope0", &err);
    EXPECT(rc == -ENODEV, "probe of a missing device returned %d (%s)", rc, err.c_str());
    return 0;
}

// ---------------------------------------------------------------------------
// rte_flow on the TAP PMD

constexpr const char* kTap = "bftap0";
constexpr uint16_t kQueues = 2;

struct Eal {
    bool ok = false;      // init() ran: the runtime directory may exist
    bool eal_up = false;  // rte_eal_init succeeded
    uint16_t port = 0;
    rte_mempool* pool = nullptr;

    std::string prefix = "bfnetns" + std::to_string(::getpid());

    bool init() {
        const std::string vdev = std::string("--vdev=net_tap0,iface=") + kTap;
        std::vector<std::string> args = {"bifurcation_netns", "--no-pci", "--no-huge",
                                         "--iova-mode=va", "-m", "256", "-l", "0",
                                         "--file-prefix", prefix, "--no-shconf", vdev,
                                         "--log-level=pmd.net.tap:debug"};
        std::vector<char*> argv;
        for (auto& s : args) argv.push_back(s.data());
        ok = true; // from here on, clean the runtime directory
        if (rte_eal_init(int(argv.size()), argv.data()) < 0) {
            std::fprintf(stderr, "rte_eal_init failed: %s\n", rte_strerror(rte_errno));
            return false;
        }
        eal_up = true;
        if (rte_eth_dev_count_avail() != 1) {
            std::fprintf(stderr, "expected one port (the tap)\n");
            return false;
        }
        pool = rte_pktmbuf_pool_create("bf_pool", 2047, 64, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                       int(rte_socket_id()));
        return pool != nullptr;
    }

    // isolate (before configure), configure 2 queues, start.
    bool start(bool isolate) {
        if (isolate) {
            std::string err;
            if (flow_isolate(port, &err) != 0) std::fprintf(stderr, "%s\n", err.c_str());
        }
        rte_eth_conf conf{};
        if (rte_eth_dev_configure(port, kQueues, kQueues, &conf) != 0) return false;
        for (uint16_t q = 0; q < kQueues; ++q) {
            if (rte_eth_rx_queue_setup(port, q, 256, rte_eth_dev_socket_id(port), nullptr, pool) != 0)
                return false;
            if (rte_eth_tx_queue_setup(port, q, 256, rte_eth_dev_socket_id(port), nullptr) != 0)
                return false;
        }
        return rte_eth_dev_start(port) == 0;
    }

    ~Eal() {
        if (!ok) return;
        if (eal_up) {
            rte_eth_dev_stop(port);
            rte_eth_dev_close(port);
            rte_eal_cleanup();
        }
        // EAL's runtime directory of this file prefix.
        std::error_code ec;
        std::filesystem::remove_all("/var/run/dpdk/" + prefix, ec);
    }
};

Plan client_plan(uint16_t engines, std::vector<uint16_t> listen) {
    PlanConfig c;
    c.ifname = kTap;
    c.app_name = "tap-test";
    c.client_range = PortSpan{61440, 61447}; // 4 ports per engine: masks 0xfffc
    c.engines = engines;
    c.min_ports_per_engine = 1;
    c.listen_ports = std::move(listen);
    std::string err;
    auto p = Plan::compute(c, &err);
    if (!p) {
        std::fprintf(stderr, "%s\n", err.c_str());
        std::exit(1);
    }
    return *p;
}

// Whether the running kernel has what the TAP PMD's rte_flow needs.
bool kernel_has_tc_for_tap(std::string* missing) {
    FILE* f = ::popen("zcat /proc/config.gz 2>/dev/null", "r");
    if (!f) return true;
    std::string cfg;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) cfg.append(buf, n);
    ::pclose(f);
    if (cfg.empty()) return true; // unknown: assume yes, a failure is then real
    for (const char* opt : {"CONFIG_NET_CLS_FLOWER", "CONFIG_NET_SCH_MULTIQ", "CONFIG_NET_ACT_SKBEDIT",
                            "CONFIG_NET_ACT_GACT"})
        if (cfg.find(std::string(opt) + "=y") == std::string::npos &&
            cfg.find(std::string(opt) + "=m") == std::string::npos)
            *missing += (missing->empty() ? "" : ", ") + std::string(opt);
    return missing->empty();
}

int mode_rte_flow_refuse() {
    if (!own_netns()) return 1;
    Eal eal;
    if (!eal.init()) return 1;
    // Backend selection from the device, before configure (isolated mode).
    Steering steer = Steering::prepare(eal.port, kQueues);
    EXPECT(steer.driver() == "net_tap", "driver %s", steer.driver().c_str());
    EXPECT(steer.backend() == Backend::RteFlow, "backend %s",
           std::string(backend_name(steer.backend())).c_str());
    std::printf("%s (isolated: %s)\n", steer.reason().c_str(), steer.isolated() ? "yes" : "no");
    if (!eal.start(false)) return 1;

    // Two engines behind a listening port: the src low-bit mask (1 bit, 32768
    // ports) can be neither matched by TC flower nor expanded: refused.
    const Plan plan = client_plan(2, {7000});
    {
        RteFlowRules rules;
        std::string err;
        const int rc = rules.install(eal.port, plan, FlowOptions{}, &err);
        EXPECT(rc < 0, "a plan the TAP PMD cannot honour was installed");
        EXPECT(err.find("refused \"tcp dst") != std::string::npos, "message: %s", err.c_str());
        EXPECT(err.find("cannot be honoured") != std::string::npos, "message: %s", err.c_str());
        EXPECT(rules.flow_count() == 0, "%zu flows left after a failed install", rules.flow_count());
        std::printf("fail policy: %s\n", err.c_str());
    }
    {
        RteFlowRules rules;
        std::string err;
        FlowOptions opt;
        opt.on_refused = FlowOptions::OnRefused::Skip;
        const int rc = rules.install(eal.port, plan, opt, &err);
        EXPECT(rc == 0, "skip policy failed: %s", err.c_str());
        // The two server rules always fail; client rules may or may not.
        EXPECT(rules.refused().size() >= 2, "%zu refused", rules.refused().size());
        size_t server_refused = 0;
        for (const auto& m : rules.refused()) server_refused += m.find("dst 7000") != std::string::npos;
        EXPECT(server_refused == 2, "server rules refused: %zu", server_refused);
        EXPECT(rules.flow_count() + 0 ==
                   (rules.refused().size() == plan.rules().size() ? 0u : 8u),
               "flows %zu, refused %zu", rules.flow_count(), rules.refused().size());
        std::printf("skip policy: %s\n", rules.report().c_str());
        std::string derr;
        EXPECT(rules.destroy(&derr) == 0, "destroy: %s", derr.c_str());
        EXPECT(rules.flow_count() == 0, "flows left after destroy");
    }
    {
        std::string err;
        EXPECT(steer.install(plan, nullptr, FlowOptions{}, &err) < 0,
               "Steering installed a plan the device cannot honour");
        EXPECT(err.find("cannot be honoured") != std::string::npos, "message: %s", err.c_str());
        EXPECT(steer.flows().flow_count() == 0, "flows left after a failed install");
    }
    return 0;
}

int mode_rte_flow_steer() {
    if (!own_netns()) return 1;
    Eal eal;
    if (!eal.init() || !eal.start(true)) return 1;

    const Plan plan = client_plan(2, {});
    std::printf("%s\n", plan.describe().c_str());
    RteFlowRules rules;
    std::string err;
    if (rules.install(eal.port, plan, FlowOptions{}, &err) != 0) {
        std::string missing;
        if (!kernel_has_tc_for_tap(&missing)) {
            std::printf("SKIP: the kernel lacks %s, which the TAP PMD needs for rte_flow "
                        "(install failed cleanly: %s)\n",
                        missing.c_str(), err.c_str());
            EXPECT(rules.flow_count() == 0, "flows left after a failed install");
            return failures ? 1 : 77;
        }
        EXPECT(false, "install: %s", err.c_str());
        return 1;
    }
    std::printf("%s\n", rules.report().c_str());
    EXPECT(rules.flow_count() >= plan.rules().size(), "%zu flows", rules.flow_count());

    // The kernel side of the tap sends SYNs to 10.99.0.2 (a static neighbour).
    if (!sh(std::string("ip addr add 10.99.0.1/24 dev ") + kTap + " && ip link set " + kTap +
            " up && ip neigh replace 10.99.0.2 lladdr 02:00:00:00:00:02 dev " + kTap +
            " nud permanent"))
        return 1;
    std::vector<uint16_t> dsts;
    for (uint32_t p = plan.app_range().lo; p <= plan.app_range().hi; ++p) dsts.push_back(uint16_t(p));
    const std::vector<uint16_t> outside = {61448, 61439, 5001};
    std::vector<int> fds;
    std::vector<uint16_t> all = dsts;
    all.insert(all.end(), outside.begin(), outside.end());
    for (uint16_t d : all) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        sockaddr_in a = addr4("10.99.0.2", d);
        ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a); // EINPROGRESS: SYN sent
        fds.push_back(fd);
    }

    std::map<uint16_t, std::set<uint16_t>> seen; // dst port -> queues
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
    while (std::chrono::steady_clock::now() < until) {
        for (uint16_t q = 0; q < kQueues; ++q) {
            rte_mbuf* bufs[32];
            const uint16_t n = rte_eth_rx_burst(eal.port, q, bufs, 32);
            for (uint16_t i = 0; i < n; ++i) {
                const uint8_t* d = rte_pktmbuf_mtod(bufs[i], const uint8_t*);
                const uint32_t len = rte_pktmbuf_data_len(bufs[i]);
                if (len >= 14 + 20 + 20 && d[12] == 0x08 && d[13] == 0x00 && d[14 + 9] == 6) {
                    const uint32_t ihl = uint32_t(d[14] & 0xf) * 4;
                    if (len >= 14 + ihl + 4) {
                        const uint8_t* tcp = d + 14 + ihl;
                        seen[uint16_t(tcp[2] << 8 | tcp[3])].insert(q);
                    }
                }
                rte_pktmbuf_free(bufs[i]);
            }
        }
        ::usleep(1000);
    }
    for (int fd : fds) ::close(fd);

    for (uint16_t d : dsts) {
        const unsigned want = plan.queue_of(*plan.engine_for(d, 0));
        auto it = seen.find(d);
        EXPECT(it != seen.end(), "SYN to %u never arrived (expected on queue %u)", d, want);
        if (it != seen.end())
            EXPECT(it->second == std::set<uint16_t>{uint16_t(want)},
                   "SYN to %u arrived on %zu queue(s), first %u; expected queue %u", d,
                   it->second.size(), unsigned(*it->second.begin()), want);
    }
    for (uint16_t d : outside)
        EXPECT(!seen.count(d), "SYN to %u (outside the plan) reached a DPDK queue", d);
    std::printf("%zu planned ports checked, %zu outside ports stayed out of DPDK\n", dsts.size(),
                outside.size());
    std::string derr;
    EXPECT(rules.destroy(&derr) == 0, "destroy: %s", derr.c_str());
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (::geteuid() != 0) {
        std::printf("SKIP: needs root\n");
        return 77;
    }
    const std::string mode = argc > 1 ? argv[1] : "";
    int rc;
    if (mode == "reserved") rc = mode_reserved();
    else if (mode == "recovery") rc = mode_recovery();
    else if (mode == "ntuple_veth") rc = mode_ntuple_veth();
    else if (mode == "rte_flow_refuse") rc = mode_rte_flow_refuse();
    else if (mode == "rte_flow_steer") rc = mode_rte_flow_steer();
    else {
        std::fprintf(stderr, "usage: %s reserved|recovery|ntuple_veth|rte_flow_refuse|rte_flow_steer\n",
                     argv[0]);
        return 2;
    }
    if (rc == 77) return 77;
    if (rc != 0 || failures) {
        std::fprintf(stderr, "%s: FAILED (%d check(s))\n", mode.c_str(), failures);
        return 1;
    }
    std::printf("%s: OK\n", mode.c_str());
    return 0;
}
