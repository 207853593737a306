// crescent — the loop of an engine without a device (kernel-only runtime):
// kernel sockets in the engine's epoll set (rpc Transport::Kernel, add_fd) and
// the engine's timer wheel, nothing else. It is the kernel baseline that runs
// the same rpc::Server / rpc::Channel code as a crescent engine, one epoll
// thread per core.
//
// One iteration: run the due timers, then exactly one epoll_wait —
//   KernelWait::Busy:  timeout 0, and round again (spin; a tuned baseline);
//   KernelWait::Block: sleep until an fd is ready or the next timer is due
//                      (an epoll/libev server, Luna's baseline), so an idle
//                      engine makes no system call but this one per wake-up.
// stop() writes the engine's eventfd (WakeFd), in the same epoll set, to end
// a blocked wait at once.
#include "stack/engine/kernel_loop.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "stack/engine/engine_impl.hpp"

namespace crescent {

std::string_view kernel_wait_name(KernelWait w) {
    switch (w) {
    case KernelWait::Busy: return "busy";
    case KernelWait::Block: return "block";
    }
    return "unknown";
}

bool parse_kernel_wait(std::string_view s, KernelWait* out) {
    if (s == "busy") *out = KernelWait::Busy;
    else if (s == "block") *out = KernelWait::Block;
    else return false;
    return true;
}

namespace engine {

WakeFd::~WakeFd() {
    if (fd_ >= 0) ::close(fd_);
}

bool WakeFd::open(int epfd) {
    int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return false;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.fd = fd;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        int saved = errno;
        ::close(fd);
        errno = saved;
        return false;
    }
    fd_ = fd;
    return true;
}

void WakeFd::notify() const noexcept {
    if (fd_ < 0) return;
    const uint64_t one = 1;
    // EAGAIN only when the counter is about to overflow: it is readable then anyway.
    [[maybe_unused]] ssize_t n = ::write(fd_, &one, sizeof one);
}

void EngineImpl::run_kernel() {
    const bool block = p_.cfg.kernel_wait == KernelWait::Block;
    // A blocked wait still comes round at least this often (a safety net: every
    // wake-up that matters — an fd, a timer, stop() — ends it earlier).
    constexpr Duration kMaxSleep = std::chrono::seconds(1);
    while (!stopping()) {
        size_t work = 0;
        Instant now = clock_.now();
        loop_now_ = now;
        const Dispatching dispatching(dispatching_);
        if (wheel_.pending()) {
            size_t ran = wheel_.advance(now);
            st_.timers_fired += ran;
            work += ran;
        }
        Duration wait = Duration::zero();
        if (block && !stopping()) {
            // Timers added by the callbacks above are in next_deadline().
            const Instant next = wheel_.next_deadline();
            now = clock_.now();
            wait = next.is_never() ? kMaxSleep : next - now;
            if (wait > kMaxSleep) wait = kMaxSleep;
            if (wait < Duration::zero()) wait = Duration::zero();
            if (wait > Duration::zero()) ++st_.sleeps;
        }
        const uint64_t before = st_.epoll_events;
        poll_fds(wait);
        work += size_t(st_.epoll_events - before);
        ++st_.loops;
        if (work == 0) ++st_.idle_loops;
        pub_.tick(*this, now);
    }
    close_all();
}

} // namespace engine
} // namespace crescent
