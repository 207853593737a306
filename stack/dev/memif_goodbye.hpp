// crescent — the goodbye two net_memif peers exchange before one of them closes.
//
// When one side of a memif link closes its port, DPDK 22.11's PMD on the
// other side disconnects in its interrupt thread: it clears the "connected"
// flag, then unmaps the shared rings and packet buffers, without waiting for
// the data path. A queue polled at that moment may have passed the flag check
// already and reads unmapped memory: SIGSEGV. CI saw it as a knb raw reflector
// dying when its ping exited (and once in a sweep, session 10). The PMD gives
// nothing to wait on, so the two processes agree between themselves:
//
//   * Before a memif port stops (Port::~Port), it sends a goodbye frame on each
//     of its queues and waits up to kAnswerWait for the peer to acknowledge
//     each one on the same queue (memif queue i meets queue i).
//   * A queue that receives a goodbye acknowledges it and from then on leaves
//     the rings alone: rx_burst returns nothing and flush sends nothing, until
//     the link is seen down (plus kDownGrace, since the PMD clears the link
//     before it unmaps) or kQuietMax has passed. Frames the stack queued
//     meanwhile were for the departed peer: freed, counted.
//   * Two ports closing at once: a closing port that receives the peer's
//     goodbye acknowledges it and counts that queue as quiet too.
//
// A peer that is not crescent ignores the goodbye (an unknown ethertype): the
// close then waits kAnswerWait and goes on. A process killed outright says no
// goodbye; the race stays open for that case (it is the PMD's).
//
// Frame: Ethernet broadcast, source = the port's MAC, ethertype 0x88B6 (IEEE
// 802 local experimental ethertype 2; knb raw uses 1), then the 8-byte magic
// "crescent", one byte kind (1 goodbye, 2 acknowledgement), two bytes queue
// (big-endian), padded to 60 bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

namespace crescent::dev::memif_goodbye {

inline constexpr uint16_t kEtherType = 0x88B6;
inline constexpr char kMagic[8] = {'c', 'r', 'e', 's', 'c', 'e', 'n', 't'};
inline constexpr uint16_t kFrameLen = 60;
// A busy peer (CI: a reflector descheduled for ~0.5 s while builds ran) still answers
// within this; only a close whose peer never answers waits it out.
inline constexpr auto kAnswerWait = std::chrono::milliseconds(1000);
inline constexpr auto kDownGrace = std::chrono::milliseconds(1);
inline constexpr auto kQuietMax = std::chrono::seconds(2);

enum class Kind : uint8_t { Goodbye = 1, Ack = 2 };

struct Message {
    Kind kind;
    uint16_t queue;
};

// Cheap enough for every received frame of a memif queue: one load of the
// ethertype, from the line the consumer reads next anyway.
inline bool is_control(const rte_mbuf* m) {
    const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
    return m->data_len >= kFrameLen && eth->ether_type == rte_cpu_to_be_16(kEtherType);
}

// The message of a control frame (is_control); false when it is not ours
// (another user of the ethertype, an unknown kind).
bool parse(const rte_mbuf* m, Message* out);

// A control frame from `pool` (nullptr when the pool is empty).
rte_mbuf* build(rte_mempool* pool, const rte_ether_addr& src, Message msg);

} // namespace crescent::dev::memif_goodbye
