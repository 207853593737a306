// crescent — a DPDK port and its per-engine queue pairs (issue 4, "stack/dev").
//
// One RX/TX queue pair per engine: `Queue` is touched only by its engine's
// thread (share-nothing; checked when CRESCENT_DEBUG_CHECKS). Per queue:
//   * an RX mbuf pool (zbuf-backed with PortConfig::rx_arena, plain
//     otherwise) sized several times the RX ring, because net_af_xdp
//     keeps its umem fill queue stocked from it (TESTBED.md: 8x);
//   * a TX pool for header mbufs and for linearized frames;
//   * a TX batch: tx_enqueue() appends, flush() (once per loop iteration)
//     bursts it; what the ring does not take stays queued, in order, for the
//     next flush — never dropped, counted in tx_full_retries.
// Devices without RTE_ETH_TX_OFFLOAD_MULTI_SEGS (net_af_xdp) cannot send a
// chain: tx_enqueue() linearizes it into one mbuf (counted).
//
// Offloads: the port enables IPv4/TCP checksum (RX and TX) and TSO when the
// device has them and reports what it got in `Offloads`; the engine sets the
// mbuf flags (set_tx_offload) or computes checksums in software.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "stack/dev/memif_goodbye.hpp"
#include "stack/dev/status.hpp"
#include "stack/wire/wire.hpp"
#include "zbuf/dpdk.hpp"

namespace crescent::dev {

struct PortConfig {
    uint16_t queues = 1;         // queue pairs (engines)
    uint16_t rx_desc = 1024;     // RX ring size per queue (adjusted to the device limits)
    uint16_t tx_desc = 1024;     // TX ring size per queue
    uint32_t rx_pool_size = 0;   // mbufs per RX pool; 0 = 8 * rx_desc (af_xdp fill queue)
    uint32_t tx_pool_size = 0;   // mbufs per TX pool; 0 = 2 * tx_desc + 1024
    uint16_t tx_batch = 0;       // TX batch capacity per queue; 0 = 2 * tx_desc
    uint16_t mtu = 0;            // 0 = keep the device's MTU
    bool csum_offload = true;    // use IPv4/TCP checksum offload when the device has it
    bool tso = true;             // use TSO when the device has it
    bool promiscuous = false;
    // net_memif client role: the port connects to its server's socket when it
    // starts. The two processes of a memif bed may start in either order, so
    // start is retried (and a connection the server refused while it was still
    // starting is made again) for up to this long. 0 = one try. Other drivers
    // and the server role: not used.
    uint32_t memif_peer_wait_ms = 10000;
    // When set, RX pools are zbuf::dpdk::MbufPools over this arena (RX DMA
    // lands in zbuf objs, zbuf::dpdk::rx_slice turns mbufs into Slices; Luna
    // §6.2 step 1) — laid out as an af_xdp umem on net_af_xdp. The arena must
    // outlive the port. nullptr: plain rte_pktmbuf pools.
    zbuf::Arena* rx_arena = nullptr;
};

// What the port actually enabled (device capability AND configuration).
struct Offloads {
    bool rx_ipv4_csum = false; // mbufs carry RTE_MBUF_F_RX_IP_CKSUM_GOOD/BAD
    bool rx_tcp_csum = false;  // mbufs carry RTE_MBUF_F_RX_L4_CKSUM_GOOD/BAD
    bool tx_ipv4_csum = false; // set RTE_MBUF_F_TX_IP_CKSUM, leave the header checksum 0
    bool tx_tcp_csum = false;  // set RTE_MBUF_F_TX_TCP_CKSUM, write the pseudo-header sum
    bool tso = false;          // RTE_MBUF_F_TX_TCP_SEG with tso_segsz
    bool multi_segs = false;   // chained mbufs accepted on TX; else linearize
    uint16_t max_segs = 0;     // segments per chained frame (tx_desc_lim.nb_mtu_seg_max; 0: no limit)
    uint16_t max_tso_segs = 0; // segments per TSO request (tx_desc_lim.nb_seg_max; 0: no limit)
    std::string describe() const;
};

struct LinkStatus {
    bool up = false;
    uint32_t speed_mbps = 0; // 0 when unknown
    bool full_duplex = false;
};

// Per-queue counters (owner thread writes, anyone may read racily for stats).
struct QueueStats {
    uint64_t rx_packets = 0;
    uint64_t rx_bytes = 0;
    uint64_t tx_packets = 0;      // taken by the device
    uint64_t tx_bytes = 0;
    uint64_t tx_full_retries = 0; // flushes that left a tail for the next flush (ring full)
    uint64_t tx_backpressure = 0; // tx_enqueue refused: the batch itself was full
    uint64_t linearized = 0;      // chains copied into one mbuf (no MULTI_SEGS)
    uint64_t linearize_nombuf = 0;// linearize failed: TX pool empty
    uint64_t linearize_too_big = 0;// linearize failed: frame larger than one mbuf
    uint64_t tx_freed_at_close = 0;// queued frames freed when the port closed
    uint64_t tx_prepare_drops = 0; // frames rte_eth_tx_prepare refused (offload request the device cannot do)
    uint64_t peer_goodbyes = 0;    // net_memif: goodbyes received (the peer closed; memif_goodbye.hpp)
    uint64_t tx_freed_peer_gone = 0;// frames queued for a peer that said goodbye, freed
};

enum class TxResult : uint8_t {
    Queued,    // the queue owns the mbuf now
    Full,      // batch full even after a flush attempt: caller still owns the mbuf
    NoMbuf,    // linearize needed but the TX pool is empty: caller still owns it
    TooBig,    // linearize needed but the frame does not fit one mbuf: caller owns it
};

class Port;

// RX/TX queue pair `id` of a port, owned by one engine thread.
class Queue {
public:
    Queue(const Queue&) = delete;
    Queue& operator=(const Queue&) = delete;
    ~Queue();

