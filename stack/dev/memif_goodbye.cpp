// crescent — the memif goodbye (see memif_goodbye.hpp): the frames, a queue's
// answer and quiet, and a closing port's wait for its peer.
#include "stack/dev/memif_goodbye.hpp"

#include <algorithm>
#include <thread>
#include <vector>

#include <rte_cycles.h>

#include <fmt/format.h>

#include <crescent/log.hpp>

#include "stack/dev/port.hpp"

namespace crescent::dev {

namespace memif_goodbye {

namespace {
constexpr size_t kKindAt = RTE_ETHER_HDR_LEN + sizeof(kMagic);
constexpr size_t kQueueAt = kKindAt + 1;

uint64_t tsc_of(std::chrono::nanoseconds d) { return uint64_t(d.count()) * rte_get_tsc_hz() / 1000000000u; }
} // namespace

bool parse(const rte_mbuf* m, Message* out) {
    if (!is_control(m)) return false;
    const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
    if (std::memcmp(p + RTE_ETHER_HDR_LEN, kMagic, sizeof(kMagic)) != 0) return false;
    const uint8_t kind = p[kKindAt];
    if (kind != uint8_t(Kind::Goodbye) && kind != uint8_t(Kind::Ack)) return false;
    out->kind = Kind(kind);
    out->queue = uint16_t(p[kQueueAt] << 8 | p[kQueueAt + 1]);
    return true;
}

rte_mbuf* build(rte_mempool* pool, const rte_ether_addr& src, Message msg) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (m == nullptr) return nullptr;
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kFrameLen));
    if (p == nullptr) {
        rte_pktmbuf_free(m);
        return nullptr;
    }
    std::memset(p, 0, kFrameLen);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(p);
    std::memset(&eth->dst_addr, 0xff, sizeof(eth->dst_addr));
    eth->src_addr = src;
    eth->ether_type = rte_cpu_to_be_16(kEtherType);
    std::memcpy(p + RTE_ETHER_HDR_LEN, kMagic, sizeof(kMagic));
    p[kKindAt] = uint8_t(msg.kind);
    p[kQueueAt] = uint8_t(msg.queue >> 8);
    p[kQueueAt + 1] = uint8_t(msg.queue);
    return m;
}

} // namespace memif_goodbye

namespace mg = memif_goodbye;

// Straight to the ring, ahead of the batch: a goodbye's answer must not wait
// behind frames the ring has no room for.
bool Queue::send_control(mg::Message msg) {
    rte_mbuf* m = mg::build(frame_pool_, mac_, msg);
    if (m == nullptr) return false;
    if (rte_eth_tx_burst(port_id_, id_, &m, 1) == 1) return true;
    rte_pktmbuf_free(m);
    return false;
}

uint16_t Queue::take_control(rte_mbuf** pkts, uint16_t n) {
    uint16_t kept = 0;
    for (uint16_t i = 0; i < n; ++i) {
        mg::Message msg{};
        if (!mg::parse(pkts[i], &msg)) {
            pkts[kept++] = pkts[i];
            continue;
        }
        rte_pktmbuf_free(pkts[i]);
        // An acknowledgement reaches a queue only after its port stopped
        // waiting for it (Port::say_goodbye polls on its own): nothing to do.
        if (msg.kind != mg::Kind::Goodbye || closing_since_ != 0) continue;
        const bool answered = send_control({mg::Kind::Ack, msg.queue});
        // Quiet from here on: the peer unmaps the rings once it has the answer.
        closing_since_ = rte_get_tsc_cycles();
        down_since_ = 0;
        ++stats_.peer_goodbyes;
        const size_t dropped = free_pending(stats_.tx_freed_peer_gone);
        log::get("dev")->info("port {} queue {} (net_memif): the peer said goodbye{}; the queue is quiet until it "
                              "is gone ({} queued frame(s) for it freed)",
                              *port_name_, id_, answered ? " and was answered" : " (the answer found no room)", dropped);
    }
    return kept;
}

bool Queue::peer_gone() {
    const uint64_t now = rte_get_tsc_cycles();
    rte_eth_link l{};
    if (down_since_ == 0 && rte_eth_link_get_nowait(port_id_, &l) == 0 && l.link_status == RTE_ETH_LINK_DOWN)
        down_since_ = now;
    const bool down = down_since_ != 0 && now - down_since_ >= mg::tsc_of(mg::kDownGrace);
    const bool timed_out = now - closing_since_ >= mg::tsc_of(mg::kQuietMax);
    if (!down && !timed_out) return false;
    closing_since_ = 0;
    const size_t dropped = free_pending(stats_.tx_freed_peer_gone);
    log::get("dev")->info("port {} queue {} (net_memif): {}; polling again ({} frame(s) queued meanwhile freed)",
                          *port_name_, id_,
                          down ? "the peer is gone" : "the peer's link is still up 2 s after its goodbye", dropped);
    return true;
}

Port::GoodbyeReport Port::say_goodbye() {
    GoodbyeReport r;
    if (driver_ != "net_memif" || !started_ || said_goodbye_) return r;
    said_goodbye_ = true;
    if (!link().up) return r;  // no peer: nobody polls our rings
    using clock = std::chrono::steady_clock;
    const size_t n = queues_.size();
    r.queues = n;
    std::vector<bool> quiet(n, false);
    size_t unsent = 0;
    for (size_t i = 0; i < n; ++i) {
        Queue& q = *queues_[i];
        q.bind_to_current_thread();  // the engines are gone: the closing thread owns the queues
        if (q.peer_closing()) {      // the peer closes too, and said so first
            quiet[i] = true;
            continue;
        }
        q.flush();  // what the engine left (the RSTs of its close)
        if (!q.send_control({mg::Kind::Goodbye, q.id_})) ++unsent;
    }
    const auto deadline = clock::now() + mg::kAnswerWait;
    const auto quiet_count = [&quiet] { return size_t(std::count(quiet.begin(), quiet.end(), true)); };
    size_t answered = 0;
    std::vector<rte_mbuf*> pkts(32);
    while (quiet_count() < n && clock::now() < deadline) {
        for (size_t i = 0; i < n; ++i) {
            if (quiet[i]) continue;
            Queue& q = *queues_[i];
            const uint16_t got = rte_eth_rx_burst(port_id_, q.id_, pkts.data(), uint16_t(pkts.size()));
            for (uint16_t k = 0; k < got; ++k) {
                mg::Message msg{};
                const bool ours = mg::parse(pkts[k], &msg) && msg.queue == q.id_;
                rte_pktmbuf_free(pkts[k]);
                if (!ours || quiet[i]) continue;
                if (msg.kind == mg::Kind::Goodbye) (void)q.send_control({mg::Kind::Ack, q.id_});
                else ++answered;
                quiet[i] = true;  // the peer polls this queue no more (it answered, or closes too)
            }
        }
    }
    r.quiet = quiet_count();
    r.answered = answered;
    const size_t still = n - r.quiet;
    // The peer's last tx_burst may still be finishing with the ring it sent the answer on.
    std::this_thread::sleep_for(mg::kDownGrace);
    if (still == 0)
        log::get("dev")->info("port {} (net_memif): the peer stopped polling {} queue(s) for our close ({} answered "
                              "our goodbye)",
                              name_, n, answered);
    else
        log::get("dev")->warn("port {} (net_memif): {} of {} queue(s) got no answer to our goodbye within {} ms{} "
                              "(a peer that is not crescent, or busy): closing anyway",
                              name_, still, n, mg::kAnswerWait.count(),
                              unsent ? fmt::format(", {} could not be sent", unsent) : std::string());
    return r;
}

} // namespace crescent::dev
