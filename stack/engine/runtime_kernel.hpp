// crescent — the kernel-only Runtime (RuntimeOptions::kernel_only): engines
// without a device, each on its own thread pinned to its own CPU, serving
// kernel TCP sockets in their epoll sets (rpc Transport::Kernel) and their
// timers. No EAL: no hugepages, no DPDK runtime files, no root needed; the
// zbuf arena is anonymous memory. runtime.cpp owns the Runtime and calls in
// here for start-up and run(); the engines and the arena live in its Impl.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/runtime.hpp>
#include <crescent/zbuf.hpp>

namespace crescent::engine {

class KernelRuntime {
public:
    // Checks the options, creates the arena and one engine per core (pinned
    // at run()), and installs the SIGINT/SIGTERM handlers (they stop the
    // engines). nullptr + *err (one line, no prefix) on failure; whatever was
    // put in *arena / *engines is the caller's to destroy (engines first).
    static std::unique_ptr<KernelRuntime> start(const RuntimeOptions& o, std::unique_ptr<zbuf::Arena>* arena,
                                                std::vector<std::unique_ptr<Engine>>* engines, std::string* err);
    // Restores the signal handlers; destroy it before the engines.
    ~KernelRuntime();
    KernelRuntime(const KernelRuntime&) = delete;
    KernelRuntime& operator=(const KernelRuntime&) = delete;

    // Engine 0 on the calling thread (pinned for the call, its affinity given
    // back after), the others on threads of their own; `setup` first on each.
    // Returns when every loop has returned: engine 0's return stops the rest.
    void run(std::vector<std::unique_ptr<Engine>>& engines, const std::function<void(Engine&)>& setup);

    // "kernel TCP only (no device), N engines, wait busy|block"
    std::string describe() const;
    // A SIGINT/SIGTERM arrived since start() (a second one kills the process).
    static bool signalled();

private:
    KernelRuntime() = default;
    std::vector<int> cpus_;  // CPU of engine i
    unsigned engines_ = 0;
    KernelWait wait_ = KernelWait::Busy;
};

} // namespace crescent::engine
