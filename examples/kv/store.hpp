// crescent-kv — the keyspace: string keys to values held as zbuf slices, with
// expiry (Redis's db.c / expire.c semantics for strings).
//
// Values: a value is the vector of slices the request carried (SET moves the
// parsed argument's slices in: no byte is copied), or a fresh small slice
// carved from an arena obj (INCR's result, see Carver). The zbuf rule holds
// throughout: bytes handed to a send are read in place until the peer ACKs
// them, so a stored value's bytes are never written again — SET, INCR, APPEND
// replace the vector, they never modify the bytes it points to. Keys are
// copied (std::string): they are small and need hashing.
//
// When a value is copied after all (StoreConfig): a stored slice keeps its
// whole obj alive, so keeping received buffers has two costs that a server
// must bound.
//   - Small values (<= copy_max, 128 B by default) are copied into carved
//     blocks: one memcpy of a few bytes instead of pinning a 2-16 KiB receive
//     buffer per key (a million 3-byte values would otherwise hold GiBs).
//   - Slices of the NIC's RX pool (Mempool zones: crescent's zero-copy
//     receive) are kept up to rx_pin_budget slices per store; past it the
//     value is copied into arena objs. The pool is a few thousand mbufs: a
//     keyspace holding them would keep it below half, where the engine
//     copies every received burst (EngineStats::rx_copy_pressure) — every
//     request, not just the stored values, would lose zero-copy receive.
// Everything else (large values; kernel-transport buffers, which are arena
// objs) is kept as received. Counted in StoreStats (zero_copy, copied_small,
// copied_rx); when the arena has no room for a copy the slices are kept
// (copy_failed).
//
// Expiry: an absolute time in Unix milliseconds, as Redis keeps it (EXPIREAT,
// PXAT, GT/LT compare in it). The caller passes `now_ms` to every call; the
// server derives it from the engine's monotonic clock plus the wall-clock
// offset sampled at start, so a step of the wall clock does not change TTLs.
// A key is expired when now_ms > expire_ms (keyIsExpired). Two paths remove
// expired keys: lazily, when a command touches one (find/upsert), and
// actively, expire_step() from a timer, which pops at most `max_keys` keys in
// deadline order from an indexed min-heap (exact order, O(log n) per key, no
// stale entries: every change of a key's expiry fixes its heap position).
//
// Threads: one Store per engine (share-nothing); all calls on its thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <crescent/zbuf.hpp>

#include "examples/kv/resp.hpp"

namespace crescent::kv {

inline constexpr int64_t kNoExpire = -1;

struct Entry {
    std::vector<Slice> value;      // never written through; replaced as a whole
    size_t len = 0;                // sum of value's sizes
    int64_t expire_ms = kNoExpire; // Unix ms, or kNoExpire
    uint32_t heap_pos = kNotInHeap;
    uint32_t rx_pins = 0;          // slices of `value` in RX-pool (Mempool) zones
    const std::string* key = nullptr; // the map node's key (node addresses are stable)
    static constexpr uint32_t kNotInHeap = ~uint32_t{0};
};

// A bump allocator over arena objs for small fresh bytes (INCR results, reply
// text). Bytes are carved in increasing order and never carved twice, so what
// was handed out (and may be in flight in a send) is never written again; a
// block is freed when the last slice carved from it is dropped.
//
// Threads: one Carver per engine (or per connection), used on its thread.
class Carver {
public:
    explicit Carver(size_t block_size = 16384) : block_size_(block_size) {}
    Carver(const Carver&) = delete;
    Carver& operator=(const Carver&) = delete;

    // `n` fresh bytes (n <= block_size) as a slice sharing the current block;
    // write them now, before handing the slice on. Empty when the arena has no
    // room (counted in alloc_failed()).
    Slice carve(size_t n);

    // For builders that write first and make slices later: make sure `n`
    // (<= block_size) fresh bytes follow cursor(); false when out of memory.
    bool ensure(size_t n);
    std::byte* cursor() const { return block_.data() + used_; }
    void advance(size_t n) { used_ += n; }
    const Zbuf& block() const { return block_; }
    size_t used() const { return used_; }
    size_t block_size() const { return block_size_; }

