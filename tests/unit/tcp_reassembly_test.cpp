// Unit tests for stack/tcp/reassembly: the zero-copy out-of-order queue
// (RFC 9293 §3.10.7.4) and the receiver's SACK blocks (RFC 2018 §4).
// Every test runs on an anonymous zbuf arena and ends with a leak check.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>

#include "stack/tcp/reassembly.hpp"
#include "tests/support/zbuf_leak.hpp"

using namespace crescent;
using namespace crescent::tcp;
using crescent::wire::SackBlock;
using crescent::wire::SeqNum;

namespace {

// A payload whose byte at sequence number s is uint8_t(s): any misplaced
// byte shows up when the stream is reassembled.
Slice payload(zbuf::Arena& a, SeqNum seq, uint32_t len) {
    Slice s = a.alloc_slice(len);
    REQUIRE(s);
    for (uint32_t i = 0; i < len; i++) s.data()[i] = std::byte(uint8_t((seq + i).raw()));
    return s;
}

// Pops what is in order and checks the bytes against the sequence pattern.
uint32_t drain_checked(Reassembly& q, SeqNum* rcv_nxt, bool* fin = nullptr) {
    std::vector<Slice> out;
    SeqNum start = *rcv_nxt;
    bool f = q.pop_in_order(rcv_nxt, &out);
    if (fin) *fin = f;
    SeqNum s = start;
    for (auto& sl : out) {
        REQUIRE_FALSE(sl.empty());
        for (size_t i = 0; i < sl.size(); i++) REQUIRE(sl.data()[i] == std::byte(uint8_t((s + uint32_t(i)).raw())));
        s += uint32_t(sl.size());
    }
    REQUIRE(s == *rcv_nxt);
    return uint32_t(*rcv_nxt - start);
}

SackBlock blk(uint32_t l, uint32_t r) { return SackBlock{SeqNum(l), SeqNum(r)}; }

} // namespace

TEST_CASE("reassembly: out-of-order segments are delivered in order once the gap fills", "[tcp][reassembly]") {
    test::ZbufArenaFixture arena;
    Reassembly q;
    SeqNum rcv_nxt(1000);
    CHECK(q.insert(SeqNum(1300), payload(arena.arena(), SeqNum(1300), 100), false, rcv_nxt) == Reassembly::Insert::Queued);
    CHECK(q.insert(SeqNum(1100), payload(arena.arena(), SeqNum(1100), 100), false, rcv_nxt) == Reassembly::Insert::Queued);
    CHECK(q.segments() == 2);
    CHECK(q.bytes() == 200);
    CHECK(drain_checked(q, &rcv_nxt) == 0); // the gap [1000, 1100) is still open
    // The in-order segment is the caller's; it advances rcv_nxt itself.
    rcv_nxt = SeqNum(1100);
    CHECK(drain_checked(q, &rcv_nxt) == 100);
    CHECK(rcv_nxt == SeqNum(1200));
    CHECK(q.insert(SeqNum(1200), payload(arena.arena(), SeqNum(1200), 100), false, rcv_nxt) == Reassembly::Insert::Queued);
    CHECK(drain_checked(q, &rcv_nxt) == 200);
    CHECK(rcv_nxt == SeqNum(1400));
    CHECK(q.empty());
    CHECK(q.bytes() == 0);
}

