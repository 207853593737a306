// echo-load — a kernel-TCP load generator for RFC 862 echo servers.
//
// Drives any echo server (crescent-echo, kernel-echo) the same way, so the
// main job compares like with like:
//   rr      each connection sends a `--size` message, waits for the whole echo,
//           records the round-trip latency, repeats (iodepth 1 per connection)
//   stream  each connection keeps `--window` bytes in flight and verifies the echo
// Every echoed byte is checked against the pattern that was sent. With
// `--busy-poll` the client spins on epoll_wait(0) instead of sleeping, like the
// user-space server it is measuring. Prints one JSON line with the results.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::string host = "127.0.0.1";
    uint16_t port = 7;
    unsigned conns = 1;
    size_t size = 64;
    double duration = 3.0;
    bool stream = false;
    size_t window = 256 * 1024;
    bool busy_poll = false;
    std::string label;
};

[[noreturn]] void usage(const char* msg) {
    std::fprintf(stderr,
                 "echo-load: %s\n"
                 "usage: echo-load --host IP --port P [--conns N] [--size BYTES] [--duration SEC]\n"
                 "                 [--mode rr|stream] [--window BYTES] [--busy-poll] [--label TEXT]\n",
                 msg);
    std::exit(2);
}

unsigned long parse_num(std::string_view flag, const char* v, unsigned long lo, unsigned long hi) {
    char* end = nullptr;
    errno = 0;
    unsigned long n = std::strtoul(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
        usage(fmt::format("{} wants an integer in [{}, {}], got '{}'", flag, lo, hi, v).c_str());
    return n;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        auto val = [&]() -> const char* {
            if (i + 1 >= argc) usage(fmt::format("{} needs a value", a).c_str());
            return argv[++i];
        };
        if (a == "--host") o.host = val();
        else if (a == "--port") o.port = uint16_t(parse_num(a, val(), 1, 65535));
        else if (a == "--conns") o.conns = unsigned(parse_num(a, val(), 1, 4096));
        else if (a == "--size") o.size = parse_num(a, val(), 1, 64u << 20);
        else if (a == "--window") o.window = parse_num(a, val(), 1, 64u << 20);
        else if (a == "--duration") {
            const char* v = val();
            char* end = nullptr;
            o.duration = std::strtod(v, &end);
            if (end == v || *end || o.duration <= 0 || o.duration > 3600) usage("--duration wants seconds in (0, 3600]");
        } else if (a == "--mode") {
            std::string_view m = val();
            if (m == "rr") o.stream = false;
            else if (m == "stream") o.stream = true;
            else usage(fmt::format("--mode is rr or stream, got '{}'", m).c_str());
        } else if (a == "--busy-poll") o.busy_poll = true;
        else if (a == "--label") o.label = val();
        else usage(fmt::format("unknown option '{}'", a).c_str());
    }
    in_addr tmp{};
    if (inet_pton(AF_INET, o.host.c_str(), &tmp) != 1) usage(fmt::format("--host '{}' is not an IPv4 address", o.host).c_str());
    return o;
}

inline uint8_t pattern(uint64_t off) { return uint8_t((off * 2654435761u) >> 13); }

