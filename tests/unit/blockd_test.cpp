// Unit tests of crescent-blockd's pure pieces (examples/blockd): CRC32C (RFC
// 3720 vectors, hardware and software agree), MemoryVolume (zero-copy block
// contents, overwrite while an old READ reply is held, bounds and alignment,
// zeros, coalescing), FileVolume (O_DIRECT + io_uring: data verified by CRC and
// by reading the file behind the volume's back, completions only from poll(),
// the eventfd, the waiting FIFO and QueueFull, buffers aligned inside larger
// objs, open errors) and the block protocol's metadata layout. Every test ends
// with no zbuf leaked.
#include <catch2/catch.hpp>

#include "examples/blockd/crc32c.hpp"
#include "examples/blockd/proto.hpp"
#include "examples/blockd/volume.hpp"
#include "tests/support/zbuf_leak.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace crescent;
using namespace crescent::blockd;

namespace {

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = uint8_t(rng());
    return v;
}

// `bytes` as the engine would deliver them: 1448-byte TCP segments, each in
// its own RX-like obj at a small, unaligned offset.
std::vector<Slice> segments(const std::vector<uint8_t>& bytes, size_t seg = 1448) {
    std::vector<Slice> out;
    size_t i = 0;
    for (size_t at = 0; at < bytes.size(); at += seg, ++i) {
        size_t n = std::min(seg, bytes.size() - at);
        size_t off = 64 + 8 * (i % 5);
        Slice s = zbuf::Arena::current()->alloc_slice(off + n);
        REQUIRE(s);
        s.remove_prefix(off);
        std::memcpy(s.data(), bytes.data() + at, n);
        out.push_back(std::move(s));
    }
    return out;
}

std::vector<uint8_t> flatten(std::span<const Slice> v) {
    std::vector<uint8_t> out;
    for (const Slice& s : v) out.insert(out.end(), (const uint8_t*)s.data(), (const uint8_t*)s.data() + s.size());
    return out;
}

// Records one completion.
struct Result {
    bool called = false;
    int calls = 0;
    VolStatus st = VolStatus::IoError;
    std::vector<Slice> data; // moved out of the completion's span
    void operator()(VolStatus s, std::span<Slice> d) {
        called = true;
        ++calls;
        st = s;
        for (Slice& x : d) data.push_back(std::move(x));
    }
    Completion cb() { return Completion::to(this); }
};

} // namespace

// --- CRC32C -------------------------------------------------------------------------

TEST_CASE("crc32c: RFC 3720 B.4 vectors, both implementations", "[blockd][crc32c]") {
    if (!crc32c_hw_available()) WARN("no SSE4.2 here: the hardware path falls back to software");
    for (Crc32cImpl impl : {Crc32cImpl::Software, Crc32cImpl::Hardware, Crc32cImpl::Auto}) {
        CAPTURE(int(impl));
        CHECK(crc32c("123456789", 9, impl) == 0xE3069283u);
        CHECK(crc32c("", 0, impl) == 0u);
        uint8_t b[32];
        std::memset(b, 0, 32);
        CHECK(crc32c(b, 32, impl) == 0x8A9136AAu);
        std::memset(b, 0xff, 32);
        CHECK(crc32c(b, 32, impl) == 0x62A8AB43u);
        for (int i = 0; i < 32; ++i) b[i] = uint8_t(i);
        CHECK(crc32c(b, 32, impl) == 0x46DD794Eu);
        for (int i = 0; i < 32; ++i) b[i] = uint8_t(31 - i);
        CHECK(crc32c(b, 32, impl) == 0x113FDB5Cu);
    }
}

TEST_CASE("crc32c: implementations agree at every length and alignment; extend chains", "[blockd][crc32c]") {
    auto data = random_bytes(5000, 7);
    std::mt19937 rng(3);
    for (int iter = 0; iter < 400; ++iter) {
        size_t off = rng() % 16, len = rng() % 4000;
        uint32_t sw = crc32c(data.data() + off, len, Crc32cImpl::Software);
        uint32_t hw = crc32c(data.data() + off, len, Crc32cImpl::Hardware);
        REQUIRE(sw == hw);
        size_t cut = len ? rng() % len : 0;
        uint32_t a = crc32c(data.data() + off, cut, Crc32cImpl::Software);
        REQUIRE(crc32c_extend(a, data.data() + off + cut, len - cut, Crc32cImpl::Hardware) == sw);
    }
    // A bit flip changes it.
    uint32_t c = crc32c(data.data(), 4096);
    data[1234] ^= 0x10;
    CHECK(crc32c(data.data(), 4096) != c);
}

