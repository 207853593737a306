// crescent — a log-linear latency histogram (HdrHistogram's bucket layout,
// Gil Tene, with 2 significant binary digits of 6 bits: relative error <= 1/64).
//
// Values are uint64 (nanoseconds by convention). Layout, with kSub = 64:
//
//   * values 0 .. 2*kSub-1 (0..127) each have their own bucket (exact);
//   * above that, every power of two [2^k, 2^(k+1)) (k = 7..43) is split into
//     kSub equal sub-buckets of width 2^(k-6), so a bucket's width is at most
//     1/64 of its lowest value;
//   * values >= kMaxValue (2^44 ns, about 4.9 hours) go into the last bucket
//     and are counted by overflow(); min(), max(), sum() and mean() still use
//     the exact value.
//
//   bucket_index(v) = s * kSub + (v >> s),  s = msb(v | 127) - 6
//
// The counts are a fixed array inside the object (kBuckets * 8 = 19,968 bytes):
// no allocation ever. record() is a bit scan, two shifts, an add and two
// compare-and-moves, inline. Histograms are per engine (single-threaded) and
// merged on read (merge()), the bvar way.
//
// sum() is modular (2^64 ns is 584 years of latency; only deliberate use of
// huge values wraps it).
#pragma once

#include <array>
#include <cstdint>

namespace crescent::rpc {

// The latency histogram described above: a fixed bucket array, single-threaded
// (one per engine), merged on read.
class Histogram {
public:
    static constexpr uint32_t kSubBits = 6;                           // log2(kSub): binary digits of precision
    static constexpr uint64_t kSub = uint64_t(1) << kSubBits;         // 64 sub-buckets per power of two
    static constexpr uint32_t kMaxBits = 44;                          // log2(kMaxValue)
    static constexpr uint64_t kMaxValue = uint64_t(1) << kMaxBits;    // first value that overflows
    static constexpr uint32_t kBuckets = uint32_t((kMaxBits - kSubBits - 1) * kSub + 2 * kSub);  // 2496

    // The bucket a value falls in (values >= kMaxValue: the last bucket).
    static constexpr uint32_t bucket_index(uint64_t v) {
        if (v >= kMaxValue) [[unlikely]]
            return kBuckets - 1;
        const uint32_t s = uint32_t(63 - __builtin_clzll(v | (2 * kSub - 1))) - kSubBits;
        return uint32_t(s * kSub + (v >> s));
    }
    // Lowest and highest value of bucket i (i < kBuckets).
    static constexpr uint64_t bucket_lo(uint32_t i) {
        const uint32_t s = i < 2 * kSub ? 0 : uint32_t(i / kSub - 1);
        return (uint64_t(i) - uint64_t(s) * kSub) << s;
    }
    // Highest value of bucket i (i < kBuckets); inclusive.
    static constexpr uint64_t bucket_hi(uint32_t i) {
        const uint32_t s = i < 2 * kSub ? 0 : uint32_t(i / kSub - 1);
        return bucket_lo(i) + (uint64_t(1) << s) - 1;
    }

    // Record one occurrence of v (nanoseconds by convention). Inline, no allocation.
    void record(uint64_t v) { record(v, 1); }
    // Record n occurrences of v (n may be 0: then nothing changes but min/max
    // are untouched too).
    void record(uint64_t v, uint64_t n) {
        if (n == 0) [[unlikely]]
            return;
        counts_[bucket_index(v)] += n;
        if (v >= kMaxValue) [[unlikely]]
            overflow_ += n;
        count_ += n;
        sum_ += v * n;
        min_ = v < min_ ? v : min_;
        max_ = v > max_ ? v : max_;
    }

    // Values recorded.
    uint64_t count() const { return count_; }
    // Exact sum of the values recorded (modulo 2^64).
    uint64_t sum() const { return sum_; }
    // 0 when empty.
    uint64_t min() const { return count_ ? min_ : 0; }
    // Exact largest value recorded (0 when empty).
    uint64_t max() const { return max_; }
    // sum() / count(), exact up to double rounding; 0 when empty.
    double mean() const { return count_ ? double(sum_) / double(count_) : 0.0; }
    // Values recorded at or above kMaxValue (they sit in the last bucket).
    uint64_t overflow() const { return overflow_; }

    // The value at percentile p (0..100; clamped): the highest value of the
    // bucket holding the ceil(p/100 * count)-th smallest value (rank at least
    // 1), limited to [min(), max()]; the last bucket counts as reaching up to
    // max() (it holds the overflow). So percentile(0) == min(),
    // percentile(100) == max(), and for a true value t < kMaxValue the result r
    // satisfies t <= r <= t + t/64. 0 when empty. A scan of the buckets (read side).
    uint64_t percentile(double p) const;

    // Add other's counts into this one (per-engine histograms, summed on read).
    void merge(const Histogram& other);
    void reset();  // back to empty (all counts 0, min/max as new)

    // fn(lo, hi, count) for every non-empty bucket, lowest first (CDF export).
    template <typename Fn>
    void for_each_bucket(Fn&& fn) const {
        for (uint32_t i = 0; i < kBuckets; ++i)
            if (counts_[i] != 0) fn(bucket_lo(i), bucket_hi(i), counts_[i]);
    }

private:
    std::array<uint64_t, kBuckets> counts_{};
    uint64_t count_ = 0;
    uint64_t sum_ = 0;        // modulo 2^64
    uint64_t min_ = UINT64_MAX;  // UINT64_MAX while empty
    uint64_t max_ = 0;
    uint64_t overflow_ = 0;
};

static_assert(Histogram::bucket_index(Histogram::kMaxValue - 1) == Histogram::kBuckets - 1);
static_assert(Histogram::bucket_hi(Histogram::kBuckets - 1) == Histogram::kMaxValue - 1);
static_assert(Histogram::bucket_index(127) == 127 && Histogram::bucket_index(128) == 128);
static_assert(Histogram::bucket_lo(128) == 128 && Histogram::bucket_hi(128) == 129);

} // namespace crescent::rpc
