// crescent-kv — the keyspace (see store.hpp).
#include "examples/kv/store.hpp"

#include <algorithm>
#include <cstring>

namespace crescent::kv {

Entry* Store::find(std::string_view key, int64_t now_ms) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    Entry& e = it->second;
    if (e.expire_ms != kNoExpire && now_ms > e.expire_ms) {
        erase_it(it);
        ++stats_.expired_lazy;
        return nullptr;
    }
    return &e;
}

Entry& Store::upsert(std::string_view key, int64_t now_ms, bool* created) {
    auto it = map_.find(key);
    if (it != map_.end()) {
        Entry& e = it->second;
        if (e.expire_ms == kNoExpire || now_ms <= e.expire_ms) {
            *created = false;
            return e;
        }
        // Expired: the key starts over (no value, no expiry), as a new one.
        ++stats_.expired_lazy;
        clear_value(e);
        heap_remove(&e);
        *created = true;
        return e;
    }
    it = map_.try_emplace(std::string(key)).first;
    it->second.key = &it->first;
    key_bytes_ += key.size();
    *created = true;
    return it->second;
}

bool Store::erase(std::string_view key, int64_t now_ms) {
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    const bool live = it->second.expire_ms == kNoExpire || now_ms <= it->second.expire_ms;
    if (!live) ++stats_.expired_lazy;
    erase_it(it);
    return live;
}

void Store::erase(Entry& e) {
    auto it = map_.find(std::string_view(*e.key));
    if (it != map_.end()) erase_it(it);
}

void Store::erase_it(Map::iterator it) {
    Entry& e = it->second;
    clear_value(e);
    heap_remove(&e);
    key_bytes_ -= it->first.size();
    map_.erase(it);
}

void Store::clear_value(Entry& e) {
    value_bytes_ -= e.len;
    rx_pinned_ -= e.rx_pins;
    e.value.clear();
    e.len = 0;
    e.rx_pins = 0;
}

namespace {

inline bool in_rx_pool(const Slice& s) { return zbuf::zone_of(s.data())->kind == zbuf::ZoneKind::Mempool; }

// Copies the bytes of `src` into `out`: one carved slice when small, else
// fresh arena objs of at most 16 KiB. False when the arena has no room.
bool copy_value(std::span<const Slice> src, size_t len, size_t carve_max, Carver& carver, std::vector<Slice>& out) {
    if (len <= carve_max) {
        Slice s = carver.carve(len);
        if (!s) return false;
        size_t off = 0;
        for (const Slice& x : src) {
            std::memcpy(s.data() + off, x.data(), x.size());
            off += x.size();
        }
        out.push_back(std::move(s));
        return true;
    }
    zbuf::Arena* arena = zbuf::Arena::current();
    if (!arena) return false;
    constexpr size_t kChunk = 16384;
    size_t si = 0, soff = 0, left = len;
    while (left > 0) {
        size_t n = std::min(kChunk, left);
        Slice d = arena->alloc_slice(n);
        if (!d) {
            out.clear();
            return false;
        }
        size_t doff = 0;
        while (doff < n) {
            size_t k = std::min(n - doff, src[si].size() - soff);
            std::memcpy(d.data() + doff, src[si].data() + soff, k);
            doff += k;
            soff += k;
            if (soff == src[si].size()) {
                ++si;
                soff = 0;
            }
        }
        out.push_back(std::move(d));
        left -= n;
    }
    return true;
}

} // namespace

void Store::adopt(Entry& e, std::vector<Slice>& v, size_t len) {
    clear_value(e);
    e.len = len;
    value_bytes_ += len;
    if (len == 0) {
        v.clear();
        return;
    }
    uint32_t rx = 0;
    for (const Slice& s : v) rx += in_rx_pool(s);
    const bool small = len <= cfg_.copy_max;
    if (small || (rx > 0 && rx_pinned_ + rx > cfg_.rx_pin_budget)) {
        if (copy_value(v, len, small ? len : 0, values_, e.value)) {
            ++(small ? stats_.copied_small : stats_.copied_rx);
            v.clear();
            return;
        }
        ++stats_.copy_failed;
    }
    e.value.reserve(v.size());
    for (Slice& s : v) e.value.push_back(std::move(s));
    v.clear();
    e.rx_pins = rx;
    rx_pinned_ += rx;
    ++stats_.zero_copy;
}