TEST_CASE("crc32c: over zbuf slices equals over the flat bytes", "[blockd][crc32c]") {
    test::ZbufArenaFixture arena;
    auto bytes = random_bytes(3 * kBlockSize, 11);
    auto segs = segments(bytes);
    CHECK(segs.size() == 9);
    uint32_t flat = crc32c(bytes.data(), bytes.size(), Crc32cImpl::Software);
    CHECK(crc32c(std::span<Slice>(segs), Crc32cImpl::Software) == flat);
    CHECK(crc32c(std::span<Slice>(segs), Crc32cImpl::Hardware) == flat);
}

// --- MemoryVolume --------------------------------------------------------------------

TEST_CASE("MemoryVolume: create validates its size", "[blockd][memory]") {
    test::ZbufArenaFixture arena;
    std::string err;
    CHECK_FALSE(MemoryVolume::create(0, &err));
    CHECK(err.find("multiple of 4096") != std::string::npos);
    CHECK_FALSE(MemoryVolume::create(4097, &err));
    auto v = MemoryVolume::create(1u << 20, &err);
    REQUIRE(v);
    CHECK(v->size() == (1u << 20));
    CHECK(v->blocks() == 256);
}

TEST_CASE("MemoryVolume: unwritten blocks read as zeros from one shared obj", "[blockd][memory]") {
    test::ZbufArenaFixture arena;
    std::string err;
    auto v = MemoryVolume::create(1u << 20, &err);
    REQUIRE(v);
    Result r;
    v->read(4 * kBlockSize, 20 * kBlockSize, r.cb());
    REQUIRE(r.called); // synchronous
    CHECK(r.st == VolStatus::Ok);
    auto bytes = flatten(r.data);
    REQUIRE(bytes.size() == 20 * kBlockSize);
    CHECK(std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; }));
    CHECK(v->stats().zero_blocks_read == 20);
    // Runs of zero blocks share one window of the zero obj (64 KiB class: 16
    // blocks per slice), all of the same obj.
    CHECK(r.data.size() == 2);
    CHECK(r.data[0].buf().data() == r.data[1].buf().data());
}

TEST_CASE("MemoryVolume: WRITE keeps the received slices, READ shares them (zero-copy)", "[blockd][memory]") {
    test::ZbufArenaFixture arena;
    std::string err;
    auto v = MemoryVolume::create(1u << 20, &err);
    REQUIRE(v);
    auto bytes = random_bytes(2 * kBlockSize, 21);
    auto segs = segments(bytes); // 1448 * 5 + 952
    REQUIRE(segs.size() == 6);
    std::vector<const std::byte*> objs, datas;
    for (auto& s : segs) objs.push_back(s.buf().data()), datas.push_back(s.data());
    uint64_t live_before = arena->live();

    Result w;
    v->write(8 * kBlockSize, segs, w.cb());
    REQUIRE(w.called);
    CHECK(w.st == VolStatus::Ok);
    CHECK(w.data.empty());
    segs.clear(); // the caller drops what it holds; the volume keeps its own references
    CHECK(arena->live() == live_before); // nothing allocated, nothing freed: no copy

    // Block 8 = segs 0,1 and the head of seg 2; block 9 = tail of 2, 3, 4, 5.
    auto b8 = v->block(8), b9 = v->block(9);
    REQUIRE(b8.size() == 3);
    REQUIRE(b9.size() == 4);
    CHECK(b8[0].data() == datas[0]);
    CHECK(b8[1].data() == datas[1]);
    CHECK(b8[2].data() == datas[2]);
    CHECK(b8[2].size() == kBlockSize - 2 * 1448);
    CHECK(b9[0].data() == datas[2] + b8[2].size());
    CHECK(b9[0].buf().data() == objs[2]);
    CHECK(b9[3].buf().data() == objs[5]);
    CHECK(zbuf::refcount(objs[2]) == 2); // one segment, two blocks
    CHECK(zbuf::refcount(objs[0]) == 1);
    CHECK(v->blocks_written() == 2);

    Result r;
    v->read(8 * kBlockSize, 2 * kBlockSize, r.cb());
    REQUIRE(r.st == VolStatus::Ok);
    // The straddling segment is one reply slice again: 6 slices, the originals.
    REQUIRE(r.data.size() == 6);
    for (size_t i = 0; i < 6; ++i) CHECK(r.data[i].data() == datas[i]);
    CHECK(flatten(r.data) == bytes);
    CHECK(crc32c(std::span<Slice>(r.data)) == crc32c(bytes.data(), bytes.size()));
    CHECK(v->stats().writes == 1);
    CHECK(v->stats().reads == 1);
    CHECK(v->stats().bytes_read == 2 * kBlockSize);
    CHECK(v->stats().blocks_coalesced == 0);

    // A partial read of the second block alone.
    Result r9;
    v->read(9 * kBlockSize, kBlockSize, r9.cb());
    CHECK(flatten(r9.data) == std::vector<uint8_t>(bytes.begin() + kBlockSize, bytes.end()));
}

