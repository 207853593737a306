// crescent — the kernel-only Runtime: N engines without a device, one thread
// each, pinned to the first N CPUs this process may use (as the EAL lcores of
// a device runtime are), each looping over its timers and one epoll_wait
// (kernel_loop.cpp). See runtime_kernel.hpp.
//
// No EAL is started: the threads are std::threads, the arena is anonymous
// memory, and the engine clock measures the TSC itself (clock.hpp). So nothing
// is created in /dev/hugepages or /var/run/dpdk, no privilege is needed, and
// start-up takes the arena's mmap plus a 10 ms TSC measurement.
//
// Signals: SIGINT/SIGTERM stop every engine from the handler (Engine::stop()
// is an atomic store and an eventfd write, both async-signal-safe), so even a
// loop asleep in epoll_wait returns at once; a second signal kills.
#include "stack/engine/runtime_kernel.hpp"

#include <pthread.h>
#include <sched.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstring>
#include <random>
#include <thread>

#include <fmt/format.h>

#include <crescent/log.hpp>

#include "stack/engine/engine_impl.hpp"

namespace crescent::engine {

namespace {

constexpr unsigned kMaxEngines = 64;

// What the signal handler may touch: plain pointers and atomics only.
std::atomic<bool> g_signalled{false};
std::array<Engine*, kMaxEngines> g_sig_engines{};
std::atomic<unsigned> g_sig_count{0};
struct sigaction g_old_int {}, g_old_term {};
bool g_installed = false;

void on_signal(int sig) {
    if (g_signalled.exchange(true)) {
        // Second signal: the application did not stop; give the default action.
        ::signal(sig, SIG_DFL);
        ::raise(sig);
        return;
    }
    const unsigned n = g_sig_count.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; ++i) g_sig_engines[i]->stop();
}

void install_signals(const std::vector<std::unique_ptr<Engine>>& engines) {
    for (size_t i = 0; i < engines.size(); ++i) g_sig_engines[i] = engines[i].get();
    g_sig_count.store(unsigned(engines.size()), std::memory_order_release);
    g_signalled.store(false);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    g_installed = true;
}

void restore_signals() {
    g_sig_count.store(0, std::memory_order_release);
    if (!g_installed) return;
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
    g_installed = false;
}

// The first `n` CPUs this process may run on; empty + *err when fewer.
std::vector<int> first_cpus(unsigned n, std::string* err) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        *err = fmt::format("sched_getaffinity: {}", std::strerror(errno));
        return {};
    }
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < n; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    if (cpus.size() < n) {
        *err = fmt::format("{} engines need {} CPUs, this process may use {}: lower --cores", n, n, CPU_COUNT(&set));
        return {};
    }
    return cpus;
}

void pin_self(int cpu, unsigned engine) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set); rc != 0)
        log::core(engine)->warn("engine {}: pinning to CPU {} failed: {}; it runs unpinned", engine, cpu,
                                std::strerror(rc));
}

} // namespace

std::unique_ptr<KernelRuntime> KernelRuntime::start(const RuntimeOptions& o, std::unique_ptr<zbuf::Arena>* arena,
                                                    std::vector<std::unique_ptr<Engine>>* engines,
                                                    std::string* err) {
    auto fail = [&](std::string m) {
        if (err) *err = std::move(m);
        return std::unique_ptr<KernelRuntime>();
    };
    if (!o.iface.empty() || !o.eal.empty())
        return fail("a kernel-only runtime has no device: give neither --iface nor --eal");
    if (o.cores == 0 || o.cores > kMaxEngines)
        return fail(fmt::format("--cores {} is out of range (1..{})", o.cores, kMaxEngines));
    if (!o.impair.empty())
        return fail("--impair needs a device and a kernel-only runtime has none (impair the kernel's interface "
                    "with tc netem instead)");
    std::unique_ptr<KernelRuntime> rt(new KernelRuntime());
    {
        std::string e;
        rt->cpus_ = first_cpus(o.cores, &e);
        if (rt->cpus_.empty()) return fail(e);
    }
    {
        zbuf::Config zc;
        zc.backing = zbuf::Backing::Anonymous;  // no hugepages: nothing is DMA'd
        zc.bytes = o.arena_bytes;
        std::string e;
        *arena = zbuf::Arena::create(zc, &e);
        if (!*arena) return fail(fmt::format("zbuf arena of {} MiB: {}", zc.bytes >> 20, e));
    }
    std::random_device rd;
    const std::array<uint64_t, 2> secret{(uint64_t(rd()) << 32) | rd(), (uint64_t(rd()) << 32) | rd()};
    for (unsigned i = 0; i < o.cores; ++i) {
        EngineParams ep;
        ep.cfg = o.engine;
        ep.index = i;
        ep.count = o.cores;
        ep.core = i;
        ep.dev = nullptr;      // kernel-only: NullDevice, run_kernel()
        ep.nexthop = nullptr;  // connect() finds no route
        ep.arena = arena->get();
        ep.secret = secret;
        engines->push_back(make_engine(ep));
    }
    rt->engines_ = o.cores;
    rt->wait_ = o.engine.kernel_wait;
    install_signals(*engines);
    std::string cpus;
    for (int c : rt->cpus_) cpus += fmt::format("{}{}", cpus.empty() ? "" : ",", c);
    log::get("runtime")->info("{}; CPUs {}; arena {} MiB (anonymous)", rt->describe(), cpus, o.arena_bytes >> 20);
    return rt;
}

KernelRuntime::~KernelRuntime() { restore_signals(); }

bool KernelRuntime::signalled() { return g_signalled.load(std::memory_order_relaxed); }

std::string KernelRuntime::describe() const {
    return fmt::format("kernel TCP only (no device), {} engines, wait {}", engines_, kernel_wait_name(wait_));
}

void KernelRuntime::run(std::vector<std::unique_ptr<Engine>>& engines, const std::function<void(Engine&)>& setup) {
    auto body = [&setup](Engine& e) {
        zbuf::CoreScope core(e.core());
        setup(e);
        e.run();
    };
    std::vector<std::thread> threads;
    threads.reserve(engines.size());
    for (size_t i = 1; i < engines.size(); ++i) {
        Engine& e = *engines[i];
        const int cpu = cpus_[i];
        threads.emplace_back([&body, &e, cpu] {
            pthread_setname_np(pthread_self(), fmt::format("kengine-{}", e.index()).c_str());
            pin_self(cpu, e.index());
            body(e);
        });
    }
    cpu_set_t saved;
    const bool have_saved = pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) == 0;
    pin_self(cpus_[0], 0);
    body(*engines[0]);
    for (auto& e : engines) e->stop();
    for (std::thread& t : threads) t.join();
    if (have_saved) pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
}

} // namespace crescent::engine
