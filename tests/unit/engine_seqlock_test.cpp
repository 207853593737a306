// crescent — the seqlock the engines publish their statistics through
// (stack/engine/seqlock.hpp): a reader never sees a torn snapshot.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "stack/engine/seqlock.hpp"

using crescent::engine::Seqlock;
using crescent::engine::SeqlockArray;

namespace {
// Written together: every field equals `a` (or a derived value) in one store.
struct Snap {
    uint64_t a = 0;
    uint64_t words[61] = {};  // == a each
    uint32_t b = 0;           // == uint32_t(a * 3)
    uint16_t c = 0;           // == uint16_t(a)  (odd size: a partial last word)
};
struct Head { uint64_t gen = 0; uint64_t n = 0; };
struct Rec { uint64_t gen = 0; uint64_t i = 0; uint8_t tail[5] = {}; };
} // namespace

TEST_CASE("seqlock: nothing before the first store, then the last value", "[engine][seqlock]") {
    Seqlock<Snap> s;
    Snap out;
    CHECK_FALSE(s.load(&out));
    Snap v;
    v.a = 7;
    v.b = 21;
    v.c = 7;
    s.store(v);
    REQUIRE(s.load(&out));
    CHECK(out.a == 7);
    CHECK(out.b == 21);
    CHECK(out.c == 7);
    CHECK(s.version() == 1);
}

TEST_CASE("seqlock: a reader thread never sees a torn snapshot", "[engine][seqlock]") {
    Seqlock<Snap> s;
    std::atomic<bool> done{false};
    std::atomic<uint64_t> stores{0};
    std::thread writer([&] {
        Snap v;
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
        for (uint64_t k = 1; std::chrono::steady_clock::now() < end; ++k) {
            v.a = k;
            for (auto& w : v.words) w = k;
            v.b = uint32_t(k * 3);
            v.c = uint16_t(k);
            s.store(v);
            stores.store(k, std::memory_order_relaxed);
            // Bursts of back-to-back stores (readers race them) with short gaps, as
            // the engine's 10 ms publishing leaves readers room: a writer that never
            // pauses starves a reader on a loaded (or sanitized) machine.
            if (k % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        done.store(true);
    });
    uint64_t reads = 0, torn = 0, last = 0, backwards = 0;
    Snap out;
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done.load() && std::chrono::steady_clock::now() < limit) {
        if (!s.load(&out)) continue;
        ++reads;
        bool ok = out.b == uint32_t(out.a * 3) && out.c == uint16_t(out.a);
        for (uint64_t w : out.words) ok = ok && w == out.a;
        if (!ok) ++torn;
        if (out.a < last) ++backwards;
        last = out.a;
    }
    writer.join();
    INFO("reads " << reads << ", stores " << stores.load());
    CHECK(reads > 10);
    CHECK(stores.load() > 1000);
    CHECK(torn == 0);
    CHECK(backwards == 0);
}

TEST_CASE("seqlock array: variable-length tables are never torn", "[engine][seqlock]") {
    SeqlockArray<Head, Rec> s(256);
    Head h;
    std::vector<Rec> out;
    CHECK_FALSE(s.load(&h, &out));
    std::atomic<bool> done{false};
    std::thread writer([&] {
        std::vector<Rec> recs(300);
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
        for (uint64_t k = 1; std::chrono::steady_clock::now() < end; ++k) {
            size_t n = k % 300;  // sometimes beyond the capacity: clamped to 256
            for (size_t i = 0; i < n; ++i) recs[i] = Rec{k, i, {uint8_t(k), 0, 0, 0, uint8_t(k)}};
            s.store(Head{k, n}, recs.data(), n);
            if (k % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));  // as above
        }
        done.store(true);
    });
    uint64_t reads = 0, torn = 0;
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done.load() && std::chrono::steady_clock::now() < limit) {
        if (!s.load(&h, &out)) continue;
        ++reads;
        bool ok = out.size() == std::min<uint64_t>(h.n, 256) && h.n == h.gen % 300;
        for (size_t i = 0; i < out.size(); ++i)
            ok = ok && out[i].gen == h.gen && out[i].i == i && out[i].tail[0] == uint8_t(h.gen) &&
                 out[i].tail[4] == uint8_t(h.gen);
        if (!ok) ++torn;
    }
    writer.join();
    INFO("reads " << reads);
    CHECK(reads > 10);
    CHECK(torn == 0);
    REQUIRE(s.load(&h, &out));
    CHECK(out.size() == std::min<uint64_t>(h.n, 256));
}