    uint64_t blocks() const { return blocks_; }
    uint64_t alloc_failed() const { return alloc_failed_; }
    // Drop the current block (the slices carved from it keep it alive).
    void release() {
        block_.reset();
        used_ = cap_ = 0;
    }

private:
    Zbuf block_;
    size_t used_ = 0, cap_ = 0;
    size_t block_size_;
    uint64_t blocks_ = 0, alloc_failed_ = 0;
};

struct StoreConfig {
    size_t copy_max = 128;       // values of at most this many bytes are copied into carved blocks
    size_t rx_pin_budget = 1024; // RX-pool slices the store may keep; further values are copied
};

struct StoreStats {
    uint64_t expired_lazy = 0;   // expired keys removed when a command touched them
    uint64_t expired_active = 0; // ... by expire_step()
    uint64_t expired_now = 0;    // EXPIRE/SET with a time already past (deleted at once)
    uint64_t flushes = 0;
    uint64_t zero_copy = 0;      // values stored as the received slices
    uint64_t copied_small = 0;   // values <= copy_max copied into carved blocks
    uint64_t copied_rx = 0;      // values copied out of the RX pool (budget reached)
    uint64_t copy_failed = 0;    // a copy found no arena room: the slices were kept
    uint64_t expired_keys() const { return expired_lazy + expired_active + expired_now; }
};

class Store {
public:
    // `values` carves the copies of small values (and INCR's results).
    explicit Store(Carver& values, StoreConfig cfg = {}) : values_(values), cfg_(cfg) {}
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

    // The live entry of `key`, or nullptr (an expired one is removed first).
    Entry* find(std::string_view key, int64_t now_ms);
    // The entry of `key`, created with an empty value when absent or expired
    // (*created tells which). The caller then sets its value.
    Entry& upsert(std::string_view key, int64_t now_ms, bool* created);
    // Remove a live key; false when there was none (or it had expired).
    bool erase(std::string_view key, int64_t now_ms);
    // Remove an entry found by find()/upsert().
    void erase(Entry& e);

    // Replace the value by the argument's slices (moved out of `a`, which is
    // left empty: SET takes no new reference), or by a copy (see the header).
    void set_value(Entry& e, Arg& a);
    // Replace the value by the slices of `v` (moved out; APPEND), or a copy.
    void set_value(Entry& e, std::vector<Slice>&& v, size_t len);
    // Replace the value by one fresh slice of our own (INCR's result), kept as is.
    void set_value(Entry& e, Slice&& s);

    void set_expire(Entry& e, int64_t expire_ms);
    // Remove the expiry; true when there was one.
    bool persist(Entry& e);

    // Active expiry: remove up to `max_keys` keys whose time has passed, in
    // deadline order. Returns how many were removed.
    size_t expire_step(int64_t now_ms, size_t max_keys);
    // The earliest expiry (Unix ms), or kNoExpire when no key has one.
    int64_t next_expiry() const { return heap_.empty() ? kNoExpire : heap_[0]->expire_ms; }

    void flush();

    size_t size() const { return map_.size(); }
    size_t expires() const { return heap_.size(); }
    // Average remaining TTL in ms of the keys with an expiry (0 when none), as
    // INFO keyspace's avg_ttl (Redis estimates it by sampling; this is exact).
    int64_t avg_ttl(int64_t now_ms) const;
    uint64_t value_bytes() const { return value_bytes_; }
    uint64_t key_bytes() const { return key_bytes_; }
    uint64_t rx_pinned() const { return rx_pinned_; } // RX-pool slices held now
    const StoreConfig& config() const { return cfg_; }
    const StoreStats& stats() const { return stats_; }
    StoreStats& stats() { return stats_; }

    // Every key (tests, debugging); order unspecified.
    void for_each(const std::function<void(const std::string&, const Entry&)>& fn) const;

private:
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    struct Eq {
        using is_transparent = void;
        bool operator()(std::string_view a, std::string_view b) const { return a == b; }
    };
    using Map = std::unordered_map<std::string, Entry, Hash, Eq>;

    void erase_it(Map::iterator it);
    void clear_value(Entry& e);
    // Store `v` (len bytes) as e's value: moved, or copied per the policy.
    void adopt(Entry& e, std::vector<Slice>& v, size_t len);
    // Indexed binary min-heap on expire_ms.
    void heap_push(Entry* e);
    void heap_remove(Entry* e);
    void heap_fix(uint32_t pos);
    void heap_up(uint32_t pos);
    void heap_down(uint32_t pos);
    void heap_set(uint32_t pos, Entry* e) {
        heap_[pos] = e;
        e->heap_pos = pos;
    }

    Carver& values_;
    StoreConfig cfg_;
    Map map_;
    std::vector<Entry*> heap_;
    __int128 expire_sum_ = 0; // sum of expire_ms over heap_, for avg_ttl
    uint64_t value_bytes_ = 0;
    uint64_t key_bytes_ = 0;
    uint64_t rx_pinned_ = 0;
    StoreStats stats_;
};

} // namespace crescent::kv
