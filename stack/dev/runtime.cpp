// crescent — EAL start-up, AF_XDP port with XDP steering, clean shutdown.
#include "stack/dev/runtime.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#include <net/if.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_log.h>

#include <crescent/log.hpp>

#include "bifurcation/xdp/steer_config.h"
#include "stack/dev/stale.hpp"

namespace crescent::dev {

std::string_view errc_name(Errc e) {
    switch (e) {
    case Errc::Ok: return "ok";
    case Errc::BadConfig: return "bad-config";
    case Errc::NotRoot: return "not-root";
    case Errc::UnknownInterface: return "unknown-interface";
    case Errc::NoHugepages: return "no-hugepages";
    case Errc::AddressInUse: return "address-in-use";
    case Errc::EalFailed: return "eal-failed";
    case Errc::AlreadyStarted: return "already-started";
    case Errc::NoMemory: return "no-memory";
    case Errc::DeviceFailed: return "device-failed";
    case Errc::SteeringFailed: return "steering-failed";
    }
    return "?";
}

namespace {

namespace fs = std::filesystem;

constexpr const char* kVdevName = "net_af_xdp0";
constexpr const char* kSteerProgName = "crescent_steer"; // the SEC("xdp") function

Status fail(Errc c, std::string msg) { return Status::error(c, "crescent: " + msg); }

// --- EAL log capture -----------------------------------------------------------
// EAL and the PMDs log through rte_log into this stream: lines go to the
// "eal" spdlog logger (debug while starting — a failure is summarised in the
// Status — and errors as warnings once running), and the error lines of the
// start-up are kept to quote in the Status.
struct EalLog {
    std::mutex mu;
    std::string partial;
    uint32_t partial_level = RTE_LOG_DEBUG;
    std::deque<std::string> errors; // ERR-or-worse lines since the last clear (bounded)
    bool running = false;           // start-up done: forward errors loudly
    FILE* stream = nullptr;

    void line(std::string s, uint32_t level) {
        while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
        if (s.empty()) return;
        auto lg = log::get("eal");
        if (level <= RTE_LOG_ERR) {
            if (errors.size() == 32) errors.pop_front();
            errors.push_back(s);
            if (running) lg->warn("{}", s); else lg->debug("{}", s);
        } else {
            lg->debug("{}", s);
        }
    }
};
EalLog g_eal_log;

ssize_t eal_log_write(void*, const char* buf, size_t n) {
    std::lock_guard lk(g_eal_log.mu);
    int lvl = rte_log_cur_msg_loglevel();
    uint32_t level = lvl > 0 ? uint32_t(lvl) : uint32_t(RTE_LOG_INFO);
    if (g_eal_log.partial.empty()) g_eal_log.partial_level = level;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            g_eal_log.line(std::move(g_eal_log.partial), g_eal_log.partial_level);
            g_eal_log.partial.clear();
            g_eal_log.partial_level = level;
        } else {
            g_eal_log.partial.push_back(buf[i]);
        }
    }
    return ssize_t(n);
}

void eal_log_install() {
    if (g_eal_log.stream) return;
    cookie_io_functions_t io{};
    io.write = eal_log_write;
    g_eal_log.stream = fopencookie(nullptr, "w", io);
    if (g_eal_log.stream) {
        setvbuf(g_eal_log.stream, nullptr, _IOLBF, 0);
        rte_openlog_stream(g_eal_log.stream);
    }
}

std::string eal_errors_summary() {
    std::lock_guard lk(g_eal_log.mu);
    if (g_eal_log.errors.empty()) return "no error message from EAL";
    auto clip = [](const std::string& s) { return s.size() > 200 ? s.substr(0, 200) + "..." : s; };
    std::string first = clip(g_eal_log.errors.front());
    std::string last = clip(g_eal_log.errors.back());
    return first == last ? first : first + " ... " + last;
}

