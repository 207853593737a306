// libFuzzer target for crescent-kv (examples/kv): the RESP2 request parser fed
// an arbitrary byte stream cut into arbitrary zbuf slices, every parsed
// request executed against a keyspace. Input layout:
//
//   byte 0        bits 0-3: number of split points k (0..15)
//                 bit 4:    small limits (bulk 4096, multibulk 64, line 1024)
//                 bit 5:    feed all pieces in one feed() call (else one call per piece)
//                 bit 6:    the virtual clock advances 7 ms per piece, with an
//                           active-expiry step (else time stands still)
//                 bit 7:    the store keeps every value as received (else values
//                           of at most 16 bytes are copied into carved blocks)
//   2k bytes      split points, little-endian u16, modulo (stream length + 1)
//   the rest      the stream
//
// Invariants (abort on violation): every request has arguments whose lengths
// are the sums of their (non-empty) slices, and a multibulk request's slices
// lie inside the fed objs (zero copy); each request gets exactly one reply,
// a protocol error exactly one more, and the replies are well-formed RESP2
// (checked by a small reply parser written here, independent of the reply
// builder); the keyspace's byte counts and expiry count agree with its
// entries; with time standing still, the replies are byte-identical to those
// of the same stream fed in one piece (splitting never changes the outcome);
// after the input every zbuf is back (no leak).
// Built with -fsanitize=fuzzer,address,undefined (tests/fuzz/meson.build); run
// by tools/run-fuzz on the seeds in tests/fuzz/corpus/resp/
// (tests/fuzz/gen_corpus_resp.py writes them).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <crescent/zbuf.hpp>

#include "tests/fuzz/fuzz_support.hpp"
#include "examples/kv/commands.hpp"
#include "examples/kv/resp.hpp"
#include "examples/kv/store.hpp"

using namespace crescent;
using namespace crescent::kv;

namespace {

[[noreturn]] void fail(const char* what) { fuzz::fail("fuzz_resp", what); }

zbuf::Arena* arena() { return fuzz::arena("fuzz_resp"); }

// ---- an independent RESP2 reply checker -----------------------------------------------

// Parses one reply at s[*pos]; false when malformed or incomplete.
bool check_reply(std::string_view s, size_t* pos, int depth) {
    if (depth > 8 || *pos >= s.size()) return false;
    const char type = s[*pos];
    size_t eol = s.find("\r\n", *pos);
    if (eol == std::string_view::npos) return false;
    std::string_view line = s.substr(*pos + 1, eol - *pos - 1);
    if (line.find('\r') != std::string_view::npos || line.find('\n') != std::string_view::npos) return false;
    *pos = eol + 2;
    auto number = [&](long long* v) {
        if (line.empty() || line.size() > 20) return false;
        size_t i = line[0] == '-' ? 1 : 0;
        if (i == line.size()) return false;
        long long x = 0;
        for (; i < line.size(); ++i) {
            if (line[i] < '0' || line[i] > '9') return false;
            if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, line[i] - '0', &x)) return false;
        }
        *v = line[0] == '-' ? -x : x;
        return true;
    };
    long long n;
    switch (type) {
    case '+': return true;
    case '-': return !line.empty() && line[0] >= 'A' && line[0] <= 'Z'; // an error code first
    case ':': return number(&n);
    case '$':
        if (!number(&n) || n < -1) return false;
        if (n == -1) return true;
        if (s.size() - *pos < size_t(n) + 2 || s.substr(*pos + size_t(n), 2) != "\r\n") return false;
        *pos += size_t(n) + 2;
        return true;
    case '*':
        if (!number(&n) || n < -1) return false;
        for (long long i = 0; i < n; ++i)
            if (!check_reply(s, pos, depth + 1)) return false;
        return true;
    default: return false;
    }
}

size_t count_replies(std::string_view s) {
    size_t pos = 0, n = 0;
    while (pos < s.size()) {
        if (!check_reply(s, &pos, 0)) fail("a malformed RESP2 reply");
        ++n;
    }
    return n;
}

// ---- one connection ----------------------------------------------------------------------

struct Run {
    std::string replies;
    size_t requests = 0;
    bool protocol_error = false;
    bool closed = false;
};

