// crescent — zbuf: the refcounted hugepage slab (Luna §6.1).
//
// One arena per process reserves hugepage memory and cuts it into 2 MiB-aligned
// memory zones. Each zone holds objs of one size class:
//
//   zone base (2 MiB aligned)
//   +-------------+-------------------+-----+------------------+--------+--------+-----+
//   | ZoneHeader  | ObjCtx[obj_count] | ... | free stack       | obj 0  | obj 1  | ... |
//   +-------------+-------------------+-----+------------------+--------+--------+-----+
//                                                              ^ base + obj_offset
//
// (The free stack, Slab zones only, ends right below obj 0, in the slack the
// objs' alignment leaves: see layout_for() in zbuf.cpp.)
//
// From any address inside any obj, everything is arithmetic: the zone is the
// address rounded down to 2 MiB, the obj index is (addr - first obj) / obj size,
// the refcount is ctx[index], the IOVA is zone IOVA + (addr - zone base).
//
// Ownership: a `Zbuf` owns one reference to an obj; a `Slice` is a Zbuf plus an
// (offset, length) window. Both are move-only; `share()` takes another
// reference explicitly so that every copy of ownership shows in the code.
//
// Threads: each engine thread registers as a core (`CoreScope`). Zones are owned
// by one core; allocation and frees on the owning core touch no atomics and no
// locks. A free from another core travels back through the owner's bounded
// return ring (MPSC); when that ring is full the freeing core parks the obj on
// a local deferred list and retries later — never a shared lock.
//
// Refcounts: biased reference counting (Choi, Shull, Torrellas, "Biased
// Reference Counting", PACT 2018). An obj of a Slab zone is biased towards its
// zone's owner core, the only core that allocates it. Each ObjCtx holds
//
//   biased  the owner's count: written by the owner core only, with plain
//           (relaxed) loads and stores. 0 = free; 1..kUnbiased-1 = live and
//           unmerged; kUnbiased = merged (the owner now counts in `shared`).
//   shared  an atomic word: bit 0 MERGED, bit 1 QUEUED, bits 2..31 a signed
//           count (two's complement, unit kShared1 = 4, so flags never carry).
//           0 for every free obj.
//
// The owner core (t_core == owner_core) refs and unrefs with `biased`: no
// locked instruction, including the final free when `shared` reads 0. Every
// other thread (other cores, threads without a core, and every thread for
// Mempool zones, whose owner is kNoOwner) adds/subtracts kShared1 on `shared`.
// A non-owner may drop a reference the owner counted (a Slice moved to it):
// `shared`'s count goes negative, and the same CAS sets QUEUED; whoever set
// QUEUED sends one merge request (the obj pointer | 1) through the owner's
// return ring. The owner's drain merges: shared += biased, MERGED on, QUEUED
// off, biased = kUnbiased; from then on everyone (the owner too) counts in
// `shared`, and the decrement that leaves exactly MERGED (count 0, not
// QUEUED) frees. When the owner's own biased count drops to 0 and `shared` is
// not 0, it sets MERGED instead (a CAS) and the last holder frees.
//
// Invariants (R = references held now, by any thread):
//  I1  R = biased' + count(shared), biased' = (biased == kUnbiased ? 0 : biased):
//      each op moves one of them by one; a merge moves biased into shared in
//      one CAS by the owner, which alone reads or writes biased.
//  I2  a live unmerged obj has biased >= 1 (it starts at 1; the owner's drop
//      to 0 frees or merges in the same step), so count(shared) < 0 only
//      while unmerged; MERGED implies biased' = 0, so then R = count(shared).
//  I3  an op (ref, unref, a handle's move) needs a holder. So when R = 0 no
//      thread can touch the obj again: the owner's load of `shared` == 0
//      with biased' = 0 means R = 0 (a concurrent ref or unref would be by a
//      holder, counted in R), so it frees without an atomic RMW. The load
//      cannot read a stale 0: every shared-counted reference the owner
//      dropped through `biased` was handed to it, so its add happens before
//      the load, and an alive reference keeps the count above the drops.
//      The acquire load pairs with the release RMWs of earlier holders.
//  I4  QUEUED set = one merge request is in flight (ring, deferred list or
//      orphans). Only the owner's merge clears QUEUED, and no path frees an
//      obj while QUEUED is set (the owner's drop to 0 only sets MERGED then;
//      a decrement that leaves MERGED|QUEUED does not free): the merge frees
//      it if R = 0, so no request can meet a freed or reused obj. After the
//      merge count(shared) >= 0 (I2), so there is at most one request per
//      allocation.
//  I5  who frees: the owner (biased 1 -> 0 with shared 0; its drop to 0
//      setting MERGED on a word of 0; a merge leaving count 0), or the
//      thread whose decrement leaves exactly MERGED; that thread stores
//      shared = 0 and frees locally, through the owner's ring, or through the
//      Mempool zone's release hook. Exactly one decrement or merge makes R 0.
// Count-1 shortcuts (DPDK's rte_mbuf trick): a `shared` of exactly
// kShared1|MERGED (Mempool objs start there) is the caller's reference only:
// ref is a plain store, unref a plain store of 0 and a free.
// ref+unref on the owner core is two plain read-modify-writes of `biased`.
// Counts must stay below 2^29.
//
// Debug checks (compiled in when NDEBUG is not defined, or with
// CRESCENT_DEBUG_CHECKS): ref/unref of a pointer outside the arena, outside an
// obj, or of an obj whose refcount is already 0 (double free) print the pointer
// and abort.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace crescent::zbuf {

