// Unit tests for rpc/protocol and rpc/framing (issue 9 "Wire format"): the
// 32-byte header's exact bytes, the streaming decoder at every split point and
// in random multi-way splits (data zero-copy: every data slice lies inside a
// fed obj), coalesced messages, limits at and above the maximum, bad input and
// sticky errors, truncation, and the header-block encoder (shared, never
// re-written, out of memory). Every test ends with no zbuf leaked.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "rpc/framing.hpp"
#include "tests/support/zbuf_leak.hpp"

using namespace crescent;
using namespace crescent::rpc;
using DecodeError = Decoder::DecodeError;
using Bytes = std::vector<std::byte>;

namespace {

// One message to put on the wire, with what the decoder must give back.
struct Spec {
    Header h;
    Bytes meta;
    Bytes data;
};

Bytes random_bytes(std::mt19937& rng, size_t n) {
    Bytes b(n);
    for (auto& x : b) x = std::byte(rng());
    return b;
}

Spec spec(std::mt19937& rng, uint64_t call_id, size_t meta, size_t data, Kind kind = Kind::Request,
          uint16_t flags = 0) {
    Spec s;
    s.h.kind = kind;
    s.h.flags = flags;
    s.h.method = uint32_t(rng());
    s.h.status = uint32_t(rng() % 2000);
    s.h.call_id = call_id;
    s.h.meta_len = uint32_t(meta);
    s.h.data_len = uint32_t(data);
    s.meta = random_bytes(rng, meta);
    s.data = random_bytes(rng, data);
    return s;
}

// The wire bytes of `specs` and the offset where each message ends.
Bytes wire_of(const std::vector<Spec>& specs, std::vector<size_t>* ends = nullptr) {
    Bytes w;
    for (const Spec& s : specs) {
        size_t at = w.size();
        w.resize(at + kHeaderSize);
        s.h.encode(w.data() + at);
        w.insert(w.end(), s.meta.begin(), s.meta.end());
        w.insert(w.end(), s.data.begin(), s.data.end());
        if (ends) ends->push_back(w.size());
    }
    return w;
}

// The objs that fed slices live in, to check that data was not copied.
struct Objs {
    std::vector<std::pair<const std::byte*, size_t>> objs;
    bool holds(const std::byte* p, size_t len) const {
        for (auto [base, cap] : objs)
            if (p >= base && p + len <= base + cap) return true;
        return false;
    }
};

// Copies w[from, to) into arena slices (at most one size class each).
void append_slices(const Bytes& w, size_t from, size_t to, std::vector<Slice>& out, Objs& objs) {
    while (from < to) {
        size_t n = std::min<size_t>(to - from, 65536);
        Slice s = zbuf::Arena::current()->alloc_slice(n);
        REQUIRE(s);
        std::memcpy(s.data(), w.data() + from, n);
        objs.objs.emplace_back(zbuf::obj_base(s.data()), s.buf().capacity());
        out.push_back(std::move(s));
        from += n;
    }
}

struct Got {
    Header h;
    Bytes meta;
    bool meta_in_input = false;  // the meta span pointed into a fed obj (not copied)
    std::vector<Slice> data;
    uint64_t messages_at_call = 0;
    bool last = false;  // Message::last
};

// Records every message; the data slices are moved out of the Message.
struct Collector : MessageSink {
    const Objs* objs = nullptr;
    const Decoder* dec = nullptr;
    std::vector<Got> got;
    void on_message(Message& m) override {
        Got g;
        g.h = m.h;
        g.meta.assign(m.meta.begin(), m.meta.end());
        g.meta_in_input = objs && !m.meta.empty() && objs->holds(m.meta.data(), m.meta.size());
        g.data = std::move(m.data);
        g.messages_at_call = dec ? dec->messages() : 0;
        g.last = m.last;
        got.push_back(std::move(g));
    }
};

bool same_header(const Header& a, const Header& b) {
    return a.magic == b.magic && a.version == b.version && a.kind == b.kind && a.flags == b.flags &&
           a.method == b.method && a.status == b.status && a.call_id == b.call_id &&
           a.meta_len == b.meta_len && a.data_len == b.data_len;
}

// "" when got[i] is exactly specs[first + i] for every recorded message, with
// non-empty data slices inside the fed objs; else what differs.
std::string verify(const std::vector<Spec>& specs, size_t first, const Collector& c, const Objs& objs) {
    std::ostringstream err;
    if (first + c.got.size() > specs.size()) return "more messages than were sent";
    for (size_t i = 0; i < c.got.size(); ++i) {
        const Spec& s = specs[first + i];
        const Got& g = c.got[i];
        if (!same_header(g.h, s.h)) err << "message " << i << ": header differs; ";
        if (g.meta != s.meta) err << "message " << i << ": meta differs; ";
        Bytes data;
        for (const Slice& sl : g.data) {
            if (sl.empty()) err << "message " << i << ": an empty data slice; ";
            if (!objs.holds(sl.data(), sl.size())) err << "message " << i << ": data slice outside the fed objs (copied); ";
            data.insert(data.end(), sl.data(), sl.data() + sl.size());
        }
        if (data != s.data) err << "message " << i << ": data differs; ";
    }
    return err.str();
}

// A varied stream: empty messages, metadata and data around the 32-byte header
// size, an unknown kind with every flag bit set, application statuses.
std::vector<Spec> varied_stream(std::mt19937& rng) {
    std::vector<Spec> v;
    const std::pair<size_t, size_t> sizes[] = {
        {0, 0}, {1, 0}, {0, 1}, {5, 17}, {31, 0}, {32, 33}, {100, 1000}, {0, 4000}, {300, 2}, {7, 0}, {64, 2048}, {0, 0},
    };
    uint64_t id = 1;
    for (auto [m, d] : sizes) v.push_back(spec(rng, id++, m, d));
    v[9].h.kind = Kind(7);  // unknown kinds are the server's business, not the decoder's
    v[9].h.flags = 0xffff;  // unknown flag bits are ignored
    v[3].h.kind = Kind::Response;
    v[3].h.status = 1003;
    v[5].h.kind = Kind::OneWay;
    v[6].h.kind = Kind::Error;
    return v;
}

std::span<const std::byte> as_bytes(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

} // namespace

TEST_CASE("rpc: header encode/decode, exact bytes and round trip", "[rpc][framing]") {
    Header h;
    h.kind = Kind::Response;
    h.flags = 0x0102;
    h.method = 0x11223344;
    h.status = 1003;
    h.call_id = 0x0102030405060708ull;
    h.meta_len = 5;
    h.data_len = 0x10000;
    std::array<std::byte, kHeaderSize> out{};
    h.encode(out.data());
    const uint8_t golden[kHeaderSize] = {
        0x43, 0x52, 0x50, 0x43,                          // "CRPC"
        0x01,                                            // version
        0x01,                                            // kind Response
        0x02, 0x01,                                      // flags
        0x44, 0x33, 0x22, 0x11,                          // method
        0xeb, 0x03, 0x00, 0x00,                          // status 1003
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // call id
        0x05, 0x00, 0x00, 0x00,                          // meta_len
        0x00, 0x00, 0x01, 0x00,                          // data_len
    };
    for (size_t i = 0; i < kHeaderSize; ++i) {
        INFO("byte " << i);
        CHECK(uint8_t(out[i]) == golden[i]);
    }
    Header d = Header::decode(reinterpret_cast<const std::byte*>(golden));
    CHECK(same_header(d, h));
    CHECK(d.magic == kMagic);

    // Every field carries all of its bits, at its own offset.
    std::mt19937 rng(7);
    for (int i = 0; i < 1000; ++i) {
        Header r;
        r.magic = uint32_t(rng());
        r.version = uint8_t(rng());
        r.kind = Kind(uint8_t(rng()));
        r.flags = uint16_t(rng());
        r.method = uint32_t(rng());
        r.status = uint32_t(rng());
        r.call_id = uint64_t(rng()) << 32;
        r.call_id |= rng();
        r.meta_len = uint32_t(rng());
        r.data_len = uint32_t(rng());
        r.encode(out.data());
        REQUIRE(same_header(Header::decode(out.data()), r));
    }
}

TEST_CASE("rpc: kind, status and decode error names", "[rpc][framing]") {
    CHECK(kind_name(Kind::Request) == "Request");
    CHECK(kind_name(Kind::Response) == "Response");
    CHECK(kind_name(Kind::Error) == "Error");
    CHECK(kind_name(Kind::OneWay) == "OneWay");
    CHECK(kind_name(Kind(9)) == "kind(9)");
    CHECK(status_name(Status::Ok) == "Ok");
    CHECK(status_name(Status::UnknownMethod) == "UnknownMethod");
    CHECK(status_name(Status::RateLimited) == "RateLimited");
    CHECK(status_name(Status::Shutdown) == "Shutdown");
    CHECK(status_name(Status(77)) == "status(77)");
    CHECK(status_name(Status::kAppStatusBase) == "app(1000)");
    CHECK(status_name(Status(1003)) == "app(1003)");
    CHECK(status_name(Status(4294967295u)) == "app(4294967295)");
    // Several formatted names can live side by side.
    std::string_view a = status_name(Status(1001)), b = status_name(Status(999));
    CHECK(a == "app(1001)");
    CHECK(b == "status(999)");
    CHECK(decode_error_name(DecodeError::None) == "None");
    CHECK(decode_error_name(DecodeError::BadMagic) == "BadMagic");
    CHECK(decode_error_name(DecodeError::BadVersion) == "BadVersion");
    CHECK(decode_error_name(DecodeError::MetaTooLarge) == "MetaTooLarge");
    CHECK(decode_error_name(DecodeError::DataTooLarge) == "DataTooLarge");
}

TEST_CASE("rpc: decoder, a stream split at every byte (two pieces), truncation at every point", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    std::mt19937 rng(42);
    const std::vector<Spec> specs = varied_stream(rng);
    std::vector<size_t> ends;
    const Bytes w = wire_of(specs, &ends);
    REQUIRE(w.size() > 8000);

    for (size_t cut = 1; cut < w.size(); ++cut) {
        INFO("cut at byte " << cut << " of " << w.size());
        test::LeakCheck leaks;
        const size_t done = size_t(std::upper_bound(ends.begin(), ends.end(), cut) - ends.begin());
        const size_t last_end = done ? ends[done - 1] : 0;
        for (int one_call = 0; one_call < 2; ++one_call) {
            Objs objs;
            Decoder dec(Limits{});
            Collector col;
            col.objs = &objs;
            col.dec = &dec;
            std::vector<Slice> a, b;
            append_slices(w, 0, cut, a, objs);
            append_slices(w, cut, w.size(), b, objs);
            if (one_call) {
                for (auto& s : b) a.push_back(std::move(s));
                REQUIRE(dec.feed(a, col) == DecodeError::None);
            } else {
                REQUIRE(dec.feed(a, col) == DecodeError::None);
                // Truncated here: exactly the complete messages came out, the rest is held.
                REQUIRE(dec.messages() == done);
                REQUIRE(col.got.size() == done);
                REQUIRE(dec.mid_message() == (cut != last_end));
                REQUIRE(dec.buffered_bytes() == cut - last_end);
                REQUIRE(verify(specs, 0, col, objs) == "");
                REQUIRE(dec.feed(b, col) == DecodeError::None);
            }
            for (auto& s : a) REQUIRE_FALSE(s);  // moved from
            for (auto& s : b) REQUIRE_FALSE(s);
            REQUIRE(dec.messages() == specs.size());
            REQUIRE_FALSE(dec.mid_message());
            REQUIRE(dec.buffered_bytes() == 0);
            REQUIRE(col.got.size() == specs.size());
            REQUIRE(verify(specs, 0, col, objs) == "");
            for (size_t i = 0; i < specs.size(); ++i) REQUIRE(col.got[i].messages_at_call == i + 1);
            // Message::last: no byte of the feed follows the message (the end of
            // the stream, or with two feeds a cut right behind it).
            for (size_t i = 0; i < specs.size(); ++i)
                REQUIRE(col.got[i].last == (ends[i] == w.size() || (!one_call && ends[i] == cut)));
            // Metadata is read in place unless the cut falls inside it.
            for (size_t i = 0; i < specs.size(); ++i) {
                if (specs[i].meta.empty()) continue;
                size_t start = (i ? ends[i - 1] : 0) + kHeaderSize;
                bool split = cut > start && cut < start + specs[i].meta.size();
                INFO("message " << i << " meta at " << start << (split ? " (split)" : ""));
                REQUIRE(col.got[i].meta_in_input == !split);
            }
        }
    }
}

TEST_CASE("rpc: decoder, random multi-way splits over several feed calls", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    std::mt19937 rng(20240917);
    for (int iter = 0; iter < 400; ++iter) {
        INFO("iteration " << iter);
        test::LeakCheck leaks;
        std::vector<Spec> specs;
        const int n = 1 + int(rng() % 40);
        for (int i = 0; i < n; ++i) {
            // One draw per statement: the order of draws is fixed, so is the stream.
            const bool big = rng() % 8 == 0;
            size_t meta = rng() % (big ? 4097 : 80);
            if (rng() % 4 == 0) meta = 0;
            size_t data = rng() % (big ? 70000 : 300);
            if (rng() % 3 == 0) data = 0;
            const Kind kind = Kind(rng() % 5);
            const uint16_t flags = uint16_t(rng());
            specs.push_back(spec(rng, uint64_t(iter) << 32 | uint64_t(i), meta, data, kind, flags));
        }
        std::vector<size_t> ends;
        const Bytes w = wire_of(specs, &ends);
        std::vector<size_t> cuts{0, w.size()};
        const size_t ncuts = rng() % 64;
        for (size_t i = 0; i < ncuts; ++i) cuts.push_back(rng() % (w.size() + 1));
        std::sort(cuts.begin(), cuts.end());
        cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());

        Objs objs;
        Decoder dec(Limits{});
        Collector col;
        col.objs = &objs;
        std::vector<Slice> pieces;
        for (size_t i = 0; i + 1 < cuts.size(); ++i) append_slices(w, cuts[i], cuts[i + 1], pieces, objs);
        // Feed calls of 1..4 slices; an empty slice now and then.
        size_t fed = 0, k = 0;
        while (k < pieces.size()) {
            size_t take = std::min<size_t>(1 + rng() % 4, pieces.size() - k);
            std::vector<Slice> call;
            for (size_t j = 0; j < take; ++j) {
                fed += pieces[k].size();
                call.push_back(std::move(pieces[k++]));
            }
            if (rng() % 4 == 0) call.push_back(Slice());
            REQUIRE(dec.feed(call, col) == DecodeError::None);
            size_t done = size_t(std::upper_bound(ends.begin(), ends.end(), fed) - ends.begin());
            REQUIRE(dec.messages() == done);
            REQUIRE(dec.buffered_bytes() == fed - (done ? ends[done - 1] : 0));
        }
        REQUIRE(col.got.size() == specs.size());
        REQUIRE_FALSE(dec.mid_message());
        REQUIRE(verify(specs, 0, col, objs) == "");
    }
}