TEST_CASE("MemoryVolume: overwrite while an old READ reply is held leaves the reply unchanged", "[blockd][memory]") {
    test::ZbufArenaFixture arena;
    std::string err;
    auto v = MemoryVolume::create(256 * kBlockSize, &err);
    REQUIRE(v);
    auto old_bytes = random_bytes(kBlockSize, 31), new_bytes = random_bytes(kBlockSize, 32);
    {
        auto s = segments(old_bytes);
        Result w;
        v->write(0, s, w.cb());
        REQUIRE(w.st == VolStatus::Ok);
    }
    uint64_t live_one = arena->live(); // 3 segment objs + the zero obj
    Result old_reply;                  // e.g. a READ reply still queued for TX
    v->read(0, kBlockSize, old_reply.cb());
    REQUIRE(old_reply.st == VolStatus::Ok);
    {
        auto s = segments(new_bytes);
        Result w;
        v->write(0, s, w.cb());
        REQUIRE(w.st == VolStatus::Ok);
    }
    CHECK(flatten(old_reply.data) == old_bytes);
    CHECK(crc32c(std::span<Slice>(old_reply.data)) == crc32c(old_bytes.data(), old_bytes.size()));
    Result now;
    v->read(0, kBlockSize, now.cb());
    CHECK(flatten(now.data) == new_bytes);
    now.data.clear();
    // The old objs live only through the old reply: dropping it frees them.
    CHECK(arena->live() == live_one + 3);
    old_reply.data.clear();
    CHECK(arena->live() == live_one);
}

TEST_CASE("MemoryVolume: bounds and alignment errors complete at once and change nothing", "[blockd][memory]") {
    test::ZbufArenaFixture arena;
    std::string err;
    const uint64_t size = 16 * kBlockSize;
    auto v = MemoryVolume::create(size, &err);
    REQUIRE(v);
    auto rd = [&](uint64_t off, uint64_t len) {
        Result r;
        v->read(off, len, r.cb());
        REQUIRE(r.calls == 1);
        CHECK(r.data.empty() == (r.st != VolStatus::Ok));
        return r.st;
    };
    CHECK(rd(1, kBlockSize) == VolStatus::Misaligned);
    CHECK(rd(0, 100) == VolStatus::Misaligned);
    CHECK(rd(512, kBlockSize) == VolStatus::Misaligned);
    CHECK(rd(0, 0) == VolStatus::Empty);
    CHECK(rd(size, kBlockSize) == VolStatus::OutOfRange);
    CHECK(rd(size - kBlockSize, 2 * kBlockSize) == VolStatus::OutOfRange);
    CHECK(rd(~uint64_t{0} - kBlockSize + 1, kBlockSize) == VolStatus::OutOfRange); // no wrap
    CHECK(rd(kBlockSize, ~uint64_t{0} - kBlockSize + 1) == VolStatus::OutOfRange);
    CHECK(rd(size - kBlockSize, kBlockSize) == VolStatus::Ok);
    CHECK(rd(0, size) == VolStatus::Ok);

    auto wr = [&](uint64_t off, size_t len) {
        auto s = segments(random_bytes(len, off + len));
        Result r;
        v->write(off, s, r.cb());
        REQUIRE(r.calls == 1);
        return r.st;
    };
    CHECK(wr(0, 100) == VolStatus::Misaligned);
    CHECK(wr(100, kBlockSize) == VolStatus::Misaligned);
    CHECK(wr(size, kBlockSize) == VolStatus::OutOfRange);
    CHECK(wr(size - kBlockSize, 2 * kBlockSize) == VolStatus::OutOfRange);
    {
        std::vector<Slice> none;
        Result r;
        v->write(0, none, r.cb());
        CHECK(r.st == VolStatus::Empty);
    }
    CHECK(v->blocks_written() == 0);
    CHECK(v->stats().errors[unsigned(VolStatus::Misaligned)] == 5);
    CHECK(v->stats().errors[unsigned(VolStatus::OutOfRange)] == 6);
    CHECK(v->stats().errors[unsigned(VolStatus::Empty)] == 2);
    CHECK(v->stats().writes == 0);
    CHECK(v->stats().reads == 2);
    Result f;
    v->flush(f.cb());
    CHECK(f.st == VolStatus::Ok);
    CHECK(v->stats().flushes == 1);
    CHECK(status_name(VolStatus::OutOfRange) == "out_of_range");
}