// EAL writes some start-up failures straight to stdout/stderr (getopt, usage,
// "EAL: FATAL: ..."). While rte_eal_init runs, both go to a memfd; afterwards
// the text is fed to the EAL log (quoted in the Status) instead of the terminal.
class StdioCapture {
public:
    StdioCapture() {
        fd_ = memfd_create("crescent-eal-stdio", MFD_CLOEXEC);
        if (fd_ < 0) return;
        std::fflush(stdout);
        std::fflush(stderr);
        saved_out_ = ::dup(STDOUT_FILENO);
        saved_err_ = ::dup(STDERR_FILENO);
        ::dup2(fd_, STDOUT_FILENO);
        ::dup2(fd_, STDERR_FILENO);
    }
    // Restore the terminal and return what was written meanwhile.
    std::string finish() {
        if (fd_ < 0) return {};
        std::fflush(stdout);
        std::fflush(stderr);
        ::dup2(saved_out_, STDOUT_FILENO);
        ::dup2(saved_err_, STDERR_FILENO);
        ::close(saved_out_);
        ::close(saved_err_);
        std::string text;
        char buf[4096];
        ::lseek(fd_, 0, SEEK_SET);
        for (ssize_t n; (n = ::read(fd_, buf, sizeof(buf))) > 0 && text.size() < (1u << 20);) text.append(buf, size_t(n));
        ::close(fd_);
        fd_ = -1;
        return text;
    }
    ~StdioCapture() { (void)finish(); }
    StdioCapture(const StdioCapture&) = delete;
    StdioCapture& operator=(const StdioCapture&) = delete;

private:
    int fd_ = -1, saved_out_ = -1, saved_err_ = -1;
};

// Lines EAL printed directly: errors ("FATAL", getopt) are kept for the
// Status, ahead of the logged ones (getopt complains before EAL gives up).
void eal_stdio_lines(const std::string& text) {
    std::lock_guard lk(g_eal_log.mu);
    std::istringstream in(text);
    std::vector<std::string> errs;
    for (std::string l; std::getline(in, l);) {
        bool fatal = l.find("FATAL") != std::string::npos;
        bool err = l.find("unrecognized option") != std::string::npos ||
                   l.find("invalid option") != std::string::npos || l.find("requires an argument") != std::string::npos;
        if (err) errs.push_back(l);
        // "EAL: FATAL: x" repeats the logged "EAL: x": keep it out of the summary.
        g_eal_log.line(l, err ? RTE_LOG_ERR : fatal ? RTE_LOG_NOTICE : RTE_LOG_DEBUG);
        if (err) g_eal_log.errors.pop_back();
    }
    for (auto it = errs.rbegin(); it != errs.rend(); ++it) g_eal_log.errors.push_front(*it);
}

bool eal_errors_contain(std::string_view needle) {
    std::lock_guard lk(g_eal_log.mu);
    for (const auto& l : g_eal_log.errors)
        if (l.find(needle) != std::string::npos) return true;
    return false;
}

void eal_errors_clear() {
    std::lock_guard lk(g_eal_log.mu);
    g_eal_log.errors.clear();
}

// --- signals, once-per-process, exit safety net ----------------------------------
std::atomic<bool> g_stop{false};
std::atomic<bool> g_eal_attempted{false};
struct sigaction g_old_int {}, g_old_term {};
bool g_signals_installed = false;

void on_signal(int sig) {
    if (g_stop.exchange(true)) {
        // Second signal: the application did not stop; give the default action.
        ::signal(sig, SIG_DFL);
        ::raise(sig);
    }
}

void install_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    g_signals_installed = true;
}

void restore_signals() {
    if (!g_signals_installed) return;
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
    g_signals_installed = false;
}

// If the process exits without destroying the Runtime (exit() elsewhere),
// still take the XDP program off the interface and remove the files.
struct ExitGuard {
    std::mutex mu;
    int ifindex = 0;
    uint32_t prog_id = 0;
    std::string prefix;
    bool armed = false;
    bool registered = false;
};
ExitGuard g_exit;

