// crescent — the engine Device over a stack/dev port queue pair.
#pragma once

#include "stack/dev/port.hpp"
#include "stack/engine/device.hpp"

namespace crescent::engine {

class QueueDevice final : public Device {
public:
    QueueDevice(dev::Port& port, dev::Queue& q) : q_(q) {
        const dev::Offloads& o = q.offloads();
        caps_.multi_segs = o.multi_segs;
        caps_.tx_ip_csum = o.tx_ipv4_csum;
        caps_.tx_tcp_csum = o.tx_tcp_csum;
        caps_.rx_csum = o.rx_ipv4_csum && o.rx_tcp_csum;
        caps_.tso = o.tso;
        caps_.max_segs = o.max_segs;
        caps_.max_tso_segs = o.max_tso_segs;
        caps_.mtu = port.mtu();
        caps_.tx_syscall = port.driver() == "net_af_xdp";
        rte_ether_addr a = port.mac();
        for (int i = 0; i < 6; ++i) mac_.b[i] = a.addr_bytes[i];
    }
    uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) override { return q_.rx_burst(pkts, n); }
    // The queue batches and keeps what the ring refuses; we hand it frames
    // until it is full, then burst once.
    uint16_t tx_burst(rte_mbuf** pkts, uint16_t n) override {
        uint16_t i = 0;
        for (; i < n; ++i) {
            dev::TxResult r = q_.tx_enqueue(pkts[i]);
            if (r == dev::TxResult::Queued) continue;
            if (r == dev::TxResult::TooBig) {  // cannot ever go out: counted by the queue
                rte_pktmbuf_free(pkts[i]);
                continue;
            }
            break;  // Full / NoMbuf: the engine keeps the rest for the next iteration
        }
        q_.flush();
        return i;
    }
    bool tx_pending() const override { return q_.tx_pending() != 0; }
    void flush() override { q_.flush(); }
    const DeviceCaps& caps() const override { return caps_; }
    rte_mempool* tx_pool() override { return q_.tx_pool(); }
    wire::MacAddr mac() const override { return mac_; }

private:
    dev::Queue& q_;
    DeviceCaps caps_;
    wire::MacAddr mac_;
};

} // namespace crescent::engine