TEST_CASE("MemoryVolume: a block in many small slices is copied into one obj", "[blockd][memory]") {
    test::ZbufArenaFixture arena;
    std::string err;
    auto v = MemoryVolume::create(64 * kBlockSize, &err);
    REQUIRE(v);
    // Block 0 in 512-byte pieces (8 > kMaxPieces), block 1 in 1448-byte ones,
    // and empty slices in between that must be skipped.
    auto bytes = random_bytes(2 * kBlockSize, 41);
    std::vector<uint8_t> a(bytes.begin(), bytes.begin() + kBlockSize), b(bytes.begin() + kBlockSize, bytes.end());
    auto sa = segments(a, 512), sb = segments(b, 1448);
    std::vector<Slice> all;
    for (auto& s : sa) all.push_back(std::move(s)), all.push_back(Slice());
    for (auto& s : sb) all.push_back(std::move(s));
    Result w;
    v->write(3 * kBlockSize, all, w.cb());
    REQUIRE(w.st == VolStatus::Ok);
    CHECK(v->stats().blocks_coalesced == 1);
    CHECK(v->block(3).size() == 1);
    CHECK(v->block(4).size() == 3);
    Result r;
    v->read(3 * kBlockSize, 2 * kBlockSize, r.cb());
    CHECK(flatten(r.data) == bytes);
}

TEST_CASE("MemoryVolume: random writes and reads against a model", "[blockd][memory]") {
    test::ZbufArenaFixture arena(64u << 20);
    std::string err;
    const uint64_t nblk = 128;
    auto v = MemoryVolume::create(nblk * kBlockSize, &err);
    REQUIRE(v);
    std::vector<uint8_t> model(nblk * kBlockSize, 0);
    std::mt19937_64 rng(5);
    for (int i = 0; i < 300; ++i) {
        uint64_t blk = rng() % nblk, n = 1 + rng() % std::min<uint64_t>(8, nblk - blk);
        if (rng() % 2) {
            auto bytes = random_bytes(n * kBlockSize, rng());
            auto s = segments(bytes, 200 + rng() % 3000);
            Result w;
            v->write(blk * kBlockSize, s, w.cb());
            REQUIRE(w.st == VolStatus::Ok);
            std::memcpy(model.data() + blk * kBlockSize, bytes.data(), bytes.size());
        } else {
            Result r;
            v->read(blk * kBlockSize, n * kBlockSize, r.cb());
            REQUIRE(r.st == VolStatus::Ok);
            auto got = flatten(r.data);
            REQUIRE(std::equal(got.begin(), got.end(), model.begin() + long(blk * kBlockSize)));
        }
    }
    for (uint64_t b = 0; b < nblk; ++b) {
        auto p = v->block(b);
        size_t sum = 0;
        for (auto& s : p) sum += s.size();
        CHECK((p.empty() || sum == kBlockSize));
        CHECK(p.size() <= MemoryVolume::kMaxPieces);
    }
}

// --- FileVolume ------------------------------------------------------------------------

namespace {

// A scratch file in the first directory whose filesystem takes O_DIRECT.
struct TempFile {
    std::string path;
    bool direct_ok = false;
    TempFile() {
        for (const char* dir : {"/var/tmp", "/work", "/tmp"}) {
            std::string p = std::string(dir) + "/crescent-blockd-test-XXXXXX";
            int fd = mkstemp(p.data());
            if (fd < 0) continue;
            ::close(fd);
            int d = ::open(p.c_str(), O_RDWR | O_DIRECT);
            if (d >= 0) {
                ::close(d);
                path = p;
                direct_ok = true;
                return;
            }
            if (path.empty()) path = p;
            else ::unlink(p.c_str());
        }
    }
    ~TempFile() {
        if (!path.empty()) ::unlink(path.c_str());
    }
};

// poll() until `pred` or 5 s.
template <class P>
bool poll_until(Volume& v, P pred) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        if (v.poll() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
}

std::vector<uint8_t> read_file(const std::string& path, uint64_t off, size_t n) {
    std::vector<uint8_t> out(n);
    int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::pread(fd, out.data(), n, off_t(off)) == ssize_t(n));
    ::close(fd);
    return out;
}

