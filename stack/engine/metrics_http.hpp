// crescent — the Runtime's Prometheus endpoint: an opt-in kernel TCP listener
// (RuntimeOptions::metrics_port / metrics_bind) served from engine 0's epoll
// set (Engine::add_fd) without ever blocking that engine, like the control
// socket (control_socket.hpp).
//
// Protocol: HTTP/1.0 style, one request per connection. "GET /metrics" is
// answered "200 OK" with the Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): for each
// family "# HELP", "# TYPE", then `crescent_<name>{labels} value` lines:
//   crescent_<counter>{engine="i"}          every EngineStats counter (counter)
//   crescent_connections / _listeners / _timers_pending / _kernel_fds /
//   _busy_loops{engine}                     (gauges; busy_loops a counter)
//   crescent_connections_by_state{engine,state}   from the connection table
//   crescent_zbuf_{capacity,live,high_water}{size}   arena gauges,
//   crescent_zbuf_alloc_failed_total{size}  counter
//   crescent_rpc_requests_total / _errors_total / _latency_seconds (histogram)
//     {engine,method}                       every rpc::Server's methods
//                                           (include/crescent/rpc/metrics.hpp)
// Any other path: "404 Not Found"; another method: "405". The reply carries
// Content-Length and the connection is closed after it. Values come from the
// engines' last publications (stats_publish.hpp: 10 ms old at most,
// connections 100 ms). A request head over 4 KiB, a client that does not
// read its reply, or more than 16 clients at once: the client is closed
// (counted in dropped()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <crescent/engine.hpp>

namespace crescent::engine {

class MetricsServer {
public:
    // Binds and listens (non-blocking) on bind_ip:port; nullptr and *err (one
    // line) when the address is bad or the port cannot be had.
    static std::unique_ptr<MetricsServer> open(const std::string& bind_ip, uint16_t port, std::string* err);
    ~MetricsServer();
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    uint16_t port() const { return port_; }  // the bound port (port 0 asked: the kernel's choice)

    // Engine 0's thread: serve from `e0`'s epoll; `engines` (all of them) are
    // only read through their published snapshots. Stops at e0's stop.
    bool attach(Engine& e0, std::vector<Engine*> engines);
    // Engine 0's thread: stop serving (idempotent; also run by e0's at_stop).
    void detach();

    // The text-format body for `engines`.
    static std::string render(const std::vector<Engine*>& engines);

    uint64_t served() const { return served_; }
    uint64_t dropped() const { return dropped_; }

private:
    struct Client {
        std::string in;    // request head so far
        std::string out;   // reply bytes the socket did not take yet
        bool answered = false;
    };
    MetricsServer(int fd, uint16_t port) : lfd_(fd), port_(port) {}
    void on_accept();
    void on_client(int fd, uint32_t events);
    void close_client(int fd);

    int lfd_ = -1;
    uint16_t port_ = 0;
    Engine* e0_ = nullptr;
    std::vector<Engine*> engines_;
    std::unordered_map<int, Client> clients_;
    bool attached_ = false;
    uint64_t served_ = 0, dropped_ = 0;
};

} // namespace crescent::engine
