// crescent — the Runtime's Prometheus endpoint (see metrics_http.hpp): a
// kernel TCP listener served from engine 0's epoll set, answering GET
// /metrics in the text exposition format 0.0.4 from the engines' published
// snapshots (stats_publish.hpp).
#include "stack/engine/metrics_http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include <crescent/rpc/metrics.hpp>

#include "stack/engine/engine_impl.hpp"

namespace crescent::engine {

namespace {

constexpr size_t kMaxHead = 4096;

// One metric family: HELP and TYPE once, then its samples.
struct Family {
    std::string help, type;
    std::string samples;
};

class Text {
public:
    void add(const std::string& name, std::string_view type, std::string_view help, std::string_view labels,
             uint64_t v) {
        auto [it, fresh] = fam_.try_emplace(name);
        if (fresh) {
            order_.push_back(name);
            it->second.help = help;
            it->second.type = type;
        }
        if (labels.empty()) fmt::format_to(std::back_inserter(it->second.samples), "{} {}\n", name, v);
        else fmt::format_to(std::back_inserter(it->second.samples), "{}{{{}}} {}\n", name, labels, v);
    }
    std::string str() const {
        std::string o;
        for (const std::string& n : order_) {
            const Family& f = fam_.at(n);
            fmt::format_to(std::back_inserter(o), "# HELP {} {}\n# TYPE {} {}\n{}", n, f.help, n, f.type, f.samples);
        }
        return o;
    }

private:
    std::vector<std::string> order_;
    std::map<std::string, Family> fam_;
};

// Metric names allow [a-zA-Z0-9_:]; counters names are identifiers already,
// but keep the output valid whatever they become.
std::string metric(std::string_view k) {
    std::string o = "crescent_";
    for (char c : k) o.push_back((std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_');
    return o;
}

std::string reply(std::string_view status, std::string_view type, const std::string& body) {
    return fmt::format("HTTP/1.0 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", status,
                       type, body.size(), body);
}

} // namespace

std::string MetricsServer::render(const std::vector<Engine*>& engines) {
    Text t;
    bool arena_done = false;
    std::vector<ConnSnapshot> recs;
    for (Engine* e : engines) {
        EngineSnapshot s;
        if (!e->impl().publisher().engine(&s)) continue;
        const std::string el = fmt::format("engine=\"{}\"", e->index());
        s.stats.for_each([&](std::string_view k, uint64_t v) {
            t.add(metric(k), "counter", fmt::format("crescent engine counter {}", k), el, v);
        });
        t.add("crescent_busy_loops", "counter", "engine loop iterations that did work", el, s.busy_loops);
        t.add("crescent_connections", "gauge", "TCP control blocks of the engine", el, s.connections);
        t.add("crescent_listeners", "gauge", "listening sockets of the engine", el, s.listeners);
        t.add("crescent_timers_pending", "gauge", "application timers on the engine's wheel", el, s.timers_pending);
        t.add("crescent_kernel_fds", "gauge", "file descriptors in the engine's epoll set", el, s.kernel_fds);
        t.add("crescent_memory_bytes", "gauge", "zbuf memory the engine's core owns (whole 2 MiB zones)", el,
              s.mem_bytes);
        t.add("crescent_memory_limit_bytes", "gauge", "the engine's zbuf memory cap (0 = none)", el,
              s.mem_limit_bytes);
        for (uint32_t c = 0; c < s.zbuf_classes; ++c)
            t.add("crescent_zbuf_live_core", "gauge", "zbuf objects allocated now by the engine's core",
                  fmt::format("{},size=\"{}\"", el, s.zbuf[c].obj_size), s.zbuf[c].live_core);
        ConnTableHead h;
        if (e->impl().publisher().conns(&h, &recs)) {
            std::map<std::string, uint64_t> by_state;
            for (const ConnSnapshot& c : recs) ++by_state[c.state];
            for (const auto& [st, n] : by_state)
                t.add("crescent_connections_by_state", "gauge",
                      "connections and listeners per TCP state (first 4096 of the engine)",
                      fmt::format("{},state=\"{}\"", el, st), n);
        }
        if (!arena_done) {  // the arena is process-wide: once
            arena_done = true;
            for (uint32_t c = 0; c < s.zbuf_classes; ++c) {
                const ZbufClassSnapshot& z = s.zbuf[c];
                const std::string sl = fmt::format("size=\"{}\"", z.obj_size);
                t.add("crescent_zbuf_capacity", "gauge", "zbuf objects in the size class's zones", sl, z.capacity);
                t.add("crescent_zbuf_live", "gauge", "zbuf objects of the size class allocated now", sl, z.live);
                t.add("crescent_zbuf_high_water", "gauge", "most zbuf objects of the size class allocated at once",
                      sl, z.high_water);
                t.add("crescent_zbuf_alloc_failed_total", "counter", "zbuf allocations refused in the size class",
                      sl, z.alloc_failed);
            }
            t.add("crescent_zbuf_zones_total", "gauge", "zbuf arena zones", "", s.zbuf_zones_total);
            t.add("crescent_zbuf_zones_used", "gauge", "zbuf arena zones in use", "", s.zbuf_zones_used);
            t.add("crescent_zbuf_external_live", "gauge", "external buffers wrapped as zbufs now", "",
                  s.zbuf_external_live);
            t.add("crescent_zbuf_alloc_too_large_total", "counter", "zbuf allocations larger than every class", "",
                  s.zbuf_alloc_too_large);
        }
    }
    std::string o = t.str();
    rpc::MetricsRegistry::get().render(o);  // the RPC servers' methods (their own families)
    return o;
}

std::unique_ptr<MetricsServer> MetricsServer::open(const std::string& bind_ip, uint16_t port, std::string* err) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    if (::inet_pton(AF_INET, bind_ip.c_str(), &sa.sin_addr) != 1) {
        if (err) *err = fmt::format("metrics address '{}' is not an IPv4 address", bind_ip);
        return nullptr;
    }
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t len = sizeof sa;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 64) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
        if (err) *err = fmt::format("cannot listen for metrics on {}:{}: {}", bind_ip, port, std::strerror(errno));
        if (fd >= 0) ::close(fd);
        return nullptr;
    }
    return std::unique_ptr<MetricsServer>(new MetricsServer(fd, ntohs(sa.sin_port)));
}

