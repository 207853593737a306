// crescent — the DPDK side of the stack/dev netns tests (driven by dev_netns.py).
//
//   dev_netns_helper steer --iface IF --port P [--seconds S] [--prefix X]
//       AF_XDP on IF with the steering program, TCP port P steered. Prints
//       READY, then one line per received frame:
//         RX TCP <src>:<sport> -> <dst>:<dport> flags=<hex>   (parsed by stack/wire)
//         RX OTHER ethertype=0x.... drop=<wire drop reason>
//       until SIGINT/SIGTERM or S seconds, then the STEER / PORT counters.
//       --zbuf: RX pool laid over a zbuf arena (af_xdp umem layout); each
//       frame is also turned into a zbuf Slice (RX ... zbuf=1).
//   dev_netns_helper tx --iface IF --src-ip A --dst-ip B --dst-mac M --dport U
//                      [--count N] [--seconds S] [--prefix X] [--files]
//       Sends N UDP datagrams "crescent-tx <i>" built as a header mbuf chained
//       to a payload mbuf (so a port without MULTI_SEGS exercises linearize),
//       then waits for SIGINT or S seconds. --files: no --in-memory (hugepage
//       files exist while running; the test checks they are gone afterwards).
//   dev_netns_helper start --iface IF [--eal "ARGS"]   start and exit (error paths)
//
// Exit status: 0 ok, 1 start-up error (the one-line Status on stderr), 2 usage.
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <rte_ether.h>
#include <rte_mbuf.h>

#include "stack/dev/runtime.hpp"
#include "stack/wire/wire.hpp"
#include "zbuf/dpdk.hpp"

namespace dev = crescent::dev;
namespace wire = crescent::wire;

