// crescent — building TX frames: Ethernet + IPv4 + TCP headers in front of a
// segment's payload, as one copied frame or as a chain over the send queue's
// zbufs (Luna §6.2 steps 6-8), and handing them to the TX queue.
//
// RFC 791 (IPv4: DF set, TTL 64, a per-engine ident counter) and RFC 9293
// §3.1 (TCP checksum over the pseudo-header), in software unless the device
// offloads them.
//
// Copy or reference, per segment and per view:
//   - a payload of <= kTxCopyBreak bytes is copied behind the headers
//     (build_copy): one mbuf, one descriptor;
//   - devices without MULTI_SEGS (af_xdp) get every segment copied into one
//     frame (build_copy);
//   - otherwise build_chain: views of >= kTxAttachMin bytes travel by
//     reference (an extbuf mbuf holding one reference on the view's obj until
//     the device frees it), shorter ones are copied into the chain's direct
//     tail, so a segment of many small RPC messages is one or two segments,
//     not one per message header and body.
#include "stack/engine/engine_impl.hpp"

#include <algorithm>
#include <cstring>

#include "zbuf/dpdk.hpp"

namespace crescent::engine {

void EngineImpl::transmit(const tcp::OutSegment& s, Instant now) {
    wire::MacAddr dst_mac{};
    Resolve r = nexthop_->resolve(s.dst, now, &dst_mac);
    if (r == Resolve::NoRoute) {
        ++st_.drop_no_route;
        return;
    }
    if (r == Resolve::Failed) {
        ++st_.drop_neigh_failed;
        warn(Warn::NeighFailed);
        return;
    }
    const size_t tcp_len = wire::tcp_header_len(s.repr);
    const uint32_t payload_len = s.payload_len();
    rte_mbuf* m = nullptr;
    // Copy-break: a payload this small costs less to copy behind the headers
    // than an extra mbuf, a reference and a descriptor per view.
    const bool small = payload_len <= kTxCopyBreak && s.tso_segsz == 0;
    if (attach_pool_ && payload_len != 0 && !small) m = build_chain(s, dst_mac, tcp_len, payload_len);
    if (m != nullptr) {
        ++st_.tx_zero_copy_segments;
    } else {
        m = build_copy(s, dst_mac, tcp_len, payload_len);
        if (m == nullptr) return;
        if (payload_len != 0) ++(attach_pool_ && small ? st_.tx_copybreak_segments : st_.tx_copied_segments);
    }
    if (r == Resolve::Pending) {
        if (pending_.size() >= p_.neigh_queue) {
            ++st_.drop_neigh_pending;
            warn(Warn::NeighPending);
            rte_pktmbuf_free(m);
            return;
        }
        pending_.push_back(PendingFrame{m, s.dst, now + p_.neigh_wait});
        return;
    }
    enqueue_tx(m);
}

void EngineImpl::emit_headers(std::byte* p, const tcp::OutSegment& s, const wire::MacAddr& dst_mac, size_t tcp_len,
                              uint32_t payload_len, std::span<const wire::Bytes> body) {
    wire::Ipv4Repr ip;
    ip.src = s.src;
    ip.dst = s.dst;
    ip.ecn = s.ip_ecn;
    ip.ident = ip_ident_++;
    ip.payload_len = uint16_t(tcp_len + payload_len);
    // TSO (s.tso_segsz): the device writes each segment's length into the
    // pseudo-header sum (DPDK's convention for RTE_MBUF_F_TX_TCP_SEG).
    const wire::CsumMode mode = s.tso_segsz != 0  ? wire::CsumMode::PseudoTso
                                : caps_.tx_tcp_csum ? wire::CsumMode::PseudoOnly
                                                    : wire::CsumMode::Full;
    // An established connection's segment (timestamps, no SACK blocks): the
    // same bytes in straight-line code.
    if (wire::ts_frame_fits(s.repr)) {
        wire::emit_ts_frame(p, dst_mac, mac_, ip, s.repr, body, !caps_.tx_ip_csum, mode);
        return;
    }
    wire::EthRepr eth;
    eth.dst = dst_mac;
    eth.src = mac_;
    eth.ethertype = wire::kEtherTypeIpv4;
    wire::emit_eth(eth, wire::MutBytes(p, wire::kEthHeaderLen));
    wire::emit_ipv4(ip, wire::MutBytes(p + wire::kEthHeaderLen, wire::kIpv4HeaderLen), !caps_.tx_ip_csum);
    wire::emit_tcp(s.repr, ip, wire::MutBytes(p + wire::kEthHeaderLen + wire::kIpv4HeaderLen, tcp_len), body, mode);
}

void EngineImpl::set_tx_offload(rte_mbuf* m, size_t tcp_len, uint16_t tso_segsz) {
    if (!caps_.tx_ip_csum && !caps_.tx_tcp_csum) return;
    m->l2_len = wire::kEthHeaderLen;
    m->l3_len = wire::kIpv4HeaderLen;
    m->l4_len = uint16_t(tcp_len);
    m->ol_flags |= RTE_MBUF_F_TX_IPV4;
    if (caps_.tx_ip_csum) m->ol_flags |= RTE_MBUF_F_TX_IP_CKSUM;
    if (caps_.tx_tcp_csum) m->ol_flags |= RTE_MBUF_F_TX_TCP_CKSUM;
    if (tso_segsz != 0) {  // only offered with both checksums (tso_max())
        m->ol_flags |= RTE_MBUF_F_TX_TCP_SEG;
        m->tso_segsz = tso_segsz;
        ++st_.tx_tso_requests;
    }
}

uint16_t EngineImpl::max_segs(const tcp::OutSegment& s) const {
    return s.tso_segsz != 0 ? caps_.max_tso_segs : caps_.max_segs;
}

size_t EngineImpl::payload_spans(const tcp::OutSegment& s, std::array<wire::Bytes, tcp::kMaxTxViews>& out) {
    const auto views = s.payload();
    for (size_t i = 0; i < views.size(); ++i) out[i] = wire::Bytes(views[i].data, views[i].len);
    return views.size();
}

// The mbuf of each frame is taken from the pool one frame before it is
// built, and its header and first data lines are prefetched then, so their
// cache misses overlap the previous frame's work instead of stalling this
// one's. On AF_XDP the pool is the UMEM, which the kernel's copies sweep
// through, and with hundreds of frames in flight the pool's cache hands back
// lines long evicted: the first read of the header in rte_pktmbuf_reset took
// 92 % of build_copy's samples (perf on the sending CPU, veth stream of 64 KiB
// messages at iodepth 16), build_copy 7.3 % of that CPU. A frame that ends a
// TX burst leaves its spare to the next one, after the burst's sendto() has
// copied it all through the cache: rx() asks for the lines again.
//
// Only where a TX burst is a system call that copies (caps_.tx_syscall:
// AF_XDP). Elsewhere (memif, a NIC's DMA) the pool's cache hands back the
// mbuf the last burst freed, still warm: nothing to hide, and the spare's
// bookkeeping costs instructions (BENCHMARKS.md, session 37).
rte_mbuf* EngineImpl::alloc_frame() {
    rte_mempool* mp = dev_->tx_pool();
    if (!caps_.tx_syscall) return rte_pktmbuf_alloc(mp);
    rte_mbuf* m = tx_spare_;
    if (m != nullptr)
        rte_pktmbuf_reset(m);  // the rest of what rte_pktmbuf_alloc does after the get
    else
        m = rte_pktmbuf_alloc(mp);  // the first frame, or the pool was dry at the last one
    tx_spare_ = rte_mbuf_raw_alloc(mp);
    prefetch_spare();
    return m;
}

rte_mbuf* EngineImpl::build_copy(const tcp::OutSegment& s, const wire::MacAddr& dst_mac, size_t tcp_len,
                                 uint32_t payload_len) {
    const size_t hdr_len = wire::kEthHeaderLen + wire::kIpv4HeaderLen + tcp_len;
    // More than one frame's room (a TSO request whose zero-copy chain could
    // not be built): copied into a chain, which TSO implies the device takes.
    if (hdr_len + payload_len > frame_room_ && !caps_.multi_segs) {
        ++st_.tx_too_large;
        return nullptr;
    }
    rte_mbuf* m = alloc_frame();
    if (!m) {
        ++st_.tx_no_mbuf;
        warn(Warn::TxNoMbuf);
        return nullptr;
    }
    const auto views = s.payload();
    rte_mbuf* cur = m;
    std::byte* dst = rte_pktmbuf_mtod(m, std::byte*) + hdr_len;
    size_t room = frame_room_ - hdr_len;
    m->data_len = uint16_t(hdr_len);
    for (size_t i = 0; i < views.size(); ++i) {
        for (size_t done = 0; done < views[i].len;) {
            if (room == 0) {
                if (const uint16_t max = max_segs(s); max != 0 && m->nb_segs >= max) {
                    ++st_.tx_too_large;
                    rte_pktmbuf_free(m);
                    return nullptr;
                }
                rte_mbuf* seg = rte_pktmbuf_alloc(dev_->tx_pool());
                if (!seg) {
                    ++st_.tx_no_mbuf;
                    warn(Warn::TxNoMbuf);
                    rte_pktmbuf_free(m);
                    return nullptr;
                }
                cur->next = seg;
                cur = seg;
                ++m->nb_segs;
                dst = rte_pktmbuf_mtod(seg, std::byte*);
                room = frame_room_;
            }
            size_t take = std::min<size_t>(room, views[i].len - done);
            std::memcpy(dst, views[i].data + done, take);
            dst += take;
            room -= take;
            done += take;
            cur->data_len = uint16_t(cur->data_len + take);
        }
    }
    // One frame (the usual case): the checksum runs over the copy, one span;
    // a chain of copies (a TSO fallback): over the views.
    if (m->nb_segs == 1) {
        const wire::Bytes copy(rte_pktmbuf_mtod_offset(m, const std::byte*, hdr_len), payload_len);
        emit_headers(rte_pktmbuf_mtod(m, std::byte*), s, dst_mac, tcp_len, payload_len,
                     std::span<const wire::Bytes>(&copy, payload_len != 0 ? 1 : 0));
    } else {
        std::array<wire::Bytes, tcp::kMaxTxViews> body;
        const size_t nbody = payload_spans(s, body);
        emit_headers(rte_pktmbuf_mtod(m, std::byte*), s, dst_mac, tcp_len, payload_len,
                     std::span<const wire::Bytes>(body.data(), nbody));
    }
    m->pkt_len = uint32_t(hdr_len) + payload_len;
    set_tx_offload(m, tcp_len, s.tso_segsz);
    return m;
}

rte_mbuf* EngineImpl::build_chain(const tcp::OutSegment& s, const wire::MacAddr& dst_mac, size_t tcp_len,
                                  uint32_t payload_len) {
    const size_t hdr_len = wire::kEthHeaderLen + wire::kIpv4HeaderLen + tcp_len;
    if (hdr_len > frame_room_) return nullptr;
    const auto views = s.payload();
    // Each view adds at most one segment (a copied view goes into the direct
    // tail or opens one new direct segment), so this bounds the chain.
    if (const uint16_t max = max_segs(s); max != 0 && views.size() + 1 > max) return nullptr;  // tcp_config() prevents it
    // Every view must lie in an arena obj (the send queue only holds zbufs;
    // anything else is copied).
    for (const tcp::TxView& v : views)
        if (!zbuf::contains(v.data)) return nullptr;
    // What the checksum runs over: the attached views, and the copies of the
    // others where they landed (adjacent copies merge into one span).
    std::array<wire::Bytes, tcp::kMaxTxViews> body;
    size_t nbody = 0;
    auto sum_copy = [&](const std::byte* at, size_t len) {
        if (nbody != 0 && body[nbody - 1].data() + body[nbody - 1].size() == at)
            body[nbody - 1] = wire::Bytes(body[nbody - 1].data(), body[nbody - 1].size() + len);
        else
            body[nbody++] = wire::Bytes(at, len);
    };
    rte_mbuf* head = alloc_frame();
    if (!head) return nullptr;
    head->data_len = uint16_t(hdr_len);
    rte_mbuf* tail = head;  // the last segment; direct ones may take copies
    uint32_t copied = 0;    // views copied rather than attached
    for (const tcp::TxView& v : views) {
        rte_mbuf* seg;
        if (v.len < kTxAttachMin) {
            // Short view (an RPC header block, a small message): copying it
            // costs less than an extbuf mbuf, an obj reference, a descriptor
            // and the free callback. Behind the tail when it is direct and
            // has the room, else into a fresh direct segment.
            ++copied;
            if (RTE_MBUF_DIRECT(tail) && rte_pktmbuf_tailroom(tail) >= v.len) {
                std::byte* at = rte_pktmbuf_mtod_offset(tail, std::byte*, tail->data_len);
                std::memcpy(at, v.data, v.len);
                sum_copy(at, v.len);
                tail->data_len = uint16_t(tail->data_len + v.len);
                continue;
            }
            seg = rte_pktmbuf_alloc(dev_->tx_pool());
            if (seg) {
                std::memcpy(rte_pktmbuf_mtod(seg, std::byte*), v.data, v.len);
                sum_copy(rte_pktmbuf_mtod(seg, const std::byte*), v.len);
                seg->data_len = uint16_t(v.len);
            }
        } else {
            // The mbuf keeps this reference on the obj until the device frees it.
            seg = zbuf::dpdk::attach_slice(attach_pool_, Slice::share_of(v.data, v.len));
            body[nbody++] = wire::Bytes(v.data, v.len);
        }
        if (!seg) {
            rte_pktmbuf_free(head);  // drops the references taken so far
            return nullptr;
        }
        tail->next = seg;
        tail = seg;
        ++head->nb_segs;
    }
    auto* p = rte_pktmbuf_mtod(head, std::byte*);
    emit_headers(p, s, dst_mac, tcp_len, payload_len, std::span<const wire::Bytes>(body.data(), nbody));
    head->pkt_len = uint32_t(hdr_len) + payload_len;
    st_.tx_copied_views += copied;
    set_tx_offload(head, tcp_len, s.tso_segsz);
    return head;
}

} // namespace crescent::engine