std::unique_ptr<FileVolume> open_file(const TempFile& f, FileOptions o) {
    REQUIRE(!f.path.empty());
    o.path = f.path;
    if (!f.direct_ok) {
        WARN("no directory here takes O_DIRECT: buffered I/O, the O_DIRECT path is untested");
        o.allow_buffered = true;
    }
    std::string err;
    auto v = FileVolume::open(o, &err);
    INFO(err);
    REQUIRE(v);
    if (f.direct_ok) CHECK(v->direct());
    return v;
}

} // namespace

TEST_CASE("FileVolume: writes, flush and reads verified by CRC; completions only from poll()", "[blockd][file]") {
    test::ZbufArenaFixture arena(64u << 20);
    TempFile f;
    FileOptions o;
    o.size = 4u << 20;
    o.queue_depth = 16;
    auto v = open_file(f, o);
    INFO(v->describe());
    CHECK(v->size() == o.size);
    CHECK(v->mem_align() <= 4096);
    CHECK(v->chunk() == 65536); // the largest default class that is whole blocks

    // Writes of 1, 2, 5 and 16 blocks from "received" 1448-byte segments.
    struct W { uint64_t off; std::vector<uint8_t> bytes; Result r; };
    std::vector<W> ws;
    uint64_t off = 0;
    for (uint64_t n : {1, 2, 5, 16, 1, 3}) {
        ws.push_back({off, random_bytes(n * kBlockSize, off + 1), {}});
        off += (n + 1) * kBlockSize; // leave a hole after each
    }
    for (auto& w : ws) {
        auto s = segments(w.bytes);
        v->write(w.off, s, w.r.cb());
        CHECK_FALSE(w.r.called); // not before poll()
    }
    CHECK(v->pending() == ws.size());
    REQUIRE(poll_until(*v, [&] { return v->pending() == 0; }));
    for (auto& w : ws) {
        CHECK(w.r.calls == 1);
        CHECK(w.r.st == VolStatus::Ok);
    }
    CHECK(v->stats().writes == ws.size());
    CHECK(v->stats().write_copies == ws.size()); // network slices are never O_DIRECT-aligned
    CHECK(v->stats().write_zero_copy == 0);

    Result fl;
    v->flush(fl.cb());
    CHECK_FALSE(fl.called);
    REQUIRE(poll_until(*v, [&] { return fl.called; }));
    CHECK(fl.st == VolStatus::Ok);
    CHECK(v->stats().flushes == 1);

    // Read back through the volume: CRC of every extent, and the hole is zeros.
    for (auto& w : ws) {
        Result r;
        v->read(w.off, w.bytes.size(), r.cb());
        CHECK_FALSE(r.called);
        REQUIRE(poll_until(*v, [&] { return r.called; }));
        REQUIRE(r.st == VolStatus::Ok);
        CHECK(crc32c(std::span<Slice>(r.data)) == crc32c(w.bytes.data(), w.bytes.size()));
        for (const Slice& s : r.data) CHECK(reinterpret_cast<uintptr_t>(s.data()) % v->mem_align() == 0);
        Result hole;
        v->read(w.off + w.bytes.size(), kBlockSize, hole.cb());
        REQUIRE(poll_until(*v, [&] { return hole.called; }));
        auto z = flatten(hole.data);
        CHECK(std::all_of(z.begin(), z.end(), [](uint8_t b) { return b == 0; }));
        // And behind the volume's back: the bytes are in the file.
        CHECK(read_file(f.path, w.off, w.bytes.size()) == w.bytes);
    }
    // A read spanning several buffer objs (chunk 64 KiB): 128 KiB.
    Result big;
    v->read(0, 128 * 1024, big.cb());
    REQUIRE(poll_until(*v, [&] { return big.called; }));
    CHECK(big.data.size() == 2);
    CHECK(flatten(big.data) == read_file(f.path, 0, 128 * 1024));
    CHECK(v->stats().errors_total() == 0);
}

