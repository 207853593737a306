// crescent — the read side of rpc::Histogram (percentiles, merge); the record
// path is inline in include/crescent/rpc/histogram.hpp.
#include <crescent/rpc/histogram.hpp>

#include <cmath>

namespace crescent::rpc {

uint64_t Histogram::percentile(double p) const {
    if (count_ == 0) return 0;
    if (!(p > 0.0)) return min();  // also NaN
    uint64_t rank = count_;
    if (p < 100.0) {
        const double r = std::ceil(p / 100.0 * double(count_));
        rank = r < 1.0 ? 1 : r >= double(count_) ? count_ : uint64_t(r);
    }
    uint64_t seen = 0;
    for (uint32_t i = 0; i < kBuckets; ++i) {
        seen += counts_[i];
        if (seen >= rank) {
            // The last bucket also holds the overflow: it reaches up to max().
            const uint64_t hi = i == kBuckets - 1 ? UINT64_MAX : bucket_hi(i);
            return hi < min_ ? min_ : hi > max_ ? max_ : hi;
        }
    }
    return max_;  // unreachable while counts_ sum to count_
}

void Histogram::merge(const Histogram& other) {
    if (other.count_ == 0) return;
    for (uint32_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
    count_ += other.count_;
    sum_ += other.sum_;
    overflow_ += other.overflow_;
    if (other.min_ < min_) min_ = other.min_;
    if (other.max_ > max_) max_ = other.max_;
}

void Histogram::reset() {
    counts_.fill(0);
    count_ = sum_ = max_ = overflow_ = 0;
    min_ = UINT64_MAX;
}

} // namespace crescent::rpc