void Store::set_value(Entry& e, Arg& a) {
    adopt(e, a.slices, a.len);
    a.len = 0;
}

void Store::set_value(Entry& e, std::vector<Slice>&& v, size_t len) { adopt(e, v, len); }

void Store::set_value(Entry& e, Slice&& s) {
    clear_value(e);
    e.len = s.size();
    e.value.push_back(std::move(s));
    value_bytes_ += e.len;
}

void Store::set_expire(Entry& e, int64_t expire_ms) {
    if (e.heap_pos == Entry::kNotInHeap) {
        e.expire_ms = expire_ms;
        expire_sum_ += expire_ms;
        heap_push(&e);
        return;
    }
    expire_sum_ += __int128(expire_ms) - e.expire_ms;
    e.expire_ms = expire_ms;
    heap_fix(e.heap_pos);
}

bool Store::persist(Entry& e) {
    if (e.heap_pos == Entry::kNotInHeap) return false;
    heap_remove(&e);
    return true;
}

size_t Store::expire_step(int64_t now_ms, size_t max_keys) {
    size_t n = 0;
    while (n < max_keys && !heap_.empty() && now_ms > heap_[0]->expire_ms) {
        erase(*heap_[0]);
        ++n;
    }
    stats_.expired_active += n;
    return n;
}

void Store::flush() {
    map_.clear();
    heap_.clear();
    expire_sum_ = 0;
    value_bytes_ = 0;
    key_bytes_ = 0;
    rx_pinned_ = 0;
    ++stats_.flushes;
}

int64_t Store::avg_ttl(int64_t now_ms) const {
    if (heap_.empty()) return 0;
    __int128 avg = expire_sum_ / __int128(heap_.size()) - now_ms;
    if (avg < 0) return 0;
    if (avg > INT64_MAX) return INT64_MAX;
    return int64_t(avg);
}

void Store::for_each(const std::function<void(const std::string&, const Entry&)>& fn) const {
    for (const auto& [k, e] : map_) fn(k, e);
}

// ---- indexed min-heap on expire_ms ---------------------------------------------------

void Store::heap_push(Entry* e) {
    heap_.push_back(e);
    e->heap_pos = uint32_t(heap_.size() - 1);
    heap_up(e->heap_pos);
}

void Store::heap_remove(Entry* e) {
    if (e->heap_pos == Entry::kNotInHeap) return;
    uint32_t pos = e->heap_pos;
    expire_sum_ -= e->expire_ms;
    e->heap_pos = Entry::kNotInHeap;
    e->expire_ms = kNoExpire;
    Entry* last = heap_.back();
    heap_.pop_back();
    if (pos < heap_.size()) {
        heap_set(pos, last);
        heap_fix(pos);
    }
}

void Store::heap_fix(uint32_t pos) {
    if (pos > 0 && heap_[pos]->expire_ms < heap_[(pos - 1) / 2]->expire_ms) heap_up(pos);
    else heap_down(pos);
}

void Store::heap_up(uint32_t pos) {
    Entry* e = heap_[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (heap_[parent]->expire_ms <= e->expire_ms) break;
        heap_set(pos, heap_[parent]);
        pos = parent;
    }
    heap_set(pos, e);
}

void Store::heap_down(uint32_t pos) {
    Entry* e = heap_[pos];
    const uint32_t n = uint32_t(heap_.size());
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_[c + 1]->expire_ms < heap_[c]->expire_ms) ++c;
        if (heap_[c]->expire_ms >= e->expire_ms) break;
        heap_set(pos, heap_[c]);
        pos = c;
    }
    heap_set(pos, e);
}

// ---- Carver --------------------------------------------------------------------------

bool Carver::ensure(size_t n) {
    if (block_ && cap_ - used_ >= n) return true;
    zbuf::Arena* arena = zbuf::Arena::current();
    Zbuf z = arena ? arena->alloc(std::max(n, block_size_)) : Zbuf();
    if (!z) {
        ++alloc_failed_;
        return false;
    }
    block_ = std::move(z);
    cap_ = block_.capacity();
    used_ = 0;
    ++blocks_;
    return true;
}

Slice Carver::carve(size_t n) {
    if (!ensure(n)) return Slice();
    Slice s(block_.share(), used_, n);
    used_ += n;
    return s;
}

} // namespace crescent::kv