void exit_guard_run() {
    std::lock_guard lk(g_exit.mu);
    if (!g_exit.armed) return;
    if (g_exit.ifindex != 0 && g_exit.prog_id != 0) bifurcation::xdp_detach_if(g_exit.ifindex, g_exit.prog_id);
    if (!g_exit.prefix.empty()) remove_dpdk_files(g_exit.prefix);
    g_exit.armed = false;
}

void exit_guard_arm(int ifindex, uint32_t prog_id, const std::string& prefix) {
    std::lock_guard lk(g_exit.mu);
    g_exit.ifindex = ifindex;
    g_exit.prog_id = prog_id;
    g_exit.prefix = prefix;
    g_exit.armed = true;
    if (!g_exit.registered) {
        std::atexit(exit_guard_run);
        g_exit.registered = true;
    }
}

void exit_guard_disarm() {
    std::lock_guard lk(g_exit.mu);
    g_exit.armed = false;
}

// --- checks ----------------------------------------------------------------------

// Free hugepage bytes over every page size.
uint64_t free_hugepage_bytes() {
    uint64_t total = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/sys/kernel/mm/hugepages", ec)) {
        std::string dir = e.path().filename().string(); // hugepages-2048kB
        uint64_t kb = std::strtoull(dir.c_str() + std::strlen("hugepages-"), nullptr, 10);
        std::ifstream f(e.path() / "free_hugepages");
        uint64_t n = 0;
        if (f >> n) total += n * kb * 1024;
    }
    return total;
}

std::vector<std::string> hugetlbfs_mounts() {
    std::vector<std::string> out;
    std::ifstream f("/proc/mounts");
    std::string dev, dir, type, rest;
    while (f >> dev >> dir >> type && std::getline(f, rest))
        if (type == "hugetlbfs") out.push_back(dir);
    return out;
}

bool file_exists(const std::string& p) { return !p.empty() && ::access(p.c_str(), R_OK) == 0; }

// The first `n` CPUs this thread may run on, as an EAL -l list.
std::string default_cores(unsigned n, std::string* err) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        *err = std::string("sched_getaffinity: ") + std::strerror(errno);
        return {};
    }
    std::string list;
    unsigned got = 0;
    for (int c = 0; c < CPU_SETSIZE && got < n; c++) {
        if (!CPU_ISSET(c, &set)) continue;
        if (got) list += ',';
        list += std::to_string(c);
        got++;
    }
    if (got < n) {
        *err = fmt::format("{} queues need {} CPUs, this process may use {}: lower the queue count or pass cores",
                           n, n, got);
        return {};
    }
    return list;
}

bool has_arg(const std::vector<std::string>& args, std::string_view name, std::string* value = nullptr) {
    for (size_t i = 0; i < args.size(); i++) {
        const std::string& a = args[i];
        if (a == name) {
            if (value && i + 1 < args.size()) *value = args[i + 1];
            return true;
        }
        if (a.size() > name.size() && a.compare(0, name.size(), name) == 0 && a[name.size()] == '=') {
            if (value) *value = a.substr(name.size() + 1);
            return true;
        }
    }
    return false;
}

} // namespace

namespace {
// A live DPDK primary holds a write lock on <runtime dir>/config.
bool prefix_locked_by_other(const std::string& prefix) {
    std::string path = "/var/run/dpdk/" + prefix + "/config";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    bool locked = ::fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK && fl.l_pid != ::getpid();
    ::close(fd);
    return locked;
}
} // namespace