TEST_CASE("rpc: decoder, 500 small messages coalesced in one slice", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    test::LeakCheck leaks;
    std::mt19937 rng(500);
    std::vector<Spec> specs;
    for (int i = 0; i < 500; ++i) specs.push_back(spec(rng, uint64_t(i), i % 3 ? 8 : 0, i % 5 ? 16 : 0));
    const Bytes w = wire_of(specs);
    REQUIRE(w.size() < 65536);
    Objs objs;
    std::vector<Slice> in;
    append_slices(w, 0, w.size(), in, objs);
    REQUIRE(in.size() == 1);
    const std::byte* obj = zbuf::obj_base(in[0].data());

    Decoder dec(Limits{});
    Collector col;
    col.objs = &objs;
    REQUIRE(dec.feed(in, col) == DecodeError::None);
    REQUIRE(dec.messages() == 500);
    REQUIRE(col.got.size() == 500);
    REQUIRE(verify(specs, 0, col, objs) == "");
    size_t with_data = 0;
    for (auto& g : col.got) {
        REQUIRE(g.data.size() == (g.h.data_len ? 1u : 0u));  // one sub-slice per message, no copy
        if (!g.data.empty()) ++with_data;
        if (g.h.meta_len) REQUIRE(g.meta_in_input);
    }
    // Every data slice is a reference to the one received obj, and nothing else
    // is (the fed slice's own reference was dropped or moved into a message).
    CHECK(zbuf::refcount(obj) == with_data);
}

