// crescent — DPDK port set-up, queue pairs, TX batching and linearization.
#include "stack/dev/port.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_version.h>

#include <crescent/log.hpp>

#include "zbuf/dpdk.hpp"

namespace crescent::dev {

namespace {

#ifdef CRESCENT_DEBUG_CHECKS
constexpr bool kDebugChecks = true;
#else
constexpr bool kDebugChecks = false;
#endif

constexpr uint32_t kPoolCache = 256; // per-lcore mempool cache (<= RTE_MEMPOOL_CACHE_MAX_SIZE)
// Ethernet header + one VLAN tag + FCS room on top of the MTU.
constexpr uint32_t kFrameOverhead = RTE_ETHER_HDR_LEN + 4 + RTE_ETHER_CRC_LEN;

std::string rte_err() { return rte_strerror(rte_errno); }

// net_memif in the client role (its default) connects to the server's socket
// when the port starts, and the two processes of a memif bed may start in
// either order. DPDK 22.11's client never reconnects on its own, and two
// things make a start that is too early fail: no socket yet (start fails),
// or a server that has created its socket (at EAL probe) but not yet started
// its port — it answers "ID not found" and disconnects, leaving the link down
// for good. So: start until the connect succeeds, then give the handshake
// (milliseconds once both sides are started) a moment and, while the link is
// still down, stop and start again, all within `wait_ms`.
bool is_memif_client(const rte_eth_dev_info& info) {
    if (info.driver_name == nullptr || std::string_view(info.driver_name) != "net_memif") return false;
    const rte_devargs* da = info.device ? rte_dev_devargs(info.device) : nullptr;
    std::string_view args = da && da->args ? da->args : "";
    return args.find("role=server") == std::string_view::npos && args.find("role=master") == std::string_view::npos;
}

int start_memif_client(uint16_t port_id, const std::string& name, uint32_t wait_ms) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::milliseconds(wait_ms);
    // The PMD logs each refused connect and disconnect: quiet it meanwhile.
    const int logtype = rte_log_register("pmd.net.memif");
    const int level = logtype >= 0 ? rte_log_get_level(uint32_t(logtype)) : -1;
    if (level >= 0) rte_log_set_level(uint32_t(logtype), RTE_LOG_CRIT);
    bool told = false;
    int rc = -1;
    for (;;) {
        rc = rte_eth_dev_start(port_id);
        if (rc == 0) {
            const auto handshake = std::min(deadline, clock::now() + std::chrono::milliseconds(500));
            rte_eth_link l{};
            while (rte_eth_link_get_nowait(port_id, &l) == 0 && l.link_status != RTE_ETH_LINK_UP &&
                   clock::now() < handshake)
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            // Up, or out of time: the caller's link wait reports a link still down.
            if (l.link_status == RTE_ETH_LINK_UP || clock::now() >= deadline) break;
            (void)rte_eth_dev_stop(port_id);  // refused by a server still starting: connect again
            rc = -ECONNREFUSED;
        }
        if (clock::now() >= deadline) break;
        if (!told) {
            log::get("dev")->info("port {} (net_memif client): waiting up to {} ms for the memif server", name, wait_ms);
            told = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (level >= 0) rte_log_set_level(uint32_t(logtype), uint32_t(level));
    return rc;
}

} // namespace

std::string Offloads::describe() const {
    return fmt::format("rx-ipv4-csum={} rx-tcp-csum={} tx-ipv4-csum={} tx-tcp-csum={} tso={} multi-segs={}",
                       rx_ipv4_csum, rx_tcp_csum, tx_ipv4_csum, tx_tcp_csum, tso, multi_segs);
}

rte_mempool* create_rx_pool(const std::string& name, uint32_t n, uint16_t data_room, int socket) {
    return rte_pktmbuf_pool_create(name.c_str(), n, std::min<uint32_t>(kPoolCache, n / 2), 0, data_room, socket);
}

wire::CsumMode set_tx_offload(rte_mbuf* m, const Offloads& off, uint8_t l2_len, uint8_t l3_len,
                              uint8_t l4_len, uint16_t tso_segsz, bool* ip_csum_in_sw) {
    m->l2_len = l2_len;
    m->l3_len = l3_len;
    m->l4_len = l4_len;
    uint64_t f = RTE_MBUF_F_TX_IPV4;
    *ip_csum_in_sw = !off.tx_ipv4_csum;
    if (off.tx_ipv4_csum) f |= RTE_MBUF_F_TX_IP_CKSUM;
    wire::CsumMode mode = wire::CsumMode::Full;
    if (tso_segsz != 0 && off.tso) {
        f |= RTE_MBUF_F_TX_TCP_SEG; // implies the TCP checksum offload
        m->tso_segsz = tso_segsz;
        mode = wire::CsumMode::PseudoOnly;
    } else if (off.tx_tcp_csum) {
        f |= RTE_MBUF_F_TX_TCP_CKSUM;
        mode = wire::CsumMode::PseudoOnly;
    }
    if (f == RTE_MBUF_F_TX_IPV4) f = 0; // nothing offloaded: no flags at all
    m->ol_flags = (m->ol_flags & ~RTE_MBUF_F_TX_OFFLOAD_MASK) | f;
    return mode;
}

// --- Queue -------------------------------------------------------------------

Queue::~Queue() { free_pending(stats_.tx_freed_at_close); }

void Queue::check_owner() {
    if constexpr (kDebugChecks) {
        auto me = std::this_thread::get_id();
        if (owner_ == std::thread::id{}) owner_ = me;
        if (owner_ != me) {
            log::get("dev")->critical("queue {}/{} used from a thread that does not own it", port_id_, id_);
            std::abort();
        }
    }
}

size_t Queue::free_pending(uint64_t& counter) {
    const size_t n = pending_;
    for (size_t i = 0; i < n; i++) rte_pktmbuf_free(batch_[i]);
    counter += n;
    pending_ = prepared_ = 0;
    return n;
}

TxResult Queue::tx_enqueue(rte_mbuf* m) {
    check_owner();
    if (m->nb_segs > 1 && !offloads_->multi_segs) {
        rte_mbuf* flat = linearize(m);
        if (flat == nullptr) {
            return rte_pktmbuf_pkt_len(m) > uint32_t(rte_pktmbuf_data_room_size(frame_pool_) - RTE_PKTMBUF_HEADROOM)
                       ? TxResult::TooBig
                       : TxResult::NoMbuf;
        }
        m = flat;
    }
    if (pending_ == batch_.size()) {
        flush();
        if (pending_ == batch_.size()) {
            stats_.tx_backpressure++;
            return TxResult::Full;
        }
    }
    batch_[pending_++] = m;
    return TxResult::Queued;
}

void Queue::prepare() {
    // Offload requests (checksums, TSO) pass rte_eth_tx_prepare(): the PMD
    // checks them against its limits (segments per frame, TSO sizes) and
    // fixes up what its hardware needs. A no-op for PMDs without the hook.
    const Offloads& o = *offloads_;
    if (!o.tx_ipv4_csum && !o.tx_tcp_csum && !o.tso) {
        prepared_ = pending_;
        return;
    }
    while (prepared_ < pending_) {
        uint16_t want = uint16_t(std::min<size_t>(pending_ - prepared_, UINT16_MAX));
        uint16_t ok = rte_eth_tx_prepare(port_id_, id_, batch_.data() + prepared_, want);
        prepared_ += ok;
        if (ok == want) continue;
        // batch_[prepared_] cannot be sent as it is: drop it, keep the order.
        rte_pktmbuf_free(batch_[prepared_]);
        stats_.tx_prepare_drops++;
        std::memmove(batch_.data() + prepared_, batch_.data() + prepared_ + 1,
                     (pending_ - prepared_ - 1) * sizeof(rte_mbuf*));
        --pending_;
    }
}

uint16_t Queue::flush() {
    check_owner();
    if (pending_ == 0 || closing_since_ != 0) return 0;  // quiet after a memif goodbye
    prepare();
    size_t sent_total = 0;
    // rte_eth_tx_burst takes a uint16_t count; the batch may be larger.
    while (sent_total < prepared_) {
        uint16_t want = uint16_t(std::min<size_t>(prepared_ - sent_total, UINT16_MAX));
        uint16_t sent = rte_eth_tx_burst(port_id_, id_, batch_.data() + sent_total, want);
        for (uint16_t i = 0; i < sent; i++) stats_.tx_bytes += rte_pktmbuf_pkt_len(batch_[sent_total + i]);
        sent_total += sent;
        if (sent < want) break;
    }
    stats_.tx_packets += sent_total;
    prepared_ -= sent_total;
    if (sent_total < pending_) {
        // Ring full: keep the tail, in order, for the next flush.
        stats_.tx_full_retries++;
        std::memmove(batch_.data(), batch_.data() + sent_total, (pending_ - sent_total) * sizeof(rte_mbuf*));
    }
    pending_ -= sent_total;
    return uint16_t(std::min<size_t>(sent_total, UINT16_MAX));
}

rte_mbuf* Queue::linearize(rte_mbuf* chain) {
    uint32_t len = rte_pktmbuf_pkt_len(chain);
    rte_mbuf* m = rte_pktmbuf_alloc(frame_pool_);
    if (m == nullptr) {
        stats_.linearize_nombuf++;
        return nullptr;
    }
    if (len > rte_pktmbuf_tailroom(m)) {
        rte_pktmbuf_free(m);
        stats_.linearize_too_big++;
        return nullptr;
    }
    auto* dst = rte_pktmbuf_mtod(m, uint8_t*);
    uint32_t off = 0;
    for (const rte_mbuf* s = chain; s != nullptr && off < len; s = s->next) {
        uint32_t n = std::min<uint32_t>(s->data_len, len - off);
        std::memcpy(dst + off, rte_pktmbuf_mtod(s, const uint8_t*), n);
        off += n;
    }
    m->data_len = uint16_t(off);
    m->pkt_len = off;
    // Offload metadata travels with the frame.
    m->ol_flags = chain->ol_flags & RTE_MBUF_F_TX_OFFLOAD_MASK;
    m->tx_offload = chain->tx_offload;
    m->packet_type = chain->packet_type;
    m->vlan_tci = chain->vlan_tci;
    rte_pktmbuf_free(chain);
    stats_.linearized++;
    return m;
}

// --- Port ----------------------------------------------------------------------

Status Port::open(uint16_t port_id, const PortConfig& cfg, std::unique_ptr<Port>* out) {
    auto fail = [&](Errc c, std::string msg) { return Status::error(c, "crescent: " + msg); };
    if (!rte_eth_dev_is_valid_port(port_id)) return fail(Errc::BadConfig, fmt::format("no DPDK port {}", port_id));
    if (cfg.queues == 0) return fail(Errc::BadConfig, "a port needs at least one queue pair");

    std::unique_ptr<Port> p(new Port());
    p->port_id_ = port_id;
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    rte_eth_dev_get_name_by_port(port_id, name);
    p->name_ = name;

    rte_eth_dev_info info{};
    if (int rc = rte_eth_dev_info_get(port_id, &info); rc != 0)
        return fail(Errc::DeviceFailed, fmt::format("port {}: cannot read device info: {}", p->name_, rte_strerror(-rc)));
    p->driver_ = info.driver_name ? info.driver_name : "?";
    if (cfg.queues > info.max_rx_queues || cfg.queues > info.max_tx_queues)
        return fail(Errc::BadConfig,
                    fmt::format("port {} ({}) has {} RX / {} TX queues, {} queue pairs asked", p->name_,
                                p->driver_, info.max_rx_queues, info.max_tx_queues, cfg.queues));

    // Offloads: what we want AND what the device has.
    Offloads& off = p->offloads_;
    rte_eth_conf conf{};
    uint64_t rx_capa = info.rx_offload_capa, tx_capa = info.tx_offload_capa;
    if (cfg.csum_offload) {
        off.rx_ipv4_csum = rx_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
        off.rx_tcp_csum = rx_capa & RTE_ETH_RX_OFFLOAD_TCP_CKSUM;
        off.tx_ipv4_csum = tx_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
        off.tx_tcp_csum = tx_capa & RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
        // net_tap "offloads" the L4 checksum in software, summing each
        // segment of a chain on its own: a segment of odd length misaligns
        // the rest, and the kernel drops the frame (TcpInCsumErrors) — every
        // retransmission of it too. Found by engine_interop_tap; DPDK fixed
        // it in 23.11 ("net/tap: fix L4 checksum offloading"). Summing it
        // ourselves costs the same work the PMD would do.
        if (p->driver_ == "net_tap" && RTE_VERSION < RTE_VERSION_NUM(23, 11, 0, 0) && off.tx_tcp_csum) {
            off.tx_tcp_csum = false;
            log::get("dev")->info("port {} (net_tap): TCP checksums computed by crescent (this DPDK's net_tap "
                                  "sums chained segments separately)", p->name_);
        }
    }
    off.multi_segs = tx_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    off.max_segs = info.tx_desc_lim.nb_mtu_seg_max;
    off.max_tso_segs = info.tx_desc_lim.nb_seg_max;
    off.tso = cfg.tso && off.tx_tcp_csum && off.tx_ipv4_csum && (tx_capa & RTE_ETH_TX_OFFLOAD_TCP_TSO) &&
              off.multi_segs;
    if (off.rx_ipv4_csum) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
    if (off.rx_tcp_csum) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_TCP_CKSUM;
    if (off.tx_ipv4_csum) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
    if (off.tx_tcp_csum) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
    if (off.multi_segs) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    if (off.tso) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_TCP_TSO;
    // Several queues: let the NIC spread flows (TCP/IP RSS) if it can. The
    // port plan (bifurcation) refines this with flow rules.
    uint64_t rss = info.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP);
    if (cfg.queues > 1 && rss != 0) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf = rss;
    }