inline constexpr unsigned kZoneShift = 21; // log2 of kZoneSize
inline constexpr size_t kZoneSize = size_t{1} << kZoneShift; // bytes per zone (2 MiB), also its alignment
inline constexpr uint64_t kZoneMagic = 0x7a6275665a4f4e45ull; // "zbufZONE"
inline constexpr uint64_t kBadIova = ~uint64_t{0}; // "IOVA unknown" (ZoneHeader::iova, iova())
inline constexpr unsigned kMaxCores = 64; // CoreScope ids are 0..kMaxCores-1
inline constexpr unsigned kNoCore = 0xffff; // current_core() of a thread without a CoreScope
inline constexpr unsigned kNoOwner = 0xfffe; // owner_core of integration (Mempool) zones
inline constexpr unsigned kMaxClasses = 8; // most entries in Config::size_classes
// index_of(): off * div_magic >> 42 with div_magic = ceil(2^42 / obj_size) is
// exact for every off < 2 MiB and every obj size (exactly off >> log2 for
// powers of two), so one multiply serves all sizes without a branch.
inline constexpr unsigned kDivShift = 42;

#if !defined(NDEBUG) || defined(CRESCENT_DEBUG_CHECKS)
// Whether ref()/unref() validate their pointer and abort on a bad one (see
// the header comment): on without NDEBUG or with CRESCENT_DEBUG_CHECKS.
inline constexpr bool kDebugChecks = true;
#else
inline constexpr bool kDebugChecks = false;
#endif

// Per-obj context, in an array right after the zone header. The counts are
// explained in the header comment (biased reference counting).
struct ObjCtx {
    // The owner core's count: 0 = free, 1..kUnbiased-1 live, kUnbiased merged.
    // Written by the zone's owner core only; atomic with relaxed loads and
    // stores (plain moves) so that refcount() and the debug checks may read it
    // from other threads.
    std::atomic<uint32_t> biased;
    // MERGED (bit 0) | QUEUED (bit 1) | signed count x kShared1; 0 when free.
    std::atomic<uint32_t> shared;
    uint64_t meta; // integration metadata (e.g. the rte_mbuf of a pool obj)
};
static_assert(sizeof(ObjCtx) == 16);
// `shared`'s bits (see ObjCtx and the header comment).
inline constexpr uint32_t kMerged = 1;       // the owner's count is merged into shared
inline constexpr uint32_t kQueued = 2;       // a merge request is on its way to the owner
inline constexpr uint32_t kShared1 = 4;      // one reference in shared's count
inline constexpr uint32_t kUnbiased = 1u << 31; // `biased` of a merged obj

// Who a zone's objs return to when their last reference goes.
enum class ZoneKind : uint8_t {
    Slab,    // objs come and go through the zone's free list
    Mempool, // objs belong to an rte_mempool; the last unref calls `release`
};

struct ZoneHeader;
// The release hook of a Mempool zone: called, on whichever core drops the
// last reference, with the zone and the index of the obj to give back.
using ReleaseFn = void (*)(ZoneHeader* zone, uint32_t obj_index);

