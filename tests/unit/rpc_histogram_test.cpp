// crescent — rpc::Histogram: exact small values, the 1/64 relative error bound
// against true percentiles of a sorted sample (seeded), merge, clamp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <crescent/rpc/histogram.hpp>

using crescent::rpc::Histogram;

namespace {

// The rank rule the histogram documents: ceil(p/100 * n), at least 1.
uint64_t true_percentile(const std::vector<uint64_t>& sorted, double p) {
    const double n = double(sorted.size());
    double r = std::ceil(p / 100.0 * n);
    if (r < 1) r = 1;
    if (r > n) r = n;
    return sorted[size_t(r) - 1];
}

} // namespace

TEST_CASE("histogram: bucket layout is contiguous, 64 sub-buckets per power of two", "[rpc][histogram]") {
    // Every bucket starts right after the previous one ends.
    for (uint32_t i = 1; i < Histogram::kBuckets; ++i) {
        REQUIRE(Histogram::bucket_lo(i) == Histogram::bucket_hi(i - 1) + 1);
        REQUIRE(Histogram::bucket_index(Histogram::bucket_lo(i)) == i);
        REQUIRE(Histogram::bucket_index(Histogram::bucket_hi(i)) == i);
        // Width at most lo/64 (exact buckets have width 1).
        const uint64_t width = Histogram::bucket_hi(i) - Histogram::bucket_lo(i) + 1;
        if (i < 128) REQUIRE(width == 1);
        else REQUIRE(width * 64 <= Histogram::bucket_lo(i));
    }
    CHECK(Histogram::bucket_lo(0) == 0);
    CHECK(Histogram::kBuckets == 2496);
    CHECK(Histogram::bucket_index(255) == 191);
    CHECK(Histogram::bucket_index(256) == 192);
    CHECK(Histogram::bucket_index(UINT64_MAX) == Histogram::kBuckets - 1);
}

TEST_CASE("histogram: values below 128 are exact", "[rpc][histogram]") {
    Histogram h;
    for (uint64_t v = 0; v < 128; ++v) h.record(v, v + 1);  // value v recorded v+1 times
    uint64_t n = 0;
    std::vector<uint64_t> seen;
    h.for_each_bucket([&](uint64_t lo, uint64_t hi, uint64_t c) {
        CHECK(lo == hi);
        CHECK(c == lo + 1);
        seen.push_back(lo);
        n += c;
    });
    CHECK(seen.size() == 128);
    CHECK(std::is_sorted(seen.begin(), seen.end()));
    CHECK(n == h.count());
    CHECK(h.count() == 128 * 129 / 2);
    // Percentiles are exact below 128.
    std::vector<uint64_t> all;
    for (uint64_t v = 0; v < 128; ++v) all.insert(all.end(), v + 1, v);
    for (double p : {0.0, 0.1, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 100.0})
        CHECK(h.percentile(p) == true_percentile(all, p));
}

TEST_CASE("histogram: min, max, sum and mean are exact", "[rpc][histogram]") {
    Histogram h;
    CHECK(h.count() == 0);
    CHECK(h.min() == 0);
    CHECK(h.max() == 0);
    CHECK(h.mean() == 0.0);
    CHECK(h.percentile(50) == 0);
    h.record(1'000'003);
    h.record(5'000'017, 3);
    h.record(777);
    CHECK(h.count() == 5);
    CHECK(h.min() == 777);
    CHECK(h.max() == 5'000'017);
    CHECK(h.sum() == 1'000'003 + 3 * 5'000'017 + 777);
    CHECK(h.mean() == Approx(double(1'000'003 + 3 * 5'000'017 + 777) / 5).epsilon(1e-12));
    // Not the bucket edges: the exact extremes.
    CHECK(h.percentile(0) == 777);
    CHECK(h.percentile(100) == 5'000'017);
    // A single value: every percentile is that value, although its bucket is wider.
    Histogram one;
    one.record(1'000'003);
    for (double p : {0.0, 1.0, 50.0, 99.0, 100.0}) CHECK(one.percentile(p) == 1'000'003);
    // record(v, 0) changes nothing.
    one.record(5, 0);
    CHECK(one.count() == 1);
    CHECK(one.min() == 1'000'003);
}