    if (int rc = rte_eth_dev_configure(port_id, cfg.queues, cfg.queues, &conf); rc != 0)
        return fail(Errc::DeviceFailed, fmt::format("port {} ({}): configure failed: {}", p->name_, p->driver_,
                                                    rte_strerror(-rc)));
    p->configured_ = true;

    if (cfg.mtu != 0) {
        if (int rc = rte_eth_dev_set_mtu(port_id, cfg.mtu); rc != 0)
            return fail(Errc::DeviceFailed,
                        fmt::format("port {}: cannot set MTU {}: {}", p->name_, cfg.mtu, rte_strerror(-rc)));
    }
    uint16_t mtu = 0;
    if (rte_eth_dev_get_mtu(port_id, &mtu) == 0 && mtu != 0) p->mtu_ = mtu;

    uint16_t nb_rx = cfg.rx_desc, nb_tx = cfg.tx_desc;
    if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &nb_rx, &nb_tx); rc != 0)
        return fail(Errc::DeviceFailed, fmt::format("port {}: ring sizes: {}", p->name_, rte_strerror(-rc)));

    int socket = rte_eth_dev_socket_id(port_id);
    if (socket < 0) socket = int(SOCKET_ID_ANY);
    uint32_t frame_room = std::max<uint32_t>(RTE_MBUF_DEFAULT_DATAROOM, p->mtu_ + kFrameOverhead);
    auto data_room = uint16_t(std::min<uint32_t>(RTE_PKTMBUF_HEADROOM + frame_room, UINT16_MAX));
    uint32_t rx_pool_n = cfg.rx_pool_size ? cfg.rx_pool_size : 8u * nb_rx;
    uint32_t tx_pool_n = cfg.tx_pool_size ? cfg.tx_pool_size : 2u * nb_tx + 1024u;
    size_t batch = cfg.tx_batch ? cfg.tx_batch : 2u * nb_tx;

    rte_eth_rxconf rxconf = info.default_rxconf;
    rxconf.offloads = conf.rxmode.offloads;
    rte_eth_txconf txconf = info.default_txconf;
    txconf.offloads = conf.txmode.offloads;

    for (uint16_t q = 0; q < cfg.queues; q++) {
        auto queue = std::unique_ptr<Queue>(new Queue(port_id, q, &p->offloads_));
        std::string rx_name = fmt::format("cr_rx_{}_{}", port_id, q);
        if (cfg.rx_arena != nullptr) {
            // Element = objhdr + rte_mbuf + headroom + frame, rounded up to a power of two.
            uint32_t need = zbuf::dpdk::MbufPool::kObjHeader + uint32_t(sizeof(rte_mbuf)) + data_room;
            uint32_t obj = 1024;
            while (obj < need) obj <<= 1;
            zbuf::dpdk::PoolConfig zc;
            zc.name = rx_name;
            zc.mbufs = rx_pool_n;
            zc.obj_size = obj;
            zc.cache_size = std::min<uint32_t>(kPoolCache, rx_pool_n / 2);
            zc.af_xdp_umem = p->driver_ == "net_af_xdp";
            std::string zerr;
            queue->rx_zpool_ = zbuf::dpdk::MbufPool::create(*cfg.rx_arena, zc, &zerr);
            if (!queue->rx_zpool_)
                return fail(Errc::NoMemory,
                            fmt::format("port {}: cannot lay an RX pool of {} x {} B over the zbuf arena: {}",
                                        p->name_, rx_pool_n, obj, zerr));
            queue->rx_pool_ = queue->rx_zpool_->mempool();
        } else {
            queue->rx_pool_ = create_rx_pool(rx_name, rx_pool_n, data_room, socket);
        }
        if (queue->rx_pool_ == nullptr)
            return fail(Errc::NoMemory,
                        fmt::format("port {}: cannot create RX pool of {} mbufs ({}): reserve more hugepages "
                                    "(tools/testbed hugepages 1024) or lower the ring size",
                                    p->name_, rx_pool_n, rte_err()));
        std::string tx_name = fmt::format("cr_tx_{}_{}", port_id, q);
        queue->tx_pool_ = rte_pktmbuf_pool_create(tx_name.c_str(), tx_pool_n,
                                                  std::min<uint32_t>(kPoolCache, tx_pool_n / 2), 0, data_room, socket);
        if (queue->tx_pool_ == nullptr) {
            p->queues_.push_back(std::move(queue)); // so the destructor frees the RX pool
            return fail(Errc::NoMemory,
                        fmt::format("port {}: cannot create TX pool of {} mbufs ({}): reserve more hugepages "
                                    "(tools/testbed hugepages 1024)",
                                    p->name_, tx_pool_n, rte_err()));
        }
        // AF_XDP over a zbuf pool: that pool is the UMEM (zbuf::dpdk::PoolConfig::
        // af_xdp_umem), and a frame built in it goes out without the PMD's copy.
        queue->frame_pool_ = queue->rx_zpool_ && p->driver_ == "net_af_xdp" ? queue->rx_pool_ : queue->tx_pool_;
        queue->batch_.assign(batch, nullptr);
        queue->memif_ = p->driver_ == "net_memif";
        queue->port_name_ = &p->name_;
        rte_eth_macaddr_get(port_id, &queue->mac_);
        p->queues_.push_back(std::move(queue));
        Queue& qq = *p->queues_.back();
        if (int rc = rte_eth_rx_queue_setup(port_id, q, nb_rx, unsigned(socket), &rxconf, qq.rx_pool_); rc != 0)
            return fail(Errc::DeviceFailed, fmt::format("port {} ({}): RX queue {} setup failed: {}", p->name_,
                                                        p->driver_, q, rte_strerror(-rc)));
        if (int rc = rte_eth_tx_queue_setup(port_id, q, nb_tx, unsigned(socket), &txconf); rc != 0)
            return fail(Errc::DeviceFailed, fmt::format("port {} ({}): TX queue {} setup failed: {}", p->name_,
                                                        p->driver_, q, rte_strerror(-rc)));
    }

    const bool memif_wait = is_memif_client(info) && cfg.memif_peer_wait_ms != 0;
    int rc = memif_wait ? start_memif_client(port_id, p->name_, cfg.memif_peer_wait_ms) : rte_eth_dev_start(port_id);
    if (rc != 0)
        return fail(Errc::DeviceFailed,
                    memif_wait
                        ? fmt::format("port {} (net_memif): no memif server answered on the socket within {} ms: "
                                      "start the server side, or check socket= and id= in --vdev",
                                      p->name_, cfg.memif_peer_wait_ms)
                        : fmt::format("port {} ({}): start failed: {}", p->name_, p->driver_, rte_strerror(-rc)));
    p->started_ = true;
    if (cfg.promiscuous) rte_eth_promiscuous_enable(port_id);

    log::get("dev")->info("port {} ({}, {}): {} queue pair(s), rings {}/{}, {} RX pool {} x {} B, MTU {}, {}",
                          port_id, p->name_, p->driver_, cfg.queues, nb_rx, nb_tx,
                          cfg.rx_arena ? "zbuf" : "plain", rx_pool_n, data_room, p->mtu_, off.describe());
    *out = std::move(p);
    return {};
}

