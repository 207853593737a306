// Unit tests for stack/tcp/scoreboard: RFC 6675 §4 (Update, IsLost, SetPipe,
// NextSeg), RFC 2883 §4 (D-SACK recognition) and the range bound.
// Expected values are worked out by hand from the RFC text (SMSS = 1000).
#include <catch2/catch.hpp>

#include <array>
#include <vector>

#include "stack/tcp/scoreboard.hpp"

using namespace crescent::tcp;
using crescent::wire::SackBlock;
using crescent::wire::SeqNum;

namespace {

constexpr uint32_t kSmss = 1000;

SackBlock blk(uint32_t l, uint32_t r) { return SackBlock{SeqNum(l), SeqNum(r)}; }

SackScoreboard::Update sack(SackScoreboard& sb, uint32_t una, uint32_t nxt, std::vector<SackBlock> blocks) {
    return sb.update(SeqNum(una), SeqNum(nxt), blocks);
}

} // namespace

TEST_CASE("RFC 6675 §4 Update(): SACKed octets are recorded and merged", "[tcp][scoreboard]") {
    SackScoreboard sb;
    auto u = sack(sb, 0, 10000, {blk(2000, 3000)});
    CHECK(u.newly_sacked == 1000);
    CHECK_FALSE(u.dsack);
    CHECK(u.ignored == 0);
    u = sack(sb, 0, 10000, {blk(2000, 4000), blk(6000, 7000)});
    CHECK(u.newly_sacked == 2000);            // [3000, 4000) and [6000, 7000)
    CHECK(sb.range_count() == 2);
    CHECK(sb.sacked_bytes() == 3000);
    u = sack(sb, 0, 10000, {blk(4000, 6000)}); // bridges the two: one range
    CHECK(u.newly_sacked == 2000);
    CHECK(sb.range_count() == 1);
    CHECK(sb.sacked_bytes() == 5000);
    CHECK(sb.highest_sacked() == SeqNum(7000));
    CHECK(sb.is_sacked(SeqNum(2000)));
    CHECK(sb.is_sacked(SeqNum(6999)));
    CHECK_FALSE(sb.is_sacked(SeqNum(7000)));
    CHECK_FALSE(sb.is_sacked(SeqNum(1999)));
    u = sack(sb, 0, 10000, {blk(1500, 8000)}); // covers the whole range and more
    CHECK(u.newly_sacked == 1500);
    CHECK(sb.range_count() == 1);
}

TEST_CASE("RFC 6675 §4 Update(): blocks outside [snd.una, snd.nxt] are ignored", "[tcp][scoreboard]") {
    SackScoreboard sb;
    auto u = sack(sb, 1000, 5000, {blk(4000, 6000), blk(3000, 3000), blk(4000, 3500)});
    CHECK(u.ignored == 3);
    CHECK(u.newly_sacked == 0);
    CHECK(sb.empty());
}

TEST_CASE("RFC 6675 §4 Update(): the cumulative ACK drops what is below it", "[tcp][scoreboard]") {
    SackScoreboard sb;
    sack(sb, 0, 10000, {blk(2000, 3000), blk(5000, 6000)});
    sb.advance(SeqNum(2500));
    CHECK(sb.range_count() == 2);
    CHECK(sb.sacked_bytes() == 1500);
    sb.advance(SeqNum(6000));
    CHECK(sb.empty());
}

TEST_CASE("RFC 2883 §4: a D-SACK is recognised and does not enter the scoreboard", "[tcp][scoreboard][dsack]") {
    SackScoreboard sb;
    // First block below the cumulative ACK.
    auto u = sack(sb, 5000, 10000, {blk(3000, 4000), blk(6000, 7000)});
    CHECK(u.dsack);
    CHECK(u.ignored == 0);
    CHECK(u.newly_sacked == 1000);
    CHECK(sb.sacked_bytes() == 1000);
    // First block inside the second block: a duplicate above the cumulative ACK.
    u = sack(sb, 5000, 10000, {blk(6000, 6500), blk(6000, 7000)});
    CHECK(u.dsack);
    CHECK(u.newly_sacked == 0);
    // A first block merely overlapping the second is an ordinary SACK.
    u = sack(sb, 5000, 10000, {blk(8000, 9000), blk(6000, 7000)});
    CHECK_FALSE(u.dsack);
    CHECK(u.newly_sacked == 1000);
}

