// crescent — zbuf: the refcounted hugepage slab (Luna §6.1, "zero-copy memory
// management"): arena, zones, per-core caches, return rings, accounting.
//
// Layout and pointer arithmetic are in <crescent/zbuf.hpp>; this file holds what
// is not on the inline path:
//
//  - Arena creation: mmap(MAP_HUGETLB) (2 MiB pages are 2 MiB aligned), else
//    anonymous memory over-allocated by one zone and trimmed to a 2 MiB boundary
//    (logged once), or memory supplied by the caller (a DPDK memzone).
//  - Zones are handed out by a bump index under `Impl::mu`. That lock is taken
//    only when a core takes a fresh zone (or an integration takes zones), never
//    on alloc/free.
//  - Per core and size class: a current zone whose free stack is popped/pushed
//    by the owning core with plain loads and stores (no atomics, no locks), and
//    the list of all zones the core owns (to refill the current zone).
//  - Remote frees: a bounded MPSC ring per owner core (D. Vyukov's bounded queue:
//    one sequence number per cell, producers claim a slot with one CAS, the
//    single consumer needs no RMW). A full ring never blocks: the freeing core
//    parks the obj on its own deferred list and retries on its next remote free,
//    drain, or allocation miss (counted in `return_ring_full`).
//  - Biased reference counting (the protocol and its invariants are in the
//    header): the slow halves of unref (decrements of `shared`, the owner's
//    drop to 0 while `shared` is not 0) and the owner's merge of a request
//    that came through its ring. A ring entry is an obj pointer: a free, or
//    with the low bit set (objs are 64-byte aligned) a merge request.
//  - Counters are written by their core only, with relaxed load+store (a plain
//    mov on x86), so stats() may read them from any thread without a data race.
#include <crescent/zbuf.hpp>

#include <crescent/log.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

namespace crescent::zbuf {

namespace detail {
Region g_region;
ArenaHot g_hot;
CoreHot g_cores[kMaxCores];
// initial-exec: a plain %fs-relative load even inside libcrescent.so (which is
// linked at start-up, never dlopen'ed).
__thread unsigned t_core __attribute__((tls_model("initial-exec"))) = kNoCore;
__thread CoreHot* t_hot __attribute__((tls_model("initial-exec"))) = nullptr;
} // namespace detail

namespace {

#define CRESCENT_LIKELY(x) __builtin_expect(!!(x), 1)
#define CRESCENT_UNLIKELY(x) __builtin_expect(!!(x), 0)

using detail::t_core;
using detail::CoreHot;

// Ids held by a live CoreScope (debug check against two threads sharing an id).
std::atomic<uint64_t> g_core_ids_in_use{0};

// A counter written by one thread and read by any: relaxed load + store.
struct Counter {
    std::atomic<uint64_t> v{0};
    uint64_t get() const { return v.load(std::memory_order_relaxed); }
    void set(uint64_t x) { v.store(x, std::memory_order_relaxed); }
    void inc() { set(get() + 1); }
    void dec() { set(get() - 1); }
};

// Bounded multi-producer single-consumer ring of obj pointers.
// Invariant: cell i holds a value for position p iff seq == p + 1; it is free
// for position p iff seq == p.
class ReturnRing {
public:
    explicit ReturnRing(uint32_t size) : cells_(new Cell[size]), mask_(size - 1) {
        for (uint32_t i = 0; i < size; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
    }

    // Any thread. False when the ring is full.
    bool push(void* p) {
        uint64_t pos = tail_.load(std::memory_order_relaxed);
        for (;;) {
            Cell& c = cells_[pos & mask_];
            uint64_t seq = c.seq.load(std::memory_order_acquire);
            auto diff = int64_t(seq - pos);
            if (diff == 0) {
                if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
                    c.ptr = p;
                    c.seq.store(pos + 1, std::memory_order_release);
                    return true;
                }
            } else if (diff < 0) {
                return false; // the consumer has not freed this cell yet: full
            } else {
                pos = tail_.load(std::memory_order_relaxed);
            }
        }
    }

