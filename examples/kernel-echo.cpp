// kernel-echo — an RFC 862 echo server on kernel TCP: the baseline that the
// main job and knb compare crescent against, in the same place and shape
// (one thread, epoll, non-blocking sockets). `--busy-poll` spins on
// epoll_wait(0) like a run-to-completion user-space loop; without it the
// thread sleeps in epoll_wait (wake-up bound, see TESTBED.md).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;

[[noreturn]] void usage(const std::string& msg) {
    std::fprintf(stderr, "kernel-echo: %s\nusage: kernel-echo [--addr IP] [--port P] [--busy-poll]\n", msg.c_str());
    std::exit(2);
}

struct Conn {
    std::vector<char> pending; // echo bytes the socket did not take yet
};

} // namespace

int main(int argc, char** argv) {
    std::string addr = "0.0.0.0";
    long port = 7;
    bool busy = false;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--addr" && i + 1 < argc) addr = argv[++i];
        else if (a == "--port" && i + 1 < argc) {
            char* end = nullptr;
            port = std::strtol(argv[++i], &end, 10);
            if (*end || port < 1 || port > 65535) usage(std::string("--port wants 1-65535, got '") + argv[i] + "'");
        } else if (a == "--busy-poll") busy = true;
        else usage("unknown or incomplete option '" + std::string(a) + "'");
    }
    signal(SIGINT, [](int) { g_stop = 1; });
    signal(SIGTERM, [](int) { g_stop = 1; });

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(uint16_t(port));
    if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) usage("--addr '" + addr + "' is not an IPv4 address");
    if (bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(lfd, 1024) != 0) {
        std::fprintf(stderr, "kernel-echo: cannot listen on %s:%ld: %s\n", addr.c_str(), port, std::strerror(errno));
        return 1;
    }
    int ep = epoll_create1(0);
    epoll_event lev{};
    lev.events = EPOLLIN;
    lev.data.fd = lfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
    std::unordered_map<int, Conn> conns;
    std::vector<char> buf(256 * 1024);
    std::vector<epoll_event> evs(256);
    std::fprintf(stderr, "kernel-echo: listening on %s:%ld%s\n", addr.c_str(), port, busy ? " (busy-poll)" : "");

    auto drop = [&](int fd) { epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr); ::close(fd); conns.erase(fd); };
    auto flush = [&](int fd, Conn& c) -> bool {
        while (!c.pending.empty()) {
            ssize_t w = ::send(fd, c.pending.data(), c.pending.size(), MSG_NOSIGNAL);
            if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
            c.pending.erase(c.pending.begin(), c.pending.begin() + w);
        }
        return true;
    };
    while (!g_stop) {
        int n = epoll_wait(ep, evs.data(), int(evs.size()), busy ? 0 : 100);
        for (int e = 0; e < n; ++e) {
            int fd = evs[size_t(e)].data.fd;
            if (fd == lfd) {
                for (;;) {
                    int c = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK);
                    if (c < 0) break;
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    epoll_event ev{};
                    ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
                    ev.data.fd = c;
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
                    conns[c];
                }
                continue;
            }
            auto it = conns.find(fd);
            if (it == conns.end()) continue;
            Conn& c = it->second;
            bool alive = flush(fd, c);
            // Read only while the previous echo has drained: backpressure, bounded memory.
            while (alive && c.pending.empty()) {
                ssize_t r = ::recv(fd, buf.data(), buf.size(), 0);
                if (r == 0) { alive = false; break; }
                if (r < 0) { alive = errno == EAGAIN || errno == EWOULDBLOCK; break; }
                ssize_t w = ::send(fd, buf.data(), size_t(r), MSG_NOSIGNAL);
                if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { alive = false; break; }
                if (w < r) c.pending.assign(buf.data() + std::max<ssize_t>(w, 0), buf.data() + r);
            }
            if (!alive) drop(fd);
        }
    }
    for (auto& [fd, c] : conns) ::close(fd);
    ::close(lfd);
    return 0;
}