TEST_CASE("rpc: decoder, the last reference travels with the data", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    test::LeakCheck leaks;
    std::mt19937 rng(3);
    Objs objs;
    struct RefSink : MessageSink {
        uint32_t refs = 0;
        std::vector<Slice> kept;
        void on_message(Message& m) override {
            refs = zbuf::refcount(m.data.back().data());
            for (auto& s : m.data) kept.push_back(std::move(s));
        }
    } sink;
    Decoder dec(Limits{});
    // No metadata, data to the end of the slice: the fed slice itself is moved in.
    std::vector<Slice> in;
    append_slices(wire_of({spec(rng, 1, 0, 100)}), 0, 132, in, objs);
    REQUIRE(dec.feed(in, sink) == DecodeError::None);
    CHECK(sink.refs == 1);
    REQUIRE(sink.kept.size() == 1);
    CHECK(zbuf::refcount(sink.kept[0].data()) == 1);
    sink.kept.clear();
    // With metadata in the same slice, the decoder keeps the slice for the
    // duration of the call (meta points into it): the data is a second reference.
    append_slices(wire_of({spec(rng, 2, 10, 100)}), 0, 142, in, objs);
    REQUIRE(dec.feed(in, sink) == DecodeError::None);
    CHECK(sink.refs == 2);
    CHECK(zbuf::refcount(sink.kept[0].data()) == 1);  // after the call: only the sink's
}