    // Owner core only. nullptr when empty.
    void* pop() {
        Cell& c = cells_[head_ & mask_];
        if (c.seq.load(std::memory_order_acquire) != head_ + 1) return nullptr;
        void* p = c.ptr;
        c.seq.store(head_ + mask_ + 1, std::memory_order_release);
        ++head_;
        return p;
    }

private:
    struct Cell {
        std::atomic<uint64_t> seq;
        void* ptr;
    };
    std::unique_ptr<Cell[]> cells_;
    const uint64_t mask_;
    alignas(64) std::atomic<uint64_t> tail_{0}; // producers
    alignas(64) uint64_t head_ = 0;             // consumer (owner core)
};

// The cold part of a core's state (the hot part is detail::CoreHot).
struct alignas(64) CoreState {
    Counter alloc_failed[kMaxClasses];
    Counter remote_frees;      // frees and merge requests this core sent to another core's ring
    Counter merge_requests;    // of those, merge requests (set QUEUED)
    Counter return_ring_full;  // frees this core had to park on `deferred`
    Counter deferred_now;      // deferred.size(), readable by stats()
    Counter external_acquired; // Mempool objs this core turned into zbufs
    Counter external_released; // Mempool objs released on this core
    std::vector<ZoneHeader*> zones[kMaxClasses]; // every Slab zone this core owns
    std::vector<void*> deferred;                 // remote frees waiting for ring space
    std::atomic<ReturnRing*> ring{nullptr};      // created with the core's first zone
    std::atomic<uint32_t> zone_count{0};         // Slab zones this core owns (all classes)
    std::atomic<uint32_t> zone_limit{0};         // set_core_limit(): most zones it may own, 0 = no cap
    Counter limit_refused;                       // allocations that needed a fresh zone, refused by zone_limit
};

struct Layout {
    uint32_t count = 0;
    uint32_t obj_offset = 0;
};

constexpr size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

Layout layout_for(uint32_t obj_size, ZoneKind kind) {
    Layout l;
    if (obj_size == 0 || obj_size > kZoneSize) return l;
    // Objs start on a boundary of their own size's lowest set bit, clamped to
    // [64, 4096]: 2 KiB objs never straddle a 4 KiB page, bigger ones are
    // page-aligned, everything is cache-line aligned.
    size_t align = std::clamp<size_t>(size_t(obj_size) & (~size_t(obj_size) + 1), 64, 4096);
    size_t meta = sizeof(ObjCtx) + (kind == ZoneKind::Slab ? sizeof(std::byte*) : 0);
    // A Slab zone's free stack has a sentinel entry below its bottom.
    size_t fixed = sizeof(ZoneHeader) + (kind == ZoneKind::Slab ? sizeof(std::byte*) : 0);
    size_t n = (kZoneSize - fixed) / (obj_size + meta);
    while (n > 0 && align_up(fixed + n * meta, align) + n * obj_size > kZoneSize) --n;
    if (n == 0) return l;
    l.count = uint32_t(n);
    l.obj_offset = uint32_t(align_up(fixed + n * meta, align));
    return l;
}

void warn_fallback_once(int err) {
    static std::once_flag once;
    std::call_once(once, [err] {
        log::get("zbuf")->warn(
            "no hugepages for the zbuf arena (mmap MAP_HUGETLB: {}); fell back to anonymous "
            "4 KiB-page memory (IOVA = VA, not DMA-safe)",
            std::strerror(err));
    });
}

} // namespace

struct Arena::Impl {
    Config cfg;
    Backing backing = Backing::Auto;
    std::byte* base = nullptr; // first zone
    uint32_t nzones = 0;
    void* map_addr = nullptr;  // what to munmap (nullptr for External)
    size_t map_len = 0;
    ExternalMemory ext;
    uint32_t classes[kMaxClasses] = {};
    unsigned nclasses = 0;

    std::mutex mu;                                   // guards next_zone
    uint32_t next_zone = 0;                          // zones [0, next_zone) are handed out
    std::atomic<uint64_t> zones_used{0};
    std::atomic<uint64_t> class_zones[kMaxClasses] = {};
    std::atomic<uint64_t> zones_reclaimed{0};        // idle zones re-formatted for another class

    std::unique_ptr<CoreState[]> cores{new CoreState[kMaxCores]};
    CoreHot* const hot = detail::g_cores; // kMaxCores entries (process-wide, reset by ~Arena)

    // Threads without a CoreScope.
    std::atomic<uint64_t> nocore_alloc_failed{0};
    std::atomic<uint64_t> too_large{0};
    std::atomic<uint64_t> nocore_remote_frees{0};
    std::atomic<uint64_t> nocore_merge_requests{0};
    std::atomic<uint64_t> nocore_ring_full{0};
    std::atomic<int64_t> nocore_external{0};
    mutable std::mutex orphan_mu;  // rare: unregistered thread met a full ring
    std::vector<void*> orphans;    // guarded by orphan_mu
    std::atomic<bool> have_orphans{false};

    ZoneHeader* zone(uint32_t i) { return reinterpret_cast<ZoneHeader*>(base + size_t(i) * kZoneSize); }

    uint64_t iova_of_zone(const std::byte* zva) const {
        if (backing == Backing::External)
            return ext.iova_of ? ext.iova_of(zva, ext.arg) : kBadIova;
        return uint64_t(reinterpret_cast<uintptr_t>(zva)); // IOVA = VA outside DPDK
    }

