// crescent — the device and next hop of an engine that has no device
// (RuntimeOptions::kernel_only): it serves kernel sockets in its epoll set and
// its timers, and never sees a frame. The engine stays callable as usual:
// poll_once() polls an empty queue, connect() finds no route (NoRoute,
// counted in drop_no_route), and listen() is refused by the engine itself.
//
// Both are stateless: one instance serves every engine of the process.
#pragma once

#include "stack/engine/device.hpp"
#include "stack/engine/nexthop.hpp"

namespace crescent::engine {

class NullDevice final : public Device {
public:
    uint16_t rx_burst(rte_mbuf**, uint16_t) override { return 0; }
    // Nothing is ever built for it (no connection exists); a frame that came
    // anyway is not taken, and stays with the caller to free.
    uint16_t tx_burst(rte_mbuf**, uint16_t) override { return 0; }
    const DeviceCaps& caps() const override { return caps_; }
    rte_mempool* tx_pool() override { return nullptr; }  // no frames: no pool
    wire::MacAddr mac() const override { return {}; }

    static NullDevice& instance() {
        static NullDevice d;
        return d;
    }

private:
    DeviceCaps caps_{};
};

class NullNextHop final : public NextHop {
public:
    Resolve resolve(wire::Ipv4Addr, Instant, wire::MacAddr*) override { return Resolve::NoRoute; }

    static NullNextHop& instance() {
        static NullNextHop n;
        return n;
    }
};

} // namespace crescent::engine