TEST_CASE("FileVolume: argument errors complete at once; the eventfd signals completions", "[blockd][file]") {
    test::ZbufArenaFixture arena;
    TempFile f;
    FileOptions o;
    o.size = 64 * kBlockSize;
    o.max_io = 8 * kBlockSize;
    auto v = open_file(f, o);
    Result r;
    v->read(1, kBlockSize, r.cb());
    CHECK(r.st == VolStatus::Misaligned);
    Result r2;
    v->read(64 * kBlockSize, kBlockSize, r2.cb());
    CHECK(r2.st == VolStatus::OutOfRange);
    Result r3;
    v->read(0, 16 * kBlockSize, r3.cb());
    CHECK(r3.st == VolStatus::TooLarge);
    Result r4;
    auto s = segments(random_bytes(100, 1));
    v->write(0, s, r4.cb());
    CHECK(r4.st == VolStatus::Misaligned);
    CHECK(v->pending() == 0);

    int efd = v->event_fd();
    REQUIRE(efd >= 0);
    auto bytes = random_bytes(kBlockSize, 9);
    auto seg = segments(bytes);
    Result w;
    v->write(kBlockSize, seg, w.cb());
    pollfd p{efd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1); // the engine's epoll would wake here
    size_t ran = 0;
    REQUIRE(poll_until(*v, [&] { return (ran += v->on_event(), w.called); }));
    CHECK(ran == 1);
    CHECK(w.st == VolStatus::Ok);
    p.revents = 0;
    CHECK(::poll(&p, 1, 0) == 0); // on_event() drained it
}

TEST_CASE("FileVolume: beyond the queue depth requests wait in a FIFO, then QueueFull", "[blockd][file]") {
    test::ZbufArenaFixture arena;
    TempFile f;
    FileOptions o;
    o.size = 256 * kBlockSize;
    o.queue_depth = 2;
    o.max_waiting = 30;
    auto v = open_file(f, o);
    std::vector<std::vector<uint8_t>> data;
    std::vector<Result> res(40);
    for (int i = 0; i < 32; ++i) {
        data.push_back(random_bytes(kBlockSize, 100 + i));
        auto s = segments(data.back());
        v->write(uint64_t(i) * kBlockSize, s, res[i].cb());
    }
    // 2 in flight + 30 waiting; the next requests of any kind are refused.
    CHECK(v->inflight() == 2);
    CHECK(v->waiting() == 30);
    for (int i = 32; i < 35; ++i) {
        auto s = segments(random_bytes(kBlockSize, 1));
        v->write(uint64_t(i) * kBlockSize, s, res[i].cb());
        REQUIRE(res[i].called);
        CHECK(res[i].st == VolStatus::QueueFull);
    }
    v->read(0, kBlockSize, res[35].cb());
    v->flush(res[36].cb());
    CHECK(res[35].st == VolStatus::QueueFull);
    CHECK(res[36].st == VolStatus::QueueFull);
    CHECK(v->stats().errors[unsigned(VolStatus::QueueFull)] == 5);
    CHECK(v->stats().waited == 30);
    CHECK(v->stats().waiting_high == 30);
    REQUIRE(poll_until(*v, [&] { return v->pending() == 0; }));
    CHECK(v->stats().inflight_high == 2);
    for (int i = 0; i < 32; ++i) {
        CHECK(res[i].calls == 1);
        CHECK(res[i].st == VolStatus::Ok);
    }
    // Read all 32 back at once (again through the FIFO) and verify.
    std::vector<Result> rd(32);
    for (int i = 0; i < 32; ++i) v->read(uint64_t(i) * kBlockSize, kBlockSize, rd[i].cb());
    REQUIRE(poll_until(*v, [&] { return v->pending() == 0; }));
    for (int i = 0; i < 32; ++i) {
        REQUIRE(rd[i].st == VolStatus::Ok);
        CHECK(crc32c(std::span<Slice>(rd[i].data)) == crc32c(data[i].data(), data[i].size()));
    }
    CHECK(v->stats().waited == 60);
}