    void format(ZoneHeader* z, uint32_t index, uint32_t obj_size, uint16_t cls, uint16_t owner,
                ZoneKind kind, ReleaseFn release, void* release_arg) {
        Layout l = layout_for(obj_size, kind);
        std::memset(static_cast<void*>(z), 0, l.obj_offset); // header, ctx array, free stack
        z->iova = iova_of_zone(z->base());
        z->obj_size = obj_size;
        z->obj_count = l.count;
        z->obj_offset = l.obj_offset;
        z->obj_shift = (obj_size & (obj_size - 1)) == 0 ? uint32_t(__builtin_ctz(obj_size)) : 0;
        z->div_magic = ((uint64_t{1} << kDivShift) + obj_size - 1) / obj_size;
        z->size_class = cls;
        z->owner_core = owner;
        z->kind = kind;
        z->release = release;
        z->release_arg = release_arg;
        z->zone_index = index;
        if (kind == ZoneKind::Slab) {
            // The free stack ends right below obj 0, as high as the alignment
            // slack lets it: its top entry (the one a lightly used zone pops
            // and pushes over and over) is the 8 bytes below obj 0, a page's
            // last for the page-aligned classes, not inside the header's
            // first lines. Intel cores compare a load with older stores by
            // the address's low 12 bits first (4K aliasing): with the stack
            // right after the ctx array, the 4 KiB class's top entry landed
            // on page offset 0x020, where index_of() reads div_magic after
            // every push, and bench_zbuf ran alloc+free at 1.7x rte_mempool
            // get+put on a Xeon (BENCHMARKS.md, session 43). The sentinel
            // below the bottom entry stays above the ctx array (obj_offset >=
            // fixed + count * meta in layout_for()).
            z->free_stack = reinterpret_cast<std::byte**>(z->obj(0)) - l.count;
            // (integration zones have no owner core, hence no counter)
            z->owner_room = owner < kMaxCores && cls < kMaxClasses ? &detail::g_cores[owner].room[cls] : nullptr;
            // Pop order 0, 1, 2...: consecutive allocations are adjacent in memory.
            for (uint32_t i = 0; i < l.count; ++i) z->free_stack[i] = z->obj(l.count - 1 - i);
            z->free_stack[-1] = nullptr; // the sentinel (memset above; explicit for the reader)
            z->free_sp = z->free_stack + l.count - 1;
        }
        z->magic = kZoneMagic;
    }

    // `count` consecutive unused zones, or nullptr.
    ZoneHeader* take(uint32_t count) {
        std::lock_guard lk(mu);
        if (count == 0 || nzones - next_zone < count) return nullptr;
        ZoneHeader* z = zone(next_zone);
        next_zone += count;
        zones_used.fetch_add(count, std::memory_order_relaxed);
        return z;
    }

    // One of `core`'s zones of another class than `cls` with every obj free
    // (remote frees already drained), unlinked from that class; nullptr when
    // there is none. Owner core only: no other core allocates from it, and a
    // zone with no live obj has no free in flight either.
    ZoneHeader* reclaim_free_zone(unsigned core, unsigned cls) {
        CoreState& cs = cores[core];
        CoreHot& h = hot[core];
        for (unsigned c = 0; c < nclasses; ++c) {
            if (c == cls) continue;
            std::vector<ZoneHeader*>& v = cs.zones[c];
            for (size_t k = 0; k < v.size(); ++k) {
                ZoneHeader* z = v[k];
                if (z->free_count() != z->obj_count) continue;
                v.erase(v.begin() + ptrdiff_t(k));
                if (h.cur[c] == z) h.cur[c] = nullptr;
                class_zones[c].fetch_sub(1, std::memory_order_relaxed);
                zones_reclaimed.fetch_add(1, std::memory_order_relaxed);
                return z;
            }
        }
        return nullptr;
    }

