// crescent — bench_l2echo: raw packet reflector on a DPDK port, the
// "raw packet echo" baseline for the stack's benchmarks (no TCP, no copies).
//
//   bench_l2echo --iface IF --port P[-Q] [--queues N] [--seconds S] [--burst B]
//   bench_l2echo --eal "EAL ARGS" [--seconds S] [--burst B]
//
// Every received frame goes back out of the queue it came from with the
// Ethernet addresses swapped and, for IPv4 (TCP/UDP), the IP addresses and
// ports swapped (checksums stay valid: the sums are symmetric). With --iface,
// AF_XDP + the steering program: TCP to ports P..Q reaches the reflector,
// everything else stays with the kernel. Prints RX/TX packets per second each
// second and totals at the end (SIGINT/SIGTERM or S seconds). One thread
// polls every queue (a baseline, not a scaling test).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "stack/dev/runtime.hpp"

namespace dev = crescent::dev;

namespace {

// Swap L2 (and L3/L4 for IPv4 TCP/UDP) addresses in place.
void reflect(rte_mbuf* m) {
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    if (rte_pktmbuf_data_len(m) < sizeof(rte_ether_hdr)) return;
    rte_ether_addr mac = eth->src_addr;
    eth->src_addr = eth->dst_addr;
    eth->dst_addr = mac;
    if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) return;
    if (rte_pktmbuf_data_len(m) < sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr)) return;
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
    rte_be32_t src = ip->src_addr; // packed fields: no references
    ip->src_addr = ip->dst_addr;
    ip->dst_addr = src;
    size_t ihl = size_t(ip->version_ihl & 0x0f) * 4;
    if ((ip->next_proto_id == IPPROTO_TCP || ip->next_proto_id == IPPROTO_UDP) &&
        rte_pktmbuf_data_len(m) >= sizeof(rte_ether_hdr) + ihl + 4) {
        uint8_t* l4 = reinterpret_cast<uint8_t*>(ip) + ihl;
        uint8_t sport[2];
        std::memcpy(sport, l4, 2);
        std::memmove(l4, l4 + 2, 2);
        std::memcpy(l4 + 2, sport, 2);
    }
}

} // namespace

int main(int argc, char** argv) {
    dev::RuntimeConfig cfg;
    unsigned seconds = 10, burst = 32;
    for (int i = 1; i < argc; i++) {
        std::string k = argv[i];
        std::string v = i + 1 < argc ? argv[i + 1] : "";
        if (k == "--iface") { cfg.iface = v; i++; }
        else if (k == "--eal") {
            cfg.mode = dev::RuntimeConfig::Mode::Eal;
            std::istringstream in(v);
            for (std::string w; in >> w;) cfg.eal_args.push_back(w);
            i++;
        } else if (k == "--port") {
            unsigned lo = 0, hi = 0;
            int n = std::sscanf(v.c_str(), "%u-%u", &lo, &hi);
            if (n < 1 || lo == 0 || lo > 65535) { std::fprintf(stderr, "bench_l2echo: bad --port %s\n", v.c_str()); return 2; }
            if (n == 1) hi = lo;
            cfg.steer_ports.push_back({uint16_t(lo), uint16_t(hi)});
            i++;
        } else if (k == "--queues") { cfg.queues = uint16_t(std::stoul(v)); i++; }
        else if (k == "--seconds") { seconds = unsigned(std::stoul(v)); i++; }
        else if (k == "--burst") { burst = std::min(256u, unsigned(std::stoul(v))); i++; }
        else {
            std::fprintf(stderr, "usage: bench_l2echo --iface IF --port P[-Q] [--queues N] | --eal \"ARGS\"; "
                                 "[--seconds S] [--burst B]\n");
            return 2;
        }
    }
    std::unique_ptr<dev::Runtime> rt;
    if (dev::Status st = dev::Runtime::start(cfg, &rt); !st) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
    }
    dev::PortConfig pc;
    pc.queues = cfg.mode == dev::RuntimeConfig::Mode::Iface ? cfg.queues : 1;
    dev::Port* port = nullptr;
    if (dev::Status st = rt->open_port(rt->default_port(), pc, &port); !st) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
    }
    port->wait_link_up(2000);
    std::printf("bench_l2echo: port %s (%s), %zu queue(s), burst %u, for %u s\n", port->name().c_str(),
                port->driver().c_str(), port->queue_count(), burst, seconds);
    std::fflush(stdout);

    using clock = std::chrono::steady_clock;
    auto start = clock::now(), last = start, end = start + std::chrono::seconds(seconds);
    uint64_t last_rx = 0, last_tx = 0;
    std::vector<rte_mbuf*> pkts(burst);
    while (!dev::Runtime::stop_requested()) {
        for (size_t qi = 0; qi < port->queue_count(); qi++) {
            dev::Queue& q = port->queue(qi);
            uint16_t n = q.rx_burst(pkts.data(), uint16_t(burst));
            for (uint16_t i = 0; i < n; i++) {
                reflect(pkts[i]);
                if (q.tx_enqueue(pkts[i]) != dev::TxResult::Queued) rte_pktmbuf_free(pkts[i]); // counted by the queue
            }
            q.flush();
        }
        auto now = clock::now();
        if (now - last >= std::chrono::seconds(1)) {
            dev::PortStats s = port->stats();
            double dt = std::chrono::duration<double>(now - last).count();
            std::printf("rx %.0f pps, tx %.0f pps\n", double(s.queues.rx_packets - last_rx) / dt,
                        double(s.queues.tx_packets - last_tx) / dt);
            std::fflush(stdout);
            last_rx = s.queues.rx_packets;
            last_tx = s.queues.tx_packets;
            last = now;
            if (now >= end) break;
        }
    }
    dev::PortStats s = port->stats();
    double total = std::chrono::duration<double>(clock::now() - start).count();
    std::printf("total: rx %lu, tx %lu packets in %.1f s (%.0f pps); tx_full_retries %lu, backpressure %lu, "
                "linearized %lu, rx_nombuf %lu, imissed %lu\n",
                (unsigned long)s.queues.rx_packets, (unsigned long)s.queues.tx_packets, total,
                double(s.queues.tx_packets) / total, (unsigned long)s.queues.tx_full_retries,
                (unsigned long)s.queues.tx_backpressure, (unsigned long)s.queues.linearized,
                (unsigned long)s.dev.rx_nombuf, (unsigned long)s.dev.imissed);
    return 0;
}