    uint16_t id() const { return id_; }
    uint16_t port_id() const { return port_id_; }
    const Offloads& offloads() const { return *offloads_; }

    // Poll up to n frames. Each returned mbuf is owned by the caller.
    // net_memif: the frames of the goodbye handshake are taken out here, and
    // after a goodbye the queue stays quiet (memif_goodbye.hpp).
    uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) {
        check_owner();
        if (closing_since_ != 0) [[unlikely]] {
            if (!peer_gone()) return 0;
        }
        uint16_t got = rte_eth_rx_burst(port_id_, id_, pkts, n);
        stats_.rx_packets += got;
        bool control = false;
        for (uint16_t i = 0; i < got; i++) {
            stats_.rx_bytes += rte_pktmbuf_pkt_len(pkts[i]);
            control |= memif_ && memif_goodbye::is_control(pkts[i]);
        }
        if (control) [[unlikely]] got = take_control(pkts, got);
        return got;
    }
    // The peer said goodbye and the queue is quiet until it is gone.
    bool peer_closing() const { return closing_since_ != 0; }

    // Queue a frame for the next flush(). On anything but Queued the caller
    // keeps ownership of `m` (and must retry later or free it, counting it).
    TxResult tx_enqueue(rte_mbuf* m);
    // Burst the batch to the device; the untaken tail stays queued in order.
    // Returns the number of frames the device took.
    uint16_t flush();
    size_t tx_pending() const { return pending_; }
    size_t tx_capacity() const { return batch_.size(); }

    // Copy a chain (header + payload segments) into one mbuf from the TX
    // pool, keeping its offload metadata, and free the chain. nullptr on
    // failure (pool empty / too big), the chain untouched.
    rte_mbuf* linearize(rte_mbuf* chain);
    // A header/frame mbuf from the TX pool (nullptr when empty).
    rte_mbuf* alloc_tx() { return rte_pktmbuf_alloc(frame_pool_); }

    rte_mempool* rx_pool() const { return rx_pool_; }
    // Where frames to send are allocated: the TX pool, or on AF_XDP the
    // UMEM pool itself, so that the PMD hands the frame to the kernel by
    // address instead of copying it into a UMEM buffer of its own.
    rte_mempool* tx_pool() const { return frame_pool_; }
    const QueueStats& stats() const { return stats_; }

    // The thread that may use this queue (default: the first caller).
    void bind_to_current_thread() { owner_ = std::this_thread::get_id(); }

private:
    friend class Port;
    Queue(uint16_t port_id, uint16_t id, const Offloads* off) : port_id_(port_id), id_(id), offloads_(off) {}
    void check_owner();
    // Free the frames queued for the next flush, counted in `counter`; returns how many.
    size_t free_pending(uint64_t& counter);
    // memif_goodbye.cpp: answer control frames (removed from pkts; returns
    // the frames left), and end the quiet once the departed peer is gone.
    uint16_t take_control(rte_mbuf** pkts, uint16_t n);
    bool peer_gone();
    bool send_control(memif_goodbye::Message msg);