    // Slow path of alloc: a fresh zone for (core, cls) — or, once the arena
    // has none left, one of this core's idle zones of another size class,
    // so a class's zones are not tied to it for the life of the process.
    ZoneHeader* take_for_core(unsigned core, unsigned cls) {
        CoreState& cs = cores[core];
        if (!cs.ring.load(std::memory_order_relaxed)) {
            // Published before any obj of this core can exist (release pairs
            // with the acquire load in remote_free).
            cs.ring.store(new ReturnRing(cfg.return_ring_size), std::memory_order_release);
        }
        // A core at its zone limit (set_core_limit) only re-formats one of
        // its own idle zones, as when the arena itself is out of zones.
        const uint32_t limit = cs.zone_limit.load(std::memory_order_relaxed);
        const bool capped = limit != 0 && cs.zone_count.load(std::memory_order_relaxed) >= limit;
        ZoneHeader* z = capped ? nullptr : take(1);
        if (z) cs.zone_count.fetch_add(1, std::memory_order_relaxed);
        else z = reclaim_free_zone(core, cls);
        if (!z) {
            if (capped) cs.limit_refused.inc();
            return nullptr;
        }
        format(z, uint32_t((z->base() - base) / kZoneSize), classes[cls], uint16_t(cls), uint16_t(core),
               ZoneKind::Slab, nullptr, nullptr);
        class_zones[cls].fetch_add(1, std::memory_order_relaxed);
        cs.zones[cls].push_back(z);
        return z;
    }
};

namespace {

Arena* g_arena = nullptr;
Arena::Impl* g_impl = nullptr; // == g_arena->impl_, reachable from free functions

// Owner core: put the obj starting at `obj` of Slab zone z back on its free stack.
inline void free_local(ZoneHeader* z, std::byte* obj) {
    *++z->free_sp = obj;
    detail::note_free(*z->owner_room);
}

// Owner core: no reference is left (invariant I5): both counts to their free
// values and the obj back on its free stack.
inline void free_owned(ZoneHeader* z, ObjCtx& c, std::byte* obj) {
    c.shared.store(0, std::memory_order_relaxed);
    c.biased.store(0, std::memory_order_relaxed);
    free_local(z, obj);
}

// A return ring entry: a free (the obj pointer) or a merge request (| 1).
constexpr uintptr_t kMergeTag = 1;
inline bool is_merge(const void* e) { return (reinterpret_cast<uintptr_t>(e) & kMergeTag) != 0; }
inline std::byte* untag(void* e) {
    return reinterpret_cast<std::byte*>(reinterpret_cast<uintptr_t>(e) & ~kMergeTag);
}

// Owner core: a merge request for obj `obj` of its Slab zone z (a thread that
// dropped a reference counted in `biased` set QUEUED and sent it). Moves
// biased into shared, sets MERGED and clears QUEUED in one CAS; frees the obj
// when that leaves no reference (invariant I4: nothing else frees it while
// QUEUED). `biased` is kUnbiased already when the owner's own count reached 0
// after the request was sent (owner_unbias then set MERGED, left QUEUED).
void merge_request(ZoneHeader* z, std::byte* obj) {
    ObjCtx& c = z->ctx()[z->index_of(obj)];
    uint32_t b = c.biased.load(std::memory_order_relaxed);
    if (CRESCENT_UNLIKELY(b == 0)) detail::bad_pointer(obj, "zbuf merge request for a free obj (internal error)");
    uint32_t add = b < kUnbiased ? b * kShared1 : 0;
    uint32_t w = c.shared.load(std::memory_order_acquire);
    // Common case: the sender dropped the last reference (biased + count = 0,
    // invariant I1): nobody holds it, nobody can touch the word (I3); free
    // with plain stores.
    if ((w & ~(kMerged | kQueued)) + add == 0) return free_owned(z, c, obj);
    uint32_t nw;
    do {
        nw = ((w + add) | kMerged) & ~kQueued;
    } while (!c.shared.compare_exchange_weak(w, nw, std::memory_order_acq_rel, std::memory_order_acquire));
    if (nw == kMerged) return free_owned(z, c, obj); // the others dropped theirs meanwhile: R = 0
    c.biased.store(kUnbiased, std::memory_order_relaxed);
}

// Owner core: one entry of its ring or of the orphans.
inline void take_entry(void* e) {
    std::byte* obj = untag(e);
    if (is_merge(e))
        merge_request(zone_of(obj), obj);
    else
        free_local(zone_of(obj), obj);
}

// Retry the parked remote frees of `cs`; keeps those whose ring is still full.
void flush_deferred(Arena::Impl& im, CoreState& cs) {
    auto& d = cs.deferred;
    size_t kept = 0;
    for (void* p : d) {
        ReturnRing* r = im.cores[zone_of(p)->owner_core].ring.load(std::memory_order_acquire);
        if (r->push(p))
            cs.remote_frees.inc();
        else
            d[kept++] = p;
    }
    d.resize(kept);
    cs.deferred_now.set(kept);
}

// A free of Slab obj p (count already 0), or a merge request (p | 1), by a
// core that does not own its zone.
[[gnu::noinline]] void remote_free(Arena::Impl& im, void* p, unsigned owner, unsigned me) {
    ReturnRing* r = im.cores[owner].ring.load(std::memory_order_acquire);
    if (CRESCENT_LIKELY(me < kMaxCores)) {
        CoreState& cs = im.cores[me];
        if (!cs.deferred.empty()) flush_deferred(im, cs);
        if (cs.deferred.empty() && r->push(p)) {
            cs.remote_frees.inc();
            return;
        }
        cs.return_ring_full.inc();
        cs.deferred.push_back(p);
        cs.deferred_now.set(cs.deferred.size());
        return;
    }
    if (r->push(p)) {
        im.nocore_remote_frees.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    im.nocore_ring_full.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lk(im.orphan_mu);
    im.orphans.push_back(p);
    im.have_orphans.store(true, std::memory_order_release);
}

// Frees parked by threads without a core: the owner takes its own, and pushes
// the others on (their owners pick them up from their rings).
void take_orphans(Arena::Impl& im, unsigned me) {
    std::lock_guard lk(im.orphan_mu);
    size_t kept = 0;
    for (void* p : im.orphans) {
        ZoneHeader* z = zone_of(p);
        if (z->owner_core == me) {
            take_entry(p);
            im.nocore_remote_frees.fetch_add(1, std::memory_order_relaxed);
        } else if (!im.cores[z->owner_core].ring.load(std::memory_order_acquire)->push(p))
            im.orphans[kept++] = p;
        else
            im.nocore_remote_frees.fetch_add(1, std::memory_order_relaxed);
    }
    im.orphans.resize(kept);
    im.have_orphans.store(kept != 0, std::memory_order_release);
}

void drain(Arena::Impl& im, unsigned me) {
    CoreState& cs = im.cores[me];
    if (!cs.deferred.empty()) flush_deferred(im, cs);
    if (CRESCENT_UNLIKELY(im.have_orphans.load(std::memory_order_acquire))) take_orphans(im, me);
    ReturnRing* r = cs.ring.load(std::memory_order_relaxed);
    if (!r) return;
    while (void* p = r->pop()) take_entry(p);
}

// Same as the inline path of Arena::alloc.
inline std::byte* pop_obj(ZoneHeader* z, CoreHot& h, unsigned cls) {
    std::byte* p = *z->free_sp--;
    z->ctx()[z->index_of(p)].biased.store(1, std::memory_order_relaxed); // shared is 0 while free
    detail::note_alloc(h, cls);
    return p;
}

} // namespace

// --- debug checks -----------------------------------------------------------

namespace detail {

void bad_pointer(const void* p, const char* what) {
    std::fprintf(stderr, "crescent zbuf: bad pointer %p: %s\n", p, what);
    std::fflush(stderr);
    std::abort();
}

void check_pointer(const void* p, const char* op) {
    char msg[160];
    auto fail = [&](const char* why) {
        std::snprintf(msg, sizeof msg, "%s: %s", op, why);
        bad_pointer(p, msg);
    };
    if (!contains(p)) fail("not inside the zbuf arena (foreign pointer)");
    ZoneHeader* z = zone_of(p);
    if (z->magic != kZoneMagic) fail("inside a zone that was never handed out");
    auto off = size_t(reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(z));
    if (off < z->obj_offset) fail("inside a zone header, not an obj");
    uint32_t idx = z->index_of(p);
    if (idx >= z->obj_count) fail("past the last obj of its zone");
    // Free: shared 0 and biased 0 or kUnbiased (a merged obj freed by a
    // non-owner keeps kUnbiased until its next alloc). A live obj has biased
    // in 1..kUnbiased-1 (unmerged, I2) or MERGED in shared with count >= 1.
    const ObjCtx& c = z->ctx()[idx];
    uint32_t b = c.biased.load(std::memory_order_relaxed);
    if (c.shared.load(std::memory_order_relaxed) == 0 && (b == 0 || b == kUnbiased))
        fail("refcount is already 0 (double free, or use after free)");
}

void check_obj_start(const void* p, const char* op) {
    check_pointer(p, op);
    char msg[160];
    auto fail = [&](const char* why) {
        std::snprintf(msg, sizeof msg, "%s: %s", op, why);
        bad_pointer(p, msg);
    };
    if (obj_base(p) != p) fail("not the first byte of its obj (a Zbuf holds only those)");
}

namespace {
// The caller made R 0 (invariant I5) and stored shared = 0: back to the
// free stack (owner), the owner's ring, or the Mempool zone's release hook.
void free_obj(ZoneHeader* z, uint32_t idx) {
    unsigned me = t_core;
    if (CRESCENT_UNLIKELY(z->kind == ZoneKind::Mempool)) {
        if (me < kMaxCores)
            g_impl->cores[me].external_released.inc();
        else
            g_impl->nocore_external.fetch_sub(1, std::memory_order_relaxed);
        z->release(z, idx);
        return;
    }
    if (z->owner_core == me) { // a merged obj's last reference on its owner
        free_local(z, z->obj(idx));
        return;
    }
    remote_free(*g_impl, z->obj(idx), z->owner_core, me);
}
} // namespace

void unref_shared(ZoneHeader* z, uint32_t idx, ObjCtx& c) {
    uint32_t w = c.shared.load(std::memory_order_acquire);
    if (w == (kShared1 | kMerged)) {
        // Count 1, merged, not queued: the caller holds the only reference
        // (I1, I2); nobody can race with it. Free without a locked instruction.
        c.shared.store(0, std::memory_order_relaxed);
        free_obj(z, idx);
        return;
    }
    // Decrement; a count that goes negative (the caller dropped a reference
    // the owner counted in `biased`) sets QUEUED in the same CAS, so that no
    // free can come between the two (I4).
    uint32_t nw;
    do {
        nw = w - kShared1;
        if (int32_t(nw) < 0) nw |= kQueued;
    } while (!c.shared.compare_exchange_weak(w, nw, std::memory_order_acq_rel, std::memory_order_acquire));
    if (nw == kMerged) { // count 0, merged, not queued: the last reference (I5)
        c.shared.store(0, std::memory_order_relaxed);
        free_obj(z, idx);
        return;
    }
    if ((nw & kQueued) == 0 || (w & kQueued) != 0) return; // still held, or a request is on its way
    unsigned me = t_core;
    const unsigned owner = z->owner_core;
    // Only a Slab zone's non-owner can hold a reference counted in `biased`;
    // anything else is a refcount underflow.
    if (CRESCENT_UNLIKELY(owner >= kMaxCores || owner == me))
        bad_pointer(z->obj(idx), "unref: refcount underflow (double free)");
    if (me < kMaxCores)
        g_impl->cores[me].merge_requests.inc();
    else
        g_impl->nocore_merge_requests.fetch_add(1, std::memory_order_relaxed);
    remote_free(*g_impl, z->obj(idx) + kMergeTag, owner, me);
}

void owner_unbias(ZoneHeader* z, uint32_t idx, ObjCtx& c) {
    // biased goes 1 -> 0 (the caller's reference): R = count(shared) (I1).
    // Set MERGED so that the last holder frees; if the word reads 0 (the
    // others dropped theirs meanwhile, not QUEUED) free it here (I3).
    uint32_t w = c.shared.load(std::memory_order_acquire);
    for (;;) {
        if (w == 0) return free_owned(z, c, z->obj(idx));
        if (c.shared.compare_exchange_weak(w, w | kMerged, std::memory_order_acq_rel, std::memory_order_acquire))
            break;
    }
    // QUEUED set: the pending merge request frees it if no reference is left
    // by then (I4), so never here even with a count of 0.
    c.biased.store(kUnbiased, std::memory_order_relaxed);
}

void note_external_acquire() {
    unsigned me = t_core;
    if (me < kMaxCores)
        g_impl->cores[me].external_acquired.inc();
    else
        g_impl->nocore_external.fetch_add(1, std::memory_order_relaxed);
}

} // namespace detail

// --- Arena ------------------------------------------------------------------

Arena::Arena(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

bool validate(const Config& cfg, std::string* err) {
    auto fail = [&](std::string m) {
        if (err) *err = std::move(m);
        return false;
    };
    if (g_arena) return fail("a zbuf arena already exists in this process");
    if (cfg.size_classes.empty() || cfg.size_classes.size() > kMaxClasses)
        return fail(fmt::format("need 1..{} size classes, got {}", kMaxClasses, cfg.size_classes.size()));
    for (size_t i = 0; i < cfg.size_classes.size(); ++i) {
        uint32_t s = cfg.size_classes[i];
        if (s < 64 || layout_for(s, ZoneKind::Slab).count == 0)
            return fail(fmt::format("size class {} does not fit a 2 MiB zone (64 B minimum)", s));
        if (i > 0 && s <= cfg.size_classes[i - 1])
            return fail("size classes must be strictly increasing");
    }
    uint32_t r = cfg.return_ring_size;
    if (r < 2 || (r & (r - 1)) != 0) return fail("return_ring_size must be a power of two >= 2");
    return true;
}

std::unique_ptr<Arena::Impl> make_impl(const Config& cfg) {
    auto im = std::make_unique<Arena::Impl>();
    im->cfg = cfg;
    im->nclasses = unsigned(cfg.size_classes.size());
    for (unsigned i = 0; i < im->nclasses; ++i) im->classes[i] = cfg.size_classes[i];
    return im;
}

} // namespace

namespace {
// The inline alloc/free paths' view of the new arena (detail::g_hot).
void publish_hot(const Arena::Impl& im) {
    detail::ArenaHot& h = detail::g_hot;
    h = {};  // every class_size a ~0 sentinel
    for (unsigned i = 0; i < im.nclasses; ++i) h.class_size[i] = im.classes[i];
    h.nclasses = im.nclasses;
    for (unsigned w = 0; w <= 64; ++w) {
        uint64_t smallest = w == 0 ? 0 : uint64_t{1} << (w - 1);  // least size of bit width w
        unsigned c = 0;
        while (c < im.nclasses && smallest > im.classes[c]) ++c;
        h.class_by_width[w] = uint8_t(c);
    }
}
} // namespace

std::unique_ptr<Arena> Arena::create(const Config& cfg, std::string* err) {
    if (!validate(cfg, err)) return nullptr;
    if (cfg.backing == Backing::External) {
        if (err) *err = "Backing::External needs the ExternalMemory overload of Arena::create";
        return nullptr;
    }
    auto im = make_impl(cfg);
    size_t len = align_up(std::max<size_t>(cfg.bytes, kZoneSize), kZoneSize);
    void* mem = MAP_FAILED;
    if (cfg.backing == Backing::Auto || cfg.backing == Backing::Hugetlb) {
        mem = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (21 << MAP_HUGE_SHIFT), -1, 0);
        if (mem != MAP_FAILED) {
            im->backing = Backing::Hugetlb;
            im->map_addr = mem;
            im->map_len = len;
            im->base = static_cast<std::byte*>(mem);
        } else if (cfg.backing == Backing::Hugetlb) {
            if (err) *err = fmt::format("mmap MAP_HUGETLB of {} bytes: {}", len, std::strerror(errno));
            return nullptr;
        } else {
            warn_fallback_once(errno);
        }
    }
    if (mem == MAP_FAILED) {
        // Over-allocate by one zone and trim both ends to a 2 MiB boundary.
        size_t map_len = len + kZoneSize;
        mem = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) {
            if (err) *err = fmt::format("mmap of {} bytes: {}", map_len, std::strerror(errno));
            return nullptr;
        }
        auto start = reinterpret_cast<uintptr_t>(mem);
        uintptr_t aligned = align_up(start, kZoneSize);
        if (aligned > start) munmap(mem, aligned - start);
        uintptr_t tail = aligned + len, end = start + map_len;
        if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
        (void)madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE); // THP if available
        im->backing = Backing::Anonymous;
        im->map_addr = reinterpret_cast<void*>(aligned);
        im->map_len = len;
        im->base = reinterpret_cast<std::byte*>(aligned);
    }
    im->nzones = uint32_t(len / kZoneSize);
    std::unique_ptr<Arena> a(new Arena(std::move(im)));
    g_arena = a.get();
    g_impl = a->impl_.get();
    publish_hot(*g_impl);
    detail::g_region = {reinterpret_cast<uintptr_t>(g_impl->base),
                        reinterpret_cast<uintptr_t>(g_impl->base) + len};
    return a;
}