void remove_dpdk_files(const std::string& prefix) {
    if (prefix.empty() || prefix.find('/') != std::string::npos) return;
    // Another process's files (same prefix, e.g. a failed second start): keep.
    if (prefix_locked_by_other(prefix)) return;
    std::error_code ec;
    for (const std::string& mnt : hugetlbfs_mounts()) {
        for (const auto& e : fs::directory_iterator(mnt, ec)) {
            std::string name = e.path().filename().string();
            // EAL names its files "<prefix>map_<n>" (and "<prefix>map_<n>_<m>" per segment list).
            if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
                name.compare(prefix.size(), 4, "map_") == 0)
                fs::remove(e.path(), ec);
        }
    }
    fs::remove_all(fs::path("/var/run/dpdk") / prefix, ec);
}

// EAL run directories of crashed instances that used the default prefix
// ("crescent<pid>"; SIGKILL leaves them, and their hugepage files if any):
// the pid is gone and nobody holds the prefix's lock.
void remove_stale_dpdk_files() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/var/run/dpdk", ec)) {
        const std::string name = e.path().filename().string();
        if (stale::gone(stale::pid_in(name, "crescent", ""))) remove_dpdk_files(name);
    }
}

Status require_root_for_iface(const std::string& iface) {
    if (::geteuid() == 0) return {};
    return fail(Errc::NotRoot, fmt::format("AF_XDP on '{}' needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_IPC_LOCK): "
                                           "run as root",
                                           iface));
}

std::string Runtime::default_xdp_prog() {
    if (const char* env = std::getenv("CRESCENT_XDP_PROG"); env && *env) return env;
    if (file_exists(CRESCENT_XDP_PROG_BUILD)) return CRESCENT_XDP_PROG_BUILD;
    return CRESCENT_XDP_PROG_INSTALL;
}

bool Runtime::stop_requested() { return g_stop.load(std::memory_order_relaxed); }
void Runtime::request_stop() { g_stop.store(true, std::memory_order_relaxed); }