    uint16_t port_id_;
    uint16_t id_;
    const Offloads* offloads_;
    rte_mempool* rx_pool_ = nullptr;
    std::unique_ptr<zbuf::dpdk::MbufPool> rx_zpool_; // owns rx_pool_ when zbuf-backed
    rte_mempool* tx_pool_ = nullptr;
    rte_mempool* frame_pool_ = nullptr;  // tx_pool_, or rx_pool_ when it is the AF_XDP UMEM
    // Frames that rte_eth_tx_prepare() refused are dropped (counted).
    void prepare();

    // TX batch: pending_ frames in batch_[0, pending_), oldest first; the
    // first prepared_ of them went through rte_eth_tx_prepare().
    std::vector<rte_mbuf*> batch_;
    size_t pending_ = 0;
    size_t prepared_ = 0;
    QueueStats stats_;
    std::thread::id owner_{};
    // net_memif only (memif_goodbye.hpp).
    bool memif_ = false;
    uint64_t closing_since_ = 0; // TSC of the goodbye; 0: no peer closing (the queue polls)
    uint64_t down_since_ = 0;    // TSC the link was first seen down after it; 0: not yet
    rte_ether_addr mac_{};       // the port's, the source of control frames
    const std::string* port_name_ = nullptr; // for the log (the Port outlives its queues)
};

struct PortStats {
    rte_eth_stats dev{};   // rte_eth_stats_get: ipackets, imissed, ierrors, rx_nombuf, ...
    QueueStats queues{};   // sum over the queues
};

class Port {
public:
    // Configure, set up `cfg.queues` queue pairs, start. Usually called
    // through Runtime::open_port.
    static Status open(uint16_t port_id, const PortConfig& cfg, std::unique_ptr<Port>* out);
    ~Port(); // stop, free queued TX frames, close the device, free the pools
    Port(const Port&) = delete;
    Port& operator=(const Port&) = delete;

    uint16_t id() const { return port_id_; }
    const std::string& name() const { return name_; }
    const std::string& driver() const { return driver_; }
    uint16_t mtu() const { return mtu_; }
    const Offloads& offloads() const { return offloads_; }
    rte_ether_addr mac() const;
    size_t queue_count() const { return queues_.size(); }
    Queue& queue(size_t i) { return *queues_[i]; }

    LinkStatus link() const; // no wait
    // Poll the link until up or `timeout_ms` (bounded). Returns the last status.
    LinkStatus wait_link_up(unsigned timeout_ms) const;

    PortStats stats() const;

    // net_memif: the goodbye on every queue before the port closes, and the
    // wait for the peer's answers (memif_goodbye.hpp). The destructor says it
    // unless it was said already; say it first to learn how it went. Once
    // said, the queues are no longer the engines' (the calling thread owns
    // them). Other drivers: nothing is sent, an empty report.
    struct GoodbyeReport {
        size_t queues = 0;   // goodbyes to say (0: not memif, said already, or no link)
        size_t quiet = 0;    // queues whose peer stopped polling (answered, or closes too)
        size_t answered = 0; // of them, answered our goodbye
    };
    GoodbyeReport say_goodbye();

private:
    Port() = default;
    uint16_t port_id_ = 0;
    std::string name_;
    std::string driver_;
    uint16_t mtu_ = 1500;
    Offloads offloads_;
    std::vector<std::unique_ptr<Queue>> queues_;
    bool started_ = false;
    bool configured_ = false;
    bool said_goodbye_ = false;
};

// --- helpers for the engine ------------------------------------------------

// What the device verified on an RX mbuf, for wire::parse_frame.
inline wire::Offload rx_offload(const rte_mbuf* m) {
    wire::Offload o;
    o.rx_ip_csum_ok = (m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD;
    o.rx_l4_csum_ok = (m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD;
    return o;
}

// Mark an IPv4/TCP frame for the offloads the port has. Returns how the TCP
// checksum must be filled (`PseudoOnly` when the device completes it, `Full`
// otherwise) and whether the IPv4 header checksum must be computed in software
// (*ip_csum_in_sw). tso_segsz > 0 requests TSO (only when offloads.tso).
wire::CsumMode set_tx_offload(rte_mbuf* m, const Offloads& off, uint8_t l2_len, uint8_t l3_len,
                              uint8_t l4_len, uint16_t tso_segsz, bool* ip_csum_in_sw);

// A plain pktmbuf RX pool (PortConfig::rx_arena == nullptr).
rte_mempool* create_rx_pool(const std::string& name, uint32_t n, uint16_t data_room, int socket);

} // namespace crescent::dev