// The first bytes of every 2 MiB zone (see the layout in the header comment):
// its geometry, IOVA, owner and free list. Found from any obj pointer by
// zone_of(). Written by the arena and, for the free list, by the owner core
// only; integrations read it and may use `live`.
struct alignas(64) ZoneHeader {
    uint64_t magic;       // kZoneMagic while the zone is live
    uint64_t iova;        // IOVA of the zone base (kBadIova if unknown)
    uint32_t obj_size;    // bytes per obj
    uint32_t obj_count;   // objs in this zone
    uint32_t obj_offset;  // from zone base to obj 0 (64-byte aligned)
    uint32_t obj_shift;   // log2(obj_size) when a power of two, else 0 (informational)
    uint64_t div_magic;   // ceil(2^kDivShift / obj_size): index_of()'s multiplier
    uint16_t size_class;  // index into the arena's size classes
    uint16_t owner_core;  // the only core that pops/pushes this zone's free list
    ZoneKind kind;        // Slab or Mempool (how the last unref frees an obj)
    uint8_t pad_[3];      // unused (keeps the layout explicit)
    ReleaseFn release;    // Mempool zones: returns an obj to its pool
    void* release_arg;    // opaque argument for `release` (e.g. the rte_mempool)
    // Free list (owner core only): a stack of the free objs' first bytes.
    // Pointers, like rte_mempool's cache, not indices: alloc's pointer is one
    // load and a free pushes the pointer it holds, so no index <-> address
    // arithmetic sits on the chain from one free to the next alloc. The top
    // is a pointer too, over a nullptr sentinel below the bottom entry: a pop
    // reads free_sp and the entry, and finds the stack empty when the entry
    // is the sentinel (no count to load and compare).
    std::byte** free_sp;    // top entry; free_stack - 1 (the sentinel) when empty
    std::byte** free_stack; // bottom entry of obj_count; free_stack[-1] == nullptr (Slab only)
    uint32_t live;        // unused for Slab zones: their live count is obj_count - free_count()
                          // (kept off the alloc/free path); free for integrations
    uint32_t zone_index;  // position in the arena
    // Slab zones: the owner core's room counter of this zone's class
    // (&g_cores[owner_core].room[size_class]), so that a free reaches it with
    // one load; nullptr for Mempool zones.
    std::atomic<uint64_t>* owner_room;

    // Objs on the free stack now (owner core only).
    uint32_t free_count() const { return uint32_t(free_sp + 1 - free_stack); }
    // The ObjCtx array (obj_count entries) right after the header.
    ObjCtx* ctx() { return reinterpret_cast<ObjCtx*>(this + 1); }
    // The zone's first byte (2 MiB aligned; the header itself).
    std::byte* base() { return reinterpret_cast<std::byte*>(this); }
    // First byte of obj `i` (< obj_count).
    std::byte* obj(uint32_t i) { return base() + obj_offset + size_t(i) * obj_size; }

    // Index of the obj that contains `p`, which must point into one of this
    // zone's objs: one multiply for every size (no division, no branch; a
    // variable shift would cost a branch on obj_shift and 3 uops on Intel).
    uint32_t index_of(const void* p) const {
        uint32_t off = uint32_t(reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(this)) - obj_offset;
        return uint32_t((uint64_t(off) * div_magic) >> kDivShift);
    }
};

// --- O(1) arithmetic from any pointer inside an obj -------------------------