TEST_CASE("reassembly: zero copy — queued slices point into the arriving buffers", "[tcp][reassembly]") {
    test::ZbufArenaFixture arena;
    Reassembly q;
    SeqNum rcv_nxt(0);
    Slice a = payload(arena.arena(), SeqNum(100), 100);
    const std::byte* a_data = a.data();
    REQUIRE(q.insert(SeqNum(100), std::move(a), false, rcv_nxt) == Reassembly::Insert::Queued);
    CHECK(zbuf::refcount(a_data) == 1); // moved in, no extra reference
    // [50, 250) overlaps [100, 200): two gaps are filled with two references to one obj.
    Slice b = payload(arena.arena(), SeqNum(50), 200);
    const std::byte* b_data = b.data();
    REQUIRE(q.insert(SeqNum(50), std::move(b), false, rcv_nxt) == Reassembly::Insert::Queued);
    CHECK(zbuf::refcount(b_data) == 2);
    CHECK(q.segments() == 3);
    CHECK(q.bytes() == 200);
    rcv_nxt = SeqNum(50);
    std::vector<Slice> out;
    REQUIRE_FALSE(q.pop_in_order(&rcv_nxt, &out));
    REQUIRE(out.size() == 3);
    CHECK(out[0].data() == b_data);
    CHECK(out[0].size() == 50);
    CHECK(out[1].data() == a_data);       // the first copy of [100, 200) won
    CHECK(out[2].data() == b_data + 150);
    CHECK(out[2].size() == 50);
    CHECK(rcv_nxt == SeqNum(250));
}

TEST_CASE("reassembly: overlaps are trimmed, duplicates refused", "[tcp][reassembly]") {
    test::ZbufArenaFixture arena;
    Reassembly q;
    SeqNum rcv_nxt(0);
    auto ins = [&](uint32_t s, uint32_t n) { return q.insert(SeqNum(s), payload(arena.arena(), SeqNum(s), n), false, rcv_nxt); };
    REQUIRE(ins(100, 100) == Reassembly::Insert::Queued);
    REQUIRE(ins(300, 100) == Reassembly::Insert::Queued);
    CHECK(ins(100, 100) == Reassembly::Insert::Duplicate); // exact duplicate
    CHECK(ins(120, 50) == Reassembly::Insert::Duplicate);  // inside a queued segment
    CHECK(ins(150, 200) == Reassembly::Insert::Queued);    // fills [200, 300) only
    CHECK(q.segments() == 3);
    CHECK(q.bytes() == 300);
    CHECK(ins(350, 100) == Reassembly::Insert::Queued);    // extends to 450
    CHECK(q.bytes() == 350);
    // Below rcv.nxt: trimmed, or a duplicate when entirely old.
    rcv_nxt = SeqNum(60);
    CHECK(q.insert(SeqNum(0), payload(arena.arena(), SeqNum(0), 50), false, rcv_nxt) == Reassembly::Insert::Duplicate);
    CHECK(q.insert(SeqNum(0), payload(arena.arena(), SeqNum(0), 80), false, rcv_nxt) == Reassembly::Insert::Queued);
    CHECK(q.bytes() == 370);
    CHECK(drain_checked(q, &rcv_nxt) == 20);               // [60, 80)
    rcv_nxt = SeqNum(100);
    CHECK(drain_checked(q, &rcv_nxt) == 350);
    CHECK(q.empty());
}

TEST_CASE("reassembly: data delivered in order past queued segments is not delivered twice", "[tcp][reassembly]") {
    test::ZbufArenaFixture arena;
    Reassembly q;
    SeqNum rcv_nxt(0);
    REQUIRE(q.insert(SeqNum(100), payload(arena.arena(), SeqNum(100), 100), false, rcv_nxt) == Reassembly::Insert::Queued);
    REQUIRE(q.insert(SeqNum(300), payload(arena.arena(), SeqNum(300), 100), false, rcv_nxt) == Reassembly::Insert::Queued);
    // A large in-order segment [0, 350) arrived and was consumed by the caller.
    rcv_nxt = SeqNum(350);
    CHECK(drain_checked(q, &rcv_nxt) == 50);
    CHECK(rcv_nxt == SeqNum(400));
    CHECK(q.empty());
    CHECK(q.bytes() == 0);
}

