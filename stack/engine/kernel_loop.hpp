// crescent — pieces of the loop of an engine without a device (kernel-only
// runtime; the loop itself is EngineImpl::run_kernel() in kernel_loop.cpp).
#pragma once

namespace crescent::engine {

// The eventfd a kernel-only engine keeps in its epoll set besides the
// application's fds, so that stop() ends a loop asleep in epoll_wait at once
// (KernelWait::Block). It is not in the engine's fd table: the loop sees its
// event as one for a removed fd and goes round, finding stopping() set.
class WakeFd {
public:
    WakeFd() = default;
    ~WakeFd();
    WakeFd(const WakeFd&) = delete;
    WakeFd& operator=(const WakeFd&) = delete;

    // Creates the eventfd and adds it to `epfd` (edge-triggered: every
    // notify() is an event, nothing to read). false (errno set) on failure.
    bool open(int epfd);
    // Any thread, async-signal-safe (one write(2)); a no-op before open().
    void notify() const noexcept;
    int fd() const { return fd_; }

private:
    int fd_ = -1;
};

} // namespace crescent::engine