TEST_CASE("rpc: decoder, metadata stays valid when the sink drops the data first", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    test::LeakCheck leaks;
    std::mt19937 rng(11);
    const Spec s = spec(rng, 9, 40, 1000);
    const Bytes w = wire_of({s});
    // The sink frees the data, then allocates objs of the same class and
    // scribbles on them: a meta span into a freed obj would see 0xAA.
    struct Scribbler : MessageSink {
        Bytes seen;
        void on_message(Message& m) override {
            m.data.clear();
            std::vector<Slice> junk;
            for (int i = 0; i < 4; ++i) {
                Slice j = zbuf::Arena::current()->alloc_slice(2048);
                std::memset(j.data(), 0xAA, j.size());
                junk.push_back(std::move(j));
            }
            seen.assign(m.meta.begin(), m.meta.end());
        }
    };
    for (size_t cut : {w.size(), size_t(kHeaderSize + 40), size_t(kHeaderSize + 40 + 500)}) {
        INFO("first slice ends at " << cut);
        Objs objs;
        Decoder dec(Limits{});
        Scribbler sink;
        std::vector<Slice> a, b;
        append_slices(w, 0, cut, a, objs);
        append_slices(w, cut, w.size(), b, objs);
        REQUIRE(dec.feed(a, sink) == DecodeError::None);
        REQUIRE(dec.feed(b, sink) == DecodeError::None);
        REQUIRE(dec.messages() == 1);
        CHECK(sink.seen == s.meta);
    }
}

