// crescent — zbuf <-> DPDK (see zbuf/dpdk.hpp): memzone-backed arena, zbuf
// mbuf pools (rte_mempool_create_empty + populate_iova over Mempool zones),
// RX mbuf -> Slice, Slice -> extbuf mbuf for TX (rte_pktmbuf_attach_extbuf).
#include "zbuf/dpdk.hpp"

#include <crescent/log.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_memory.h>
#include <rte_mempool.h>
#include <rte_memzone.h>

namespace crescent::zbuf::dpdk {

static_assert(MbufPool::kObjHeader == RTE_ALIGN_CEIL(sizeof(rte_mempool_objhdr), RTE_MEMPOOL_ALIGN),
              "rte_mempool element header size changed (mempool debug build?)");

namespace {

constexpr size_t zone_align_up(size_t x) { return (x + kZoneSize - 1) & ~(kZoneSize - 1); }

// --- (a) arena memory -------------------------------------------------------

uint64_t memzone_iova(const void* zone_va, void*) {
    rte_iova_t iova = rte_mem_virt2iova(zone_va);
    return iova == RTE_BAD_IOVA ? kBadIova : uint64_t(iova);
}

void memzone_free(void* arg) { rte_memzone_free(static_cast<const rte_memzone*>(arg)); }

// --- (b)/(c) pool elements ----------------------------------------------------

// Release hook of the pool's zones: the last zbuf reference to an RX obj is
// gone, give the mbuf back to its pool.
void release_mbuf(ZoneHeader* z, uint32_t idx) {
    auto* m = reinterpret_cast<rte_mbuf*>(z->ctx()[idx].meta);
    rte_pktmbuf_free(m);
}

struct IterCheck {
    uint32_t bad = 0;
};

// rte_mempool_obj_iter callback after rte_pktmbuf_init: record each mbuf in
// its obj's ctx and check that element == obj.
void note_element(rte_mempool* mp, void* arg, void* obj, unsigned) {
    auto* chk = static_cast<IterCheck*>(arg);
    auto* elt = static_cast<std::byte*>(obj) - mp->header_size;
    if (!contains(obj) || obj_base(obj) != elt || obj_size(obj) != mp->header_size + mp->elt_size + mp->trailer_size) {
        ++chk->bad;
        return;
    }
    ctx_of(obj).meta = reinterpret_cast<uintptr_t>(obj);
}

// --- (d) TX -------------------------------------------------------------------

// One attachment's shared info, with the pool it returns to.
struct AttachInfo {
    rte_mbuf_ext_shared_info sh;
    rte_mempool* pool;
};

void extbuf_free(void* addr, void* opaque) {
    zbuf::unref(addr);
    auto* ai = static_cast<AttachInfo*>(opaque);
    rte_mempool_put(ai->pool, ai);
}

} // namespace

std::unique_ptr<Arena> create_arena(const Config& cfg, std::string* err) {
    static std::atomic<unsigned> seq{0};
    std::string name = fmt::format("crescent_zbuf_{}", seq.fetch_add(1));
    size_t len = zone_align_up(std::max<size_t>(cfg.bytes, kZoneSize));
    const rte_memzone* mz = rte_memzone_reserve_aligned(name.c_str(), len, SOCKET_ID_ANY,
                                                        RTE_MEMZONE_2MB | RTE_MEMZONE_SIZE_HINT_ONLY, kZoneSize);
    if (!mz) {
        if (err) *err = fmt::format("rte_memzone_reserve_aligned({} bytes): {}", len, rte_strerror(rte_errno));
        return nullptr;
    }
    ExternalMemory mem;
    mem.va = mz->addr;
    mem.len = len;
    mem.iova_of = memzone_iova;
    mem.arg = const_cast<rte_memzone*>(mz);
    mem.free = memzone_free;
    Config c = cfg;
    c.backing = Backing::External;
    auto arena = Arena::create(c, mem, err);
    if (!arena) {
        rte_memzone_free(mz);
        return nullptr;
    }
    log::get("zbuf")->info("arena in DPDK memzone {}: {} MiB, {} pages", name, len >> 20,
                           mz->hugepage_sz >= kZoneSize ? "huge" : "4 KiB");
    return arena;
}

// --- MbufPool -------------------------------------------------------------------

std::unique_ptr<MbufPool> MbufPool::create(Arena& arena, const PoolConfig& cfg, std::string* err) {
    auto fail = [&](std::string m) -> std::unique_ptr<MbufPool> {
        if (err) *err = fmt::format("mbuf pool '{}': {}", cfg.name, m);
        return nullptr;
    };
    const uint32_t S = cfg.obj_size;
    if (S < 1024 || (S & (S - 1)) != 0 || S > 65536)
        return fail("obj_size must be a power of two in [1024, 65536]");
    if (cfg.priv_size % RTE_MBUF_PRIV_ALIGN != 0) return fail("priv_size must be a multiple of 8");
    if (cfg.mbufs == 0) return fail("needs at least one mbuf");

    // header (64) + elt + trailer (0) == S exactly, without spreading padding.
    const uint32_t flags = RTE_MEMPOOL_F_NO_SPREAD;
    const uint32_t elt_size = S - kObjHeader;
    if (elt_size < sizeof(rte_mbuf) + cfg.priv_size + RTE_PKTMBUF_HEADROOM)
        return fail("obj_size too small for mbuf + priv + headroom");
    rte_mempool_objsz sz;
    if (rte_mempool_calc_obj_size(elt_size, flags, &sz) != S || sz.header_size != kObjHeader)
        return fail(fmt::format("element would be {} bytes, not {} (header {}, trailer {})", sz.total_size, S,
                                sz.header_size, sz.trailer_size));
    const uint32_t room = elt_size - uint32_t(sizeof(rte_mbuf)) - cfg.priv_size;
    if (room > UINT16_MAX) return fail("data room over 64 KiB");

    // Zones: enough for cfg.mbufs usable elements (af_xdp: after withholding).
    const uint32_t per_zone = Arena::objs_per_zone(S, ZoneKind::Mempool);
    if (per_zone == 0) return fail("obj_size does not fit a zone");
    uint32_t nzones = (cfg.mbufs + per_zone - 1) / per_zone;
    // Every zone has the same layout, so element j of zone k starts at
    // k * 2 MiB + j * S from the first element.
    auto usable_for = [&](uint32_t zones) -> uint32_t {
        if (!cfg.af_xdp_umem || zones == 1) return zones * per_zone;
        uint64_t limit = uint64_t(zones) * per_zone * S; // the umem length
        uint32_t n = 0;
        for (uint32_t k = 0; k < zones; ++k)
            for (uint32_t j = 0; j < per_zone; ++j)
                if (uint64_t(k) * kZoneSize + uint64_t(j + 1) * S <= limit) ++n;
        return n;
    };
    while (usable_for(nzones) < cfg.mbufs) ++nzones;

    auto pool = std::unique_ptr<MbufPool>(new MbufPool());
    pool->first_ = arena.take_zones(nzones, S, ZoneKind::Mempool, release_mbuf, nullptr);
    if (!pool->first_) return fail(fmt::format("arena has fewer than {} free zones", nzones));
    pool->zones_ = nzones;
    pool->data_room_ = uint16_t(room);
    const uint32_t total = nzones * per_zone;

    rte_mempool* mp = rte_mempool_create_empty(cfg.name.c_str(), total, elt_size, cfg.cache_size,
                                               sizeof(rte_pktmbuf_pool_private), SOCKET_ID_ANY, flags);
    if (!mp) return fail(fmt::format("rte_mempool_create_empty: {}", rte_strerror(rte_errno)));
    pool->mp_ = mp;
    if (int rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr); rc != 0)
        return fail(fmt::format("rte_mempool_set_ops_byname: {}", rte_strerror(-rc)));
    rte_pktmbuf_pool_private priv{};
    priv.mbuf_data_room_size = uint16_t(room);
    priv.mbuf_priv_size = cfg.priv_size;
    rte_pktmbuf_pool_init(mp, &priv);