Port::~Port() {
    if (started_) {
        say_goodbye();
        int rc = rte_eth_dev_stop(port_id_);
        if (rc != 0) log::get("dev")->warn("port {}: stop: {}", name_, rte_strerror(-rc));
    }
    for (auto& q : queues_) q->free_pending(q->stats_.tx_freed_at_close);
    if (configured_) rte_eth_dev_close(port_id_);
    // The device returned its mbufs at close: the pools can go.
    for (auto& q : queues_) {
        if (q->rx_zpool_) q->rx_zpool_.reset(); // frees its mempool
        else rte_mempool_free(q->rx_pool_);
        rte_mempool_free(q->tx_pool_);
        q->rx_pool_ = q->tx_pool_ = q->frame_pool_ = nullptr;
    }
}

rte_ether_addr Port::mac() const {
    rte_ether_addr a{};
    rte_eth_macaddr_get(port_id_, &a);
    return a;
}

LinkStatus Port::link() const {
    rte_eth_link l{};
    LinkStatus s;
    if (rte_eth_link_get_nowait(port_id_, &l) != 0) return s;
    s.up = l.link_status == RTE_ETH_LINK_UP;
    s.speed_mbps = l.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : l.link_speed;
    s.full_duplex = l.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
    return s;
}

LinkStatus Port::wait_link_up(unsigned timeout_ms) const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    LinkStatus s = link();
    while (!s.up && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        s = link();
    }
    return s;
}

PortStats Port::stats() const {
    PortStats s;
    rte_eth_stats_get(port_id_, &s.dev);
    for (const auto& q : queues_) {
        const QueueStats& x = q->stats();
        s.queues.rx_packets += x.rx_packets;
        s.queues.rx_bytes += x.rx_bytes;
        s.queues.tx_packets += x.tx_packets;
        s.queues.tx_bytes += x.tx_bytes;
        s.queues.tx_full_retries += x.tx_full_retries;
        s.queues.tx_backpressure += x.tx_backpressure;
        s.queues.linearized += x.linearized;
        s.queues.linearize_nombuf += x.linearize_nombuf;
        s.queues.linearize_too_big += x.linearize_too_big;
        s.queues.tx_freed_at_close += x.tx_freed_at_close;
        s.queues.tx_prepare_drops += x.tx_prepare_drops;
        s.queues.peer_goodbyes += x.peer_goodbyes;
        s.queues.tx_freed_peer_gone += x.tx_freed_peer_gone;
    }
    return s;
}

} // namespace crescent::dev