std::unique_ptr<Arena> Arena::create(const Config& cfg, ExternalMemory mem, std::string* err) {
    if (!validate(cfg, err)) return nullptr;
    auto va = reinterpret_cast<uintptr_t>(mem.va);
    if (!mem.va || (va & (kZoneSize - 1)) != 0 || mem.len < kZoneSize) {
        if (err) *err = "external memory must be 2 MiB aligned and hold at least one 2 MiB zone";
        return nullptr;
    }
    auto im = make_impl(cfg);
    im->backing = Backing::External;
    im->ext = mem;
    im->base = static_cast<std::byte*>(mem.va);
    im->nzones = uint32_t(mem.len / kZoneSize);
    size_t len = size_t(im->nzones) * kZoneSize;
    std::unique_ptr<Arena> a(new Arena(std::move(im)));
    g_arena = a.get();
    g_impl = a->impl_.get();
    publish_hot(*g_impl);
    detail::g_region = {va, va + len};
    return a;
}

Arena* Arena::current() { return g_arena; }

Arena::~Arena() {
    uint64_t left = live();
    if (left != 0)
        log::get("zbuf")->warn("arena destroyed with {} objs still live (leaked zbufs)", left);
    for (unsigned i = 0; i < kMaxCores; ++i) delete impl_->cores[i].ring.load(std::memory_order_relaxed);
    if (impl_->map_addr) munmap(impl_->map_addr, impl_->map_len);
    if (impl_->backing == Backing::External && impl_->ext.free) impl_->ext.free(impl_->ext.arg);
    detail::g_region = {};
    detail::g_hot = {};
    for (CoreHot& h : detail::g_cores) {  // the next arena's cores start empty
        for (ZoneHeader*& z : h.cur) z = nullptr;
        for (unsigned c = 0; c < kMaxClasses; ++c) {
            h.room[c].store(0, std::memory_order_relaxed);
            h.high_water[c].store(0, std::memory_order_relaxed);
        }
    }
    g_arena = nullptr;
    g_impl = nullptr;
}