namespace {

struct Args {
    std::string mode, iface, src_ip, dst_ip, dst_mac, prefix, eal;
    uint16_t port = 0, dport = 0;
    unsigned count = 10, seconds = 20;
    bool files = false;
    bool zbuf = false;
};

int usage() {
    std::fprintf(stderr, "usage: dev_netns_helper steer|tx|start --iface IF [options] (see the source)\n");
    return 2;
}

bool parse_args(int argc, char** argv, Args* a) {
    if (argc < 2) return false;
    a->mode = argv[1];
    for (int i = 2; i < argc; i++) {
        std::string k = argv[i];
        auto val = [&]() -> std::string { return i + 1 < argc ? argv[++i] : std::string(); };
        if (k == "--iface") a->iface = val();
        else if (k == "--port") a->port = uint16_t(std::stoul(val()));
        else if (k == "--dport") a->dport = uint16_t(std::stoul(val()));
        else if (k == "--src-ip") a->src_ip = val();
        else if (k == "--dst-ip") a->dst_ip = val();
        else if (k == "--dst-mac") a->dst_mac = val();
        else if (k == "--count") a->count = unsigned(std::stoul(val()));
        else if (k == "--seconds") a->seconds = unsigned(std::stoul(val()));
        else if (k == "--prefix") a->prefix = val();
        else if (k == "--eal") a->eal = val();
        else if (k == "--files") a->files = true;
        else if (k == "--zbuf") a->zbuf = true;
        else return false;
    }
    return true;
}

std::string ip_str(wire::Ipv4Addr a) {
    return std::to_string(a.v >> 24) + "." + std::to_string((a.v >> 16) & 255) + "." +
           std::to_string((a.v >> 8) & 255) + "." + std::to_string(a.v & 255);
}

bool parse_ip(const std::string& s, wire::Ipv4Addr* out) {
    in_addr a{};
    if (inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
    out->v = ntohl(a.s_addr);
    return true;
}

bool parse_mac(const std::string& s, wire::MacAddr* out) {
    unsigned b[6];
    if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) return false;
    for (int i = 0; i < 6; i++) out->b[size_t(i)] = uint8_t(b[i]);
    return true;
}

bool wait_or_stop(std::chrono::steady_clock::time_point deadline) {
    return !dev::Runtime::stop_requested() && std::chrono::steady_clock::now() < deadline;
}

void print_stats(dev::Runtime& rt, dev::Port& port) {
    dev::PortStats ps = port.stats();
    std::printf("PORT rx=%lu tx=%lu tx_full_retries=%lu linearized=%lu rx_nombuf=%lu imissed=%lu\n",
                (unsigned long)ps.queues.rx_packets, (unsigned long)ps.queues.tx_packets,
                (unsigned long)ps.queues.tx_full_retries, (unsigned long)ps.queues.linearized,
                (unsigned long)ps.dev.rx_nombuf, (unsigned long)ps.dev.imissed);
    if (const auto* s = rt.steering()) {
        auto st = s->stats();
        std::printf("STEER prog=%u redirected=%lu passed=%lu\n", s->prog_id(), (unsigned long)st.redirected(),
                    (unsigned long)st.passed());
    }
    std::fflush(stdout);
}

int run_steer(dev::Runtime& rt, dev::Port& port, const Args& a) {
    dev::Queue& q = port.queue(0);
    std::printf("READY port=%u driver=%s mtu=%u offloads: %s\n", port.id(), port.driver().c_str(), port.mtu(),
                port.offloads().describe().c_str());
    std::fflush(stdout);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.seconds);
    rte_mbuf* pkts[32];
    while (wait_or_stop(deadline)) {
        uint16_t n = q.rx_burst(pkts, 32);
        if (n == 0) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            continue;
        }
        for (uint16_t i = 0; i < n; i++) {
            rte_mbuf* m = pkts[i];
            wire::Bytes frame(rte_pktmbuf_mtod(m, const std::byte*), rte_pktmbuf_data_len(m));
            wire::Frame f;
            wire::Drop d = wire::parse_frame(frame, dev::rx_offload(m), &f);
            if (d == wire::Drop::None) {
                std::printf("RX TCP %s:%u -> %s:%u flags=0x%02x%s", ip_str(f.ip.src).c_str(), f.tcp.src_port,
                            ip_str(f.ip.dst).c_str(), f.tcp.dst_port, f.tcp.flags,
                            a.zbuf ? " zbuf=" : "");
            } else {
                unsigned et = frame.size() >= 14 ? (unsigned(frame[12]) << 8 | unsigned(frame[13])) : 0;
                std::printf("RX OTHER ethertype=0x%04x drop=%s%s", et, std::string(wire::drop_name(d)).c_str(),
                            a.zbuf ? " zbuf=" : "");
            }
            if (a.zbuf) {
                // Zero-copy hand-over: the frame as a Slice of a zbuf obj.
                crescent::zbuf::Slice s = crescent::zbuf::dpdk::rx_slice(m);
                std::printf("%d\n", s && s.size() == frame.size() && s.data() == frame.data() ? 1 : 0);
                if (!s) rte_pktmbuf_free(m);
            } else {
                std::printf("\n");
                rte_pktmbuf_free(m);
            }
        }
        std::fflush(stdout);
    }
    print_stats(rt, port);
    return 0;
}

// Ethernet + IPv4 + UDP header for `payload_len` bytes of payload into hdr.
size_t build_udp_header(std::span<std::byte> hdr, const wire::EthRepr& eth, wire::Ipv4Repr ip, uint16_t sport,
                        uint16_t dport, wire::Bytes payload) {
    constexpr uint8_t kUdp = 17;
    size_t eth_len = wire::eth_header_len(eth);
    ip.protocol = kUdp;
    ip.payload_len = uint16_t(8 + payload.size());
    wire::emit_eth(eth, hdr.subspan(0, eth_len));
    wire::emit_ipv4(ip, hdr.subspan(eth_len, wire::kIpv4HeaderLen));
    std::byte* u = hdr.data() + eth_len + wire::kIpv4HeaderLen;
    auto put16 = [](std::byte* p, uint16_t v) { p[0] = std::byte(v >> 8); p[1] = std::byte(v & 255); };
    put16(u, sport);
    put16(u + 2, dport);
    put16(u + 4, ip.payload_len);
    put16(u + 6, 0);
    uint32_t sum = wire::pseudo_header_sum(ip.src, ip.dst, kUdp, ip.payload_len);
    sum = wire::csum_partial(wire::Bytes(u, 8), sum);
    sum = wire::csum_partial(payload, sum);
    uint16_t c = wire::csum_fold(sum);
    put16(u + 6, c == 0 ? 0xffff : c);
    return eth_len + wire::kIpv4HeaderLen + 8;
}

