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
#include <vector>

#include <crescent/engine.hpp>

#include "stack/engine/loop_server.hpp"

namespace crescent::engine {

// attach() / detach() / served() / dropped(): LoopServer (loop_server.hpp).
class MetricsServer : public LoopServer {
public:
    // Binds and listens (non-blocking) on bind_ip:port; nullptr and *err (one
    // line) when the address is bad or the port cannot be had.
    static std::unique_ptr<MetricsServer> open(const std::string& bind_ip, uint16_t port, std::string* err);

    uint16_t port() const { return port_; }  // the bound port (port 0 asked: the kernel's choice)

    // The text-format body for `engines`.
    static std::string render(const std::vector<Engine*>& engines);

private:
    MetricsServer(int fd, uint16_t port) : LoopServer(fd), port_(port) {}
    // One request per connection: answers once the head is complete (Client::answered),
    // closes once the reply is out.
    void on_input(int fd, Client& c, uint32_t events, bool eof) override;

    uint16_t port_ = 0;
};

} // namespace crescent::engine