TEST_CASE("FileVolume: deferred submission sends a loop's SQEs in one system call", "[blockd][file]") {
    test::ZbufArenaFixture arena;
    TempFile f;
    FileOptions o;
    o.size = 64 * kBlockSize;
    o.queue_depth = 8;
    o.defer_submit = true;
    auto v = open_file(f, o);
    std::vector<Result> res(8);
    std::vector<std::vector<uint8_t>> data;
    for (int i = 0; i < 8; ++i) {
        data.push_back(random_bytes(kBlockSize, 200 + i));
        auto s = segments(data.back());
        v->write(uint64_t(i) * kBlockSize, s, res[i].cb());
    }
    CHECK(v->stats().submit_calls == 0);
    REQUIRE(poll_until(*v, [&] { return v->pending() == 0; }));
    CHECK(v->stats().submit_calls >= 1);
    CHECK(v->stats().submitted == 8);
    for (int i = 0; i < 8; ++i) {
        CHECK(res[i].st == VolStatus::Ok);
        CHECK(read_file(f.path, uint64_t(i) * kBlockSize, kBlockSize) == data[i]);
    }
}

TEST_CASE("FileVolume: aligned caller buffers are written without a copy", "[blockd][file]") {
    test::ZbufArenaFixture arena;
    TempFile f;
    FileOptions o;
    o.size = 64 * kBlockSize;
    auto v = open_file(f, o);
    auto bytes = random_bytes(2 * kBlockSize, 300);
    std::vector<Slice> s;
    for (int i = 0; i < 2; ++i) {
        Slice b = zbuf::Arena::current()->alloc_slice(kBlockSize); // 4 KiB class: page-aligned
        REQUIRE(b);
        REQUIRE(reinterpret_cast<uintptr_t>(b.data()) % 4096 == 0);
        std::memcpy(b.data(), bytes.data() + i * kBlockSize, kBlockSize);
        s.push_back(std::move(b));
    }
    Result w;
    v->write(4 * kBlockSize, s, w.cb());
    REQUIRE(poll_until(*v, [&] { return w.called; }));
    CHECK(w.st == VolStatus::Ok);
    CHECK(v->stats().write_zero_copy == 1);
    CHECK(v->stats().bytes_copied == 0);
    CHECK(read_file(f.path, 4 * kBlockSize, 2 * kBlockSize) == bytes);
}

TEST_CASE("FileVolume: size classes whose objs are not aligned get buffers aligned inside a larger obj", "[blockd][file]") {
    // 4160 = 65 * 64: those objs are only 64-byte aligned; 6208 holds 4096 plus
    // the worst-case padding.
    zbuf::Config c;
    c.backing = zbuf::Backing::Anonymous;
    c.bytes = 16u << 20;
    c.size_classes = {2048, 4160, 6208};
    std::string err;
    auto a = zbuf::Arena::create(c, &err);
    REQUIRE(a);
    {
        zbuf::CoreScope core(0);
        test::LeakCheck leaks;
        TempFile f;
        FileOptions o;
        o.size = 64 * kBlockSize;
        o.queue_depth = 4;
        auto v = open_file(f, o);
        CHECK(v->chunk() == kBlockSize);
        if (v->mem_align() <= 64) WARN("the filesystem needs no buffer alignment: padding untested");
        auto bytes = random_bytes(8 * kBlockSize, 400);
        auto s = segments(bytes);
        Result w, r;
        v->write(0, s, w.cb());
        REQUIRE(poll_until(*v, [&] { return w.called; }));
        REQUIRE(w.st == VolStatus::Ok);
        v->read(0, 8 * kBlockSize, r.cb());
        REQUIRE(poll_until(*v, [&] { return r.called; }));
        REQUIRE(r.st == VolStatus::Ok);
        CHECK(r.data.size() == 8);
        for (const Slice& x : r.data) CHECK(reinterpret_cast<uintptr_t>(x.data()) % v->mem_align() == 0);
        CHECK(flatten(r.data) == bytes);
        if (v->mem_align() > 64) CHECK(v->stats().padded_allocs > 0);
        r.data.clear();
        s.clear();
        v.reset();
    }
}

TEST_CASE("FileVolume: buffered mode on request", "[blockd][file]") {
    test::ZbufArenaFixture arena;
    TempFile f;
    FileOptions o;
    o.path = f.path;
    o.size = 16 * kBlockSize;
    o.direct = false;
    std::string err;
    auto v = FileVolume::open(o, &err);
    INFO(err);
    REQUIRE(v);
    CHECK_FALSE(v->direct());
    CHECK(v->describe().find("buffered") != std::string::npos);
    auto bytes = random_bytes(3 * kBlockSize, 500);
    auto s = segments(bytes);
    Result w, r;
    v->write(kBlockSize, s, w.cb());
    REQUIRE(poll_until(*v, [&] { return w.called; }));
    v->read(kBlockSize, 3 * kBlockSize, r.cb());
    REQUIRE(poll_until(*v, [&] { return r.called; }));
    CHECK(flatten(r.data) == bytes);
}

