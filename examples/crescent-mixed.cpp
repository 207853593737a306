// crescent-mixed — one process, one engine, both paths of flow bifurcation
// (Luna §7.2 "kernel traffic in the same loop"):
//
//   * an RFC 862 echo server on --port (default 7) through crescent: the port
//     is in the port plan, so the XDP steering program sends its segments to
//     the engine's AF_XDP queue;
//   * an HTTP/1.0 status endpoint on --http-port (default 8080) through a
//     KERNEL TCP listener on the same interface and IP: the steering program
//     passes that port to the kernel, and the listener (and each HTTP
//     connection) is a non-blocking fd in the engine's epoll set
//     (Engine::add_fd), served from the same loop as the echo connections.
//
//   crescent-mixed --iface IFACE [--port P] [--http-port P] [--file-prefix P]
//                  [--app-slot N --app-slots N] [--no-huge] [--stats] [--show-plan]
//
// GET / answers 200 with a JSON object: echo connections (accepted, active,
// bytes), HTTP requests, and every counter of the engine. Other paths answer
// 404, other methods 405, a request head over 8 KiB 431, and a client that
// sends no complete head within 5 s is disconnected. At most 64 HTTP
// connections at once; more are closed on accept.
//
// --show-plan prints the port plan these options give and exits without
// starting anything (no root needed). Ctrl-C / SIGTERM: the engine stops,
// the kernel sockets are closed, and the runtime removes the XDP program, the
// reserved ports and DPDK's files before exiting.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <crescent/engine.hpp>
#include <crescent/runtime.hpp>

#include "examples/cli.hpp"

namespace {

using namespace crescent;

struct Options {
    RuntimeOptions rt;
    uint16_t port = 7;
    uint16_t http_port = 8080;
    bool stats = false;
    bool show_plan = false;
};

[[noreturn]] void die(const std::string& msg) { examples::fail("crescent-mixed", msg); }

const char* usage =
    "usage: crescent-mixed --iface IFACE [--port P] [--http-port P] [--file-prefix P]\n"
    "                      [--app-slot N --app-slots N] [--no-huge] [--stats] [--show-plan]\n"
    "  echo on --port through crescent (AF_XDP), HTTP/1.0 status (GET /) on --http-port through kernel TCP\n";

Options parse(int argc, char** argv) {
    Options o;
    examples::Cli cli("crescent-mixed", argc, argv, usage);
    while (cli.next()) {
        if (cli.is("--eal")) cli.die("--eal is not supported: crescent-mixed shares a kernel interface (--iface)");
        if (cli.runtime_option(o.rt)) continue;
        if (cli.is("--port")) o.port = uint16_t(cli.number(1, 65535));
        else if (cli.is("--http-port")) o.http_port = uint16_t(cli.number(1, 65535));
        else if (cli.is("--stats")) o.stats = true;
        else if (cli.is("--show-plan")) o.show_plan = true;
        else cli.unknown();
    }
    if (o.rt.iface.empty()) die("--iface IFACE is required (the interface crescent shares with the kernel)");
    if (o.http_port == o.port) die("--http-port " + std::to_string(o.http_port) + " is also the echo --port");
    if (o.http_port >= o.rt.client_port_lo && o.http_port <= o.rt.client_port_hi)
        die("--http-port " + std::to_string(o.http_port) + " is in crescent's client port range " +
            std::to_string(o.rt.client_port_lo) + "-" + std::to_string(o.rt.client_port_hi) +
            ": the kernel would never see it");
    o.rt.cores = 1;
    o.rt.listen_ports.push_back(o.port);
    return o;
}

// ---- echo through crescent ---------------------------------------------------------

class Echo final : public Handler {
public:
    uint64_t accepted = 0, active = 0, bytes = 0;

private:
    struct Pending {
        std::deque<Slice> slices;  // received, not yet accepted by send()
        bool peer_closed = false;
    };
    void on_connected(Conn c) override {
        ++accepted;
        ++active;
        c.set_user(new Pending);
    }
    void on_data(Conn c, std::span<Slice> data) override {
        auto* p = static_cast<Pending*>(c.user());
        size_t n = 0;
        for (const Slice& s : data) n += s.size();
        if (p->slices.empty() && c.send(data) == SendStatus::Ok) {
            bytes += n;
            return;
        }
        for (Slice& s : data)
            if (!s.empty()) p->slices.push_back(std::move(s));
        drain(c, *p);
    }
    void on_writable(Conn c) override { drain(c, *static_cast<Pending*>(c.user())); }
    void on_peer_closed(Conn c) override {
        auto* p = static_cast<Pending*>(c.user());
        p->peer_closed = true;
        drain(c, *p);
    }
    void on_closed(Conn c, CloseReason) override {
        --active;
        delete static_cast<Pending*>(c.user());
        c.set_user(nullptr);
    }
    void drain(Conn c, Pending& p) {
        while (!p.slices.empty()) {
            Slice& s = p.slices.front();
            size_t n = s.size();
            if (c.send(std::span<Slice>(&s, 1)) == SendStatus::Ok) {
                bytes += n;
                p.slices.pop_front();
                continue;
            }
            size_t space = c.send_space();  // refused, on_writable armed: send what fits
            if (space == 0 || space >= n || c.send(s.sub(0, space)) != SendStatus::Ok) return;
            s.remove_prefix(space);
            bytes += space;
        }
        if (p.peer_closed) c.close();
    }
};

// ---- HTTP/1.0 status through kernel TCP, in the engine's epoll set -----------------

class StatusServer {
public:
    static constexpr size_t kMaxHead = 8192;
    static constexpr size_t kMaxClients = 64;
    static constexpr auto kHeadTimeout = std::chrono::seconds(5);