// Everything alloc() does not do inline: misses of the current zone, a fresh
// zone, exhaustion, bad sizes, threads without a core.
[[gnu::noinline]] Zbuf Arena::alloc_slow(size_t size) {
    Impl& im = *impl_;
    unsigned core = t_core;
    unsigned cls = 0;
    while (cls < im.nclasses && size > im.classes[cls]) ++cls;
    if (cls == im.nclasses) {
        im.too_large.fetch_add(1, std::memory_order_relaxed);
        return {};
    }
    if (core >= kMaxCores) {
        static std::once_flag once;
        std::call_once(once, [] {
            log::get("zbuf")->error("zbuf alloc from a thread without a CoreScope: failing it (counted)");
        });
        im.nocore_alloc_failed.fetch_add(1, std::memory_order_relaxed);
        return {};
    }
    CoreState& cs = im.cores[core];
    CoreHot& h = im.hot[core];
    // 1. Frees other cores sent back.
    drain(im, core);
    ZoneHeader* z = h.cur[cls];
    if (!z || z->free_count() == 0) {
        // 2. Another zone of ours with free objs, 3. a fresh zone.
        z = nullptr;
        for (ZoneHeader* o : cs.zones[cls])
            if (o->free_count() != 0) { z = o; break; }
        if (!z) z = im.take_for_core(core, cls);
        if (!z) {
            cs.alloc_failed[cls].inc();
            return {};
        }
        h.cur[cls] = z;
    }
    return Zbuf(pop_obj(z, h, cls));
}