TEST_CASE("FileVolume: open errors name the problem", "[blockd][file]") {
    test::ZbufArenaFixture arena;
    std::string err;
    FileOptions o;
    o.path = "/nonexistent-dir-h4/vol";
    o.size = 1u << 20;
    CHECK_FALSE(FileVolume::open(o, &err));
    CHECK(err.find("cannot open /nonexistent-dir-h4/vol") != std::string::npos);

    TempFile f;
    o.path = f.path;
    o.size = 0; // the file is empty
    CHECK_FALSE(FileVolume::open(o, &err));
    CHECK(err.find("is empty") != std::string::npos);
    o.size = 5000;
    CHECK_FALSE(FileVolume::open(o, &err));
    CHECK(err.find("multiple of 4096") != std::string::npos);
    o.size = 1u << 20;
    o.queue_depth = 0;
    CHECK_FALSE(FileVolume::open(o, &err));
    CHECK(err.find("queue depth") != std::string::npos);
    o.queue_depth = 8;
    o.path = "/var/tmp";
    CHECK_FALSE(FileVolume::open(o, &err));
    CHECK(!err.empty());
    // An existing file of 3 MiB + 100 bytes, size from the file.
    o.path = f.path;
    REQUIRE(::truncate(f.path.c_str(), (3 << 20) + 100) == 0);
    o.size = 0;
    o.allow_buffered = !f.direct_ok;
    auto v = FileVolume::open(o, &err);
    INFO(err);
    REQUIRE(v);
    CHECK(v->size() == (3u << 20));
}

TEST_CASE("direct_io_problem: O_DIRECT refusals are named with the filesystem", "[blockd][file]") {
    CHECK(direct_io_problem("/dev/shm/v", "tmpfs", EINVAL, false, 0, 0).find("the filesystem of /dev/shm/v (tmpfs) refuses O_DIRECT") == 0);
    CHECK(direct_io_problem("/x/v", "fuse", 0, true, 0, 0).find("reports no direct I/O support") != std::string::npos);
    CHECK(direct_io_problem("/x/v", "xfs", 0, true, 512, 8192).find("8192-byte aligned") != std::string::npos);
    CHECK(direct_io_problem("/x/v", "xfs", 0, true, 8192, 512).find("8192-byte aligned buffers") != std::string::npos);
    CHECK(direct_io_problem("/x/v", "ext2/3/4", 0, true, 512, 512).empty());
    CHECK(direct_io_problem("/x/v", "tmpfs", 0, false, 0, 0).empty()); // tmpfs >= 6.6: accepted, nothing reported
    CHECK(direct_io_problem("/x/v", "ext2/3/4", EACCES, false, 0, 0).find("cannot open /x/v") == 0);
    CHECK(fs_name(0x01021994) == "tmpfs");
    CHECK(fs_name(0xEF53) == "ext2/3/4");
    CHECK(fs_name(0x1234) == "0x1234");
}

// --- protocol ---------------------------------------------------------------------------

TEST_CASE("proto: BlockMeta is 16 little-endian bytes and round-trips", "[blockd][proto]") {
    BlockMeta m{0x0102030405060708ull, 0x0a0b0c0d, 0xE3069283u};
    std::byte b[kMetaSize];
    m.encode(b);
    const uint8_t want[16] = {8, 7, 6, 5, 4, 3, 2, 1, 0x0d, 0x0c, 0x0b, 0x0a, 0x83, 0x92, 0x06, 0xE3};
    CHECK(std::memcmp(b, want, 16) == 0);
    BlockMeta d;
    REQUIRE(BlockMeta::decode(std::span<const std::byte>(b, 16), &d));
    CHECK(d.offset == m.offset);
    CHECK(d.len == m.len);
    CHECK(d.crc32c == m.crc32c);
    CHECK_FALSE(BlockMeta::decode(std::span<const std::byte>(b, 15), &d));
    CHECK_FALSE(BlockMeta::decode({}, &d));
    CHECK(uint32_t(app_status(VolStatus::OutOfRange)) == 1003);
    CHECK(app_status_name(app_status(VolStatus::OutOfRange)) == "out_of_range");
    CHECK(app_status_name(rpc::Status(kCrcMismatch)) == "crc_mismatch");
    CHECK(app_status_name(rpc::Status::Ok).empty());
}