Status Runtime::start(const RuntimeConfig& cfg_in, std::unique_ptr<Runtime>* out) {
    out->reset();
    RuntimeConfig cfg = cfg_in;
    std::unique_ptr<Runtime> rt(new Runtime());
    bool iface_mode = cfg.mode == RuntimeConfig::Mode::Iface;

    // --- validate before touching anything ---
    if (iface_mode) {
        if (cfg.iface.empty()) return fail(Errc::BadConfig, "no interface given (--iface IFACE)");
        if (cfg.queues == 0) return fail(Errc::BadConfig, "at least one queue is needed");
        if (Status st = require_root_for_iface(cfg.iface); !st) return st;
        rt->ifindex_ = int(if_nametoindex(cfg.iface.c_str()));
        if (rt->ifindex_ == 0)
            return fail(Errc::UnknownInterface,
                        fmt::format("no network interface '{}' in this network namespace (see `ip link`)", cfg.iface));
        uint32_t prog = 0;
        std::string pname;
        if (int rc = bifurcation::xdp_attached_prog(rt->ifindex_, &prog, &pname); rc < 0)
            return fail(Errc::DeviceFailed, fmt::format("cannot query XDP on '{}': {}", cfg.iface, std::strerror(-rc)));
        if (prog != 0)
            return fail(Errc::AddressInUse,
                        fmt::format("interface '{}' already has an XDP program (id {}, '{}'): another crescent or "
                                    "XDP user owns it; if it is stale, remove it with `ip link set dev {} xdp off`",
                                    cfg.iface, prog, pname, cfg.iface));
        if (cfg.steer) {
            if (cfg.xdp_prog.empty()) cfg.xdp_prog = default_xdp_prog();
            if (!file_exists(cfg.xdp_prog))
                return fail(Errc::SteeringFailed,
                            fmt::format("XDP steering object '{}' is missing: build crescent_steer.bpf.o or set "
                                        "CRESCENT_XDP_PROG",
                                        cfg.xdp_prog));
            if (cfg.xdp_prog.find(',') != std::string::npos)
                return fail(Errc::BadConfig, fmt::format("XDP object path '{}' contains a comma", cfg.xdp_prog));
        }
    } else if (cfg.eal_args.empty()) {
        return fail(Errc::BadConfig, "no EAL arguments given (--eal \"ARGS\")");
    }

    bool no_huge = cfg.no_huge || (!iface_mode && has_arg(cfg.eal_args, "--no-huge"));
    if (!no_huge) {
        if (free_hugepage_bytes() == 0)
            return fail(Errc::NoHugepages, "no free hugepages: reserve some with `tools/testbed hugepages 1024` "
                                           "(or `echo 1024 > /proc/sys/vm/nr_hugepages`)");
        bool in_memory = iface_mode ? cfg.in_memory : has_arg(cfg.eal_args, "--in-memory");
        if (!in_memory && hugetlbfs_mounts().empty())
            return fail(Errc::NoHugepages, "hugetlbfs is not mounted: run `tools/testbed hugepages 1024` "
                                           "(or `mount -t hugetlbfs nodev /dev/hugepages`)");
    }

    if (g_eal_attempted.exchange(true))
        return fail(Errc::AlreadyStarted, "EAL can be started once per process and already was");

    // --- EAL arguments ---
    std::string prefix = cfg.file_prefix.empty() ? fmt::format("crescent{}", ::getpid()) : cfg.file_prefix;
    std::vector<std::string>& a = rt->argv_;
    a.push_back("crescent");
    if (iface_mode) {
        std::string cores = cfg.cores;
        if (cores.empty()) {
            std::string err;
            cores = default_cores(cfg.queues, &err);
            if (cores.empty()) {
                g_eal_attempted = false;
                return fail(Errc::BadConfig, err);
            }
        }
        a.insert(a.end(), {"-l", cores, "--file-prefix=" + prefix, "--log-level=" + cfg.log_level, "--no-pci",
                           "--no-telemetry"});
        if (cfg.in_memory) a.push_back("--in-memory");
        if (cfg.no_huge) a.push_back("--no-huge");
        if (cfg.memory_mb) a.insert(a.end(), {"-m", std::to_string(cfg.memory_mb)});
        // busy_budget=0: the PMD's preferred busy polling would make a
        // recvfrom() system call on every empty RX poll; our engines poll
        // anyway, and on veth the frames are delivered by the sender's own
        // system call, so those calls only cost (8 % of RPC/s at 4 KiB).
        std::string vdev = fmt::format("--vdev={},iface={},start_queue=0,queue_count={},busy_budget=0", kVdevName,
                                       cfg.iface, cfg.queues);
        if (cfg.steer) vdev += ",xdp_prog=" + cfg.xdp_prog;
        a.push_back(vdev);
    } else {
        std::string given;
        if (has_arg(cfg.eal_args, "--file-prefix", &given)) prefix = given;
        else a.push_back("--file-prefix=" + prefix);
        if (!cfg.cores.empty() && !has_arg(cfg.eal_args, "-l") && !has_arg(cfg.eal_args, "--lcores"))
            a.insert(a.end(), {"-l", cfg.cores});
        if (!has_arg(cfg.eal_args, "--log-level")) a.push_back("--log-level=" + cfg.log_level);
        // crescent owns its ports: never attach silently as a secondary to a
        // process that happens to use the same prefix (EAL's "auto").
        if (!has_arg(cfg.eal_args, "--proc-type")) a.push_back("--proc-type=primary");
        if (cfg.no_huge && !has_arg(cfg.eal_args, "--no-huge")) a.push_back("--no-huge");
        a.insert(a.end(), cfg.eal_args.begin(), cfg.eal_args.end());
    }
    rt->prefix_ = prefix;
    rt->cfg_ = cfg;

    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::string joined;
    for (size_t i = 1; i < a.size(); i++) joined += (i > 1 ? " " : "") + a[i];
    log::get("dev")->debug("EAL arguments: {}", joined);

    eal_log_install();
    eal_errors_clear();
    exit_guard_arm(0, 0, prefix);
    // rte_eal_init may permute argv; our strings stay alive in rt->argv_.
    remove_stale_dpdk_files();
    std::vector<char*> argv_copy = argv;
    StdioCapture capture;
    int rc = rte_eal_init(int(argv_copy.size() - 1), argv_copy.data());
    int init_errno = rte_errno;
    eal_stdio_lines(capture.finish());
    rte_errno = init_errno;
    if (rc < 0) {
        int err = rte_errno;
        remove_dpdk_files(prefix);
        exit_guard_disarm();
        std::string said = eal_errors_summary();
        if (eal_errors_contain("Cannot create lock") || eal_errors_contain("another primary"))
            return fail(Errc::AddressInUse,
                        fmt::format("DPDK file prefix '{}' is in use by another process ({}): use another prefix",
                                    prefix, said));
        if (err == EACCES || eal_errors_contain("Permission denied"))
            return fail(Errc::NotRoot, fmt::format("EAL was denied access ({}): run as root", said));
        if (eal_errors_contain("hugepage") || eal_errors_contain("Cannot init memory") ||
            eal_errors_contain("Cannot get hugepage"))
            return fail(Errc::NoHugepages,
                        fmt::format("EAL could not use hugepages ({}): run `tools/testbed hugepages 1024`", said));
        if (iface_mode && (eal_errors_contain("xdp") || eal_errors_contain("XDP") || eal_errors_contain("af_xdp")))
            return fail(Errc::EalFailed, fmt::format("AF_XDP on '{}' failed to start: {} (rte_errno {})", cfg.iface,
                                                     said, rte_strerror(err)));
        return fail(Errc::EalFailed, fmt::format("EAL failed to start: {} (rte_errno {})", said, rte_strerror(err)));
    }
    rt->eal_up_ = true;
    {
        std::lock_guard lk(g_eal_log.mu);
        g_eal_log.running = true;
    }

    if (iface_mode) {
        uint16_t pid = 0;
        if (rte_eth_dev_get_port_by_name(kVdevName, &pid) != 0 && eal_errors_contain("combined queue count"))
            return fail(Errc::BadConfig,
                        fmt::format("'{}' has fewer combined channels than the {} queues asked ({}): see `ethtool -l "
                                    "{}` or ask for fewer queues",
                                    cfg.iface, cfg.queues, eal_errors_summary(), cfg.iface));
        if (rte_eth_dev_get_port_by_name(kVdevName, &pid) != 0)
            return fail(Errc::DeviceFailed, fmt::format("the AF_XDP port for '{}' did not appear: {}", cfg.iface,
                                                        eal_errors_summary()));
        rt->default_port_ = pid;
    } else {
        uint16_t pid = 0;
        bool any = false;
        RTE_ETH_FOREACH_DEV(pid) {
            rt->default_port_ = pid;
            any = true;
            break;
        }
        if (!any)
            return fail(Errc::DeviceFailed, "EAL started but found no ethdev port: check the --vdev/-a arguments");
    }
    if (cfg.handle_signals) install_signals();
    log::get("dev")->info("EAL up (prefix {}), {} port(s){}", prefix, rte_eth_dev_count_avail(),
                          iface_mode ? fmt::format(", AF_XDP on {}", cfg.iface) : std::string());
    *out = std::move(rt);
    return {};
}