void MetricsServer::on_input(int fd, Client& c, uint32_t events, bool eof) {
    if (!c.answered) {
        size_t end = c.in.find("\r\n\r\n");
        if (end == std::string::npos) end = c.in.find("\n\n");
        if (end == std::string::npos) {
            if (c.in.size() > kMaxHead || eof) {
                ++dropped_;
                return close_client(fd);
            }
            return;  // more of the head to come
        }
        std::string_view line(c.in.data(), c.in.find('\n'));
        if (line.ends_with('\r')) line.remove_suffix(1);
        const size_t sp1 = line.find(' ');
        const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
        const std::string_view method = line.substr(0, sp1);
        std::string_view path = sp1 == std::string_view::npos ? std::string_view{} : line.substr(sp1 + 1, sp2 - sp1 - 1);
        if (size_t q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
        if (method != "GET" && method != "HEAD") c.out = reply("405 Method Not Allowed", "text/plain", "GET only\n");
        else if (path != "/metrics") c.out = reply("404 Not Found", "text/plain", "not found: try /metrics\n");
        else c.out = reply("200 OK", "text/plain; version=0.0.4; charset=utf-8", render(engines()));
        if (method == "HEAD") c.out.erase(c.out.find("\r\n\r\n") + 4);
        c.answered = true;
        c.in.clear();
        ++served_;
    }
    const Flush f = flush(fd, c);
    if (f == Flush::Again && !(events & EPOLLHUP)) return;  // EPOLLOUT resumes
    if (f != Flush::Done) ++dropped_;                        // a send error, or a peer gone with the reply unread
    close_client(fd);  // one request per connection: the reply is out
}

} // namespace crescent::engine