TEST_CASE("rpc: decoder, limits: exactly the maximum is accepted, one more refused", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    std::mt19937 rng(5);
    const Limits lim{64, 100000};
    struct Case {
        size_t meta, data;
        DecodeError want;
    };
    for (Case c : {Case{64, 0, DecodeError::None}, Case{0, 100000, DecodeError::None},
                   Case{64, 100000, DecodeError::None}, Case{65, 0, DecodeError::MetaTooLarge},
                   Case{0, 100001, DecodeError::DataTooLarge}, Case{65, 100001, DecodeError::MetaTooLarge}}) {
        INFO("meta " << c.meta << " data " << c.data);
        test::LeakCheck leaks;
        std::vector<Spec> specs{spec(rng, 1, 3, 3), spec(rng, 2, c.meta, c.data), spec(rng, 3, 3, 3)};
        const Bytes w = wire_of(specs);
        Objs objs;
        Decoder dec(lim);
        Collector col;
        col.objs = &objs;
        std::vector<Slice> in;
        append_slices(w, 0, w.size() / 2, in, objs);
        append_slices(w, w.size() / 2, w.size(), in, objs);
        REQUIRE(dec.feed(in, col) == c.want);
        for (auto& s : in) REQUIRE_FALSE(s);
        REQUIRE(verify(specs, 0, col, objs) == "");
        REQUIRE(col.got.size() == (c.want == DecodeError::None ? 3u : 1u));
        REQUIRE_FALSE(dec.mid_message());
        REQUIRE(dec.error() == c.want);
    }
}

TEST_CASE("rpc: decoder, bad magic and bad version, each error sticky", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    std::mt19937 rng(6);
    struct Case {
        size_t byte;  // offset in the second header
        uint8_t value;
        DecodeError want;
    };
    for (Case c : {Case{0, 0x44, DecodeError::BadMagic}, Case{3, 0x00, DecodeError::BadMagic},
                   Case{4, 0, DecodeError::BadVersion}, Case{4, 2, DecodeError::BadVersion},
                   Case{25, 0xff, DecodeError::MetaTooLarge}, Case{31, 0x7f, DecodeError::DataTooLarge}}) {
        for (size_t split : {size_t(0), size_t(1), size_t(kHeaderSize - 1)}) {
            INFO("byte " << c.byte << " = " << int(c.value) << ", header split after " << split);
            test::LeakCheck leaks;
            std::vector<Spec> specs{spec(rng, 1, 10, 20), spec(rng, 2, 1, 1), spec(rng, 3, 0, 5)};
            std::vector<size_t> ends;
            Bytes w = wire_of(specs, &ends);
            w[ends[0] + c.byte] = std::byte(c.value);
            Objs objs;
            Decoder dec(Limits{});
            Collector col;
            col.objs = &objs;
            std::vector<Slice> in;
            append_slices(w, 0, ends[0] + split, in, objs);
            REQUIRE(dec.feed(in, col) == DecodeError::None);
            REQUIRE(dec.mid_message() == (split != 0));
            append_slices(w, ends[0] + split, w.size(), in, objs);
            REQUIRE(dec.feed(in, col) == c.want);
            REQUIRE(col.got.size() == 1);  // the message before the bad header
            REQUIRE(verify(specs, 0, col, objs) == "");
            REQUIRE_FALSE(dec.mid_message());
            REQUIRE(dec.buffered_bytes() == 0);
            // Sticky: a valid message later changes nothing, and is released.
            in.clear();
            append_slices(wire_of({spec(rng, 4, 1, 1)}), 0, kHeaderSize + 2, in, objs);
            REQUIRE(dec.feed(in, col) == c.want);
            REQUIRE(dec.feed({}, col) == c.want);
            for (auto& s : in) REQUIRE_FALSE(s);
            REQUIRE(col.got.size() == 1);
            REQUIRE(dec.messages() == 1);
        }
    }
}

TEST_CASE("rpc: decoder, a sink may keep the vector it swaps in", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    test::LeakCheck leaks;
    std::mt19937 rng(8);
    std::vector<Spec> specs;
    for (int i = 0; i < 50; ++i) specs.push_back(spec(rng, uint64_t(i), 4, 30));
    const Bytes w = wire_of(specs);
    struct Swapper : MessageSink {
        std::vector<Slice> mine;
        size_t bytes = 0, max_capacity_seen = 0;
        void on_message(Message& m) override {
            mine.clear();
            std::swap(mine, m.data);
            for (auto& s : mine) bytes += s.size();
            max_capacity_seen = std::max(max_capacity_seen, m.data.capacity());
        }
    } sink;
    sink.mine.reserve(8);
    Objs objs;
    Decoder dec(Limits{});
    std::vector<Slice> in;
    for (size_t off = 0; off < w.size(); off += 7) append_slices(w, off, std::min(off + 7, w.size()), in, objs);
    REQUIRE(dec.feed(in, sink) == DecodeError::None);
    CHECK(dec.messages() == 50);
    CHECK(sink.bytes == 50 * 30);
    CHECK(sink.max_capacity_seen >= 8);
    sink.mine.clear();
}

