// crescent — the classic-pcap writer (stack/engine/pcap.hpp): file header
// bytes, record layout and timestamps, snap length cut, size cap.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "stack/engine/pcap.hpp"

using crescent::Instant;
using crescent::engine::PcapWriter;

namespace {

std::string tmp_path(const char* tag) {
    return "/tmp/crescent_pcap_test_" + std::to_string(getpid()) + "_" + tag + ".pcap";
}

std::vector<uint8_t> slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

uint32_t u32(const std::vector<uint8_t>& b, size_t off) {
    uint32_t v;
    std::memcpy(&v, b.data() + off, 4);
    return v;
}
uint16_t u16(const std::vector<uint8_t>& b, size_t off) {
    uint16_t v;
    std::memcpy(&v, b.data() + off, 2);
    return v;
}

std::vector<std::byte> pattern(size_t n, uint8_t seed) {
    std::vector<std::byte> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = std::byte(uint8_t(seed + i));
    return v;
}

} // namespace

TEST_CASE("pcap: file header, records from pieces, timestamps, snaplen cut") {
    const std::string path = tmp_path("basic");
    std::string err;
    const Instant t0 = Instant::from_nanos(5'000'000'000);
    auto w = PcapWriter::open(path, 100, 0, t0, &err);
    REQUIRE(w);
    auto a = pattern(60, 1), b = pattern(30, 100), big = pattern(150, 7);
    std::span<const std::byte> two[] = {a, b};
    w->write(t0 + std::chrono::nanoseconds(1'500'000'123), two);  // 90 B in two pieces
    std::span<const std::byte> one[] = {big};
    w->write(t0 + std::chrono::nanoseconds(2'000'000'000), one);  // 150 B, cut to 100
    CHECK(w->frames() == 2);
    CHECK(w->dropped_cap() == 0);
    CHECK(w->bytes() == 24 + 16 + 90 + 16 + 100);
    w.reset();  // closes (flushes)

    auto f = slurp(path);
    REQUIRE(f.size() == 24 + 16 + 90 + 16 + 100);
    // File header: magic (ns), version 2.4, thiszone, sigfigs, snaplen, Ethernet.
    CHECK(u32(f, 0) == 0xa1b23c4d);
    CHECK(u16(f, 4) == 2);
    CHECK(u16(f, 6) == 4);
    CHECK(u32(f, 8) == 0);
    CHECK(u32(f, 12) == 0);
    CHECK(u32(f, 16) == 100);
    CHECK(u32(f, 20) == 1);
    // Record 1: the pieces back to back; wall time = open's wall time + 1.5 s.
    const uint64_t s1 = u32(f, 24), ns1 = u32(f, 28);
    CHECK(ns1 < 1'000'000'000);
    CHECK(u32(f, 32) == 90);
    CHECK(u32(f, 36) == 90);
    CHECK(std::memcmp(f.data() + 40, a.data(), 60) == 0);
    CHECK(std::memcmp(f.data() + 100, b.data(), 30) == 0);
    // The record's wall time is near now (opened a moment ago) plus 1.5 s.
    const int64_t wall1 = int64_t(s1) * 1'000'000'000 + int64_t(ns1);
    const int64_t now = int64_t(time(nullptr)) * 1'000'000'000;
    CHECK(wall1 > now - 5'000'000'000);
    CHECK(wall1 < now + 5'000'000'000);
    // Record 2: incl_len = snaplen, orig_len = 150, 0.5 s after record 1.
    const size_t r2 = 40 + 90;
    const int64_t wall2 = int64_t(u32(f, r2)) * 1'000'000'000 + int64_t(u32(f, r2 + 4));
    CHECK(wall2 - wall1 == 499'999'877);
    CHECK(u32(f, r2 + 8) == 100);
    CHECK(u32(f, r2 + 12) == 150);
    CHECK(std::memcmp(f.data() + r2 + 16, big.data(), 100) == 0);
    std::remove(path.c_str());
}

TEST_CASE("pcap: the size cap stops the file and counts the frames not written") {
    const std::string path = tmp_path("cap");
    std::string err;
    // Header 24 + two records of 16 + 64 = 184; the third would cross 201.
    auto w = PcapWriter::open(path, 0, 201, Instant::from_nanos(0), &err);
    REQUIRE(w);
    CHECK(w->snaplen() == PcapWriter::kDefaultSnaplen);
    auto fr = pattern(64, 3), tiny = pattern(1, 9);
    std::span<const std::byte> one[] = {fr};
    std::span<const std::byte> small[] = {tiny};
    for (int i = 0; i < 5; ++i) w->write(Instant::from_nanos(i), one);
    w->write(Instant::from_nanos(9), small);  // 184 + 17 fits the cap, but the capture has stopped
    CHECK(w->frames() == 2);
    CHECK(w->dropped_cap() == 4);
    CHECK(w->bytes() == 184);
    w.reset();
    CHECK(slurp(path).size() == 184);
    std::remove(path.c_str());
}

TEST_CASE("pcap: an unopenable path is one error naming the path and errno") {
    std::string err;
    auto w = PcapWriter::open("/nonexistent-dir-crescent/x.pcap", 0, 0, Instant::from_nanos(0), &err);
    CHECK_FALSE(w);
    CHECK(err == "cannot open the capture file /nonexistent-dir-crescent/x.pcap: No such file or directory");
}

TEST_CASE("pcap: one file per engine") {
    using crescent::engine::pcap_path;
    CHECK(pcap_path("/tmp/c.pcap", 0, 1) == "/tmp/c.pcap");
    CHECK(pcap_path("/tmp/c.pcap", 0, 2) == "/tmp/c.pcap.0");
    CHECK(pcap_path("/tmp/c.pcap", 1, 2) == "/tmp/c.pcap.1");
}