int run_tx(dev::Runtime& rt, dev::Port& port, const Args& a) {
    dev::Queue& q = port.queue(0);
    wire::EthRepr eth;
    wire::Ipv4Repr ip;
    if (!parse_mac(a.dst_mac, &eth.dst) || !parse_ip(a.src_ip, &ip.src) || !parse_ip(a.dst_ip, &ip.dst)) {
        std::fprintf(stderr, "dev_netns_helper: bad --dst-mac/--src-ip/--dst-ip\n");
        return 2;
    }
    rte_ether_addr mac = port.mac();
    std::memcpy(eth.src.b.data(), mac.addr_bytes, 6);
    std::printf("READY port=%u driver=%s multi_segs=%d\n", port.id(), port.driver().c_str(),
                int(port.offloads().multi_segs));
    std::fflush(stdout);
    unsigned queued = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.seconds);
    for (unsigned i = 0; i < a.count && wait_or_stop(deadline);) {
        std::string text = "crescent-tx " + std::to_string(i);
        rte_mbuf* h = q.alloc_tx();
        rte_mbuf* p = q.alloc_tx();
        if (!h || !p) {
            rte_pktmbuf_free(h);
            rte_pktmbuf_free(p);
            q.flush();
            continue;
        }
        char* pd = rte_pktmbuf_append(p, uint16_t(text.size()));
        std::memcpy(pd, text.data(), text.size());
        wire::Bytes payload(reinterpret_cast<const std::byte*>(pd), text.size());
        char* hd = rte_pktmbuf_append(h, 14 + 20 + 8);
        size_t hl = build_udp_header(std::span<std::byte>(reinterpret_cast<std::byte*>(hd), 42), eth, ip, 40000,
                                     a.dport, payload);
        if (hl != 42 || rte_pktmbuf_chain(h, p) != 0) {
            std::fprintf(stderr, "dev_netns_helper: frame build failed\n");
            return 1;
        }
        dev::TxResult r = q.tx_enqueue(h);
        if (r != dev::TxResult::Queued) {
            rte_pktmbuf_free(h);
            q.flush();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        ++queued;
        ++i;
        if (i % 8 == 0) q.flush();
    }
    while (q.tx_pending() > 0 && wait_or_stop(deadline)) {
        q.flush();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::printf("SENT %u\n", queued);
    print_stats(rt, port);
    // Stay up (the test looks at the files of a running process) until told.
    while (wait_or_stop(deadline)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    Args a;
    try {
        if (!parse_args(argc, argv, &a)) return usage();
    } catch (const std::exception&) {
        return usage();
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    dev::RuntimeConfig cfg;
    if (!a.eal.empty()) {
        cfg.mode = dev::RuntimeConfig::Mode::Eal;
        std::istringstream in(a.eal);
        for (std::string w; in >> w;) cfg.eal_args.push_back(w);
    } else {
        cfg.iface = a.iface;
    }
    cfg.file_prefix = a.prefix;
    cfg.in_memory = !a.files;
    if (a.port != 0) cfg.steer_ports.push_back({a.port, a.port});

    std::unique_ptr<dev::Runtime> rt;
    if (dev::Status st = dev::Runtime::start(cfg, &rt); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
    }
    dev::PortConfig pcfg;
    pcfg.rx_desc = 512;
    pcfg.tx_desc = 512;
    std::unique_ptr<crescent::zbuf::Arena> arena;
    if (a.zbuf) {
        crescent::zbuf::Config zc;
        zc.bytes = 64u << 20;
        std::string err;
        arena = crescent::zbuf::dpdk::create_arena(zc, &err);
        if (!arena) {
            std::fprintf(stderr, "dev_netns_helper: zbuf arena: %s\n", err.c_str());
            return 1;
        }
        pcfg.rx_arena = arena.get();
    }
    dev::Port* port = nullptr;
    if (dev::Status st = rt->open_port(rt->default_port(), pcfg, &port); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
    }
    dev::LinkStatus link = port->wait_link_up(2000);
    std::printf("LINK up=%d speed=%u\n", int(link.up), link.speed_mbps);
    int rc = 2;
    if (a.mode == "steer") rc = run_steer(*rt, *port, a);
    else if (a.mode == "tx") rc = run_tx(*rt, *port, a);
    else if (a.mode == "start") rc = 0;
    else usage();
    // Ports (their pools) -> arena -> EAL.
    rt->close_ports();
    arena.reset();
    return rc;
}