TEST_CASE("RFC 6675 §4 IsLost(): DupThresh discontiguous SACKed sequences above", "[tcp][scoreboard]") {
    SackScoreboard sb;
    // Three small discontiguous blocks (100 bytes each) above 1000.
    sack(sb, 1000, 20000, {blk(2000, 2100), blk(4000, 4100), blk(6000, 6100)});
    CHECK(sb.is_lost(SeqNum(1000), kSmss));  // 3 sequences above
    CHECK(sb.is_lost(SeqNum(1999), kSmss));
    CHECK_FALSE(sb.is_lost(SeqNum(3000), kSmss)); // 2 sequences, 200 bytes
    CHECK_FALSE(sb.is_lost(SeqNum(6050), kSmss)); // inside the last block: 49 bytes above
}

TEST_CASE("RFC 6675 §4 IsLost(): more than (DupThresh - 1) * SMSS bytes SACKed above", "[tcp][scoreboard]") {
    SackScoreboard sb;
    sack(sb, 0, 20000, {blk(1000, 3001)}); // one block of 2001 bytes
    CHECK(sb.is_lost(SeqNum(0), kSmss));
    CHECK(sb.is_lost(SeqNum(999), kSmss));
    CHECK_FALSE(sb.is_lost(SeqNum(1000), kSmss)); // 2000 bytes above 1000: not more than 2*SMSS
    SackScoreboard exact;
    sack(exact, 0, 20000, {blk(1000, 3000)}); // exactly 2*SMSS: not lost
    CHECK_FALSE(exact.is_lost(SeqNum(0), kSmss));
    sack(exact, 0, 20000, {blk(5000, 5001)}); // one more byte (second sequence): lost
    CHECK(exact.is_lost(SeqNum(0), kSmss));
}

TEST_CASE("RFC 6675 §4 SetPipe(): un-SACKed, not-lost octets plus retransmitted ones", "[tcp][scoreboard]") {
    SackScoreboard sb;
    // Ten segments [0, 10000) in flight; segments 1, 3, 4, 6 SACKed.
    sack(sb, 0, 10000, {blk(1000, 2000), blk(3000, 5000), blk(6000, 7000)});
    // Holes: [0,1000) lost (3 ranges above); [2000,3000) lost (3000 bytes
    // above > 2*SMSS); [5000,6000) not lost (1 range, 1000 bytes);
    // [7000,10000) not lost. Nothing retransmitted: pipe = 1000 + 3000.
    CHECK(sb.pipe(SeqNum(0), SeqNum(10000), SeqNum(0), kSmss) == 4000);
    // Segment 0 retransmitted (HighRxt = 1000): +1000.
    CHECK(sb.pipe(SeqNum(0), SeqNum(10000), SeqNum(1000), kSmss) == 5000);
    // Segments 0 and 2 retransmitted (HighRxt = 3000): +2000.
    CHECK(sb.pipe(SeqNum(0), SeqNum(10000), SeqNum(3000), kSmss) == 6000);
    // HighRxt inside a not-lost hole counts those octets twice (rules a and b).
    CHECK(sb.pipe(SeqNum(0), SeqNum(10000), SeqNum(5500), kSmss) == 6500);
    // Without any SACK, pipe is the flight size.
    SackScoreboard none;
    CHECK(none.pipe(SeqNum(0), SeqNum(10000), SeqNum(0), kSmss) == 10000);
}