std::vector<uint16_t> Runtime::ports() const {
    std::vector<uint16_t> v;
    uint16_t pid = 0;
    RTE_ETH_FOREACH_DEV(pid) v.push_back(pid);
    return v;
}

Status Runtime::open_port(uint16_t port_id, const PortConfig& pcfg_in, Port** out) {
    *out = nullptr;
    PortConfig pcfg = pcfg_in;
    bool iface_mode = cfg_.mode == RuntimeConfig::Mode::Iface;
    if (iface_mode && port_id == default_port_ && pcfg.queues > cfg_.queues)
        return fail(Errc::BadConfig,
                    fmt::format("{} queue pairs asked, the AF_XDP port was created with {}", pcfg.queues, cfg_.queues));
    eal_errors_clear();
    std::unique_ptr<Port> p;
    Status st = Port::open(port_id, pcfg, &p);
    // Whatever happened, the PMD may have attached the program: remember it.
    if (iface_mode && cfg_.steer && steer_prog_id_ == 0) {
        uint32_t id = 0;
        std::string name;
        if (bifurcation::xdp_attached_prog(ifindex_, &id, &name) == 0 && id != 0 && name == kSteerProgName) {
            steer_prog_id_ = id;
            exit_guard_arm(ifindex_, id, prefix_);
        }
    }
    if (!st.ok()) {
        std::string said = eal_errors_summary();
        if (said != "no error message from EAL") return Status::error(st.code(), st.message() + " (" + said + ")");
        return st;
    }
    ports_.push_back(std::move(p));
    *out = ports_.back().get();
    if (iface_mode && port_id == default_port_ && cfg_.steer) {
        Status s = attach_steering();
        if (!s.ok()) return s;
    }
    return {};
}

