// crescent — zbuf <-> DPDK: arena memory from EAL, pktmbuf pools whose
// elements are zbuf objs (RX DMA lands in the slab, Luna §6.2 step 1), RX
// mbufs as Slices, and Slices attached to mbufs as external buffers for TX.
//
// Include from engine/dev code as "zbuf/dpdk.hpp" (libcrescent only; the slab
// core <crescent/zbuf.hpp> builds without DPDK).
//
// Lifetimes: the Arena outlives every MbufPool and every attach pool built over
// it, and all of them are gone before rte_eal_cleanup(). Zones a pool took stay
// taken until the arena is destroyed (zones are handed out once).
//
// Element layout of a zbuf mbuf pool (one obj of a Mempool zone each):
//
//   obj base ----------------------------------------------- obj base + obj_size
//   | rte_mempool_objhdr (64) | rte_mbuf (128) | priv | headroom | data ...   |
//                             ^ the rte_mbuf *     ^ buf_addr
//
// so zbuf::obj_base(rte_pktmbuf_mtod(m, void*)) is the element, and the mbuf
// is obj_base + MbufPool::kObjHeader (also kept in ObjCtx::meta).
//
// AF_XDP: the af_xdp PMD registers its umem from the pool's first memory chunk
// and assumes populated_size * element size bytes from there hold every
// element (frame = mbuf address - umem base - header). Zone headers break that
// stride at each 2 MiB boundary, so a pool created with `af_xdp_umem = true`
// withholds (never hands out) the elements that lie past that length. A pool
// that fits in one zone (obj_size 2 KiB: 1014 mbufs, 4 KiB: 509) withholds
// nothing. Element sizes must be powers of two (2048, 4096, ...) so that no
// element straddles a page.
#pragma once

#include <crescent/zbuf.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct rte_mbuf;
struct rte_mempool;

namespace crescent::zbuf::dpdk {

// (a) An arena in DPDK memory: one rte_memzone, 2 MiB aligned (2 MiB pages
// when EAL has them), IOVA per zone from rte_mem_virt2iova. EAL must be up.
// cfg.backing is ignored (the result reports Backing::External).
std::unique_ptr<Arena> create_arena(const Config& cfg, std::string* err);

// (b) A pktmbuf pool laid over zbuf Mempool zones.
struct PoolConfig {
    std::string name;            // rte_mempool name (unique, < RTE_MEMPOOL_NAMESIZE)
    uint32_t mbufs = 4096;       // at least this many mbufs available
    uint32_t obj_size = 4096;    // element size = obj size (power of two, >= 1024)
    uint16_t priv_size = 0;      // mbuf private area (multiple of 8)
    uint32_t cache_size = 256;   // per-lcore cache
    bool af_xdp_umem = false;    // usable as an af_xdp umem (see above)
};

class MbufPool {
public:
    // Bytes before the rte_mbuf in each element (the rte_mempool_objhdr).
    static constexpr uint32_t kObjHeader = 64;

    static std::unique_ptr<MbufPool> create(Arena& arena, const PoolConfig& cfg, std::string* err);
    ~MbufPool();
    MbufPool(const MbufPool&) = delete;
    MbufPool& operator=(const MbufPool&) = delete;

    rte_mempool* mempool() const { return mp_; }
    uint32_t usable() const { return usable_; }     // mbufs that can be handed out
    uint32_t withheld() const { return uint32_t(withheld_.size()); }
    uint16_t data_room() const { return data_room_; } // headroom + data per mbuf
    ZoneHeader* first_zone() const { return first_; }
    uint32_t zones() const { return zones_; }

private:
    MbufPool() = default;
    rte_mempool* mp_ = nullptr;
    ZoneHeader* first_ = nullptr;
    uint32_t zones_ = 0;
    uint32_t usable_ = 0;
    uint16_t data_room_ = 0;
    std::vector<void*> withheld_; // af_xdp: elements outside the umem length
};

// The mbuf whose element contains p (p inside an obj of a zbuf mbuf pool).
rte_mbuf* mbuf_of(const void* p);

// (c) RX: turn a received single-segment mbuf of a zbuf pool into a Slice of
// its data with refcount 1. On success the Slice owns the mbuf: the last unref
// of the obj (of this Slice or any share/sub of it) frees the mbuf to its
// pool. On failure (chained mbuf, mbuf not from a zbuf pool, mbuf shared) the
// result is empty and the caller still owns m.
Slice rx_slice(rte_mbuf* m);

// (d) TX: data-less mbufs for attaching Slices as external buffers, and the
// rte_mbuf_ext_shared_info blocks of those attachments. The shared info has a
// pool of its own rather than the mbuf's private area: an indirect mbuf
// attached to ours (rte_pktmbuf_clone, rte_gso_segment, a PMD's software TSO)
// goes on using it after our mbuf is freed and recycled; it returns to its
// pool, and the obj reference is dropped, when the last user detaches.
struct AttachPool {
    rte_mempool* mbufs = nullptr;
    rte_mempool* shinfo = nullptr;
    explicit operator bool() const { return mbufs != nullptr && shinfo != nullptr; }
};
// `n` attachments at most; both pools or neither (rte_errno set).
AttachPool create_attach_pool(const std::string& name, uint32_t n, uint32_t cache_size, int socket);
// Frees both pools when no attachment is alive (true); else leaves them (an
// mbuf still in a device would use freed memory at its TX completion).
bool free_attach_pool(AttachPool& pool);

// An mbuf from `pool` whose data is s's bytes (buf_addr = s.data() -
// headroom, data_off = headroom, data_len = pkt_len = s.size()). It takes its
// own reference on s's obj, dropped when the mbuf and every clone of it are
// freed (the NIC's TX completion). nullptr when a pool is empty or the window
// is over 64 KiB. The headroom bytes must lie in the same obj.
rte_mbuf* attach_slice(const AttachPool& pool, const Slice& s, uint16_t headroom = 0);
// The same, moving s's own reference into the mbuf instead of taking another
// (one refcount operation less per view on the TX path). On success s is
// left empty; on failure it is untouched.
rte_mbuf* attach_slice(const AttachPool& pool, Slice&& s, uint16_t headroom = 0);

} // namespace crescent::zbuf::dpdk