TEST_CASE("RFC 6675 §4 NextSeg() rule 1: the first lost un-SACKed segment above HighRxt", "[tcp][scoreboard]") {
    SackScoreboard sb;
    sack(sb, 0, 10000, {blk(1000, 2000), blk(3000, 5000), blk(6000, 7000)});
    auto r = sb.next_lost(SeqNum(0), SeqNum(0), kSmss);
    REQUIRE(r);
    CHECK(r->start == SeqNum(0));
    CHECK(r->len == 1000);
    r = sb.next_lost(SeqNum(0), SeqNum(1000), kSmss); // segment 0 already retransmitted
    REQUIRE(r);
    CHECK(r->start == SeqNum(2000));
    CHECK(r->len == 1000);
    r = sb.next_lost(SeqNum(0), SeqNum(2500), kSmss); // half of the hole retransmitted
    REQUIRE(r);
    CHECK(r->start == SeqNum(2500));
    CHECK(r->len == 500);                           // clipped at the next SACKed range
    CHECK_FALSE(sb.next_lost(SeqNum(0), SeqNum(3000), kSmss)); // [5000, 6000) is not lost
    // Large holes yield SMSS-sized pieces.
    SackScoreboard big;
    sack(big, 0, 20000, {blk(10000, 13000)});
    r = big.next_lost(SeqNum(0), SeqNum(0), kSmss);
    REQUIRE(r);
    CHECK(r->start == SeqNum(0));
    CHECK(r->len == 1000);
    r = big.next_lost(SeqNum(0), SeqNum(9500), kSmss);
    REQUIRE(r);
    CHECK(r->len == 500);
}

TEST_CASE("RFC 6675 §4 NextSeg() rule 3: un-SACKed but not lost, below the highest SACK", "[tcp][scoreboard]") {
    SackScoreboard sb;
    sack(sb, 0, 10000, {blk(1000, 2000), blk(3000, 5000), blk(6000, 7000)});
    auto r = sb.next_unsacked(SeqNum(0), SeqNum(3000), kSmss);
    REQUIRE(r);
    CHECK(r->start == SeqNum(5000));
    CHECK(r->len == 1000);
    // Nothing above the highest SACKed octet (that is new data, rule 2).
    CHECK_FALSE(sb.next_unsacked(SeqNum(0), SeqNum(7000), kSmss));
    CHECK_FALSE(SackScoreboard().next_unsacked(SeqNum(0), SeqNum(0), kSmss));
}

TEST_CASE("scoreboard: the range count is bounded", "[tcp][scoreboard]") {
    SackScoreboard sb;
    uint32_t ignored = 0;
    for (uint32_t i = 0; i < kMaxScoreboardRanges + 10; i++) {
        auto u = sack(sb, 0, 1u << 30, {blk(1000 + i * 2000, 2000 + i * 2000)});
        ignored += u.ignored;
    }
    CHECK(sb.range_count() == kMaxScoreboardRanges);
    CHECK(ignored == 10);
    // Blocks that merge into existing ranges are still accepted at the bound.
    auto u = sack(sb, 0, 1u << 30, {blk(2000, 3000)});
    CHECK(u.ignored == 0);
    CHECK(u.newly_sacked == 1000);
    CHECK(sb.range_count() == kMaxScoreboardRanges - 1);
}

TEST_CASE("scoreboard: sequence numbers wrap around 2^32", "[tcp][scoreboard]") {
    SackScoreboard sb;
    uint32_t una = 0xfffff000u;
    auto u = sack(sb, una, una + 10000, {blk(una + 1000, una + 2000), blk(una + 3000, una + 5000), blk(una + 6000, una + 7000)});
    CHECK(u.newly_sacked == 4000);
    CHECK(sb.highest_sacked() == SeqNum(una + 7000));
    CHECK(sb.pipe(SeqNum(una), SeqNum(una + 10000), SeqNum(una), kSmss) == 4000);
    auto r = sb.next_lost(SeqNum(una), SeqNum(una + 1000), kSmss);
    REQUIRE(r);
    CHECK(r->start == SeqNum(una + 2000));
    sb.advance(SeqNum(una + 5000));
    CHECK(sb.sacked_bytes() == 1000);
}