    StatusServer(Engine& e, const Echo& echo, uint16_t echo_port) : e_(e), echo_(echo), echo_port_(echo_port) {}
    ~StatusServer() {
        for (auto& [fd, c] : clients_) {
            e_.remove_fd(fd);
            ::close(fd);
        }
        if (lfd_ >= 0) {
            e_.remove_fd(lfd_);
            ::close(lfd_);
        }
    }
    uint64_t requests = 0, refused = 0;

    // Listen on ip:port (kernel TCP) and register with the engine. "" or the error.
    std::string start(Ipv4 ip, uint16_t port) {
        port_ = port;
        lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (lfd_ < 0) return std::string("socket: ") + std::strerror(errno);
        int one = 1;
        ::setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(ip.v);
        if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || ::listen(lfd_, 128) < 0)
            return "kernel TCP " + ip.to_string() + ":" + std::to_string(port) + ": " + std::strerror(errno);
        if (!e_.add_fd(lfd_, EPOLLIN, [this](uint32_t) { accept_all(); }))
            return "the engine refused the listener fd (no epoll set)";
        return {};
    }

private:
    struct Client {
        std::string in;   // request head so far
        std::string out;  // response not yet written
        size_t off = 0;
        TimerId timer = 0;
        uint64_t gen = 0;
    };