Status Runtime::attach_steering() {
    std::string err;
    if (steer_.open(ifindex_, &err) != 0)
        return fail(Errc::SteeringFailed, fmt::format("steering on '{}': {}", cfg_.iface, err));
    if (steer_prog_id_ == 0) {
        steer_prog_id_ = steer_.prog_id();
        exit_guard_arm(ifindex_, steer_prog_id_, prefix_);
    }
    if (cfg_.steer_ports.empty())
        log::get("dev")->warn("XDP steering on {}: no port range given, every frame goes to the kernel", cfg_.iface);
    if (steer_.set_ranges(cfg_.steer_ports, &err) != 0)
        return fail(Errc::SteeringFailed, fmt::format("steering on '{}': {}", cfg_.iface, err));
    std::string ranges;
    for (const auto& r : cfg_.steer_ports) ranges += fmt::format("{}{}-{}", ranges.empty() ? "" : ",", r.lo, r.hi);
    log::get("dev")->info("XDP steering on {} (prog id {}): TCP ports [{}] -> DPDK, the rest -> kernel", cfg_.iface,
                          steer_.prog_id(), ranges);
    return {};
}

Status Runtime::set_steer_ports(std::span<const PortRange> ranges) {
    if (!steer_.is_open()) return fail(Errc::SteeringFailed, "no XDP steering program is attached (open the port first)");
    std::string err;
    if (steer_.set_ranges(ranges, &err) != 0) return fail(Errc::SteeringFailed, err);
    cfg_.steer_ports.assign(ranges.begin(), ranges.end());
    return {};
}

void Runtime::close_ports() { ports_.clear(); }

void Runtime::shutdown() {
    ports_.clear(); // stop + close: the PMD deletes its XSKs (and usually the program)
    if (steer_prog_id_ != 0) {
        int rc = bifurcation::xdp_detach_if(ifindex_, steer_prog_id_);
        if (rc < 0)
            log::get("dev")->warn("could not detach XDP program {} from {}: {} (remove it with `ip link set dev {} "
                                  "xdp off`)",
                                  steer_prog_id_, cfg_.iface, std::strerror(-rc), cfg_.iface);
        steer_prog_id_ = 0;
    }
    steer_ = bifurcation::XdpSteer();
    if (eal_up_) {
        {
            std::lock_guard lk(g_eal_log.mu);
            g_eal_log.running = false;
        }
        rte_eal_cleanup();
        eal_up_ = false;
    }
    remove_dpdk_files(prefix_);
    exit_guard_disarm();
    restore_signals();
}

Runtime::~Runtime() { shutdown(); }

} // namespace crescent::dev
