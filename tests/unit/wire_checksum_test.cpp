// Unit tests: Internet checksum (RFC 1071, RFC 1624) and SeqNum arithmetic
// (RFC 9293 §3.4), against independent byte-at-a-time references.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "stack/wire/seq.hpp"
#include "stack/wire/wire.hpp"
#include "tests/unit/wire_test_util.hpp"

using namespace crescent::wire;
using namespace wire_test;

namespace {

ByteVec random_bytes(std::mt19937& rng, size_t n)
{
    ByteVec v(n);
    for (auto& b : v)
        b = std::byte(rng());
    return v;
}

} // namespace

TEST_CASE("RFC 1071: checksum of a known IPv4 header", "[wire][csum]")
{
    // The classic worked example (checksum field 0xb861 in place).
    ByteVec hdr = bytes({0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                         0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7});
    CHECK(csum_fold(csum_partial(hdr)) == 0);   // verifies
    CHECK(ref_csum(hdr) == 0);
    CHECK(ipv4_header_csum(hdr.data()) == 0);
    put16(hdr, 10, 0);
    CHECK(csum_fold(csum_partial(hdr)) == 0xb861);
    CHECK(ref_csum(hdr) == 0xb861);
    CHECK(ipv4_header_csum(hdr.data()) == 0xb861);
}

TEST_CASE("ipv4_header_csum equals the general sum over any 20 bytes", "[wire][csum]")
{
    std::mt19937 rng(7);
    ByteVec buf = random_bytes(rng, 64);
    ByteVec ones(24, std::byte(0xff));
    for (size_t off = 0; off < 4; ++off)  // every carry, at unaligned addresses
        CHECK(ipv4_header_csum(ones.data() + off) == ref_csum(Bytes(ones).subspan(off, 20)));
    for (int i = 0; i < 5000; ++i) {
        for (auto& b : buf) b = std::byte(rng());
        const size_t off = rng() % 40;
        REQUIRE(ipv4_header_csum(buf.data() + off) == ref_csum(Bytes(buf).subspan(off, 20)));
    }
}

TEST_CASE("emit_ipv4's checksum equals the reference over the bytes, every field at random and at its extremes",
          "[wire][csum]")
{
    std::mt19937 rng(11);
    auto check_one = [](const Ipv4Repr& ip) {
        ByteVec h(20);
        emit_ipv4(ip, h, true);
        REQUIRE(ref_csum(h) == 0);
        const uint16_t stored = uint16_t(uint16_t(h[10]) << 8 | uint16_t(h[11]));
        put16(h, 10, 0);
        REQUIRE(ref_csum(h) == stored);
    };
    // Every field of the header, as emit_ipv4 takes it.
    auto repr = [](uint32_t src, uint32_t dst, uint8_t ttl, uint8_t protocol, uint8_t dscp, uint8_t ecn,
                   uint16_t ident, bool df, uint16_t payload_len) {
        Ipv4Repr ip;
        ip.src = Ipv4Addr{src};
        ip.dst = Ipv4Addr{dst};
        ip.ttl = ttl;
        ip.protocol = protocol;
        ip.dscp = dscp;
        ip.ecn = ecn;
        ip.ident = ident;
        ip.dont_fragment = df;
        ip.payload_len = payload_len;
        return ip;
    };
    check_one(repr(0xffffffff, 0xffffffff, 255, 255, 63, 3, 0xffff, true, 0xffff - 20));
    check_one(Ipv4Repr{});
    for (int i = 0; i < 20000; ++i)
        check_one(repr(uint32_t(rng()), uint32_t(rng()), uint8_t(rng()), uint8_t(rng()), uint8_t(rng() & 63),
                       uint8_t(rng() & 3), uint16_t(rng()), (rng() & 1) != 0, uint16_t(rng() % (0xffff - 20 + 1))));
}