    for (uint32_t k = 0; k < nzones; ++k) {
        auto* z = reinterpret_cast<ZoneHeader*>(pool->first_->base() + size_t(k) * kZoneSize);
        z->release_arg = mp;
        size_t len = size_t(z->obj_count) * S;
        rte_iova_t iova = z->iova == kBadIova ? RTE_BAD_IOVA : rte_iova_t(z->iova + z->obj_offset);
        int rc = rte_mempool_populate_iova(mp, reinterpret_cast<char*>(z->obj(0)), iova, len, nullptr, nullptr);
        if (rc != int(z->obj_count))
            return fail(fmt::format("rte_mempool_populate_iova of zone {}: {} (want {} objs)", k, rc, z->obj_count));
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
    IterCheck chk;
    rte_mempool_obj_iter(mp, note_element, &chk);
    if (chk.bad != 0) return fail(fmt::format("{} elements are not zbuf objs", chk.bad));

    if (cfg.af_xdp_umem && nzones > 1) {
        // The af_xdp PMD's umem: page-aligned start of the first memory chunk,
        // populated_size * element size (+ the alignment) long.
        auto start = reinterpret_cast<uintptr_t>(pool->first_->obj(0));
        uintptr_t limit = start + uintptr_t(mp->populated_size) * S;
        std::vector<void*> all(total);
        if (rte_mempool_generic_get(mp, all.data(), total, nullptr) != 0) return fail("could not take the elements");
        std::vector<void*> keep;
        for (void* m : all) {
            auto end = reinterpret_cast<uintptr_t>(m) - kObjHeader + S;
            (end <= limit ? keep : pool->withheld_).push_back(m);
        }
        rte_mempool_generic_put(mp, keep.data(), unsigned(keep.size()), nullptr);
    }
    pool->usable_ = total - uint32_t(pool->withheld_.size());
    if (pool->usable_ < cfg.mbufs) return fail("internal: fewer usable elements than planned");
    return pool;
}

MbufPool::~MbufPool() {
    if (mp_) rte_mempool_free(mp_);
}

rte_mbuf* mbuf_of(const void* p) { return reinterpret_cast<rte_mbuf*>(obj_base(p) + MbufPool::kObjHeader); }

// --- (c) RX ---------------------------------------------------------------------

Slice rx_slice(rte_mbuf* m) {
    if (!m || m->nb_segs != 1 || m->next != nullptr || !RTE_MBUF_DIRECT(m) || !contains(m)) return {};
    ZoneHeader* z = zone_of(m);
    if (z->magic != kZoneMagic || z->kind != ZoneKind::Mempool || z->release != release_mbuf) return {};
    if (rte_mbuf_refcnt_read(m) != 1) return {};
    uint32_t idx = z->index_of(m);
    std::byte* base = z->obj(idx);
    if (base + MbufPool::kObjHeader != reinterpret_cast<std::byte*>(m)) return {};
    detail::set_external_ref(z->ctx()[idx]); // count 1 in `shared` (Mempool zones have no owner core)
    detail::note_external_acquire();
    auto* data = rte_pktmbuf_mtod(m, std::byte*);
    return Slice(Zbuf::adopt(base), size_t(data - base), m->data_len);
}

// --- (d) TX ---------------------------------------------------------------------

AttachPool create_attach_pool(const std::string& name, uint32_t n, uint32_t cache_size, int socket) {
    AttachPool p;
    p.mbufs = rte_pktmbuf_pool_create(name.c_str(), n, cache_size, 0, 0, socket);
    if (!p.mbufs) return {};
    p.shinfo = rte_mempool_create((name + "_sh").c_str(), n, sizeof(AttachInfo), cache_size, 0, nullptr, nullptr,
                                  nullptr, nullptr, socket, 0);
    if (!p.shinfo) {
        rte_mempool_free(p.mbufs);
        return {};
    }
    return p;
}

bool free_attach_pool(AttachPool& p) {
    if ((p.mbufs && rte_mempool_in_use_count(p.mbufs) != 0) || (p.shinfo && rte_mempool_in_use_count(p.shinfo) != 0))
        return false;
    rte_mempool_free(p.mbufs);
    rte_mempool_free(p.shinfo);
    p = {};
    return true;
}

rte_mbuf* attach_slice(const AttachPool& pool, const Slice& s, uint16_t headroom) {
    Slice ref = s.share();
    return attach_slice(pool, std::move(ref), headroom);  // on failure `ref` drops the extra reference
}

rte_mbuf* attach_slice(const AttachPool& pool, Slice&& s, uint16_t headroom) {
    if (!s || !pool || headroom > s.offset() || size_t(headroom) + s.size() > UINT16_MAX) return nullptr;
    void* e = nullptr;
    if (rte_mempool_get(pool.shinfo, &e) != 0) return nullptr;
    rte_mbuf* m = rte_pktmbuf_alloc(pool.mbufs);
    if (!m) {
        rte_mempool_put(pool.shinfo, e);
        return nullptr;
    }
    auto* ai = static_cast<AttachInfo*>(e);
    ai->pool = pool.shinfo;
    ai->sh.free_cb = extbuf_free;
    ai->sh.fcb_opaque = ai;
    rte_mbuf_ext_refcnt_set(&ai->sh, 1);
    const size_t off = s.offset(), len = s.size();
    const rte_iova_t iova = rte_iova_t(s.iova() - headroom);
    // s's reference becomes the attachment's, dropped by extbuf_free(buf_addr).
    std::byte* buf = s.take_buf().release() + off - headroom;
    rte_pktmbuf_attach_extbuf(m, buf, iova, uint16_t(headroom + len), &ai->sh);
    m->data_off = headroom;
    m->data_len = uint16_t(len);
    m->pkt_len = uint32_t(len);
    return m;
}

} // namespace crescent::zbuf::dpdk