ZoneHeader* Arena::take_zone(uint32_t obj_size, ZoneKind kind, ReleaseFn release, void* release_arg) {
    return take_zones(1, obj_size, kind, release, release_arg);
}

ZoneHeader* Arena::take_zones(uint32_t count, uint32_t obj_size, ZoneKind kind, ReleaseFn release,
                              void* release_arg) {
    if (layout_for(obj_size, kind).count == 0) return nullptr;
    if (kind == ZoneKind::Mempool && !release) return nullptr;
    ZoneHeader* first = impl_->take(count);
    if (!first) return nullptr;
    auto first_index = uint32_t((first->base() - impl_->base) / kZoneSize);
    for (uint32_t i = 0; i < count; ++i) {
        auto* z = reinterpret_cast<ZoneHeader*>(first->base() + size_t(i) * kZoneSize);
        // Integration zones belong to no core and no size class; Slab zones
        // taken this way are freed through the return ring of no one, so only
        // Mempool zones make sense for integrations.
        impl_->format(z, first_index + i, obj_size, uint16_t(kMaxClasses), uint16_t(kNoOwner), kind,
                      release, release_arg);
    }
    return first;
}

uint32_t Arena::objs_per_zone(uint32_t obj_size, ZoneKind kind) { return layout_for(obj_size, kind).count; }