namespace detail {
struct Region {
    uintptr_t base = 0; // first zone, 2 MiB aligned
    uintptr_t end = 0;
};
extern Region g_region; // the live arena's address range (one arena per process)
[[noreturn]] void bad_pointer(const void* p, const char* what); // diagnostic + abort
// unref() by anyone but the owner of an unmerged obj: decrement `shared`
// (free at count 0 when MERGED; a merge request when it goes negative).
void unref_shared(ZoneHeader* z, uint32_t idx, ObjCtx& c);
// The owner dropped its biased count to 0 while `shared` was not 0: set
// MERGED (or free, if the word became 0 meanwhile).
void owner_unbias(ZoneHeader* z, uint32_t idx, ObjCtx& c);
// Debug-build validation of a pointer handed to ref/unref (aborts if bad).
void check_pointer(const void* p, const char* op);
// An integration handed out a Mempool-zone obj as a zbuf with refcount 1 (e.g.
// an RX mbuf turned into a Slice): counted in Stats::external_live until the
// last unref releases it.
void note_external_acquire();
// An integration hands out a free Mempool-zone obj as a zbuf with one
// reference: its count lives in `shared` only (count 1, MERGED), then
// note_external_acquire().
inline void set_external_ref(ObjCtx& c) { c.shared.store(kShared1 | kMerged, std::memory_order_relaxed); }

// The hot per-core state that the inline alloc/free paths touch. Written only
// by its core (relaxed load+store: plain moves), read by Arena::stats().
//
// The objs of this core's zones held now (live) are kept as high_water - room,
// where room is how far live is below its peak: an alloc decrements room (or,
// at a new peak, increments high_water) and a free increments room, one
// counter each instead of live plus a compare with the peak on every alloc.
struct alignas(64) CoreHot {
    // Slab zone alloc() pops from, per class; entries from the arena's class
    // count on stay nullptr (alloc()'s search may end on the first of them).
    ZoneHeader* cur[kMaxClasses + 1];
    std::atomic<uint64_t> room[kMaxClasses];       // high_water - live (>= 0)
    std::atomic<uint64_t> high_water[kMaxClasses]; // max of live
};
// One per core id, for the process (at most one arena): CoreScope points the
// thread at its entry whether or not an arena exists yet.
extern CoreHot g_cores[kMaxCores];
struct ArenaHot {
    // Ascending, then ~0 from index nclasses on: alloc()'s search stops on
    // that sentinel, with no separate bound check.
    uint64_t class_size[kMaxClasses + 1] = {~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull};
    uint32_t nclasses = 0; // 0 without an arena
    // class_by_width[w]: the first class that can hold a size of bit width w
    // (>= 2^(w-1)); nclasses when none. alloc() starts its search there, so
    // the walk over class_size takes 0-1 steps instead of up to kMaxClasses.
    uint8_t class_by_width[65] = {};
};
static_assert(kMaxClasses == 8, "ArenaHot::class_size's initializer lists kMaxClasses + 1 sentinels");
extern ArenaHot g_hot;
// The calling thread's core id (CoreScope), kNoCore if none. __thread rather
// than thread_local: no TLS wrapper call; initial-exec: one %fs-relative load.
extern __thread unsigned t_core __attribute__((tls_model("initial-exec")));
// &g_cores[t_core], nullptr without a CoreScope (set together with t_core).
extern __thread CoreHot* t_hot __attribute__((tls_model("initial-exec")));

// One obj of class `cls` of h's core handed out / given back (its core only).
inline void note_alloc(CoreHot& h, unsigned cls) {
    uint64_t r = h.room[cls].load(std::memory_order_relaxed);
    if (__builtin_expect(r != 0, 1))
        h.room[cls].store(r - 1, std::memory_order_relaxed);
    else
        h.high_water[cls].store(h.high_water[cls].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
// `room` is the zone's owner_room.
inline void note_free(std::atomic<uint64_t>& room) {
    room.store(room.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
// live of (h's core, cls), from any thread: room is read first, so a peak
// reached between the two loads cannot make it negative (clamped anyway).
inline uint64_t live_of(const CoreHot& h, unsigned cls) {
    uint64_t r = h.room[cls].load(std::memory_order_acquire);
    uint64_t hw = h.high_water[cls].load(std::memory_order_relaxed);
    return hw > r ? hw - r : 0;
}
} // namespace detail

// Whether `p` lies in the live arena's address range (any zone, any kind).
// One subtraction and compare; false when there is no arena.
inline bool contains(const void* p) {
    auto a = reinterpret_cast<uintptr_t>(p);
    return a - detail::g_region.base < detail::g_region.end - detail::g_region.base;
}

// The header of the zone containing `p` (`p` rounded down to 2 MiB); only
// meaningful when contains(p).
inline ZoneHeader* zone_of(const void* p) {
    return reinterpret_cast<ZoneHeader*>(reinterpret_cast<uintptr_t>(p) & ~(kZoneSize - 1));
}

// Pointer to the first byte of the obj that contains `p`.
inline std::byte* obj_base(const void* p) {
    ZoneHeader* z = zone_of(p);
    return z->obj(z->index_of(p));
}

// The refcount/owner context of the obj that contains `p`.
inline ObjCtx& ctx_of(const void* p) {
    ZoneHeader* z = zone_of(p);
    return z->ctx()[z->index_of(p)];
}

// Bytes of the obj that contains `p` (its size class), not what is used.
inline size_t obj_size(const void* p) { return zone_of(p)->obj_size; }

// The IO address of `p` for a device's DMA: the zone's IOVA plus the offset
// of `p` in the zone (IOVA = VA with Anonymous backing).
inline uint64_t iova(const void* p) {
    ZoneHeader* z = zone_of(p);
    return z->iova + (reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(z));
}

// References held now on the obj that contains `p` (0 = free): biased (unless
// merged) + shared's count. A relaxed snapshot, for tests and diagnostics:
// another core may change it.
inline uint32_t refcount(const void* p) {
    const ObjCtx& c = ctx_of(p);
    uint32_t b = c.biased.load(std::memory_order_relaxed);
    auto n = int32_t(c.shared.load(std::memory_order_relaxed)) >> 2; // the signed count
    return uint32_t(int64_t(b < kUnbiased ? b : 0) + n);
}

namespace detail {
// ref() by anyone but the owner of an unmerged obj. Exactly count 1 and
// MERGED (not QUEUED): the caller holds the only reference, so nobody can race
// with it and 1 -> 2 is a plain store (unref's count-1 shortcut, the other
// way); else one atomic add.
inline void ref_shared(ObjCtx& c) {
    if (c.shared.load(std::memory_order_relaxed) == (kShared1 | kMerged))
        c.shared.store(2 * kShared1 | kMerged, std::memory_order_relaxed);
    else
        c.shared.fetch_add(kShared1, std::memory_order_relaxed);
}
} // namespace detail

// Take one more reference on the obj containing p (any core). On the owner
// core of an unmerged obj: biased + 1, a plain load and store; else
// detail::ref_shared().
inline void ref(const void* p) {
    if constexpr (kDebugChecks) detail::check_pointer(p, "ref");
    ZoneHeader* z = zone_of(p);
    ObjCtx& c = z->ctx()[z->index_of(p)];
    if (z->owner_core == detail::t_core) {
        uint32_t b = c.biased.load(std::memory_order_relaxed);
        if (__builtin_expect(b < kUnbiased, 1)) {
            c.biased.store(b + 1, std::memory_order_relaxed);
            return;
        }
    }
    detail::ref_shared(c);
}

namespace detail {
// unref's body: drop one reference on obj `idx` of zone z, whose first byte
// is `obj` (what goes back on the free stack).
inline void unref_at(ZoneHeader* z, uint32_t idx, std::byte* obj) {
    ObjCtx& c = z->ctx()[idx];
    // The owner core (integration zones have kNoOwner, threads without a core
    // kNoCore) of an unmerged obj: biased - 1, no locked instruction.
    if (z->owner_core == t_core) {
        uint32_t b = c.biased.load(std::memory_order_relaxed);
        if (b - 2 < kUnbiased - 2) { // 2..kUnbiased-1: not the last biased reference
            c.biased.store(b - 1, std::memory_order_relaxed);
            return;
        }
        if (b == 1) {
            // The owner's count reaches 0. `shared` 0 (no count, not QUEUED):
            // no reference is left anywhere (invariant I3), free it on its
            // zone's stack with plain stores. Acquire pairs with the release
            // of other holders' earlier decrements.
            if (__builtin_expect(c.shared.load(std::memory_order_acquire) == 0, 1)) {
                c.biased.store(0, std::memory_order_relaxed);
                *++z->free_sp = obj;
                note_free(*z->owner_room);
            } else {
                owner_unbias(z, idx, c);
            }
            return;
        }
        // kUnbiased (merged): counted in shared, as for everyone else.
    }
    unref_shared(z, idx, c);
}
// Debug-build check that `p` is an obj's first byte (aborts if not).
void check_obj_start(const void* p, const char* op);
} // namespace detail

// Drop one reference on the obj containing p; at zero the obj is freed
// (back to its zone free list, its owner's return ring, or its mempool).
inline void unref(const void* p) {
    if constexpr (kDebugChecks) detail::check_pointer(p, "unref");
    ZoneHeader* z = zone_of(p);
    uint32_t idx = z->index_of(p);
    detail::unref_at(z, idx, z->obj(idx));
}

// unref() of `obj`, which must be an obj's first byte (what Zbuf holds): the
// free pushes `obj` itself, without computing the obj's start from an index.
inline void unref_obj(std::byte* obj) {
    if constexpr (kDebugChecks) detail::check_obj_start(obj, "unref");
    ZoneHeader* z = zone_of(obj);
    detail::unref_at(z, z->index_of(obj), obj);
}

// --- owning handles ---------------------------------------------------------

// Owns one reference to an obj, or nothing. Move-only.
class Zbuf {
public:
    Zbuf() = default;
    Zbuf(const Zbuf&) = delete;
    Zbuf& operator=(const Zbuf&) = delete;
    // Takes over `o`'s reference; `o` is left empty.
    Zbuf(Zbuf&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    // Drops this handle's reference (if any), then takes over `o`'s.
    Zbuf& operator=(Zbuf&& o) noexcept {
        if (this != &o) { reset(); p_ = std::exchange(o.p_, nullptr); }
        return *this;
    }
    ~Zbuf() { reset(); }

    // Take over a reference the caller already holds on the obj containing p.
    static Zbuf adopt(void* p) { return Zbuf(obj_base(p)); }
    // Take a new reference on the obj containing p.
    static Zbuf share_of(const void* p) { zbuf::ref(p); return Zbuf(obj_base(p)); }

    // zbuf::ref qualified: unqualified, ADL on std::byte* finds std::ref.
    Zbuf share() const { zbuf::ref(p_); return Zbuf(p_); }
    // Drops the reference (freeing the obj if it was the last one); the
    // handle becomes empty. Any core.
    void reset() { if (p_) { unref_obj(p_); p_ = nullptr; } }
    // Give up ownership without dropping the reference (the caller now owns it).
    std::byte* release() { return std::exchange(p_, nullptr); }

    // True when the handle holds a reference.
    explicit operator bool() const { return p_ != nullptr; }
    // First byte of the obj (nullptr when empty); valid while this handle or
    // another reference keeps the obj alive.
    std::byte* data() const { return p_; }
    // Bytes of the obj (its size class, may exceed what was asked); 0 when empty.
    size_t capacity() const { return p_ ? obj_size(p_) : 0; }
    // IO address of data() for DMA (must not be called on an empty handle).
    uint64_t iova() const { return zbuf::iova(p_); }
    // The whole obj, [data(), data() + capacity()).
    std::span<std::byte> bytes() const { return {p_, capacity()}; }

private:
    friend class Arena;
    explicit Zbuf(std::byte* p) : p_(p) {}
    std::byte* p_ = nullptr; // nullptr, or the first byte of an obj (reset() relies on it)
};

// A window [offset, offset+length) of an obj, owning one reference. Move-only.
class Slice {
public:
    Slice() = default;
    // Takes over `buf`'s reference as the window [offset, offset+length),
    // which must lie within buf.capacity() (not checked).
    Slice(Zbuf buf, size_t offset, size_t length)
        : buf_(std::move(buf)), off_(uint32_t(offset)), len_(uint32_t(length)) {}
    // Takes over `buf`'s reference as a window over the whole obj.
    explicit Slice(Zbuf buf) : buf_(std::move(buf)), off_(0), len_(uint32_t(buf_.capacity())) {}
    // New reference on the obj containing [p, p+len) (which must lie in one obj).
    static Slice share_of(const void* p, size_t len) {
        Zbuf z = Zbuf::share_of(p);
        size_t off = size_t(static_cast<const std::byte*>(p) - z.data());
        return Slice(std::move(z), off, len);
    }

    // Takes over the other slice's reference and window; it is left empty.
    Slice(Slice&&) noexcept = default;
    // Drops this slice's reference (if any), then takes over the other's.
    Slice& operator=(Slice&&) noexcept = default;

    // Another reference to the same obj and window (any core; a plain add on
    // the obj's owner core, else one atomic add).
    Slice share() const { return Slice(buf_.share(), off_, len_); }
    // Gives up the obj reference (the slice becomes empty) to whoever takes
    // over its lifetime, e.g. an extbuf mbuf (zbuf::dpdk::attach_slice).
    Zbuf take_buf() {
        off_ = len_ = 0;
        return std::move(buf_);
    }
    // A new reference to [off, off+len) of this slice.
    Slice sub(size_t off, size_t len) const { return Slice(buf_.share(), off_ + off, len); }

    // First byte of the window; valid while the slice (or another reference)
    // keeps the obj alive.
    std::byte* data() const { return buf_.data() + off_; }
    // Bytes in the window.
    size_t size() const { return len_; }
    // size() == 0 (the slice may still hold a reference).
    bool empty() const { return len_ == 0; }
    // True when the slice holds a reference (even with an empty window).
    explicit operator bool() const { return bool(buf_); }
    // IO address of data() for DMA (the slice must hold a reference).
    uint64_t iova() const { return buf_.iova() + off_; }
    // The window, [data(), data() + size()).
    std::span<std::byte> bytes() const { return {data(), len_}; }
    // The underlying obj reference (still owned by the slice).
    const Zbuf& buf() const { return buf_; }
    // Where the window starts, in bytes from the obj's first byte.
    size_t offset() const { return off_; }

    // Drop the first `n` bytes of the window (n <= size(), not checked).
    void remove_prefix(size_t n) { off_ += uint32_t(n); len_ -= uint32_t(n); }
    // Drop the last `n` bytes of the window (n <= size(), not checked).
    void remove_suffix(size_t n) { len_ -= uint32_t(n); }
    // Grow the window to the right, up to the obj's capacity (for writers).
    void set_size(size_t n) { len_ = uint32_t(n); }
    // Drops the reference and empties the window.
    void reset() { buf_.reset(); off_ = len_ = 0; }

private:
    Zbuf buf_;
    uint32_t off_ = 0;
    uint32_t len_ = 0;
};

// --- the arena --------------------------------------------------------------

enum class Backing : uint8_t {
    Auto,      // hugetlb mmap, falling back to anonymous memory (logged)
    Hugetlb,   // mmap(MAP_HUGETLB) only; fail if no hugepages
    Anonymous, // plain anonymous memory (tests without hugepages; IOVA = VA)
    External,  // memory supplied by the caller (e.g. a DPDK memzone)
};

// How Arena::create() lays out the arena. The defaults suit an engine with
// MTU 1500 (the RX pool uses the 4096 class) and 64 KiB TSO sends.
struct Config {
    // Obj sizes in bytes, strictly increasing, 1..kMaxClasses entries, each
    // >= 64 and small enough for a 2 MiB zone; alloc(n) takes the smallest >= n.
    std::vector<uint32_t> size_classes{2048, 4096, 16384, 65536};
    size_t bytes = 64u << 20;        // total, rounded up to whole zones
    Backing backing = Backing::Auto; // where the memory comes from
    uint32_t return_ring_size = 4096; // per core, power of two
};

// Memory supplied by the caller: `len` bytes at `va` (2 MiB aligned), with an
// IOVA per zone given by `iova_of(zone_va)`.
struct ExternalMemory {
    void* va = nullptr;                // first byte (2 MiB aligned); the caller's memory
    size_t len = 0;                    // bytes at va (whole zones are used)
    // IOVA of the zone at `zone_va`, called once per zone at create().
    uint64_t (*iova_of)(const void* zone_va, void* arg) = nullptr;
    void* arg = nullptr;               // passed to iova_of and free
    void (*free)(void* arg) = nullptr; // called when the arena is destroyed
};

// One size class in Stats (a snapshot; relaxed reads of per-core counters).
struct ClassStats {
    uint32_t obj_size = 0;      // bytes per obj of this class
    uint64_t zones = 0;         // zones formatted for this class now
    uint64_t capacity = 0;      // objs in all zones of this class
    uint64_t live = 0;          // allocated now
    uint64_t high_water = 0;    // peak of live (see Stats: sum of per-core peaks)
    uint64_t alloc_failed = 0;  // alloc() calls of this class that returned empty (out of memory)
    uint64_t live_per_core[kMaxCores] = {}; // live, split by the core owning the zone
};

// high_water of a class is the sum of the per-core high-water marks: exact with
// one core, an upper bound when several cores peak at different times (an exact
// global mark would need a shared atomic on every alloc).
struct Stats {
    std::vector<ClassStats> classes;  // one per Config::size_classes entry, same order
    uint64_t remote_frees = 0;        // frees and merge requests that went through a return ring
    uint64_t merge_requests = 0;      // of those, merge requests (an owner-counted reference dropped on another thread)
    uint64_t return_ring_full = 0;    // times a remote free or merge request had to wait for ring space
    uint64_t deferred = 0;            // remote frees parked now, waiting for ring space
    uint64_t external_live = 0;       // objs of Mempool zones held as zbufs (e.g. RX slices)
    uint64_t alloc_too_large = 0;     // requests larger than the largest size class
    uint64_t zones_total = 0;         // zones in the arena
    uint64_t zones_used = 0;          // handed to a core or an integration
    uint64_t zones_reclaimed = 0;     // idle zones of one class re-formatted for another (arena full)
    uint64_t core_limit_refused = 0;  // allocations refused by cores' limits (Arena::set_core_limit)
    Backing backing = Backing::Auto;  // what was actually used
    size_t bytes = 0;                 // arena size in bytes (whole zones)
    // Objs held now: every class's live plus external_live (what a leak check
    // compares to 0).
    uint64_t live_total() const {
        uint64_t n = external_live;
        for (auto& c : classes) n += c.live;
        return n;
    }
};

// The process-wide zbuf arena: owns the memory and its zones, hands out objs
// to the calling core (alloc() needs a CoreScope) and reports Stats. At most
// one exists per process (current()); it must outlive every Zbuf and Slice.
// Engines and the Runtime create it; tests create their own.
class Arena {
public:
    // Create the process-wide arena. Returns nullptr and sets *err on failure
    // (already one arena, no memory, bad size classes).
    static std::unique_ptr<Arena> create(const Config& cfg, std::string* err);
    // The same over caller-supplied memory (cfg.backing is External; `mem.free`
    // is called when the arena is destroyed).
    static std::unique_ptr<Arena> create(const Config& cfg, ExternalMemory mem, std::string* err);
    static Arena* current(); // the live arena or nullptr
    ~Arena();
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;

    // Smallest size class that fits `size`, from the calling core's zones.
    // Empty handle when size is too large or the memory is exhausted (counted).
    // Inline fast path: pop the current zone's free stack (no atomics, no locks).
    Zbuf alloc(size_t size) {
        const detail::ArenaHot& a = detail::g_hot;
        unsigned cls = a.class_by_width[std::bit_width(size)];
        while (size > a.class_size[cls]) ++cls; // ends on the ~0 sentinel at the latest
        detail::CoreHot* h = detail::t_hot;
        if (__builtin_expect(h != nullptr, 1)) {
            ZoneHeader* z = h->cur[cls]; // nullptr for cls == nclasses (too large)
            std::byte** sp;
            std::byte* p;
            if (__builtin_expect(z != nullptr && (p = *(sp = z->free_sp)) != nullptr, 1)) {
                z->free_sp = sp - 1;
                z->ctx()[z->index_of(p)].biased.store(1, std::memory_order_relaxed); // shared is 0 while free
                detail::note_alloc(*h, cls);
                return Zbuf(p);
            }
        }
        return alloc_slow(size);
    }
    // alloc(size) as a Slice whose window is exactly `size` bytes; an empty
    // Slice on failure. Calling core only (needs a CoreScope).
    Slice alloc_slice(size_t size) {
        Zbuf z = alloc(size);
        return z ? Slice(std::move(z), 0, size) : Slice();
    }

    // A whole fresh zone for an integration (e.g. a DPDK mempool laid over its
    // objs). The zone is not used by alloc(). nullptr when out of zones.
    ZoneHeader* take_zone(uint32_t obj_size, ZoneKind kind, ReleaseFn release, void* release_arg);
    // `count` fresh zones at consecutive addresses (zone i at first->base() +
    // i * kZoneSize), all formatted like take_zone(). nullptr when fewer remain.
    ZoneHeader* take_zones(uint32_t count, uint32_t obj_size, ZoneKind kind, ReleaseFn release,
                           void* release_arg);
    // Objs per zone for a given obj size and kind (the zone layout, no allocation).
    static uint32_t objs_per_zone(uint32_t obj_size, ZoneKind kind);

    // Drain this core's return ring (frees sent by other cores). Engines call it
    // once per loop; alloc() also drains when the free list is empty.
    void drain_returns();

    // Cap the Slab zones core `core` may own at `bytes` (rounded up to whole
    // zones; 0 = no cap but the arena's size): one engine cannot take the
    // arena from the others. A core at its cap re-formats its own idle zones
    // of another class, else alloc() fails (counted in alloc_failed and
    // core_limit_refused). Zones it owns already stay; any thread.
    void set_core_limit(unsigned core, size_t bytes);
    size_t core_limit(unsigned core) const;  // bytes (whole zones), 0 = none
    // One core's memory: the Slab zones it owns, its cap, what the cap refused.
    struct CoreUsage {
        uint64_t zones = 0;          // owned now (x kZoneSize bytes)
        uint64_t limit_zones = 0;    // set_core_limit(), 0 = none
        uint64_t limit_refused = 0;  // allocations that needed a fresh zone, refused by the cap
    };
    CoreUsage core_usage(unsigned core) const;  // any thread (relaxed reads)
    // Bytes of the objs allocated now from `core`'s zones (live objs x their
    // class size); a few relaxed loads.
    uint64_t core_live_bytes(unsigned core) const {
        if (core >= kMaxCores) return 0;
        const detail::CoreHot& h = detail::g_cores[core];
        uint64_t b = 0;
        for (unsigned c = 0; c < detail::g_hot.nclasses; ++c) b += detail::live_of(h, c) * detail::g_hot.class_size[c];
        return b;
    }

    // A snapshot of every counter (any thread; relaxed reads, so counters of
    // running cores may be a moment old).
    Stats stats() const;
    // Objs held now (all classes, all cores, plus Mempool objs held as zbufs).
    // Objs freed remotely but still in a return ring count as live until their
    // owner drains it.
    uint64_t live() const;
    // The Config given to create() (after validation).
    const Config& config() const;
    Backing backing() const; // what was actually used (Auto resolves to Hugetlb or Anonymous)

    struct Impl;
private:
    explicit Arena(std::unique_ptr<Impl> impl);
    Zbuf alloc_slow(size_t size);
    std::unique_ptr<Impl> impl_;
};

// Registers the calling thread as core `id` for the scope's lifetime.
// Two live scopes may not use the same id (debug builds abort if they do); a
// scope may nest inside another on the same thread (the outer id comes back).
// A core's zones and caches outlive the scope: the next thread that takes the
// same id continues with them.
class CoreScope {
public:
    // Registers the calling thread as core `id` (< kMaxCores).
    explicit CoreScope(unsigned id);
    ~CoreScope();
    CoreScope(const CoreScope&) = delete;
    CoreScope& operator=(const CoreScope&) = delete;

private:
    unsigned id_;
    unsigned prev_;
};
unsigned current_core(); // kNoCore when the thread is not registered

} // namespace crescent::zbuf

namespace crescent {
using zbuf::Slice;
using zbuf::Zbuf;
}
