// crescent — one RX burst through the stack: each frame parsed, its payload
// made a zbuf slice (the RX obj itself, or a copy under pool pressure), and
// handed to TCP; in inline mode the handlers run inside that call.
//
// Output made while a burst is processed (replies, ACKs) normally leaves
// when the burst is done (poll_once: pump, flush_tx). A burst can carry a
// lot of work, though: two segments of 8 RPCs each from one pipelined
// client arrive together, and if the 16 replies wait for each other the
// peer idles while we work and we idle while it works — the two sides take
// turns instead of overlapping. So once the handlers' output has waited
// EngineConfig::burst_flush_after and frames of the burst remain, it is sent
// first (memif 64 B iodepth 16: +17 %, as much as an RX burst of 1 gains,
// without giving up the burst). ACKs alone wait for the burst's end, where
// a later reply may carry them. Not on AF_XDP by default: there each TX
// burst is a sendto() whose kernel work the sender pays whenever it comes,
// so more of them only cost (veth 4 KiB iodepth 16: -12 %).
#include "stack/engine/engine_impl.hpp"

#include <cstring>

#include "zbuf/dpdk.hpp"

namespace crescent::engine {

void EngineImpl::rx(Instant now, uint16_t n) {
    // Zero-copy RX keeps received mbufs alive for as long as the application
    // (or a send queue echoing them) holds the slices. When the RX pool runs
    // low, copy instead, so held payloads can never starve the NIC of
    // buffers (which would stop the ACKs that release them). The pool is
    // looked at after the burst's output has left (check_rx_pool), every
    // kPoolCheckBursts bursts, which a pool of thousands of mbufs cannot
    // drain in between, and after every burst once it is low.
    bool zero_copy = false;
    if (zbuf::contains(rx_pkts_[0])) {
        if (pool_check_countdown_-- == 0) pool_to_check_ = rx_pkts_[0]->pool;
        zero_copy = pool_roomy_;
        if (!zero_copy) ++st_.rx_copy_pressure;
    }
    prefetch_spare();  // the reply's frame: its lines arrive while the burst is parsed
    const bool early_flush = p_.cfg.mode == DispatchMode::Inline && burst_flush_after_ != Duration::max();
    Instant since = now;  // output made since then has not been sent
    for (uint16_t i = 0; i < n; ++i) {
        if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(rx_pkts_[i + 1], void*));
        at_last_frame_ = reply_at_once_ && i + 1 == n;
        rx_one(rx_pkts_[i], now, zero_copy);
        if (early_flush && i + 1 < n && app_output_waiting()) {
            const Instant t = clock_.now();
            if (t - since >= burst_flush_after_) {
                phases_.end(Phase::App);
                pump(now);
                phases_.end(Phase::Output);
                flush_tx();
                phases_.end(Phase::Flush);
                ++st_.tx_early_flushes;
                since = t;
            }
        }
    }
    at_last_frame_ = false;
}

// rte_mempool_avail_count() walks every lcore's cache, RTE_MAX_LCORE (128)
// of them 8 KiB apart, each a cache miss: ~600 cycles (BENCHMARKS.md,
// session 15), which on the RX path every 17th request on memif waited for.
void EngineImpl::check_rx_pool() {
    const rte_mempool* pool = pool_to_check_;
    pool_to_check_ = nullptr;
    pool_roomy_ = rte_mempool_avail_count(pool) > pool->size / 2;
    pool_check_countdown_ = pool_roomy_ ? kPoolCheckBursts : 0;
}

void EngineImpl::rx_one(rte_mbuf* m, Instant now, bool zero_copy) {
    ++st_.rx_packets;
    st_.rx_bytes += m->pkt_len;
    if (m->nb_segs != 1) {
        // Chained frames only arrive from loopback-style PMDs (net_ring
        // passing our own zero-copy TX chains through; RX scatter is not
        // enabled on NIC ports): made linear in the head mbuf, then on
        // as any frame.
        m = linearize(m);
        if (!m) return;
    }
    wire::Offload off;
    if (caps_.rx_csum) {
        off.rx_ip_csum_ok = (m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD;
        off.rx_l4_csum_ok = (m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD;
    }
    const auto* data = rte_pktmbuf_mtod(m, const std::byte*);
    // The software checksum is the first touch of the whole frame, which
    // another core has just written (the kernel's copy into the UMEM on
    // veth, the peer process on memif): asking for every line at once lets
    // their transfers overlap instead of following the checksum's walk
    // (~60 ns of ~700 per 1.5 KB frame on the veth bed; BENCHMARKS.md,
    // session 28). A device that checked the sum leaves the payload to the
    // application's first touch.
    if (!off.rx_l4_csum_ok)
        for (uint32_t o = RTE_CACHE_LINE_SIZE; o < m->data_len; o += RTE_CACHE_LINE_SIZE) rte_prefetch0(data + o);
    wire::Frame f;
    wire::Drop d = wire::parse_frame(wire::Bytes(data, m->data_len), off, &f);
    if (d == wire::Drop::None && f.tcp.has(wire::tcp_flags::SYN) && nexthop_->directed_broadcast(f.ip.src))
        [[unlikely]] d = wire::Drop::IpBadSource;  // our subnet's broadcast address (RFC 1812 §5.3.7)
    if (d != wire::Drop::None) {
        size_t k = size_t(d) < EngineStats::kParseDrops ? size_t(d) : 0;
        ++st_.parse_drops[k];
        rte_pktmbuf_free(m);
        return;
    }
    // The payload becomes a zbuf slice. With a zbuf-backed RX pool the
    // mbuf's own obj is the slice (zero-copy, Luna §6.2 step 1: the slice
    // now owns the mbuf); otherwise the bytes are copied into an arena obj.
    Slice payload;
    if (zero_copy && f.payload_len != 0) {
        payload = zbuf::dpdk::rx_slice(m);
        if (payload) {
            ++st_.rx_zero_copy;
            payload.remove_prefix(f.payload_off);
            payload.set_size(f.payload_len);
            deliver_segment(f, std::move(payload), now);
            return;
        }
    }
    if (f.payload_len != 0) {
        if (rx_copy_allowed(f.payload_len, f)) [[likely]] payload = arena_->alloc_slice(f.payload_len);
        if (!payload) {
            ++st_.rx_no_memory;
            warn(Warn::RxNoMemory);
            rte_pktmbuf_free(m);
            rx_header_only(f, now);
            return;
        }
        std::memcpy(payload.data(), data + f.payload_off, f.payload_len);
    }
    rte_pktmbuf_free(m);
    deliver_segment(f, std::move(payload), now);
}

// A parsed segment through TCP, then its events (in inline mode the
// handlers): the phases parse | tcp | app of a timed iteration. A frame
// dropped before TCP adds its time to the next boundary (the next frame's
// parse, or the burst's app).
void EngineImpl::deliver_segment(const wire::Frame& f, Slice payload, Instant now) {
    phases_.end(Phase::Parse);
    host_.on_segment(f.ip.src, f.ip.dst, f.ip.ecn, f.tcp, std::move(payload), now, act_);
    phases_.end(Phase::Tcp);
    if (!act_.empty()) {
        process(act_, now);
        act_.clear();
    }
    phases_.end(Phase::App);
}

} // namespace crescent::engine