TEST_CASE("histogram: percentiles within 1/64 of the true ones (random, seeded)", "[rpc][histogram]") {
    for (uint32_t seed : {1u, 2u, 42u, 1234u}) {
        std::mt19937_64 rng(seed);
        // Log-uniform over [1, 2^40): every power of two gets values.
        std::uniform_real_distribution<double> exp2(0.0, 40.0);
        std::vector<uint64_t> vals(20000);
        Histogram h;
        for (auto& v : vals) {
            v = uint64_t(std::exp2(exp2(rng)));
            h.record(v);
        }
        std::sort(vals.begin(), vals.end());
        INFO("seed " << seed);
        for (double p = 0.0; p <= 100.0; p += 0.25) {
            const uint64_t t = true_percentile(vals, p);
            const uint64_t r = h.percentile(p);
            INFO("p " << p << " true " << t << " got " << r);
            REQUIRE(r >= t);
            REQUIRE(r - t <= t / 64);
        }
        for (double p : {99.9, 99.99, 99.999}) {
            const uint64_t t = true_percentile(vals, p);
            REQUIRE(h.percentile(p) >= t);
            REQUIRE(h.percentile(p) - t <= t / 64);
        }
    }
}

TEST_CASE("histogram: percentile is monotone in p", "[rpc][histogram]") {
    std::mt19937_64 rng(7);
    std::lognormal_distribution<double> d(10.0, 2.0);
    Histogram h;
    for (int i = 0; i < 5000; ++i) h.record(uint64_t(d(rng)));
    uint64_t prev = h.percentile(0);
    CHECK(prev == h.min());
    for (int i = 1; i <= 10000; ++i) {
        const uint64_t v = h.percentile(i / 100.0);
        REQUIRE(v >= prev);
        prev = v;
    }
    CHECK(prev == h.max());
    // Out-of-range p clamps.
    CHECK(h.percentile(-5) == h.min());
    CHECK(h.percentile(250) == h.max());
}

TEST_CASE("histogram: merge equals recording everything into one", "[rpc][histogram]") {
    std::mt19937_64 rng(99);
    std::uniform_int_distribution<uint64_t> d(0, uint64_t(1) << 36);
    Histogram all, a, b, c;
    for (int i = 0; i < 30000; ++i) {
        const uint64_t v = d(rng) >> (i % 30);
        all.record(v);
        (i % 3 == 0 ? a : i % 3 == 1 ? b : c).record(v);
    }
    all.record(Histogram::kMaxValue + 5);
    c.record(Histogram::kMaxValue + 5);
    Histogram m;
    m.merge(a);
    m.merge(b);
    m.merge(Histogram());  // empty: no effect on min
    m.merge(c);
    CHECK(m.count() == all.count());
    CHECK(m.sum() == all.sum());
    CHECK(m.min() == all.min());
    CHECK(m.max() == all.max());
    CHECK(m.overflow() == 1);
    std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> bm, ba;
    m.for_each_bucket([&](uint64_t lo, uint64_t hi, uint64_t n) { bm.emplace_back(lo, hi, n); });
    all.for_each_bucket([&](uint64_t lo, uint64_t hi, uint64_t n) { ba.emplace_back(lo, hi, n); });
    CHECK(bm == ba);
    for (double p : {0.0, 50.0, 90.0, 99.0, 99.9, 100.0}) CHECK(m.percentile(p) == all.percentile(p));

    m.reset();
    CHECK(m.count() == 0);
    CHECK(m.min() == 0);
    CHECK(m.max() == 0);
    CHECK(m.overflow() == 0);
    size_t buckets = 0;
    m.for_each_bucket([&](uint64_t, uint64_t, uint64_t) { ++buckets; });
    CHECK(buckets == 0);
}

TEST_CASE("histogram: values at or above 2^44 clamp into the last bucket", "[rpc][histogram]") {
    Histogram h;
    h.record(Histogram::kMaxValue - 1);
    CHECK(h.overflow() == 0);
    h.record(Histogram::kMaxValue);
    h.record(UINT64_MAX / 4, 2);
    CHECK(h.overflow() == 3);
    CHECK(h.count() == 4);
    CHECK(h.max() == UINT64_MAX / 4);  // exact, not clamped
    uint32_t buckets = 0;
    h.for_each_bucket([&](uint64_t lo, uint64_t hi, uint64_t n) {
        ++buckets;
        CHECK(lo == Histogram::bucket_lo(Histogram::kBuckets - 1));
        CHECK(hi == Histogram::kMaxValue - 1);
        CHECK(n == 4);
    });
    CHECK(buckets == 1);
    // The last bucket reaches up to max(): percentiles in it are max().
    CHECK(h.percentile(0) == Histogram::kMaxValue - 1);
    CHECK(h.percentile(50) == UINT64_MAX / 4);
    CHECK(h.percentile(100) == UINT64_MAX / 4);
    // Without overflow the last bucket behaves like the others.
    Histogram top;
    top.record(Histogram::bucket_lo(Histogram::kBuckets - 1));
    top.record(Histogram::bucket_lo(Histogram::kBuckets - 1) + 7);
    CHECK(top.overflow() == 0);
    CHECK(top.percentile(50) == Histogram::bucket_lo(Histogram::kBuckets - 1) + 7);
}