TEST_CASE("reassembly: bounded by segment count and bytes", "[tcp][reassembly]") {
    test::ZbufArenaFixture arena;
    Reassembly q(ReassemblyLimits{.max_segments = 3, .max_bytes = 250});
    SeqNum rcv_nxt(0);
    auto ins = [&](uint32_t s, uint32_t n) { return q.insert(SeqNum(s), payload(arena.arena(), SeqNum(s), n), false, rcv_nxt); };
    CHECK(ins(100, 50) == Reassembly::Insert::Queued);
    CHECK(ins(200, 50) == Reassembly::Insert::Queued);
    CHECK(ins(300, 100) == Reassembly::Insert::Queued);
    CHECK(ins(500, 10) == Reassembly::Insert::NoRoom);   // a fourth segment
    CHECK(ins(150, 50) == Reassembly::Insert::NoRoom);   // also a fourth, though it fits in bytes
    CHECK(ins(300, 150) == Reassembly::Insert::NoRoom);  // its new part [400, 450) would be a fourth
    CHECK(ins(300, 100) == Reassembly::Insert::Duplicate);
    CHECK(q.segments() == 3);
    CHECK(q.bytes() == 200);
    q.clear();
    CHECK(q.empty());
    CHECK(ins(100, 250) == Reassembly::Insert::Queued);
    CHECK(ins(400, 1) == Reassembly::Insert::NoRoom);    // byte budget spent
}

TEST_CASE("RFC 9293 §3.10.7.4: an out-of-order FIN is held until the data before it is in", "[tcp][reassembly]") {
    test::ZbufArenaFixture arena;
    Reassembly q;
    SeqNum rcv_nxt(0);
    REQUIRE(q.insert(SeqNum(200), payload(arena.arena(), SeqNum(200), 100), true, rcv_nxt) == Reassembly::Insert::Queued);
    REQUIRE(q.fin_seq() == SeqNum(300));
    // Data beyond the FIN is never kept; data before it is.
    CHECK(q.insert(SeqNum(300), payload(arena.arena(), SeqNum(300), 10), false, rcv_nxt) == Reassembly::Insert::Duplicate);
    CHECK(q.insert(SeqNum(100), payload(arena.arena(), SeqNum(100), 250), false, rcv_nxt) == Reassembly::Insert::Queued);
    CHECK(q.bytes() == 200);
    rcv_nxt = SeqNum(100);
    bool fin = false;
    CHECK(drain_checked(q, &rcv_nxt, &fin) == 200);
    CHECK(fin);
    CHECK(rcv_nxt == SeqNum(300)); // the FIN itself is the caller's to consume
    CHECK(q.empty());
}

TEST_CASE("RFC 9293 §3.10.7.4: a bare FIN out of order, and duplicate FINs", "[tcp][reassembly]") {
    test::ZbufArenaFixture arena;
    Reassembly q;
    SeqNum rcv_nxt(0);
    CHECK(q.insert(SeqNum(100), Slice(), true, rcv_nxt) == Reassembly::Insert::Queued);
    CHECK_FALSE(q.empty());
    CHECK(q.segments() == 0);
    CHECK(q.insert(SeqNum(100), Slice(), true, rcv_nxt) == Reassembly::Insert::Duplicate);
    // A FIN at a different place than the first one is ignored.
    CHECK(q.insert(SeqNum(50), payload(arena.arena(), SeqNum(50), 10), true, rcv_nxt) == Reassembly::Insert::Queued);
    CHECK(q.fin_seq() == SeqNum(100));
    rcv_nxt = SeqNum(50);
    bool fin = true;
    CHECK(drain_checked(q, &rcv_nxt, &fin) == 10);
    CHECK_FALSE(fin);
    rcv_nxt = SeqNum(100);
    CHECK(drain_checked(q, &rcv_nxt, &fin) == 0);
    CHECK(fin);
    CHECK(q.empty());
}