TEST_CASE("rpc: encoder, header blocks shared across messages and never re-written", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    test::LeakCheck leaks;
    std::mt19937 rng(12);
    Encoder enc;
    std::vector<Slice> out;
    const Bytes meta = random_bytes(rng, 20);
    for (int i = 0; i < 10; ++i) {
        Header h;
        h.call_id = uint64_t(i);
        h.method = 7;
        REQUIRE(enc.encode(h, meta, {}, out));
        REQUIRE(enc.last_bytes() == kHeaderSize + meta.size());
    }
    // Encoded into one vector (a batch), the headers follow each other in the
    // block and the first slice is widened over the rest: one slice, one reference.
    const size_t one = kHeaderSize + meta.size();
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].size() == 10 * one);
    CHECK(enc.merged() == 9);
    const std::byte* block = zbuf::obj_base(out[0].data());
    for (size_t i = 0; i < 10; ++i) {
        const std::byte* p = out[0].data() + i * one;
        Header d = Header::decode(p);
        REQUIRE(d.call_id == i);
        REQUIRE(d.meta_len == meta.size());
        REQUIRE(d.data_len == 0);
        REQUIRE(std::equal(meta.begin(), meta.end(), p + kHeaderSize));
    }
    CHECK(zbuf::refcount(block) == 2);  // the batch's slice and the encoder's own reference
    CHECK(enc.blocks() == 1);

    // Into separate vectors, each header is a slice of its own, carved in order.
    std::vector<Slice> o1, o2;
    REQUIRE(enc.encode(Header{}, meta, {}, o1));
    REQUIRE(enc.encode(Header{}, meta, {}, o2));
    REQUIRE((o1.size() == 1 && o2.size() == 1));
    CHECK(o1[0].data() == out[0].data() + out[0].size());
    CHECK(o2[0].data() == o1[0].data() + one);
    CHECK(zbuf::refcount(block) == 4);
    CHECK(enc.merged() == 9);
    o1.clear();
    o2.clear();

    // A handed-out header is never written again, however many follow.
    const Bytes before(out[0].data(), out[0].data() + out[0].size());
    Slice keep = std::move(out[0]);
    out.clear();
    CHECK(zbuf::refcount(block) == 2);
    for (int i = 0; i < 1000; ++i) {
        Header h;
        h.call_id = 1000 + uint64_t(i);
        std::vector<Slice> o;
        REQUIRE(enc.encode(h, random_bytes(rng, rng() % 100), {}, o));
        REQUIRE(o.size() == 1);
    }
    CHECK(Bytes(keep.data(), keep.data() + keep.size()) == before);
    CHECK(enc.blocks() > 20);
    CHECK(zbuf::refcount(block) == 1);  // the encoder moved on; only `keep` holds it
}

TEST_CASE("rpc: encoder, data slices moved behind the header, decoded back", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    test::LeakCheck leaks;
    std::mt19937 rng(13);
    Encoder enc(256);
    std::vector<Slice> out;
    std::vector<Spec> specs;
    for (int i = 0; i < 20; ++i) {
        const size_t meta_len = rng() % 300;
        const size_t data_len = rng() % 5000;
        const Kind kind = Kind(rng() % 4);
        const uint16_t flags = uint16_t(rng());
        Spec s = spec(rng, uint64_t(i), meta_len, data_len, kind, flags);
        std::vector<Slice> data;
        size_t off = 0;
        while (off < s.data.size()) {
            size_t n = std::min<size_t>(1 + rng() % 2000, s.data.size() - off);
            Slice d = zbuf::Arena::current()->alloc_slice(n);
            std::memcpy(d.data(), s.data.data() + off, n);
            data.push_back(std::move(d));
            if (rng() % 3 == 0) data.push_back(zbuf::Arena::current()->alloc_slice(0));  // empty: skipped
            off += n;
        }
        const size_t out_before = out.size();
        const uint64_t merged_before = enc.merged();
        size_t nonempty = 0;
        for (auto& d : data) nonempty += !d.empty();
        Header h = s.h;
        h.meta_len = h.data_len = 12345;  // overwritten from the arguments
        REQUIRE(enc.encode(h, s.meta, data, out));
        for (auto& d : data) REQUIRE_FALSE(d);  // moved or dropped
        // The header widens the previous one when that ended the vector
        // (a message without data) in the same block.
        const size_t widened = size_t(enc.merged() - merged_before);
        REQUIRE(widened <= 1);
        REQUIRE(out.size() == out_before + 1 - widened + nonempty);
        REQUIRE(enc.last_bytes() == kHeaderSize + meta_len + s.data.size());
        specs.push_back(std::move(s));
    }
    CHECK(enc.own_objs() > 0);  // header+meta above 256 bytes: objs of their own
    // The encoded slices, fed straight to a decoder, give the messages back.
    Objs objs;
    for (auto& s : out) objs.objs.emplace_back(zbuf::obj_base(s.data()), s.buf().capacity());
    Decoder dec(Limits{});
    Collector col;
    col.objs = &objs;
    REQUIRE(dec.feed(out, col) == DecodeError::None);
    REQUIRE(col.got.size() == specs.size());
    CHECK(verify(specs, 0, col, objs) == "");
}