Run run(const uint8_t* stream, const std::vector<size_t>& cuts, uint8_t cfg) {
    zbuf::Arena* a = arena();
    const bool small = cfg & 16, one_call = cfg & 32, clock = cfg & 64;
    ParserLimits lim;
    if (small) lim = ParserLimits{4096, 64, 1024};

    Carver values(256), reply_blocks(512); // small blocks: many block changes
    StoreConfig sc;
    sc.copy_max = (cfg & 128) ? 0 : 16; // small values copied (or never), so both paths run
    Store store(values, sc);
    ServerInfo info;
    info.run_id = std::string(40, '0');
    ServerStats stats;
    Executor x(store, values, info, stats);
    Client client;
    client.id = 1;
    Parser parser(lim);
    int64_t now_us = 1700000000000000;
    Run out;
    std::vector<const std::byte*> objs; // bases of the fed objs

    std::vector<Slice> pieces;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        size_t from = cuts[i], to = cuts[i + 1];
        do { // at most 16 KiB per obj; empty pieces too
            size_t n = std::min<size_t>(to - from, 16384);
            Slice s = a->alloc_slice(n);
            if (!s) fail("the arena ran out of memory");
            if (n) std::memcpy(s.data(), stream + from, n);
            objs.push_back(zbuf::obj_base(s.data()));
            pieces.push_back(std::move(s));
            from += n;
        } while (from < to);
    }
    auto fed = [&](const Slice& s) {
        const std::byte* base = zbuf::obj_base(s.data());
        return std::find(objs.begin(), objs.end(), base) != objs.end();
    };

    std::vector<Slice> reply;
    auto pump = [&] {
        Reply r(reply, reply_blocks);
        while (!out.closed) {
            Parser::Status st = parser.next();
            if (st == Parser::Status::NeedMore) break;
            if (st == Parser::Status::Error) {
                if (parser.error_reply().empty()) fail("an error without a reply text");
                r.raw(parser.error_reply());
                out.protocol_error = out.closed = true;
                break;
            }
            Request& req = parser.request();
            if (req.argc() == 0) fail("a request without arguments");
            for (size_t i = 0; i < req.argc(); ++i) {
                size_t sum = 0;
                for (const Slice& s : req[i].slices) {
                    if (!s || s.empty()) fail("an empty argument slice");
                    if (!req.is_inline() && !fed(s)) fail("a multibulk argument outside the fed objs (copied)");
                    sum += s.size();
                }
                if (sum != req[i].len) fail("argument length != sum of its slices");
                if (small && req[i].len > 4096) fail("an argument above max_bulk_len");
            }
            // max_multibulk bounds a multibulk count; an inline line, as in Redis
            // (processInlineBuffer), is bounded only by its length: each argument
            // takes a byte and a separator at least.
            if (small && !req.is_inline() && req.argc() > 64) fail("more arguments than max_multibulk");
            if (small && req.is_inline() && req.argc() > 1024 / 2 + 1) fail("more inline arguments than the line holds");
            ++out.requests;
            x.execute(req, client, r, now_us);
            if (r.failed()) fail("a reply ran out of memory");
            if (client.close_now) {
                --out.requests; // closed without a reply
                out.closed = true;
            }
            if (client.close_after_reply) out.closed = true;
        }
        for (const Slice& s : reply) out.replies.append(reinterpret_cast<const char*>(s.data()), s.size());
        reply.clear();
    };

    if (one_call) {
        parser.feed(pieces);
        pump();
    } else {
        for (Slice& s : pieces) {
            parser.feed(std::move(s));
            pump();
            if (clock) {
                now_us += 7000;
                store.expire_step(now_us / 1000, 3);
            }
        }
    }
    for (const Slice& s : pieces)
        if (s) fail("feed() left an input slice behind");

    // The keyspace's accounting agrees with its entries.
    uint64_t bytes = 0, keys = 0;
    size_t expires = 0;
    store.for_each([&](const std::string& k, const Entry& e) {
        size_t sum = 0;
        for (const Slice& s : e.value) sum += s.size();
        if (sum != e.len) fail("a value's length != sum of its slices");
        bytes += e.len;
        keys += k.size();
        expires += e.expire_ms != kNoExpire;
    });
    if (bytes != store.value_bytes() || keys != store.key_bytes()) fail("store byte counts disagree");
    if (expires != store.expires()) fail("store expiry count disagrees");
    return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    zbuf::Arena* a = arena();
    const uint64_t live_before = a->live();
    {
        const uint8_t cfg = data[0];
        const size_t nsplit = cfg & 15;
        fuzz::Split sp = fuzz::split_input(data, size, nsplit);
        const uint8_t* stream = sp.stream;
        const size_t len = sp.len;
        std::vector<size_t>& cuts = sp.cuts;

        Run split = run(stream, cuts, cfg);
        const size_t n = count_replies(split.replies);
        if (n != split.requests + (split.protocol_error ? 1 : 0)) fail("not exactly one reply per request");

        if (!(cfg & 64)) { // time stands still: the cuts must not matter
            Run whole = run(stream, {0, len}, uint8_t(cfg & ~32));
            if (whole.replies != split.replies) fail("replies depend on how the stream was split");
            if (whole.requests != split.requests || whole.protocol_error != split.protocol_error)
                fail("requests depend on how the stream was split");
        }
    }
    a->drain_returns();
    if (a->live() != live_before) fail("zbufs leaked");
    return 0;
}
