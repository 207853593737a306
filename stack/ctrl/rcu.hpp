// crescent — publishing immutable snapshots to engines without locks
// (quiescent-state-based RCU, as in userspace-rcu's QSBR flavour and DPDK's
// rte_rcu_qsbr).
//
// Protocol
// --------
// One writer (the control-plane owner) and up to kMaxReaders registered
// readers (engines), each reader used by one thread at a time.
//
//   writer:  publish(next)    1. current_.exchange(next)            (seq_cst)
//                             2. E = ++epoch_                       (seq_cst)
//                             3. retire (old, E)
//                             4. reclaim(): free every retired (p, E) such that
//                                each *online* reader's slot >= E   (seq_cst loads)
//   reader:  const T& s = r.read();       current_.load()           (seq_cst; a plain
//                                         load on x86, ldar on arm64)
//            ... use s for one burst, keep no pointer into it ...
//            r.quiescent();               slot = epoch_.load()      (acquire load, release store)
//            r.offline() / r.online();    leave / rejoin (e.g. around a sleep)
//
// Why a retired snapshot is never freed while in use: a reader that stored
// slot >= E loaded epoch E at a quiescent point. The release store of that
// value orders all its earlier uses of the old snapshot before the writer's
// acquire load of the slot (so before the free); and its acquire load of epoch
// E synchronises with step 2, which follows step 1, so every later read()
// returns the new snapshot (or a newer one). A reader whose slot is < E may
// still hold the old snapshot: the writer keeps it.
// Going online is the store-then-load (Dekker) case: the reader stores its
// slot and then loads current_; the writer exchanges current_ and then loads
// the slot. With all four seq_cst, either the writer sees the reader online
// (and keeps the old snapshot) or the reader's load follows the exchange (and
// never sees the old snapshot).
//
// Costs on the data path: read() is one load; quiescent() is one load and one
// store to the reader's own cache line. No read-modify-write, no lock, no
// allocation. A reader that never calls quiescent() while online stops
// reclamation (memory grows with every publish): engines call it once per loop
// iteration, and go offline() before blocking or sleeping.
#pragma once

#include <array>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace crescent::ctrl {

template <class T>
class Rcu {
    static constexpr uint64_t kOffline = UINT64_MAX;

    // One cache line per reader: readers write only their own slot.
    struct alignas(64) Slot {
        std::atomic<uint64_t> epoch{kOffline}; // kOffline, or the epoch seen at the last quiescent point
        std::atomic<bool> in_use{false};       // claimed by a Reader
    };
    struct Retired {
        const T* ptr;
        uint64_t epoch; // freed once every online reader has seen an epoch >= this
    };

public:
    static constexpr size_t kMaxReaders = 64;

    class Reader;

    explicit Rcu(std::unique_ptr<const T> initial) : current_(initial.release()) { assert(current_.load() != nullptr); }
    Rcu(const Rcu&) = delete;
    Rcu& operator=(const Rcu&) = delete;
    // Every Reader must be gone (destroyed or unregistered) by now.
    ~Rcu() {
#ifndef NDEBUG
        for (const Slot& s : slots_) assert(!s.in_use.load() && "Rcu destroyed with registered readers");
#endif
        delete current_.load();
        for (auto& r : retired_) delete r.ptr;
    }

    // ---- writer side (one thread: the owner) ----

    // Makes `next` the current snapshot; the previous one is retired and freed
    // once every online reader has passed a quiescent point.
    void publish(std::unique_ptr<const T> next) {
        assert(next != nullptr);
        const T* old = current_.exchange(next.release(), std::memory_order_seq_cst);
        uint64_t e = epoch_.fetch_add(1, std::memory_order_seq_cst) + 1;
        retired_.push_back(Retired{old, e});
        reclaim();
    }

    // Frees the retired snapshots no reader can still hold; returns how many.
    // Called by publish(); the owner may also call it periodically so memory
    // is returned without waiting for the next publish.
    size_t reclaim() {
        if (retired_.empty()) return 0;
        uint64_t min_seen = kOffline;
        for (const Slot& s : slots_) {
            uint64_t v = s.epoch.load(std::memory_order_seq_cst);
            if (v < min_seen) min_seen = v;
        }
        size_t freed = 0;
        size_t keep = 0;
        for (size_t i = 0; i < retired_.size(); ++i) {
            if (retired_[i].epoch <= min_seen) {
                delete retired_[i].ptr;
                ++freed;
            } else {
                retired_[keep++] = retired_[i];
            }
        }
        retired_.resize(keep);
        freed_ += freed;
        return freed;
    }

    // The current snapshot, for the writer itself (which never races with itself).
    const T& current() const { return *current_.load(std::memory_order_relaxed); }
    size_t retired_count() const { return retired_.size(); }
    uint64_t freed_count() const { return freed_; }
    uint64_t epoch() const { return epoch_.load(std::memory_order_relaxed); }

    // ---- readers ----

    // Registers a reader (any thread; not on the data path). The reader starts
    // online. nullopt when kMaxReaders are registered.
    std::optional<Reader> register_reader() {
        for (size_t i = 0; i < kMaxReaders; ++i) {
            bool expected = false;
            if (slots_[i].in_use.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
                Reader r(this, &slots_[i]);
                r.online();
                return r;
            }
        }
        return std::nullopt;
    }

    // A registered reader. Move-only; unregisters on destruction. Used by one
    // thread at a time (it may move between threads while offline).
    class Reader {
    public:
        Reader(Reader&& o) noexcept : rcu_(std::exchange(o.rcu_, nullptr)), slot_(std::exchange(o.slot_, nullptr)) {}
        Reader& operator=(Reader&& o) noexcept {
            if (this != &o) {
                release();
                rcu_ = std::exchange(o.rcu_, nullptr);
                slot_ = std::exchange(o.slot_, nullptr);
            }
            return *this;
        }
        Reader(const Reader&) = delete;
        Reader& operator=(const Reader&) = delete;
        ~Reader() { release(); }

        // The current snapshot. The reference stays valid until this reader's
        // next quiescent() or offline(). Must be online.
        const T& read() const {
            assert(slot_ != nullptr && slot_->epoch.load(std::memory_order_relaxed) != kOffline);
            return *rcu_->current_.load(std::memory_order_seq_cst);
        }
        // "I hold no reference obtained from read() any more."
        void quiescent() {
            slot_->epoch.store(rcu_->epoch_.load(std::memory_order_acquire), std::memory_order_release);
        }
        // Stop taking part (the writer no longer waits for this reader): call
        // before sleeping or blocking. References from read() die here.
        void offline() { slot_->epoch.store(kOffline, std::memory_order_release); }
        void online() { slot_->epoch.store(rcu_->epoch_.load(std::memory_order_seq_cst), std::memory_order_seq_cst); }
        bool is_online() const { return slot_->epoch.load(std::memory_order_relaxed) != kOffline; }

    private:
        friend class Rcu;
        Reader(Rcu* rcu, Slot* slot) : rcu_(rcu), slot_(slot) {}
        void release() {
            if (slot_ == nullptr) return;
            offline();
            slot_->in_use.store(false, std::memory_order_release);
            slot_ = nullptr;
            rcu_ = nullptr;
        }
        Rcu* rcu_;
        Slot* slot_;
    };

private:
    std::atomic<const T*> current_; // never null
    std::atomic<uint64_t> epoch_{0};
    std::array<Slot, kMaxReaders> slots_{};
    std::vector<Retired> retired_;  // writer only
    uint64_t freed_ = 0;            // writer only
};

} // namespace crescent::ctrl
