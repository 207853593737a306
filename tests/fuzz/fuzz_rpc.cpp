// libFuzzer target for rpc/framing: the streaming Decoder fed an arbitrary
// byte stream cut into arbitrary zbuf slices, every decoded message re-encoded
// with the Encoder. Input layout:
//
//   byte 0        bits 0-3: number of split points k (0..15)
//                 bit 4:    feed every slice in one feed() call (else one call each)
//                 bit 5:    small limits (max_meta 64, max_data 4096) instead of the defaults
//   2k bytes      split points, little-endian u16, taken modulo (stream length + 1);
//                 equal points make empty slices
//   the rest      the stream
//
// Invariants (abort on violation): each message's metadata has meta_len bytes
// and its data exactly data_len bytes in non-empty slices inside the fed objs
// (zero copy); headers within the limits, with the right magic and version;
// re-encoding the messages reproduces the consumed stream bytes exactly; with
// no error, the bytes held (buffered_bytes) are exactly the unconsumed tail;
// on an error, the header at the first unconsumed byte really is bad for the
// reason given (checked independently of the decoder), and the error is sticky;
// after the input every zbuf is back (no leak).
// Built with -fsanitize=fuzzer,address,undefined (tests/fuzz/meson.build); run
// by tools/run-fuzz on the seeds in tests/fuzz/corpus/rpc/
// (tests/fuzz/gen_corpus_rpc.py writes them).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <crescent/zbuf.hpp>

#include "tests/fuzz/fuzz_support.hpp"
#include "rpc/framing.hpp"

using namespace crescent;
using namespace crescent::rpc;
using DecodeError = Decoder::DecodeError;

namespace {

[[noreturn]] void fail(const char* what) { fuzz::fail("fuzz_rpc", what); }

zbuf::Arena* arena() { return fuzz::arena("fuzz_rpc"); }

uint32_t le32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }

// Why the header at `h` (kHeaderSize bytes) must be refused, from the layout
// in protocol.hpp and nothing else.
DecodeError expected_error(const uint8_t* h, const Limits& lim) {
    if (h[0] != 'C' || h[1] != 'R' || h[2] != 'P' || h[3] != 'C') return DecodeError::BadMagic;
    if (h[4] != kVersion) return DecodeError::BadVersion;
    if (le32(h + 24) > lim.max_meta) return DecodeError::MetaTooLarge;
    if (le32(h + 28) > lim.max_data) return DecodeError::DataTooLarge;
    return DecodeError::None;
}

struct Check : MessageSink {
    Limits lim;
    std::vector<const std::byte*> objs;  // bases of the fed objs
    Encoder* enc = nullptr;
    std::vector<std::byte> reencoded;    // every message, re-encoded
    uint64_t count = 0;

    bool fed(const std::byte* p, size_t n) const {
        const std::byte* base = zbuf::obj_base(p);
        return std::find(objs.begin(), objs.end(), base) != objs.end() && p + n <= base + zbuf::obj_size(base);
    }

    void on_message(Message& m) override {
        ++count;
        const Header& h = m.h;
        if (h.magic != kMagic || h.version != kVersion) fail("a message with a bad magic or version");
        if (h.meta_len > lim.max_meta || h.data_len > lim.max_data) fail("a message above the limits");
        if (m.meta.size() != h.meta_len) fail("meta size != meta_len");
        uint64_t total = 0;
        for (const Slice& s : m.data) {
            if (!s || s.empty()) fail("an empty data slice");
            if (!fed(s.data(), s.size())) fail("a data slice outside the fed objs (copied)");
            total += s.size();
        }
        if (total != h.data_len) fail("data total != data_len");
        std::vector<Slice> out;
        if (!enc->encode(h, m.meta, m.data, out)) fail("re-encoding ran out of memory");
        for (const Slice& s : m.data)
            if (s) fail("encode() left a data slice behind");
        for (const Slice& s : out) reencoded.insert(reencoded.end(), s.data(), s.data() + s.size());
    }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    zbuf::Arena* a = arena();
    const uint64_t live_before = a->live();
    {
        const uint8_t cfg = data[0];
        const size_t nsplit = cfg & 15;
        const bool one_call = cfg & 16;
        const Limits lim = (cfg & 32) ? Limits{64, 4096} : Limits{};
        fuzz::Split sp = fuzz::split_input(data, size, nsplit);
        const uint8_t* stream = sp.stream;
        const size_t len = sp.len;
        std::vector<size_t>& cuts = sp.cuts;

        Check sink;
        Encoder enc;
        sink.enc = &enc;
        sink.lim = lim;
        std::vector<Slice> pieces;
        for (size_t i = 0; i + 1 < cuts.size(); ++i) {
            size_t from = cuts[i], to = cuts[i + 1];
            do {  // one slice per chunk of at most the largest size class; empty pieces too
                size_t n = std::min<size_t>(to - from, 65536);
                Slice s = a->alloc_slice(n);
                if (!s) fail("the arena ran out of memory");
                if (n) std::memcpy(s.data(), stream + from, n);
                sink.objs.push_back(zbuf::obj_base(s.data()));
                pieces.push_back(std::move(s));
                from += n;
            } while (from < to);
        }

        Decoder dec(lim);
        DecodeError err = DecodeError::None;
        if (one_call) {
            err = dec.feed(pieces, sink);
        } else {
            for (Slice& s : pieces) {  // after an error, the rest must get the same one
                DecodeError e = dec.feed(std::span(&s, 1), sink);
                if (err == DecodeError::None) err = e;
                else if (e != err) fail("error not sticky across feed calls");
            }
        }
        for (const Slice& s : pieces)
            if (s) fail("feed() left an input slice behind");
        if (err != dec.error()) fail("feed() and error() disagree");
        if (dec.messages() != sink.count) fail("messages() != messages delivered");

        const size_t consumed = sink.reencoded.size();
        if (consumed > len || (consumed != 0 && std::memcmp(sink.reencoded.data(), stream, consumed) != 0))
            fail("re-encoded messages differ from the stream");
        if (err == DecodeError::None) {
            if (dec.buffered_bytes() != len - consumed) fail("buffered_bytes() != the unconsumed tail");
            if (dec.mid_message() != (consumed != len)) fail("mid_message() wrong");
        } else {
            if (size_t(err) >= Decoder::kDecodeErrorCount || decode_error_name(err) == "unknown")
                fail("error out of range");
            if (consumed + kHeaderSize > len) fail("an error without a whole header");
            if (expected_error(stream + consumed, lim) != err) fail("the error does not match the bad header");
            if (dec.mid_message() || dec.buffered_bytes() != 0) fail("bytes held after an error");
            // Sticky: a valid message later is released, not decoded.
            Slice more = a->alloc_slice(kHeaderSize);
            if (!more) fail("the arena ran out of memory");
            Header{}.encode(more.data());
            if (dec.feed(std::span(&more, 1), sink) != err || more) fail("error not sticky");
            if (dec.messages() != sink.count) fail("a message after an error");
        }
    }
    a->drain_returns();
    if (a->live() != live_before) fail("zbufs leaked");
    return 0;
}