TEST_CASE("RFC 1071: csum_partial matches the byte-at-a-time reference on random data", "[wire][csum]")
{
    std::mt19937 rng(0xc0ffee);
    ByteVec buf = random_bytes(rng, 4096 + 16);
    for (size_t len = 0; len <= 300; ++len) {
        for (size_t off = 0; off < 8; ++off) {
            Bytes d = Bytes(buf).subspan(off, len);
            INFO("len " << len << " off " << off);
            REQUIRE(csum_fold(csum_partial(d)) == ref_csum(d));
        }
    }
    for (int i = 0; i < 2000; ++i) {
        size_t off = rng() % 16, len = rng() % 4096;
        Bytes d = Bytes(buf).subspan(off, len);
        uint32_t start = rng();
        INFO("len " << len << " off " << off << " start " << start);
        // A non-zero starting sum is carried in too.
        uint32_t folded_start = start % 0xffff;
        REQUIRE(csum_fold(csum_partial(d, start)) == ref_csum(d, folded_start));
    }
}

TEST_CASE("RFC 1071: all-ones and all-zero data", "[wire][csum]")
{
    ByteVec ones(1501, std::byte(0xff)), zeros(1500, std::byte(0));
    CHECK(csum_fold(csum_partial(ones)) == ref_csum(ones));
    CHECK(csum_fold(csum_partial(zeros)) == 0xffff);
    CHECK(csum_fold(csum_partial(Bytes{})) == 0xffff);
    // Every carry taken at every length and both word parities: spans under
    // 64 bytes go word by word, longer ones 64 bytes a step (AVX2 where the
    // CPU has it) and then word by word for the tail.
    ByteVec many(9000 + 1, std::byte(0xff));
    for (size_t len : {size_t(4096), size_t(4097), size_t(9000)})
        CHECK(csum_fold(csum_partial(Bytes(many).first(len), 0xfffeu)) == ref_csum(Bytes(many).first(len), 0xfffeu));
    for (size_t len = 0; len <= 600; ++len)
        for (size_t off = 0; off < 2; ++off) {
            Bytes d = Bytes(ones).subspan(off, len);
            INFO("len " << len << " off " << off);
            REQUIRE(csum_fold(csum_partial(d, 0xfffeu)) == ref_csum(d, 0xfffeu));
        }
}

TEST_CASE("RFC 1071 §2(B): chaining spans with even lengths, and of any length with CsumChain", "[wire][csum]")
{
    std::mt19937 rng(42);
    for (int iter = 0; iter < 500; ++iter) {
        ByteVec data = random_bytes(rng, rng() % 3000);
        uint16_t want = ref_csum(data);

        // csum_partial chaining: every span but the last has an even length.
        uint32_t sum = 0;
        size_t pos = 0;
        while (pos < data.size()) {
            size_t n = std::min<size_t>((rng() % 400) & ~size_t(1), data.size() - pos);
            if (n == 0 && data.size() - pos < 2)
                n = data.size() - pos;
            sum = csum_partial(Bytes(data).subspan(pos, n), sum);
            pos += n;
        }
        REQUIRE(csum_fold(sum) == want);

        // CsumChain: arbitrary (odd) span lengths, including empty spans.
        CsumChain chain;
        pos = 0;
        while (pos < data.size()) {
            size_t n = std::min<size_t>(rng() % 97, data.size() - pos);
            chain.add(Bytes(data).subspan(pos, n));
            pos += n;
        }
        REQUIRE(chain.length() == data.size());
        REQUIRE(chain.fold() == want);
    }
}

TEST_CASE("RFC 1071: naive chaining of an odd-length span is wrong (documents the rule)", "[wire][csum]")
{
    ByteVec a = bytes({0x12, 0x34, 0x56}), b = bytes({0x78, 0x9a});
    ByteVec ab = a;
    append(ab, b);
    CHECK(csum_fold(csum_partial(b, csum_partial(a))) != ref_csum(ab));
    CsumChain c;
    c.add(a);
    c.add(b);
    CHECK(c.fold() == ref_csum(ab));
}