TEST_CASE("rpc: encoder, data up to inline_max copied behind the header, decoded back", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    test::LeakCheck leaks;
    std::mt19937 rng(21);
    Encoder enc(2048, 256);
    std::vector<Slice> out;
    std::vector<Spec> specs;
    uint64_t want_inlined = 0;
    for (int i = 0; i < 200; ++i) {
        // Around the limit: 0..400 bytes of data in 1-3 slices, meta 0..100
        // (and now and then meta that leaves no room in a block for the data).
        const size_t meta_len = i % 17 == 0 ? 1900 + rng() % 100 : rng() % 100;
        const size_t data_len = rng() % 400;
        Spec s = spec(rng, uint64_t(i), meta_len, data_len);
        std::vector<Slice> data;
        size_t off = 0;
        while (off < s.data.size()) {
            size_t n = std::min<size_t>(1 + rng() % 200, s.data.size() - off);
            Slice d = zbuf::Arena::current()->alloc_slice(n);
            std::memcpy(d.data(), s.data.data() + off, n);
            data.push_back(std::move(d));
            off += n;
        }
        const bool inl = data_len != 0 && data_len <= 256 && kHeaderSize + meta_len + data_len <= 2048;
        want_inlined += inl;
        const size_t out_before = out.size();
        const uint64_t merged_before = enc.merged();
        REQUIRE(enc.encode(s.h, s.meta, data, out));
        for (auto& d : data) REQUIRE_FALSE(d);  // copied (and dropped) or moved
        INFO("message " << i << ": meta " << meta_len << " B, data " << data_len << " B in " << data.size() << " slices");
        // Widened: the previous message's slice (header, meta and inline data)
        // ended the vector right before this header, in the same block.
        const size_t widened = size_t(enc.merged() - merged_before);
        REQUIRE(widened <= 1);
        if (inl) {
            REQUIRE(out.size() == out_before + 1 - widened);  // one slice: header, meta and the data
            if (!widened) CHECK(out.back().size() == kHeaderSize + meta_len + data_len);
            CHECK(std::memcmp(out.back().data() + out.back().size() - data_len, s.data.data(), data_len) == 0);
        } else {
            CHECK(out.size() == out_before + 1 - widened + data.size());
        }
        s.h.meta_len = uint32_t(meta_len);
        s.h.data_len = uint32_t(data_len);
        specs.push_back(std::move(s));
    }
    CHECK(enc.inlined() == want_inlined);
    CHECK(want_inlined > 50);
    CHECK(enc.merged() > 50);  // runs of inline messages in a block: one slice each run
    // The decoder cannot tell: every message comes back as sent.
    Decoder dec(Limits{});
    Collector col;
    REQUIRE(dec.feed(out, col) == DecodeError::None);
    REQUIRE(col.got.size() == specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
        INFO("message " << i);
        CHECK(same_header(col.got[i].h, specs[i].h));
        CHECK(col.got[i].meta == specs[i].meta);
        Bytes d;
        for (const Slice& sl : col.got[i].data) d.insert(d.end(), sl.data(), sl.data() + sl.size());
        CHECK(d == specs[i].data);
    }
    // inline_max 0 (the default) never copies.
    Encoder plain;
    std::vector<Slice> one, o2;
    one.push_back(zbuf::Arena::current()->alloc_slice(10));
    const std::byte* p = one[0].data();
    REQUIRE(plain.encode(Header{}, {}, one, o2));
    REQUIRE(o2.size() == 2);
    CHECK(o2[1].data() == p);
    CHECK(plain.inlined() == 0);
    enc.release_block();
}

