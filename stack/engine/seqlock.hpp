// crescent — a single-writer seqlock over plain data, for publishing an
// engine's statistics to other threads without stopping the engine.
//
// The writer (the engine's thread, one writer only) never waits: it makes the
// sequence odd, stores the words, makes it even again. A reader copies the
// words and retries when the sequence was odd or changed meanwhile, so it only
// ever returns a copy the writer finished (no torn snapshot). Every shared word
// is accessed through std::atomic_ref with relaxed order and the sequence with
// acquire/release fences (Boehm, "Can seqlocks get along with programming
// language memory models?", MSPC 2012), so the scheme has no data race.
//
// SeqlockArray<T> publishes a variable number (up to a fixed capacity) of
// records plus a header: the writer stores only the records it has, and the
// reader copies only the count it finds.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

namespace crescent::engine {

namespace seqlock_detail {

// T as whole 64-bit words (the storage is word-aligned and padded).
template <class T>
inline constexpr size_t kWords = (sizeof(T) + 7) / 8;

inline void store_words(uint64_t* dst, const void* src, size_t bytes) {
    const size_t full = bytes / 8;
    const auto* s = static_cast<const unsigned char*>(src);
    for (size_t i = 0; i < full; ++i) {
        uint64_t w;
        std::memcpy(&w, s + i * 8, 8);
        std::atomic_ref<uint64_t>(dst[i]).store(w, std::memory_order_relaxed);
    }
    if (bytes % 8) {
        uint64_t w = 0;
        std::memcpy(&w, s + full * 8, bytes % 8);
        std::atomic_ref<uint64_t>(dst[full]).store(w, std::memory_order_relaxed);
    }
}

inline void load_words(void* dst, const uint64_t* src, size_t bytes) {
    const size_t full = bytes / 8;
    auto* d = static_cast<unsigned char*>(dst);
    for (size_t i = 0; i < full; ++i) {
        uint64_t w = std::atomic_ref<const uint64_t>(src[i]).load(std::memory_order_relaxed);
        std::memcpy(d + i * 8, &w, 8);
    }
    if (bytes % 8) {
        uint64_t w = std::atomic_ref<const uint64_t>(src[full]).load(std::memory_order_relaxed);
        std::memcpy(d + full * 8, &w, bytes % 8);
    }
}

// The writer's side (the single writer; never blocks): the sequence odd,
// `copy_in()` stores the words (store_words), the sequence even again.
template <class CopyIn>
inline void write(std::atomic<uint64_t>& seq, CopyIn&& copy_in) {
    seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // odd: writing
    std::atomic_thread_fence(std::memory_order_release);
    copy_in();
    seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);  // even: stable
}

// The reader's side: `copy_out()` copies the words (load_words) into the
// caller's temporaries, again until one copy was good: the sequence was even
// before it and did not move while the words were read. True then (the
// temporaries hold one complete write); false when nothing was written yet
// or `max_attempts` copies were all overtaken by the writer.
template <class CopyOut>
inline bool read(const std::atomic<uint64_t>& seq, unsigned max_attempts, CopyOut&& copy_out) {
    for (unsigned i = 0; i < max_attempts; ++i) {
        const uint64_t before = seq.load(std::memory_order_acquire);
        if (before == 0) return false;  // never published
        copy_out();
        std::atomic_thread_fence(std::memory_order_acquire);
        if ((before & 1) == 0 && seq.load(std::memory_order_relaxed) == before) return true;
        if (i > 16) std::this_thread::yield();  // back off
    }
    return false;
}

} // namespace seqlock_detail

// One value of T (trivially copyable), written by one thread, read by any.
template <class T>
class Seqlock {
    static_assert(std::is_trivially_copyable_v<T>, "a seqlock copies bytes");

public:
    Seqlock() { std::fill(std::begin(words_), std::end(words_), 0); }
    Seqlock(const Seqlock&) = delete;
    Seqlock& operator=(const Seqlock&) = delete;

    // The single writer. Never blocks.
    void store(const T& v) {
        seqlock_detail::write(seq_, [&] { seqlock_detail::store_words(words_, &v, sizeof(T)); });
    }

    // Any thread: a copy of a complete store(). False (and *out unchanged)
    // when nothing was stored yet, or when `max_attempts` copies were all
    // overtaken by the writer.
    bool load(T* out, unsigned max_attempts = 1000) const {
        T tmp;
        if (!seqlock_detail::read(seq_, max_attempts, [&] { seqlock_detail::load_words(&tmp, words_, sizeof(T)); }))
            return false;
        *out = tmp;
        return true;
    }

    // Completed stores so far (any thread).
    uint64_t version() const { return seq_.load(std::memory_order_acquire) / 2; }

private:
    alignas(64) std::atomic<uint64_t> seq_{0};  // odd while the writer is inside store()
    alignas(64) uint64_t words_[seqlock_detail::kWords<T>];
};

// A header H and up to `capacity` records R, both trivially copyable.
template <class H, class R>
class SeqlockArray {
    static_assert(std::is_trivially_copyable_v<H> && std::is_trivially_copyable_v<R>, "a seqlock copies bytes");
    static constexpr size_t kHeadWords = seqlock_detail::kWords<H>;
    static constexpr size_t kRecWords = seqlock_detail::kWords<R>;

public:
    explicit SeqlockArray(size_t capacity)
        : cap_(capacity), words_(std::make_unique<uint64_t[]>(1 + kHeadWords + capacity * kRecWords)) {}
    SeqlockArray(const SeqlockArray&) = delete;
    SeqlockArray& operator=(const SeqlockArray&) = delete;

    size_t capacity() const { return cap_; }

    // The single writer: the header and recs[0..n) (n is clamped to the capacity).
    void store(const H& head, const R* recs, size_t n) {
        n = std::min(n, cap_);
        seqlock_detail::write(seq_, [&] {
            std::atomic_ref<uint64_t>(words_[0]).store(n, std::memory_order_relaxed);
            seqlock_detail::store_words(&words_[1], &head, sizeof(H));
            uint64_t* base = &words_[1 + kHeadWords];
            for (size_t i = 0; i < n; ++i) seqlock_detail::store_words(base + i * kRecWords, &recs[i], sizeof(R));
        });
    }

    // Any thread: the header and records of one complete store() (`out` is
    // replaced). False when nothing was stored yet or the writer kept
    // overtaking the copy.
    bool load(H* head, std::vector<R>* out, unsigned max_attempts = 1000) const {
        H h;
        const bool ok = seqlock_detail::read(seq_, max_attempts, [&] {
            size_t n = size_t(std::atomic_ref<const uint64_t>(words_[0]).load(std::memory_order_relaxed));
            if (n > cap_) n = cap_;  // torn: read() rejects this copy
            seqlock_detail::load_words(&h, &words_[1], sizeof(H));
            out->resize(n);
            const uint64_t* base = &words_[1 + kHeadWords];
            for (size_t k = 0; k < n; ++k) seqlock_detail::load_words(&(*out)[k], base + k * kRecWords, sizeof(R));
        });
        if (ok) *head = h;
        return ok;
    }

    uint64_t version() const { return seq_.load(std::memory_order_acquire) / 2; }

private:
    alignas(64) std::atomic<uint64_t> seq_{0};
    size_t cap_;
    std::unique_ptr<uint64_t[]> words_;  // [0] = count, then the header, then the records
};

} // namespace crescent::engine