    void accept_all() {
        for (;;) {
            int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) return;  // EAGAIN (drained) or a transient error: the next EPOLLIN retries
            if (clients_.size() >= kMaxClients || !e_.add_fd(fd, EPOLLIN, [this, fd](uint32_t ev) { on_event(fd, ev); })) {
                ++refused;
                ::close(fd);
                continue;
            }
            Client& c = clients_[fd];
            c.gen = ++gen_;
            uint64_t gen = c.gen;
            c.timer = e_.add_timer(kHeadTimeout, [this, fd, gen] {
                auto it = clients_.find(fd);
                if (it != clients_.end() && it->second.gen == gen) {
                    it->second.timer = 0;
                    drop(fd);
                }
            });
        }
    }

    void on_event(int fd, uint32_t ev) {
        auto it = clients_.find(fd);
        if (it == clients_.end()) return;
        Client& c = it->second;
        if (!c.out.empty()) return flush(fd, c);
        char buf[2048];
        for (;;) {
            ssize_t n = ::read(fd, buf, sizeof buf);
            if (n > 0) {
                c.in.append(buf, size_t(n));
                if (c.in.find("\r\n\r\n") != std::string::npos || c.in.find("\n\n") != std::string::npos)
                    return respond(fd, c);
                if (c.in.size() > kMaxHead) return reply(fd, c, 431, "Request Header Fields Too Large", "text/plain",
                                                         "request head over 8 KiB\n");
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                if (ev & (EPOLLHUP | EPOLLERR)) drop(fd);
                return;
            }
            if (n < 0 && errno == EINTR) continue;
            return drop(fd);  // EOF before a complete head, or an error
        }
    }

    void respond(int fd, Client& c) {
        ++requests;
        std::string_view line(c.in);
        line = line.substr(0, line.find_first_of("\r\n"));
        size_t sp1 = line.find(' ');
        size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
        if (sp1 == std::string_view::npos) return reply(fd, c, 400, "Bad Request", "text/plain", "bad request line\n");
        std::string_view method = line.substr(0, sp1);
        std::string_view target = line.substr(sp1 + 1, sp2 == std::string_view::npos ? line.npos : sp2 - sp1 - 1);
        if (method != "GET" && method != "HEAD")
            return reply(fd, c, 405, "Method Not Allowed", "text/plain", "only GET and HEAD\n", method == "HEAD");
        if (target != "/" && target != "/status")
            return reply(fd, c, 404, "Not Found", "text/plain", "try GET /\n", method == "HEAD");
        reply(fd, c, 200, "OK", "application/json", status_json(), method == "HEAD");
    }

    std::string status_json() const {
        std::string j = "{\"engine\":" + std::to_string(e_.index()) + ",\"ip\":\"" + e_.local_ip().to_string() + "\"";
        j += ",\"echo\":{\"port\":" + std::to_string(echo_port_) + ",\"accepted\":" + std::to_string(echo_.accepted) +
             ",\"active\":" + std::to_string(echo_.active) + ",\"bytes\":" + std::to_string(echo_.bytes) + "}";
        j += ",\"http\":{\"port\":" + std::to_string(port_) + ",\"requests\":" + std::to_string(requests) +
             ",\"active\":" + std::to_string(clients_.size()) + ",\"refused\":" + std::to_string(refused) + "}";
        j += ",\"connections\":" + std::to_string(e_.connection_count());
        auto [lo, hi] = e_.client_ports();
        j += ",\"client_ports\":\"" + std::to_string(lo) + "-" + std::to_string(hi) + "\"";
        j += ",\"counters\":{";
        bool first = true;
        e_.stats().for_each([&](std::string_view name, uint64_t v) {
            j += (first ? "\"" : ",\"") + std::string(name) + "\":" + std::to_string(v);
            first = false;
        });
        j += "}}\n";
        return j;
    }

    void reply(int fd, Client& c, int code, const char* reason, const char* type, const std::string& body,
               bool head_only = false) {
        c.out = "HTTP/1.0 " + std::to_string(code) + " " + reason + "\r\nServer: crescent-mixed\r\nContent-Type: " +
                type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
        if (!head_only) c.out += body;
        c.off = 0;
        flush(fd, c);
    }

    void flush(int fd, Client& c) {
        while (c.off < c.out.size()) {
            ssize_t n = ::send(fd, c.out.data() + c.off, c.out.size() - c.off, MSG_NOSIGNAL);
            if (n > 0) {
                c.off += size_t(n);
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                // Wait for room: re-register for EPOLLOUT (the engine has no modify call).
                e_.remove_fd(fd);
                if (!e_.add_fd(fd, EPOLLOUT, [this, fd](uint32_t ev) { on_event(fd, ev); })) drop(fd);
                return;
            }
            return drop(fd);
        }
        ::shutdown(fd, SHUT_WR);  // HTTP/1.0: the response ends with the connection
        drop(fd);
    }

    void drop(int fd) {
        auto it = clients_.find(fd);
        if (it == clients_.end()) return;
        if (it->second.timer) e_.cancel_timer(it->second.timer);
        clients_.erase(it);
        e_.remove_fd(fd);
        ::close(fd);
    }

    Engine& e_;
    const Echo& echo_;
    uint16_t echo_port_;
    uint16_t port_ = 0;
    int lfd_ = -1;
    uint64_t gen_ = 0;
    std::map<int, Client> clients_;
};

} // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    auto rt = examples::start_or_exit("crescent-mixed", o.rt, o.show_plan);

    Echo echo;
    std::unique_ptr<StatusServer> status;
    std::string setup_error;
    rt->run([&](Engine& e) {
        if (e.listen(o.port, echo) != ListenStatus::Ok) {
            setup_error = "echo port " + std::to_string(o.port) + " is already in use";
            rt->stop();
            return;
        }
        status = std::make_unique<StatusServer>(e, echo, o.port);
        setup_error = status->start(rt->local_ip(), o.http_port);
        if (!setup_error.empty()) {
            rt->stop();
            return;
        }
        std::fprintf(stderr, "crescent-mixed: echo on %s:%u through crescent, HTTP status on %s:%u through kernel TCP\n",
                     rt->local_ip().to_string().c_str(), o.port, rt->local_ip().to_string().c_str(), o.http_port);
    });
    if (o.stats) examples::print_engine_stats(rt->engine(0));
    status.reset();  // kernel sockets out of the engine's epoll set before the runtime goes
    if (!setup_error.empty()) {
        std::fprintf(stderr, "crescent-mixed: %s\n", setup_error.c_str());
        return 1;
    }
    return 0;
}