TEST_CASE("rpc: encoder, error messages", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    test::LeakCheck leaks;
    Encoder enc;
    std::vector<Slice> out;
    REQUIRE(enc.encode_error(77, 5, Status::UnknownMethod, "no handler for method 5", out));
    REQUIRE(out.size() == 1);
    Header h = Header::decode(out[0].data());
    CHECK(h.kind == Kind::Error);
    CHECK(h.call_id == 77);
    CHECK(h.method == 5);
    CHECK(h.status == uint32_t(Status::UnknownMethod));
    CHECK(h.data_len == 0);
    CHECK(std::string_view(reinterpret_cast<const char*>(out[0].data()) + kHeaderSize, h.meta_len) ==
          "no handler for method 5");

    // A long reason is cut, not in the middle of a UTF-8 character.
    std::string reason(Encoder::kMaxErrorReason - 1, 'x');
    reason += "\xc3\xa9\xc3\xa9";  // "éé" straddles the limit
    out.clear();
    REQUIRE(enc.encode_error(1, 1, Status::Internal, reason, out));
    h = Header::decode(out[0].data());
    CHECK(h.meta_len == Encoder::kMaxErrorReason - 1);
}

TEST_CASE("rpc: encoder, out of memory returns false and leaks nothing", "[rpc][framing]") {
    test::ZbufArenaFixture arena(4u << 20);
    test::LeakCheck leaks;
    std::mt19937 rng(14);
    Encoder enc;
    std::vector<Slice> data;
    data.push_back(zbuf::Arena::current()->alloc_slice(100));
    data.push_back(zbuf::Arena::current()->alloc_slice(200));
    const std::byte* d0 = data[0].data();
    std::vector<Slice> out;
    REQUIRE(enc.encode(Header{}, {}, data, out));  // takes a block
    out.clear();
    data.clear();
    data.push_back(zbuf::Arena::current()->alloc_slice(100));
    d0 = data[0].data();
    // Hold every obj the arena has left, of every class.
    std::vector<Zbuf> hog;
    for (size_t sz : {65536u, 16384u, 4096u, 2048u})
        for (int i = 0; i < 100000; ++i) {
            Zbuf z = zbuf::Arena::current()->alloc(sz);
            if (!z) break;
            hog.push_back(std::move(z));
        }
    REQUIRE_FALSE(hog.empty());
    REQUIRE_FALSE(zbuf::Arena::current()->alloc(2048));

    // The current block still has room: small headers still go out.
    REQUIRE(enc.encode(Header{}, as_bytes("abc"), {}, out));
    out.clear();
    // A header+meta above the block size needs an obj of its own: refused.
    const Bytes big = random_bytes(rng, 3000);
    REQUIRE_FALSE(enc.encode(Header{}, big, data, out));
    CHECK(out.empty());
    REQUIRE(data[0]);
    CHECK(data[0].data() == d0);  // untouched
    CHECK(enc.alloc_failed() == 1);
    // Fill the block (its headers held, as if not yet acknowledged), then the
    // next one cannot be had.
    bool refused = false;
    std::vector<Slice> unacked;
    for (int i = 0; i < 100 && !refused; ++i) {
        std::vector<Slice> o;
        refused = !enc.encode(Header{}, random_bytes(rng, 100), data, o);
        if (!refused) {
            REQUIRE(o.size() == 2);
            unacked.push_back(std::move(o[0]));
            data.clear();
            data.push_back(std::move(o[1]));  // hand the data back for the next try
        }
    }
    CHECK(refused);
    CHECK(unacked.size() > 5);
    CHECK(enc.alloc_failed() == 2);
    REQUIRE(data.size() == 1);
    CHECK(data[0].data() == d0);  // untouched by the refused call
    CHECK(data[0].size() == 100);
    // Once those are acknowledged, the full block's obj comes back to the encoder.
    unacked.clear();
    REQUIRE(enc.encode(Header{}, random_bytes(rng, 100), {}, out));
    CHECK(enc.blocks() == 2);
    out.clear();

    hog.clear();
    REQUIRE(enc.encode(Header{}, big, data, out));
    CHECK(enc.own_objs() == 1);
    REQUIRE(out.size() == 2);
    CHECK(out[1].data() == d0);
    out.clear();
    enc.release_block();
}

TEST_CASE("rpc: encoder, lengths that do not fit the header are refused", "[rpc][framing]") {
    test::ZbufArenaFixture arena;
    test::LeakCheck leaks;
    Encoder enc;
    std::vector<Slice> data;
    data.push_back(zbuf::Arena::current()->alloc_slice(8));
    data.push_back(zbuf::Arena::current()->alloc_slice(8));
    // Windows wider than their objs: never read, only summed (3 GiB + 3 GiB).
    data[0].set_size(3u << 30);
    data[1].set_size(3u << 30);
    std::vector<Slice> out;
    CHECK_FALSE(enc.encode(Header{}, {}, data, out));
    CHECK(out.empty());
    CHECK(enc.oversize() == 1);
    CHECK(enc.alloc_failed() == 0);
    REQUIRE(data[0]);
    data[0].set_size(8);
    data[1].set_size(8);
}