struct Conn {
    int fd = -1;
    uint64_t sent = 0;      // bytes written
    uint64_t received = 0;  // bytes echoed back and verified
    uint64_t msg_end = 0;   // rr: received offset that completes the current message
    Clock::time_point t0;
};

} // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(o.port);
    inet_pton(AF_INET, o.host.c_str(), &sa.sin_addr);

    int ep = epoll_create1(0);
    std::vector<Conn> conns(o.conns);
    for (unsigned i = 0; i < o.conns; ++i) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        timeval tv{5, 0};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv); // bounds a connect to a dead server
        if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
            std::fprintf(stderr, "echo-load: connect to %s:%u failed: %s\n", o.host.c_str(), o.port, std::strerror(errno));
            return 1;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        conns[i].fd = fd;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT;
        ev.data.u32 = i;
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }

    std::vector<uint8_t> txbuf(std::max<size_t>(o.size, 64 * 1024) + 4096), rxbuf(256 * 1024);
    std::vector<uint32_t> lat_ns;
    lat_ns.reserve(1 << 20);
    uint64_t completed = 0, verified_bytes = 0, mismatches = 0;
    const size_t inflight_cap = o.stream ? o.window : o.size;

    auto fill = [&](uint64_t off, size_t n) {
        for (size_t k = 0; k < n; ++k) txbuf[k] = pattern(off + k);
    };
    auto pump_tx = [&](Conn& c) -> bool {
        // rr: write the rest of the current message; stream: keep `window` in flight.
        uint64_t limit = o.stream ? c.received + inflight_cap : c.msg_end;
        while (c.sent < limit) {
            size_t n = size_t(std::min<uint64_t>(limit - c.sent, 64 * 1024));
            fill(c.sent, n);
            ssize_t w = ::send(c.fd, txbuf.data(), n, MSG_NOSIGNAL);
            if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
            c.sent += uint64_t(w);
        }
        return true;
    };

    auto start = Clock::now();
    auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration));
    for (auto& c : conns) {
        c.msg_end = o.size;
        c.t0 = Clock::now();
        if (!pump_tx(c)) { std::fprintf(stderr, "echo-load: send failed: %s\n", std::strerror(errno)); return 1; }
    }
    std::vector<epoll_event> evs(64);
    bool failed = false;
    while (!failed) {
        auto now = Clock::now();
        if (now >= deadline) break;
        int n = epoll_wait(ep, evs.data(), int(evs.size()), o.busy_poll ? 0 : 10);
        for (int e = 0; e < n; ++e) {
            Conn& c = conns[evs[size_t(e)].data.u32];
            if (evs[size_t(e)].events & (EPOLLERR | EPOLLHUP)) {
                std::fprintf(stderr, "echo-load: connection error/hangup\n");
                failed = true;
                break;
            }
            for (;;) {
                ssize_t r = ::recv(c.fd, rxbuf.data(), rxbuf.size(), 0);
                if (r == 0) { std::fprintf(stderr, "echo-load: server closed the connection\n"); failed = true; break; }
                if (r < 0) {
                    if (errno != EAGAIN && errno != EWOULDBLOCK) { std::perror("echo-load: recv"); failed = true; }
                    break;
                }
                for (ssize_t k = 0; k < r; ++k)
                    if (rxbuf[size_t(k)] != pattern(c.received + uint64_t(k))) { ++mismatches; break; }
                c.received += uint64_t(r);
                verified_bytes += uint64_t(r);
                if (!o.stream) {
                    while (c.received >= c.msg_end) {
                        auto t = Clock::now();
                        lat_ns.push_back(uint32_t(std::min<int64_t>(
                            std::chrono::duration_cast<std::chrono::nanoseconds>(t - c.t0).count(), UINT32_MAX)));
                        ++completed;
                        c.t0 = t;
                        c.msg_end += o.size;
                    }
                }
            }
            if (!pump_tx(c)) { std::perror("echo-load: send"); failed = true; }
        }
    }
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    std::sort(lat_ns.begin(), lat_ns.end());
    auto pct = [&](double p) -> double {
        if (lat_ns.empty()) return 0;
        return lat_ns[std::min(lat_ns.size() - 1, size_t(p * double(lat_ns.size())))] / 1000.0;
    };
    std::printf("{\"label\":\"%s\",\"mode\":\"%s\",\"conns\":%u,\"size\":%zu,\"seconds\":%.3f,"
                "\"rps\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"mbit_s\":%.1f,"
                "\"mismatches\":%llu,\"ok\":%s}\n",
                o.label.c_str(), o.stream ? "stream" : "rr", o.conns, o.size, secs, double(completed) / secs,
                pct(0.50), pct(0.99), pct(0.999), double(verified_bytes) * 8 / secs / 1e6,
                (unsigned long long)mismatches, (!failed && mismatches == 0 && verified_bytes > 0) ? "true" : "false");
    for (auto& c : conns) ::close(c.fd);
    return (!failed && mismatches == 0 && verified_bytes > 0) ? 0 : 1;
}
