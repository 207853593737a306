// crescent — the engine's per-connection application state, indexed by
// tcp::ConnId::index: a table that grows in fixed chunks and never moves an
// element (a ConnState holds a deque of Slices and handlers keep pointers to
// it across calls), looked up with a shift and a mask — std::deque's
// operator[] cost a division per lookup, several lookups per RPC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace crescent::engine {

template <class T, unsigned ChunkShift = 6>
class StableTable {
public:
    static constexpr size_t kChunk = size_t{1} << ChunkShift;

    size_t size() const { return size_; }
    T& operator[](size_t i) { return chunks_[i >> ChunkShift][i & (kChunk - 1)]; }
    const T& operator[](size_t i) const { return chunks_[i >> ChunkShift][i & (kChunk - 1)]; }
    // Grows to at least `n` elements (value-initialized); never shrinks, never moves one.
    void resize(size_t n) {
        while (chunks_.size() * kChunk < n) chunks_.push_back(std::make_unique<T[]>(kChunk));
        if (n > size_) size_ = n;
    }

private:
    std::vector<std::unique_ptr<T[]>> chunks_;
    size_t size_ = 0;
};

} // namespace crescent::engine