void Arena::drain_returns() {
    unsigned me = t_core;
    if (me < kMaxCores) drain(*impl_, me);
}

Stats Arena::stats() const {
    const Impl& im = *impl_;
    Stats s;
    s.backing = im.backing;
    s.bytes = size_t(im.nzones) * kZoneSize;
    s.zones_total = im.nzones;
    s.zones_used = im.zones_used.load(std::memory_order_relaxed);
    s.zones_reclaimed = im.zones_reclaimed.load(std::memory_order_relaxed);
    s.alloc_too_large = im.too_large.load(std::memory_order_relaxed);
    s.remote_frees = im.nocore_remote_frees.load(std::memory_order_relaxed);
    s.merge_requests = im.nocore_merge_requests.load(std::memory_order_relaxed);
    s.return_ring_full = im.nocore_ring_full.load(std::memory_order_relaxed);
    int64_t ext = im.nocore_external.load(std::memory_order_relaxed);
    s.classes.resize(im.nclasses);
    for (unsigned c = 0; c < im.nclasses; ++c) {
        ClassStats& cs = s.classes[c];
        cs.obj_size = im.classes[c];
        cs.zones = im.class_zones[c].load(std::memory_order_relaxed);
        cs.capacity = cs.zones * layout_for(cs.obj_size, ZoneKind::Slab).count;
    }
    if (!s.classes.empty()) s.classes[0].alloc_failed += im.nocore_alloc_failed.load(std::memory_order_relaxed);
    for (unsigned k = 0; k < kMaxCores; ++k) {
        const CoreState& core = im.cores[k];
        for (unsigned c = 0; c < im.nclasses; ++c) {
            ClassStats& cs = s.classes[c];
            const CoreHot& hot = im.hot[k];
            uint64_t l = detail::live_of(hot, c);
            cs.live += l;
            cs.live_per_core[k] = l;
            cs.high_water += hot.high_water[c].load(std::memory_order_relaxed);
            cs.alloc_failed += core.alloc_failed[c].get();
        }
        s.core_limit_refused += core.limit_refused.get();
        s.remote_frees += core.remote_frees.get();
        s.merge_requests += core.merge_requests.get();
        s.return_ring_full += core.return_ring_full.get();
        s.deferred += core.deferred_now.get();
        ext += int64_t(core.external_acquired.get() - core.external_released.get());
    }
    s.external_live = uint64_t(std::max<int64_t>(ext, 0));
    if (im.have_orphans.load(std::memory_order_acquire)) {
        std::lock_guard lk(im.orphan_mu);
        s.deferred += im.orphans.size();
    }
    return s;
}

uint64_t Arena::live() const { return stats().live_total(); }

void Arena::set_core_limit(unsigned core, size_t bytes) {
    if (core >= kMaxCores) return;
    const size_t zones = (bytes + kZoneSize - 1) / kZoneSize;
    impl_->cores[core].zone_limit.store(uint32_t(std::min<size_t>(zones, UINT32_MAX)), std::memory_order_relaxed);
}

size_t Arena::core_limit(unsigned core) const {
    if (core >= kMaxCores) return 0;
    return size_t(impl_->cores[core].zone_limit.load(std::memory_order_relaxed)) * kZoneSize;
}

Arena::CoreUsage Arena::core_usage(unsigned core) const {
    CoreUsage u;
    if (core >= kMaxCores) return u;
    const CoreState& cs = impl_->cores[core];
    u.zones = cs.zone_count.load(std::memory_order_relaxed);
    u.limit_zones = cs.zone_limit.load(std::memory_order_relaxed);
    u.limit_refused = cs.limit_refused.get();
    return u;
}

const Config& Arena::config() const { return impl_->cfg; }

Backing Arena::backing() const { return impl_->backing; }

// --- cores ------------------------------------------------------------------

CoreScope::CoreScope(unsigned id) : id_(id), prev_(t_core) {
    if (id >= kMaxCores) {
        std::fprintf(stderr, "crescent zbuf: CoreScope(%u): core ids are 0..%u\n", id, kMaxCores - 1);
        std::abort();
    }
    if constexpr (kDebugChecks) {
        uint64_t bit = uint64_t{1} << id;
        if (id != prev_ && (g_core_ids_in_use.fetch_or(bit) & bit) != 0) {
            std::fprintf(stderr, "crescent zbuf: CoreScope(%u): core id already used by another live scope\n", id);
            std::abort();
        }
    }
    t_core = id;
    detail::t_hot = &detail::g_cores[id];
}

CoreScope::~CoreScope() {
    if constexpr (kDebugChecks) {
        if (id_ != prev_) g_core_ids_in_use.fetch_and(~(uint64_t{1} << id_));
    }
    t_core = prev_;
    detail::t_hot = prev_ < kMaxCores ? &detail::g_cores[prev_] : nullptr;
}

unsigned current_core() { return t_core; }

} // namespace crescent::zbuf