TEST_CASE("RFC 1624: incremental update equals recomputation", "[wire][csum]")
{
    std::mt19937 rng(7);
    for (int iter = 0; iter < 2000; ++iter) {
        ByteVec data = random_bytes(rng, 2 + 2 * (rng() % 40));
        if (iter % 10 == 0) // sums near the ±0 corner
            std::fill(data.begin(), data.end(), std::byte(iter % 20 == 0 ? 0xff : 0x00));
        uint16_t csum = ref_csum(data);
        size_t w = 2 * (rng() % (data.size() / 2));
        uint16_t old_word = get16(data, w);
        uint16_t new_word = iter % 3 == 0 ? uint16_t(0) : uint16_t(rng());
        put16(data, w, new_word);
        uint16_t updated = csum_update16(csum, old_word, new_word);
        INFO("iter " << iter);
        const uint16_t fresh = ref_csum(data);
        if (std::all_of(data.begin(), data.end(), [](std::byte b) { return b == std::byte(0); })) {
            // The one corner of eqn. 3 (RFC 1624 §3): data summing to exactly
            // +0 gives 0x0000 instead of 0xffff, the same one's-complement value.
            REQUIRE((updated == 0x0000 || updated == 0xffff));
        } else {
            REQUIRE(updated == fresh);
        }
    }
}

TEST_CASE("RFC 9293 §3.1: pseudo-header sum matches its byte layout", "[wire][csum]")
{
    std::mt19937 rng(9);
    for (int i = 0; i < 1000; ++i) {
        Ipv4Addr src{uint32_t(rng())}, dst{uint32_t(rng())};
        auto len = uint16_t(rng());
        ByteVec ph = bytes({int(src.v >> 24), int(src.v >> 16 & 0xff), int(src.v >> 8 & 0xff), int(src.v & 0xff),
                            int(dst.v >> 24), int(dst.v >> 16 & 0xff), int(dst.v >> 8 & 0xff), int(dst.v & 0xff),
                            0, 6, len >> 8, len & 0xff});
        REQUIRE(csum_fold(pseudo_header_sum(src, dst, 6, len)) == ref_csum(ph));
    }
}

TEST_CASE("RFC 9293 §3.4: SeqNum comparisons wrap modulo 2^32", "[wire][seq]")
{
    const SeqNum hi(0xfffffff0u), lo(0x10u);
    CHECK(hi < lo);
    CHECK(lo > hi);
    CHECK(hi <= lo);
    CHECK_FALSE(lo < hi);
    CHECK(lo - hi == 0x20);
    CHECK(hi - lo == -0x20);
    CHECK((hi + 0x20u) == lo);
    CHECK((lo - 0x20u) == hi);
    CHECK(seq_max(hi, lo) == lo);
    CHECK(seq_min(hi, lo) == hi);
    CHECK(seq_in(SeqNum(0xffffffffu), hi, lo));
    CHECK(seq_in(SeqNum(0u), hi, lo));
    CHECK(seq_in(hi, hi, lo));
    CHECK_FALSE(seq_in(lo, hi, lo));
    CHECK_FALSE(seq_in(SeqNum(0x11u), hi, lo));
    SeqNum s = hi;
    s += 0x30u;
    CHECK(s.raw() == 0x20u);
    // Up to 2^31 - 1 apart the order is total (exactly 2^31 is undefined,
    // RFC 1982 §3.2, and must never be relied on).
    CHECK(SeqNum(0u) < SeqNum(0x7fffffffu));
    CHECK_FALSE(SeqNum(0x7fffffffu) < SeqNum(0u));
    CHECK(SeqNum(0x80000001u) < SeqNum(0u));
    CHECK_FALSE(SeqNum(0u) < SeqNum(0x80000001u));
}
