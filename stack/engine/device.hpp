// crescent — the engine's view of a NIC queue pair.
//
// The engine never talks to a DPDK port directly: it polls and transmits
// through this interface, so its core runs the same against a real port
// (stack/dev), DPDK's net_ring PMD in a unit test, or anything else that moves
// rte_mbufs. One Device belongs to one engine (one RX and one TX queue).
#pragma once

#include <cstdint>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "stack/wire/wire.hpp"

namespace crescent::engine {

// What the device does for us; decided once at start-up.
struct DeviceCaps {
    bool multi_segs = false;     // TX accepts chained mbufs (RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
    bool tx_ip_csum = false;     // RTE_ETH_TX_OFFLOAD_IPV4_CKSUM
    bool tx_tcp_csum = false;    // RTE_ETH_TX_OFFLOAD_TCP_CKSUM
    bool rx_csum = false;        // RX flags RTE_MBUF_F_RX_*_CKSUM_* are meaningful
    bool tso = false;            // RTE_ETH_TX_OFFLOAD_TCP_TSO (used with multi_segs and both checksums)
    uint16_t max_segs = 0;       // segments per chained frame (nb_mtu_seg_max; 0: no limit)
    uint16_t max_tso_segs = 0;   // segments per TSO request (nb_seg_max; 0: no limit)
    uint16_t mtu = 1500;
    bool tx_syscall = false;     // each TX burst is a system call (AF_XDP's sendto() kick)
};

class Device {
public:
    virtual ~Device() = default;
    // Up to `n` received frames into `pkts`; the caller owns them.
    virtual uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) = 0;
    // Hands up to `n` frames to the NIC; returns how many it took (the caller
    // keeps the rest and retries later).
    virtual uint16_t tx_burst(rte_mbuf** pkts, uint16_t n) = 0;
    // Devices that batch internally: frames accepted by tx_burst but not yet
    // on the wire; flush() retries them (called once per loop iteration).
    virtual bool tx_pending() const { return false; }
    virtual void flush() {}
    virtual const DeviceCaps& caps() const = 0;
    // Pool for TX frames / header mbufs (one per engine, never shared with RX
    // when the PMD computes addresses from the RX pool, e.g. af_xdp).
    virtual rte_mempool* tx_pool() = 0;
    virtual wire::MacAddr mac() const = 0;
};

// A started ethdev port and one queue pair (queue `q` for RX and TX).
class EthdevDevice final : public Device {
public:
    EthdevDevice(uint16_t port, uint16_t queue, rte_mempool* tx_pool, DeviceCaps caps)
        : port_(port), queue_(queue), tx_pool_(tx_pool), caps_(caps) {
        rte_ether_addr a;
        if (rte_eth_macaddr_get(port, &a) == 0)
            for (int i = 0; i < 6; ++i) mac_.b[i] = a.addr_bytes[i];
    }
    uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) override { return rte_eth_rx_burst(port_, queue_, pkts, n); }
    uint16_t tx_burst(rte_mbuf** pkts, uint16_t n) override { return rte_eth_tx_burst(port_, queue_, pkts, n); }
    const DeviceCaps& caps() const override { return caps_; }
    rte_mempool* tx_pool() override { return tx_pool_; }
    wire::MacAddr mac() const override { return mac_; }
    uint16_t port() const { return port_; }

    // Capabilities from rte_eth_dev_info (offloads the engine would use), and
    // the MTU from the port.
    static DeviceCaps query_caps(uint16_t port);

private:
    uint16_t port_, queue_;
    rte_mempool* tx_pool_;
    DeviceCaps caps_;
    wire::MacAddr mac_;
};

} // namespace crescent::engine