TEST_CASE("RFC 2018 §4: the first SACK block holds the most recent segment, then by recency", "[tcp][reassembly][sack]") {
    test::ZbufArenaFixture arena;
    Reassembly q;
    SeqNum rcv_nxt(0);
    auto ins = [&](uint32_t s, uint32_t n) { return q.insert(SeqNum(s), payload(arena.arena(), SeqNum(s), n), false, rcv_nxt); };
    std::array<SackBlock, 4> b{};
    CHECK(q.sack_blocks(b) == 0);
    ins(1000, 100);  // block A
    ins(3000, 100);  // block C
    ins(2000, 100);  // block B
    REQUIRE(q.sack_blocks(b) == 3);
    CHECK(b[0] == blk(2000, 2100));
    CHECK(b[1] == blk(3000, 3100));
    CHECK(b[2] == blk(1000, 1100));
    // A segment extending A makes A the most recent block.
    ins(1100, 100);
    REQUIRE(q.sack_blocks(b) == 3);
    CHECK(b[0] == blk(1000, 1200));
    CHECK(b[1] == blk(2000, 2100));
    CHECK(b[2] == blk(3000, 3100));
    // Five blocks, room for three: the three most recent.
    ins(5000, 100);
    ins(4000, 100);
    std::array<SackBlock, 3> three{};
    REQUIRE(q.sack_blocks(three) == 3);
    CHECK(three[0] == blk(4000, 4100));
    CHECK(three[1] == blk(5000, 5100));
    CHECK(three[2] == blk(1000, 1200));
    // A duplicate of C makes C's block the one that triggered the ACK.
    CHECK(ins(3000, 50) == Reassembly::Insert::Duplicate);
    REQUIRE(q.sack_blocks(three) == 3);
    CHECK(three[0] == blk(3000, 3100));
    // Filling the gap between B and C merges them into one block.
    ins(2100, 900);
    REQUIRE(q.sack_blocks(b) == 4);
    CHECK(b[0] == blk(2000, 3100));
    CHECK(b[1] == blk(4000, 4100));
    CHECK(b[2] == blk(5000, 5100));
    CHECK(b[3] == blk(1000, 1200));
}

TEST_CASE("reassembly: sequence numbers wrap around 2^32", "[tcp][reassembly]") {
    test::ZbufArenaFixture arena;
    Reassembly q;
    SeqNum rcv_nxt(0xffffff00u);
    REQUIRE(q.insert(SeqNum(0x00000010u), payload(arena.arena(), SeqNum(0x10u), 0x40), false, rcv_nxt) == Reassembly::Insert::Queued);
    REQUIRE(q.insert(SeqNum(0xffffff80u), payload(arena.arena(), SeqNum(0xffffff80u), 0x90), false, rcv_nxt) == Reassembly::Insert::Queued);
    std::array<SackBlock, 4> b{};
    REQUIRE(q.sack_blocks(b) == 1);
    CHECK(b[0] == blk(0xffffff80u, 0x50u));
    rcv_nxt = SeqNum(0xffffff80u);
    CHECK(drain_checked(q, &rcv_nxt) == 0xd0);
    CHECK(rcv_nxt == SeqNum(0x50u));
}

TEST_CASE("reassembly: clear and destruction release every slice", "[tcp][reassembly]") {
    test::ZbufArenaFixture arena;
    uint64_t before = arena->live();
    {
        Reassembly q;
        for (uint32_t i = 0; i < 50; i++)
            REQUIRE(q.insert(SeqNum(1000 + i * 200), payload(arena.arena(), SeqNum(1000 + i * 200), 100), false, SeqNum(0)) ==
                    Reassembly::Insert::Queued);
        CHECK(arena->live() == before + 50);
        q.clear();
        CHECK(arena->live() == before);
        for (uint32_t i = 0; i < 10; i++)
            q.insert(SeqNum(1000 + i * 200), payload(arena.arena(), SeqNum(1000 + i * 200), 100), false, SeqNum(0));
    }
    CHECK(arena->live() == before);
}
