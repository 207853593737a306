// Unit tests of crescent-kv's pure pieces (examples/kv): the RESP2 request
// parser (every split point of a pipeline, inline quoting, every protocol
// error text, limits, zero-copy), the keyspace (expiry on a virtual clock,
// the expiry heap against a model), the reply builder (block merging,
// zero-copy GET) and every command's reply bytes as Redis 7.0.15 sends them
// (the expected RESP is written out literally; it was checked against a
// redis-server 7.0.15 where Redis and crescent-kv agree, and the few places
// where crescent-kv differs on purpose say so). Every test ends with no zbuf
// leaked.
#include <catch2/catch.hpp>

#include <crescent/zbuf.hpp>

#include "examples/kv/commands.hpp"
#include "examples/kv/resp.hpp"
#include "examples/kv/store.hpp"
#include "tests/support/zbuf_leak.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace crescent;
using namespace crescent::kv;
using namespace std::string_literals;

namespace {

using Args = std::vector<std::string>;

// A received buffer: `bytes` copied into one arena obj (as the transport
// would deliver them; at most 64 KiB).
Slice received(std::string_view bytes) {
    Slice s = zbuf::Arena::current()->alloc_slice(bytes.size());
    REQUIRE(s);
    std::memcpy(s.data(), bytes.data(), bytes.size());
    return s;
}

// Longer input: one obj per 16 KiB.
void feed_received(Parser& p, std::string_view bytes) {
    std::vector<Slice> v;
    for (size_t off = 0; off < bytes.size(); off += 16384) v.push_back(received(bytes.substr(off, 16384)));
    p.feed(v);
}

std::string flatten(const std::vector<Slice>& v) {
    std::string s;
    for (const Slice& x : v) s.append(reinterpret_cast<const char*>(x.data()), x.size());
    return s;
}

std::string resp(const Args& args) {
    std::string s = "*" + std::to_string(args.size()) + "\r\n";
    for (const std::string& a : args) s += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    return s;
}

Args to_args(Request& req) {
    Args a;
    for (size_t i = 0; i < req.argc(); ++i) {
        std::string s;
        req[i].append_to(s);
        REQUIRE(s.size() == req[i].len);
        a.push_back(s);
    }
    return a;
}

struct Parsed {
    std::vector<Args> requests;
    std::string error; // error_reply() when the parser failed
};

// Feeds `bytes` cut at the given offsets (each piece its own obj) and
// collects every request.
Parsed parse_pieces(std::string_view bytes, const std::vector<size_t>& cuts, ParserLimits lim = {}) {
    Parser p(lim);
    Parsed out;
    size_t prev = 0;
    auto drain = [&] {
        for (;;) {
            Parser::Status st = p.next();
            if (st == Parser::Status::NeedMore) return;
            if (st == Parser::Status::Error) {
                out.error = p.error_reply();
                return;
            }
            out.requests.push_back(to_args(p.request()));
        }
    };
    for (size_t c : cuts) {
        if (c > prev) {
            feed_received(p, bytes.substr(prev, c - prev));
            drain();
        }
        prev = c;
    }
    if (prev < bytes.size()) {
        feed_received(p, bytes.substr(prev));
        drain();
    }
    return out;
}

// The server side of one connection, on a virtual clock.
struct Kv {
    test::ZbufArenaFixture arena{64u << 20};
    Carver values{16384};
    Carver replies{16384};
    Store store;
    ServerInfo info;
    ServerStats stats;
    Executor x{store, values, info, stats};
    Client client;
    Parser parser;
    int64_t now_us = 1700000000000000; // 2023-11-14T22:13:20Z
    std::vector<Slice> out;
    bool closed = false;

    explicit Kv(StoreConfig sc = {}) : store(values, sc) { client.id = 7; }

    void feed(std::string_view bytes) { parser.feed(received(bytes)); }
    // Run what is parsed; returns the reply bytes (as one send would carry them).
    std::string pump() {
        Reply r(out, replies);
        while (!closed) {
            Parser::Status st = parser.next();
            if (st == Parser::Status::NeedMore) break;
            if (st == Parser::Status::Error) {
                r.raw(parser.error_reply());
                closed = true;
                break;
            }
            x.execute(parser.request(), client, r, now_us);
            REQUIRE_FALSE(r.failed());
            if (client.close_now || client.close_after_reply) closed = true;
        }
        std::string s = flatten(out);
        out.clear();
        return s;
    }
    std::string run(std::string_view bytes) {
        feed(bytes);
        return pump();
    }
    std::string cmd(const Args& a) { return run(resp(a)); }
    void advance_ms(int64_t ms) { now_us += ms * 1000; }
    int64_t now_ms() const { return now_us / 1000; }
};

} // namespace

// ---- parser ------------------------------------------------------------------------

TEST_CASE("kv parser: a pipeline of varied requests at every split point", "[kv][resp]") {
    test::ZbufArenaFixture arena;
    std::string bin;
    for (int i = 0; i < 40; ++i) bin += char((i * 37) & 0xff); // includes \0, \r, \n
    bin += "\r\n\0"s;
    const std::string pipeline = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$6\r\nva\r\nl\n\r\n"
                                 "PING\r\n"
                                 "*0\r\n"
                                 "*-1\r\n"
                                 "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"
                                 "ECHO \"a b\" 'c\\'d' \"\\x41\"\r\n"
                                 "\r\n"
                                 "*1\r\n$4\r\nPING\r\n"
                                 "SET k v\n" +
                                 resp({"GET", bin}) + "  get   x  \r\n";
    const std::vector<Args> want = {
        {"SET", "key", "va\r\nl\n"}, {"PING"}, {"ECHO", ""}, {"ECHO", "a b", "c'd", "A"},
        {"PING"}, {"SET", "k", "v"}, {"GET", bin}, {"get", "x"},
    };

    SECTION("whole") {
        Parsed p = parse_pieces(pipeline, {});
        CHECK(p.error.empty());
        CHECK(p.requests == want);
    }
    SECTION("every single split point") {
        for (size_t i = 0; i <= pipeline.size(); ++i) {
            Parsed p = parse_pieces(pipeline, {i});
            INFO("split at " << i);
            REQUIRE(p.error.empty());
            REQUIRE(p.requests == want);
        }
    }
    SECTION("every pair of split points") {
        for (size_t i = 1; i < pipeline.size(); i += 1)
            for (size_t j = i + 1; j < pipeline.size(); j += 3) {
                Parsed p = parse_pieces(pipeline, {i, j});
                INFO("split at " << i << " and " << j);
                REQUIRE(p.requests == want);
            }
    }
    SECTION("one byte at a time") {
        std::vector<size_t> cuts;
        for (size_t i = 1; i < pipeline.size(); ++i) cuts.push_back(i);
        Parsed p = parse_pieces(pipeline, cuts);
        CHECK(p.error.empty());
        CHECK(p.requests == want);
    }
}

TEST_CASE("kv parser: inline commands and quoting as sdssplitargs", "[kv][resp]") {
    test::ZbufArenaFixture arena;
    struct Case {
        std::string line;
        Args args; // empty with ok=false: unbalanced quotes
        bool ok = true;
    };
    const std::vector<Case> cases = {
        {"ECHO \"a\\x41b\"", {"ECHO", "aAb"}},
        {"ECHO 'it\\'s'", {"ECHO", "it's"}},
        {"ECHO foo\"bar baz\"", {"ECHO", "foobar baz"}},
        {"ECHO \"\\n\\r\\t\\b\\a\\q\"", {"ECHO", "\n\r\t\b\aq"}},
        {"  ECHO   x  ", {"ECHO", "x"}},
        {"ECHO \"\"", {"ECHO", ""}},
        {"ECHO \"a\\\"b\"", {"ECHO", "a\"b"}},
        {"ECHO 'a\"b'", {"ECHO", "a\"b"}},
        {"ECHO \"\\x4\"", {"ECHO", "x4"}},
        {"ECHO \"x\\xZZ\"", {"ECHO", "xxZZ"}},
        {"ECHO \"x\\xaF\"", {"ECHO", "x\xaf"}},
        {"ECHO\tx", {"ECHO", "x"}},
        {"ECHO x\vy", {"ECHO", "x\vy"}},
        {"\v\fECHO x", {"ECHO", "x"}},
        {"ECHO a\rb", {"ECHO", "a", "b"}},
        {"ECHO '\\n'", {"ECHO", "\\n"}},
        {"ECHO \"a\" ", {"ECHO", "a"}},
        {"ECHO a\0b c"s, {"ECHO", "a"}}, // sdssplitargs sees a C string
        {"ECHO \"a\"b", {}, false},
        {"ECHO 'a'b", {}, false},
        {"ECHO 'abc", {}, false},
        {"ECHO \"abc\\\"", {}, false},
    };
    for (const Case& c : cases) {
        INFO("line: " << c.line);
        Parsed p = parse_pieces(c.line + "\r\n", {});
        if (c.ok) {
            CHECK(p.error.empty());
            REQUIRE(p.requests.size() == 1);
            CHECK(p.requests[0] == c.args);
        } else {
            CHECK(p.requests.empty());
            CHECK(p.error == "-ERR Protocol error: unbalanced quotes in request\r\n");
        }
    }
    // A bare \n ends a line too, an empty line is skipped, \r alone is not an end.
    Parsed p = parse_pieces("PING\n\r\n\nECHO a\rb\n", {});
    CHECK(p.requests == std::vector<Args>{{"PING"}, {"ECHO", "a", "b"}});

    // The arguments of a line share one fresh obj (unescaping needs a copy).
    Parser parser;
    parser.feed(received("SET key value\r\n"));
    REQUIRE(parser.next() == Parser::Status::Ready);
    Request& r = parser.request();
    CHECK(r.is_inline());
    REQUIRE(r.argc() == 3);
    CHECK(zbuf::obj_base(r[0].slices[0].data()) == zbuf::obj_base(r[2].slices[0].data()));
}

TEST_CASE("kv parser: every protocol error, with Redis's text", "[kv][resp]") {
    test::ZbufArenaFixture arena;
    const std::string big_line(65537, 'a');
    struct Case {
        std::string in;
        std::string error;
        size_t before = 0; // requests parsed before the error
    };
    const std::vector<Case> cases = {
        {"*abc\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
        {"* 1\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
        {"*01\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
        {"*\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
        {"*1\n\r\n$4\r\nPING\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
        {"*1048577\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
        {"*99999999999999999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
        {"*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
        {"*1\r\n$04\r\nPING\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
        {"*1\r\n$+4\r\nPING\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
        {"*1\r\n$4 \r\nPING\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
        {"*1\r\n$536870913\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
        {"*1\r\nX\r\n", "-ERR Protocol error: expected '$', got 'X'\r\n"},
        {"*2\r\n$1\r\na\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"},
        {"*1\r\n\r\n", "-ERR Protocol error: expected '$', got ' '\r\n"},
        {"*1\r\n\0\r\n"s, "-ERR Protocol error: expected '$', got '\r\n"},
        {"PING \"a\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
        {"*1\r\n$4\r\nPING\r\nfoo \"bar\r\nPING\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n", 1},
        {big_line, "-ERR Protocol error: too big inline request\r\n"},
        {"PING\r\n" + big_line + "\r\n", "-ERR Protocol error: too big inline request\r\n", 1},
        {"*" + std::string(65536, '1'), "-ERR Protocol error: too big mbulk count string\r\n"},
        {"*1\r\n$" + std::string(65536, '1'), "-ERR Protocol error: too big bulk count string\r\n"},
    };
    for (const Case& c : cases) {
        INFO("input: " << c.in.substr(0, 40));
        Parsed whole = parse_pieces(c.in, {});
        CHECK(whole.error == c.error);
        CHECK(whole.requests.size() == c.before);
        // The same at every split point (short inputs).
        if (c.in.size() < 100)
            for (size_t i = 0; i <= c.in.size(); ++i) {
                Parsed p = parse_pieces(c.in, {i});
                INFO("split at " << i);
                CHECK(p.error == c.error);
                CHECK(p.requests.size() == c.before);
            }
    }

    SECTION("limits: exactly at the limit is accepted") {
        // 65536 bytes of line without an end yet: still waiting.
        Parser p;
        p.feed(received(std::string(65536, 'a')));
        CHECK(p.next() == Parser::Status::NeedMore);
        p.feed(received("\n"));
        CHECK(p.next() == Parser::Status::Ready);
        CHECK(p.request()[0].len == 65536);

        Parser q;
        q.feed(received("*1048576\r\n$536870912\r\n"));
        CHECK(q.next() == Parser::Status::NeedMore);
        CHECK(q.error() == ProtoError::None);
    }
    SECTION("configured lower bulk limit") {
        ParserLimits lim;
        lim.max_bulk_len = 1000;
        CHECK(parse_pieces("*1\r\n$1001\r\n", {}, lim).error == "-ERR Protocol error: invalid bulk length\r\n");
        Parsed ok = parse_pieces(resp({std::string(1000, 'x')}), {}, lim);
        CHECK(ok.error.empty());
        CHECK(ok.requests.size() == 1);
    }
    SECTION("max_multibulk bounds a multibulk count, not an inline line's arguments") {
        // Redis's processInlineBuffer takes as many arguments as the line holds
        // (found by fuzz_resp, whose invariant had wrongly applied the count limit).
        ParserLimits lim;
        lim.max_multibulk = 64;
        std::string line = "MGET";
        for (int i = 0; i < 100; ++i) line += " k" + std::to_string(i);
        Parsed in = parse_pieces(line + "\r\n", {7, 200}, lim);
        CHECK(in.error.empty());
        REQUIRE(in.requests.size() == 1);
        CHECK(in.requests[0].size() == 101);
        CHECK(in.requests[0][100] == "k99");
        CHECK(parse_pieces("*65\r\n", {}, lim).error == "-ERR Protocol error: invalid multibulk length\r\n");
    }
    SECTION("after an error the parser stays failed and drops input") {
        Parser p;
        p.feed(received("*x\r\n*1\r\n$4\r\nPING\r\n"));
        CHECK(p.next() == Parser::Status::Error);
        p.feed(received("*1\r\n$4\r\nPING\r\n"));
        CHECK(p.next() == Parser::Status::Error);
        CHECK(p.buffered() == 0);
    }
}

TEST_CASE("kv parser: Redis quirks kept", "[kv][resp]") {
    test::ZbufArenaFixture arena;
    // The two bytes after a bulk and the byte after a count's \r are not checked.
    CHECK(parse_pieces("*1\r\n$4\r\nPINGXY*1\rX$4\r\nPING\r\n", {}).requests == std::vector<Args>{{"PING"}, {"PING"}});
    // Empty multibulk requests are skipped.
    CHECK(parse_pieces("*0\r\n*-1\r\n*-100\r\nPING\r\n", {}).requests == std::vector<Args>{{"PING"}});
    // -0 is not a number for string2ll.
    CHECK(parse_pieces("*-0\r\n", {}).error == "-ERR Protocol error: invalid multibulk length\r\n");
}

TEST_CASE("kv parser: arguments share the received objs (zero-copy)", "[kv][resp]") {
    test::ZbufArenaFixture arena;
    Parser p;
    Slice rx = received("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    const std::byte* base = rx.buf().data();
    p.feed(std::move(rx));
    REQUIRE(p.next() == Parser::Status::Ready);
    Request& r = p.request();
    REQUIRE(r.argc() == 3);
    for (size_t i = 0; i < 3; ++i) {
        REQUIRE(r[i].slices.size() == 1);
        CHECK(r[i].slices[0].buf().data() == base);
    }
    CHECK(r[2].view() == "hello");
    CHECK(r[2].slices[0].data() == base + 24);
    CHECK(r[0].is("set"));
    CHECK_FALSE(r[0].is("get"));

    // A value split over three received buffers: three slices, one per obj;
    // view() copies it once into the argument's own buffer.
    Parser q;
    Slice a = received("*2\r\n$4\r\nECHO\r\n$10\r\nabc"), b = received("defg"), c = received("hij\r\n");
    const std::byte *pa = a.buf().data(), *pb = b.buf().data(), *pc = c.buf().data();
    q.feed(std::move(a));
    CHECK(q.next() == Parser::Status::NeedMore);
    q.feed(std::move(b));
    CHECK(q.next() == Parser::Status::NeedMore);
    q.feed(std::move(c));
    REQUIRE(q.next() == Parser::Status::Ready);
    Arg& v = q.request()[1];
    REQUIRE(v.slices.size() == 3);
    CHECK(v.slices[0].buf().data() == pa);
    CHECK(v.slices[1].buf().data() == pb);
    CHECK(v.slices[2].buf().data() == pc);
    CHECK(v.len == 10);
    CHECK(v.view() == "abcdefghij");
    CHECK(v.flat == "abcdefghij");
}

TEST_CASE("kv parser: steady state reuses the argument vectors", "[kv][resp]") {
    test::ZbufArenaFixture arena;
    Parser p;
    std::string batch;
    for (int i = 0; i < 64; ++i) batch += resp({"SET", "key:" + std::to_string(i), "value"});
    p.feed(received(batch));
    const Arg* first_args = nullptr;
    const Slice* first_slices = nullptr;
    for (int i = 0; i < 64; ++i) {
        REQUIRE(p.next() == Parser::Status::Ready);
        Request& r = p.request();
        if (i == 0) {
            first_args = &r[0];
            first_slices = r[2].slices.data();
        } else {
            // Same argument slots, same slice storage: no allocation per argument.
            CHECK(&r[0] == first_args);
            CHECK(r[2].slices.data() == first_slices);
        }
    }
    CHECK(p.next() == Parser::Status::NeedMore);
    CHECK(p.requests() == 64);
}

TEST_CASE("kv parse_ll follows string2ll", "[kv][resp]") {
    long long v = 0;
    CHECK(parse_ll("0", &v));
    CHECK(v == 0);
    CHECK(parse_ll("-9223372036854775808", &v));
    CHECK(v == INT64_MIN);
    CHECK(parse_ll("9223372036854775807", &v));
    CHECK(v == INT64_MAX);
    for (const char* bad : {"", "-", "-0", "01", "+1", " 1", "1 ", "9223372036854775808", "-9223372036854775809",
                            "1a", "123456789012345678901"})
        CHECK_FALSE(parse_ll(bad, &v));
}

// ---- commands ------------------------------------------------------------------------

TEST_CASE("kv commands: replies byte-exact as Redis 7.0.15", "[kv][cmd]") {
    Kv kv;
    struct Step {
        Args req;
        std::string reply;
    };
    const std::vector<Step> steps = {
        {{"PING"}, "+PONG\r\n"},
        {{"PING", "hello"}, "$5\r\nhello\r\n"},
        {{"PING", "a", "b"}, "-ERR wrong number of arguments for 'ping' command\r\n"},
        {{"ECHO", "x y"}, "$3\r\nx y\r\n"},
        {{"ECHO"}, "-ERR wrong number of arguments for 'echo' command\r\n"},
        {{"SET", "k", "v"}, "+OK\r\n"},
        {{"GET", "k"}, "$1\r\nv\r\n"},
        {{"GET", "nokey"}, "$-1\r\n"},
        {{"GET"}, "-ERR wrong number of arguments for 'get' command\r\n"},
        {{"GET", "a", "b"}, "-ERR wrong number of arguments for 'get' command\r\n"},
        {{"SET", "k", "v2", "GET"}, "$1\r\nv\r\n"},
        {{"SET", "k2", "v", "NX"}, "+OK\r\n"},
        {{"SET", "k2", "v", "NX"}, "$-1\r\n"},
        {{"SET", "k3", "v", "XX"}, "$-1\r\n"},
        {{"SET", "k", "v", "NX", "XX"}, "-ERR syntax error\r\n"},
        {{"SET", "k", "v", "EX"}, "-ERR syntax error\r\n"},
        {{"SET", "k", "v", "EX", "abc"}, "-ERR value is not an integer or out of range\r\n"},
        {{"SET", "k", "v", "EX", "0"}, "-ERR invalid expire time in 'set' command\r\n"},
        {{"SET", "k", "v", "EX", "-5"}, "-ERR invalid expire time in 'set' command\r\n"},
        {{"SET", "k", "v", "PX", "9223372036854775807"}, "-ERR invalid expire time in 'set' command\r\n"},
        {{"SET", "k", "v", "EX", "9223372036854775"}, "-ERR invalid expire time in 'set' command\r\n"},
        {{"SET", "k", "v", "EX", "10", "PX", "10"}, "-ERR syntax error\r\n"},
        {{"SET", "k", "v", "KEEPTTL", "EX", "10"}, "-ERR syntax error\r\n"},
        {{"SET", "k", "v", "foo"}, "-ERR syntax error\r\n"},
        {{"SET", "k2", "new", "NX", "GET"}, "$1\r\nv\r\n"},
        {{"SET", "k4", "x", "XX", "GET"}, "$-1\r\n"},
        {{"SET", "e", ""}, "+OK\r\n"},
        {{"GET", "e"}, "$0\r\n\r\n"},
        {{"STRLEN", "e"}, ":0\r\n"},
        {{"STRLEN", "k"}, ":2\r\n"},
        {{"STRLEN", "zz"}, ":0\r\n"},
        {{"DEL", "k", "k", "zz", "k2"}, ":2\r\n"},
        {{"EXISTS", "e", "e", "zz"}, ":2\r\n"},
        {{"TYPE", "e"}, "+string\r\n"},
        {{"TYPE", "zz"}, "+none\r\n"},
        {{"MSET", "a", "1", "b", "2"}, "+OK\r\n"},
        {{"MSET", "a", "1", "b"}, "-ERR wrong number of arguments for 'mset' command\r\n"},
        {{"MSET", "a"}, "-ERR wrong number of arguments for 'mset' command\r\n"},
        {{"MGET", "a", "b", "zz"}, "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n"},
        {{"INCR", "a"}, ":2\r\n"},
        {{"DECR", "a"}, ":1\r\n"},
        {{"INCRBY", "a", "10"}, ":11\r\n"},
        {{"DECRBY", "a", "5"}, ":6\r\n"},
        {{"INCRBY", "a", "x"}, "-ERR value is not an integer or out of range\r\n"},
        {{"INCR", "nn"}, ":1\r\n"},
        {{"DECR", "dd"}, ":-1\r\n"},
        {{"GET", "a"}, "$1\r\n6\r\n"},
        {{"APPEND", "ap", "hello"}, ":5\r\n"},
        {{"APPEND", "ap", " world"}, ":11\r\n"},
        {{"GET", "ap"}, "$11\r\nhello world\r\n"},
        {{"GETSET", "ap", "x"}, "$11\r\nhello world\r\n"},
        {{"GETSET", "nope", "x"}, "$-1\r\n"},
        {{"GETDEL", "nope"}, "$1\r\nx\r\n"},
        {{"GETDEL", "nope"}, "$-1\r\n"},
        {{"SETNX", "nx1", "a"}, ":1\r\n"},
        {{"SETNX", "nx1", "b"}, ":0\r\n"},
        {{"SETEX", "se", "abc", "v"}, "-ERR value is not an integer or out of range\r\n"},
        {{"SETEX", "se", "0", "v"}, "-ERR invalid expire time in 'setex' command\r\n"},
        {{"PSETEX", "se", "-1", "v"}, "-ERR invalid expire time in 'psetex' command\r\n"},
        {{"EXPIRE", "a", "100"}, ":1\r\n"},
        {{"TTL", "a"}, ":100\r\n"},
        {{"PTTL", "zz"}, ":-2\r\n"},
        {{"TTL", "b"}, ":-1\r\n"},
        {{"EXPIRE", "zz", "10"}, ":0\r\n"},
        {{"EXPIRE", "a", "100", "NX"}, ":0\r\n"},
        {{"EXPIRE", "b", "100", "XX"}, ":0\r\n"},
        {{"EXPIRE", "a", "50", "GT"}, ":0\r\n"},
        {{"EXPIRE", "a", "500", "GT"}, ":1\r\n"},
        {{"EXPIRE", "a", "50", "LT"}, ":1\r\n"},
        {{"EXPIRE", "a", "10", "NX", "XX"}, "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"},
        {{"EXPIRE", "a", "10", "GT", "LT"}, "-ERR GT and LT options at the same time are not compatible\r\n"},
        {{"EXPIRE", "a", "10", "FOO"}, "-ERR Unsupported option FOO\r\n"},
        // Error texts stay on one line: \r \n trimmed at the end of a formatted one, else spaces.
        {{"EXPIRE", "a", "10", "a\r\n"}, "-ERR Unsupported option a\r\n"},
        {{"EXPIRE", "a", "10", "\na\rb"}, "-ERR Unsupported option  a b\r\n"},
        {{"HELLO", "2", "\nx\n"}, "-ERR Syntax error in HELLO option ' x '\r\n"},
        {{"foo\r\n", "a\n"}, "-ERR unknown command 'foo  ', with args beginning with: 'a ' \r\n"},
        {{"EXPIRE", "a", "x"}, "-ERR value is not an integer or out of range\r\n"},
        {{"EXPIRE", "a", "9223372036854775807"}, "-ERR invalid expire time in 'expire' command\r\n"},
        {{"PEXPIRE", "a", "9223372036854775807"}, "-ERR invalid expire time in 'pexpire' command\r\n"},
        {{"PERSIST", "a"}, ":1\r\n"},
        {{"PERSIST", "a"}, ":0\r\n"},
        {{"PERSIST", "zz"}, ":0\r\n"},
        {{"EXPIRE", "b", "-1"}, ":1\r\n"},
        {{"EXISTS", "b"}, ":0\r\n"},
        {{"EXPIREAT", "nx1", "1"}, ":1\r\n"},
        {{"EXISTS", "nx1"}, ":0\r\n"},
        {{"DBSIZE"}, ":5\r\n"}, // e, a, nn, dd, ap
        {{"DBSIZE", "x"}, "-ERR wrong number of arguments for 'dbsize' command\r\n"},
        {{"SELECT", "0"}, "+OK\r\n"},
        {{"SELECT", "1"}, "-ERR DB index is out of range\r\n"}, // one database only (Redis has 16)
        {{"SELECT", "x"}, "-ERR value is not an integer or out of range\r\n"},
        {{"SELECT", "99999999999"}, "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n"},
        {{"FLUSHALL", "foo"}, "-ERR syntax error\r\n"},
        {{"FLUSHALL", "ASYNC", "x"}, "-ERR syntax error\r\n"},
        {{"FLUSHALL", "SYNC"}, "+OK\r\n"},
        {{"DBSIZE"}, ":0\r\n"},
        {{"FLUSHDB"}, "+OK\r\n"},
        {{"foo"}, "-ERR unknown command 'foo', with args beginning with: \r\n"},
        {{"foo", "a", "b"}, "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n"},
        {{"foo", "a\r\nb", "c\0d"s}, "-ERR unknown command 'foo', with args beginning with: 'a  b' 'c' \r\n"},
        {{"foo", std::string(200, 'a'), "b"},
         "-ERR unknown command 'foo', with args beginning with: '" + std::string(128, 'a') + "' \r\n"},
        {{"CONFIG"}, "-ERR wrong number of arguments for 'config' command\r\n"},
        {{"CONFIG", "foo"}, "-ERR unknown subcommand 'foo'. Try CONFIG HELP.\r\n"},
        {{"config", "foo"}, "-ERR unknown subcommand 'foo'. Try CONFIG HELP.\r\n"},
        {{"CONFIG", "GET"}, "-ERR wrong number of arguments for 'config|get' command\r\n"},
        {{"CONFIG", "GET", "save"}, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n"},
        {{"CONFIG", "GET", "appendonly"}, "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"},
        {{"CONFIG", "GET", "nosuch"}, "*0\r\n"},
        {{"CLIENT", "GETNAME"}, "$-1\r\n"},
        {{"CLIENT", "SETNAME", "my name"}, "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
        {{"CLIENT", "SETNAME", "myname"}, "+OK\r\n"},
        {{"CLIENT", "GETNAME"}, "$6\r\nmyname\r\n"},
        {{"CLIENT", "SETNAME", ""}, "+OK\r\n"},
        {{"CLIENT", "GETNAME"}, "$-1\r\n"},
        {{"CLIENT", "SETNAME"}, "-ERR wrong number of arguments for 'client|setname' command\r\n"},
        {{"CLIENT", "foo"}, "-ERR unknown subcommand 'foo'. Try CLIENT HELP.\r\n"},
        {{"CLIENT"}, "-ERR wrong number of arguments for 'client' command\r\n"},
        {{"CLIENT", "ID"}, ":7\r\n"},
        // Redis 7.2's CLIENT SETINFO (7.0.15 answers "unknown subcommand").
        {{"CLIENT", "SETINFO", "lib-name", "redis-py"}, "+OK\r\n"},
        {{"CLIENT", "SETINFO", "LIB-VER", "4.3.4"}, "+OK\r\n"},
        {{"CLIENT", "SETINFO", "lib-ver", "a b"}, "-ERR lib-ver cannot contain spaces, newlines or special characters.\r\n"},
        {{"CLIENT", "SETINFO", "foo", "x"}, "-ERR Unrecognized option 'foo'\r\n"},
        {{"HELLO", "x"}, "-ERR Protocol version is not an integer or out of range\r\n"},
        {{"HELLO", "1"}, "-NOPROTO unsupported protocol version\r\n"},
        {{"HELLO", "3"}, "-NOPROTO unsupported protocol version\r\n"}, // RESP2 only (Redis 7 accepts 3)
        {{"HELLO", "2", "foo"}, "-ERR Syntax error in HELLO option 'foo'\r\n"},
        {{"HELLO", "2", "AUTH", "bob", "pw"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
        {{"HELLO", "2", "SETNAME", "cli"},
         "*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:7\r\n"
         "$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"},
        {{"CLIENT", "GETNAME"}, "$3\r\ncli\r\n"},
        {{"AUTH", "x"}, "-ERR AUTH <password> called without any password configured for the default user. Are you sure "
                        "your configuration is correct?\r\n"},
        {{"AUTH", "bob", "x"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
        {{"AUTH", "default", "x"}, "+OK\r\n"},
        {{"AUTH", "a", "b", "c"}, "-ERR syntax error\r\n"},
        {{"COMMAND", "foo"}, "-ERR unknown subcommand 'foo'. Try COMMAND HELP.\r\n"},
        {{"COMMAND", "COUNT"}, ":" + std::to_string(command_table().size()) + "\r\n"},
        // As Redis, without the key specifications (an empty array here).
        {{"COMMAND", "INFO", "get", "nosuch"},
         "*2\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@read\r\n+@string\r\n+@fast\r\n"
         "*0\r\n*0\r\n*0\r\n*-1\r\n"},
        {{"COMMAND", "DOCS", "get"},
         "*2\r\n$3\r\nget\r\n*6\r\n$7\r\nsummary\r\n$22\r\nGet the value of a key\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n"
         "$5\r\ngroup\r\n$6\r\nstring\r\n"},
        {{"SET", "k", "v", "EXAT", "1"}, "+OK\r\n"},
        {{"GET", "k"}, "$-1\r\n"},
        {{"TIME"}, "*2\r\n$10\r\n1700000000\r\n$1\r\n0\r\n"},
        {{"QUIT"}, "+OK\r\n"},
    };
    for (const Step& s : steps) {
        INFO("request: " << resp(s.req));
        REQUIRE_FALSE(kv.closed);
        CHECK(kv.cmd(s.req) == s.reply);
    }
    CHECK(kv.closed); // QUIT
    CHECK(kv.stats.commands == steps.size());
}

TEST_CASE("kv commands: INCR family, overflow, fresh value objs", "[kv][cmd]") {
    Kv kv;
    CHECK(kv.cmd({"SET", "big", "9223372036854775807"}) == "+OK\r\n");
    CHECK(kv.cmd({"INCR", "big"}) == "-ERR increment or decrement would overflow\r\n");
    CHECK(kv.cmd({"INCRBY", "big", "1"}) == "-ERR increment or decrement would overflow\r\n");
    CHECK(kv.cmd({"DECRBY", "big", "-9223372036854775808"}) == "-ERR decrement would overflow\r\n");
    CHECK(kv.cmd({"INCRBY", "big", "-1"}) == ":9223372036854775806\r\n");
    CHECK(kv.cmd({"SET", "sm", "-9223372036854775808"}) == "+OK\r\n");
    CHECK(kv.cmd({"DECR", "sm"}) == "-ERR increment or decrement would overflow\r\n");
    CHECK(kv.cmd({"INCRBY", "sm", "-1"}) == "-ERR increment or decrement would overflow\r\n");
    CHECK(kv.cmd({"INCRBY", "sm", "9223372036854775807"}) == ":-1\r\n");
    for (const char* bad : {" 1", "01", "+1", "-0", "abc", "1.5", "", "99999999999999999999"}) {
        INFO("value '" << bad << "'");
        CHECK(kv.cmd({"SET", "s", bad}) == "+OK\r\n");
        CHECK(kv.cmd({"INCR", "s"}) == "-ERR value is not an integer or out of range\r\n");
    }
    // The result is a fresh carved obj, not a request buffer; the old value is released.
    const uint64_t live_before = zbuf::Arena::current()->live();
    CHECK(kv.cmd({"INCR", "ctr"}) == ":1\r\n");
    Entry* e = kv.store.find("ctr", kv.now_ms());
    REQUIRE(e);
    REQUIRE(e->value.size() == 1);
    CHECK(e->value[0].buf().data() == kv.values.block().data());
    CHECK(kv.cmd({"INCRBY", "ctr", "41"}) == ":42\r\n");
    CHECK(kv.cmd({"GET", "ctr"}) == "$2\r\n42\r\n");
    // Values split over several received buffers parse as integers too.
    kv.feed("*2\r\n$4\r\nINCR\r\n$3\r\nc");
    kv.feed("t");
    CHECK(kv.run("r\r\n") == ":43\r\n");
    // Many INCRs share carved blocks: a handful of objs, not one per value.
    for (int i = 0; i < 1000; ++i) kv.cmd({"INCR", "k" + std::to_string(i)});
    CHECK(zbuf::Arena::current()->live() - live_before < 10);
}

TEST_CASE("kv commands: SET stores the request's own slices; GET shares them", "[kv][cmd][zerocopy]") {
    StoreConfig keep_all;
    keep_all.copy_max = 0; // even tiny values stay in the received objs
    Kv kv(keep_all);
    Slice rx = received(resp({"SET", "key", "the value"}));
    const std::byte* obj = rx.buf().data();
    kv.parser.feed(std::move(rx));
    CHECK(kv.pump() == "+OK\r\n");
    Entry* e = kv.store.find("key", kv.now_ms());
    REQUIRE(e);
    REQUIRE(e->value.size() == 1);
    CHECK(e->value[0].buf().data() == obj); // no copy: the received obj itself
    CHECK(e->len == 9);
    // The parser, the request and the connection are done with the obj: the store's slice holds it.
    CHECK(zbuf::refcount(obj) == 1);

    // GET: "$9\r\n" + a share of the stored slice + "\r\n", nothing copied.
    kv.feed(resp({"GET", "key"}));
    Reply r(kv.out, kv.replies);
    REQUIRE(kv.parser.next() == Parser::Status::Ready);
    kv.x.execute(kv.parser.request(), kv.client, r, kv.now_us);
    REQUIRE(kv.out.size() == 3);
    CHECK(flatten(kv.out) == "$9\r\nthe value\r\n");
    CHECK(kv.out[1].data() == e->value[0].data());
    CHECK(zbuf::refcount(obj) == 2);
    kv.out.clear();
    CHECK(zbuf::refcount(obj) == 1);

    // Overwrite: the old obj is released, the new value is the new request's obj.
    Slice rx2 = received(resp({"SET", "key", "v2"}));
    const std::byte* obj2 = rx2.buf().data();
    kv.parser.feed(std::move(rx2));
    CHECK(kv.pump() == "+OK\r\n");
    e = kv.store.find("key", kv.now_ms());
    CHECK(e->value[0].buf().data() == obj2);

    // A value received in pieces stays in pieces (one slice per obj).
    kv.feed("*3\r\n$3\r\nSET\r\n$2\r\nk2\r\n$6\r\nab");
    kv.feed("cd");
    CHECK(kv.run("ef\r\n") == "+OK\r\n");
    Entry* e2 = kv.store.find("k2", kv.now_ms());
    REQUIRE(e2);
    CHECK(e2->value.size() == 3);
    CHECK(kv.cmd({"GET", "k2"}) == "$6\r\nabcdef\r\n");
    CHECK(kv.cmd({"APPEND", "k2", "gh"}) == ":8\r\n");
    CHECK(kv.cmd({"GET", "k2"}) == "$8\r\nabcdefgh\r\n");
    CHECK(kv.cmd({"MSET", "m1", "x", "m2", "yy"}) == "+OK\r\n");
    CHECK(kv.cmd({"MGET", "m1", "m2", "k2"}) == "*3\r\n$1\r\nx\r\n$2\r\nyy\r\n$8\r\nabcdefgh\r\n");
    CHECK(kv.cmd({"ECHO", "zero copy echo"}) == "$14\r\nzero copy echo\r\n");
}

TEST_CASE("kv store: small values are copied, large ones kept, RX-pool pins bounded", "[kv][cmd][zerocopy]") {
    StoreConfig sc;
    sc.copy_max = 128;
    sc.rx_pin_budget = 2;
    Kv kv(sc);
    zbuf::Arena* a = zbuf::Arena::current();

    // Small: one memcpy into a carved block, the received obj is not kept.
    Slice rx = received(resp({"SET", "small", "tiny value"}));
    const std::byte* obj = rx.buf().data();
    kv.parser.feed(std::move(rx));
    CHECK(kv.pump() == "+OK\r\n");
    Entry* e = kv.store.find("small", kv.now_ms());
    REQUIRE(e);
    REQUIRE(e->value.size() == 1);
    CHECK(e->value[0].buf().data() == kv.values.block().data());
    CHECK(kv.store.stats().copied_small == 1);
    kv.cmd({"PING"}); // the parser lets go of the last request
    CHECK(zbuf::refcount(obj) == 0);
    CHECK(kv.cmd({"GET", "small"}) == "$10\r\ntiny value\r\n");

    // Large (> copy_max) arena buffers: kept as received.
    const std::string big(300, 'b');
    Slice rx2 = received(resp({"SET", "big", big}));
    const std::byte* obj2 = rx2.buf().data();
    kv.parser.feed(std::move(rx2));
    CHECK(kv.pump() == "+OK\r\n");
    e = kv.store.find("big", kv.now_ms());
    REQUIRE(e);
    CHECK(e->value[0].buf().data() == obj2);
    CHECK(kv.store.stats().zero_copy == 1);

    // An "RX pool": objs of a Mempool zone handed out like received mbufs.
    static uint32_t released;
    released = 0;
    zbuf::ZoneHeader* z = a->take_zone(4096, zbuf::ZoneKind::Mempool,
                                       [](zbuf::ZoneHeader*, uint32_t) { ++released; }, nullptr);
    REQUIRE(z);
    uint32_t next = 0;
    auto rx_pool = [&](const std::string& bytes) {
        REQUIRE(bytes.size() <= 4096);
        std::byte* p = z->obj(next++);
        zbuf::detail::set_external_ref(z->ctx()[next - 1]);
        zbuf::detail::note_external_acquire();
        std::memcpy(p, bytes.data(), bytes.size());
        return Slice(Zbuf::adopt(p), 0, bytes.size());
    };
    for (int i = 0; i < 3; ++i) {
        kv.parser.feed(rx_pool(resp({"SET", "rx" + std::to_string(i), big})));
        CHECK(kv.pump() == "+OK\r\n");
    }
    // Two kept (the budget), the third copied out of the pool.
    CHECK(kv.store.rx_pinned() == 2);
    CHECK(kv.store.stats().copied_rx == 1);
    CHECK(zbuf::zone_of(kv.store.find("rx0", kv.now_ms())->value[0].data()) == z);
    CHECK(zbuf::zone_of(kv.store.find("rx2", kv.now_ms())->value[0].data()) != z);
    CHECK(kv.cmd({"GET", "rx2"}) == "$300\r\n" + big + "\r\n");
    CHECK(released == 1); // the third request's mbuf went back to its pool
    // Overwriting a pinned value returns its mbuf and frees budget.
    CHECK(kv.cmd({"SET", "rx0", "x"}) == "+OK\r\n");
    CHECK(kv.store.rx_pinned() == 1);
    CHECK(released == 2);
    kv.parser.feed(rx_pool(resp({"SET", "rx3", big})));
    CHECK(kv.pump() == "+OK\r\n");
    CHECK(kv.store.rx_pinned() == 2);
    CHECK(kv.cmd({"FLUSHALL"}) == "+OK\r\n");
    CHECK(kv.store.rx_pinned() == 0);
    CHECK(released == next);
}

TEST_CASE("kv reply builder: small replies merge into one slice per block", "[kv][reply]") {
    Kv kv;
    std::string batch;
    for (int i = 0; i < 16; ++i) batch += resp({"SET", "k" + std::to_string(i), "v"});
    kv.feed(batch);
    Reply r(kv.out, kv.replies);
    while (kv.parser.next() == Parser::Status::Ready) kv.x.execute(kv.parser.request(), kv.client, r, kv.now_us);
    REQUIRE(kv.out.size() == 1);
    CHECK(kv.out[0].size() == 16 * 5);
    kv.out.clear();

    // Bytes handed out are never written again: a new reply continues after them.
    const std::byte* end_of_first = kv.replies.cursor();
    Reply r2(kv.out, kv.replies);
    r2.simple("OK");
    REQUIRE(kv.out.size() == 1);
    CHECK(kv.out[0].data() == end_of_first);
    kv.out.clear();

    // A reply larger than a block spans blocks; the bytes come out intact.
    std::string big(40000, 'x');
    for (size_t i = 0; i < big.size(); ++i) big[i] = char('a' + i % 26);
    Reply r3(kv.out, kv.replies);
    r3.bulk(big);
    CHECK(flatten(kv.out) == "$40000\r\n" + big + "\r\n");
    CHECK(kv.out.size() >= 3);
    kv.out.clear();
}

TEST_CASE("kv commands: INFO, COMMAND, CONFIG GET formats", "[kv][cmd]") {
    Kv kv;
    kv.info.tcp_port = 6380;
    kv.info.run_id = std::string(40, 'f');
    CHECK(kv.cmd({"INFO", "keyspace"}) == "$12\r\n# Keyspace\r\n\r\n");
    CHECK(kv.cmd({"SET", "a", "1"}) == "+OK\r\n");
    CHECK(kv.cmd({"SET", "b", "2", "PX", "1000"}) == "+OK\r\n");
    CHECK(kv.cmd({"SET", "c", "3", "PX", "3000"}) == "+OK\r\n");
    const std::string ks = "# Keyspace\r\ndb0:keys=3,expires=2,avg_ttl=2000\r\n";
    CHECK(kv.cmd({"INFO", "KEYSPACE"}) == "$" + std::to_string(ks.size()) + "\r\n" + ks + "\r\n");
    CHECK(kv.cmd({"INFO", "nosuch"}) == "$0\r\n\r\n");

    std::string all = kv.cmd({"INFO"});
    const std::string head = "# Server\r\nredis_version:7.0.15\r\n";
    REQUIRE(all.size() > 20);
    CHECK(all.substr(0, 1) == "$");
    size_t body = all.find("\r\n") + 2;
    std::string text = all.substr(body, all.size() - body - 2);
    CHECK(std::stoul(all.substr(1)) == text.size());
    CHECK(text.substr(0, head.size()) == head);
    for (const char* s : {"\r\n\r\n# Clients\r\n", "\r\n\r\n# Memory\r\n", "\r\n\r\n# Stats\r\n", "\r\n\r\n# Keyspace\r\n",
                          "\r\ntcp_port:6380\r\n", "\r\nredis_mode:standalone\r\n", "\r\nrun_id:ffff",
                          "\r\ntotal_commands_processed:"})
        CHECK(text.find(s) != std::string::npos);
    // Every line is "# Title", empty (between sections) or "name:value".
    size_t pos = 0;
    while (pos < text.size()) {
        size_t e = text.find("\r\n", pos);
        REQUIRE(e != std::string::npos);
        std::string line = text.substr(pos, e - pos);
        INFO("line: " << line);
        CHECK((line.empty() || line[0] == '#' || line.find(':') != std::string::npos));
        pos = e + 2;
    }
    CHECK(text.substr(text.size() - 2) == "\r\n");

    // redis-benchmark's start-up questions.
    CHECK(kv.cmd({"CONFIG", "GET", "SAVE"}) == "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
    CHECK(kv.cmd({"CONFIG", "GET", "port"}) == "*2\r\n$4\r\nport\r\n$4\r\n6380\r\n");
    CHECK(kv.cmd({"CONFIG", "GET", "max*"}) ==
          "*6\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n");
    CHECK(kv.cmd({"CONFIG", "GET", "save", "appendonly", "sav?"}) ==
          "*4\r\n$10\r\nappendonly\r\n$2\r\nno\r\n$4\r\nsave\r\n$0\r\n\r\n");

    // COMMAND: one 10-element entry per command, COUNT agrees.
    std::string all_cmds = kv.cmd({"COMMAND"});
    CHECK(all_cmds.substr(0, all_cmds.find("\r\n")) == "*" + std::to_string(command_table().size()));
    CHECK(all_cmds.find("*10\r\n$3\r\nset\r\n:-3\r\n*2\r\n+write\r\n+denyoom\r\n") != std::string::npos);
    std::string help = kv.cmd({"CONFIG", "HELP"});
    CHECK(help.rfind("*7\r\n+CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n", 0) == 0);
    std::string docs = kv.cmd({"COMMAND", "DOCS"});
    CHECK(docs.substr(0, docs.find("\r\n")) == "*" + std::to_string(2 * command_table().size()));

    CHECK(glob_match("a*b?c[x-z]\\*", "aXXbQcy*", false));
    CHECK_FALSE(glob_match("a*b", "ac", false));
    CHECK(glob_match("[^a]bc", "xbc", false));
    CHECK(glob_match("SAVE", "save", true));
    CHECK(bytes_to_human(1023) == "1023B");
    CHECK(bytes_to_human(1536) == "1.50K");
    CHECK(bytes_to_human(3u << 20) == "3.00M");
}

TEST_CASE("kv commands: cross-protocol requests close without a reply", "[kv][cmd]") {
    Kv kv;
    SECTION("POST") {
        CHECK(kv.run("PING\r\nPOST / HTTP/1.1\r\nHost: x\r\n\r\n") == "+PONG\r\n");
        CHECK(kv.closed);
    }
    SECTION("Host:") {
        CHECK(kv.run("host: evil\r\nPING\r\n") == "");
        CHECK(kv.closed);
    }
}

// ---- expiry --------------------------------------------------------------------------

TEST_CASE("kv expiry on a virtual clock", "[kv][expire]") {
    Kv kv;
    CHECK(kv.cmd({"SET", "k", "v", "PX", "100"}) == "+OK\r\n");
    CHECK(kv.cmd({"PTTL", "k"}) == ":100\r\n");
    CHECK(kv.cmd({"TTL", "k"}) == ":0\r\n"); // (100 + 500) / 1000
    kv.advance_ms(60);
    CHECK(kv.cmd({"PTTL", "k"}) == ":40\r\n");
    kv.advance_ms(40);
    CHECK(kv.cmd({"PTTL", "k"}) == ":0\r\n"); // now == expire: not yet expired (now > when)
    CHECK(kv.cmd({"GET", "k"}) == "$1\r\nv\r\n");
    kv.advance_ms(1);
    CHECK(kv.cmd({"GET", "k"}) == "$-1\r\n");
    CHECK(kv.store.stats().expired_lazy == 1);
    CHECK(kv.store.size() == 0);

    // TTL rounds to the nearest second.
    CHECK(kv.cmd({"SET", "r", "v", "PX", "2499"}) == "+OK\r\n");
    CHECK(kv.cmd({"TTL", "r"}) == ":2\r\n");
    CHECK(kv.cmd({"PEXPIRE", "r", "2500"}) == ":1\r\n");
    CHECK(kv.cmd({"TTL", "r"}) == ":3\r\n");
    CHECK(kv.cmd({"PEXPIRETIME", "r"}) == ":" + std::to_string(kv.now_ms() + 2500) + "\r\n");
    CHECK(kv.cmd({"EXPIRETIME", "r"}) == ":" + std::to_string((kv.now_ms() + 2500 + 500) / 1000) + "\r\n");

    // SET drops the TTL, KEEPTTL keeps it, INCR and APPEND keep it.
    CHECK(kv.cmd({"SET", "t", "1", "EX", "10"}) == "+OK\r\n");
    CHECK(kv.cmd({"INCR", "t"}) == ":2\r\n");
    CHECK(kv.cmd({"TTL", "t"}) == ":10\r\n");
    CHECK(kv.cmd({"APPEND", "t", "0"}) == ":2\r\n");
    CHECK(kv.cmd({"TTL", "t"}) == ":10\r\n");
    CHECK(kv.cmd({"SET", "t", "x", "KEEPTTL"}) == "+OK\r\n");
    CHECK(kv.cmd({"TTL", "t"}) == ":10\r\n");
    CHECK(kv.cmd({"SET", "t", "x"}) == "+OK\r\n");
    CHECK(kv.cmd({"TTL", "t"}) == ":-1\r\n");
    CHECK(kv.cmd({"SETEX", "t", "5", "y"}) == "+OK\r\n");
    CHECK(kv.cmd({"TTL", "t"}) == ":5\r\n");
    CHECK(kv.cmd({"GETSET", "t", "z"}) == "$1\r\ny\r\n");
    CHECK(kv.cmd({"TTL", "t"}) == ":-1\r\n");
    CHECK(kv.cmd({"PSETEX", "t", "1500", "y"}) == "+OK\r\n");
    CHECK(kv.cmd({"PTTL", "t"}) == ":1500\r\n");
    CHECK(kv.cmd({"MSET", "t", "m"}) == "+OK\r\n");
    CHECK(kv.cmd({"PTTL", "t"}) == ":-1\r\n");

    // EXAT / PXAT are absolute Unix times; a past one expires the key at once.
    const int64_t at = kv.now_ms() + 5000;
    CHECK(kv.cmd({"SET", "abs", "v", "PXAT", std::to_string(at)}) == "+OK\r\n");
    CHECK(kv.cmd({"PTTL", "abs"}) == ":5000\r\n");
    CHECK(kv.cmd({"SET", "abs", "v", "EXAT", std::to_string(at / 1000 + 10)}) == "+OK\r\n");
    CHECK(kv.cmd({"PEXPIREAT", "abs", std::to_string(kv.now_ms() - 1)}) == ":1\r\n");
    CHECK(kv.cmd({"EXISTS", "abs"}) == ":0\r\n");

    // A key that expired is absent for every command, and SET NX may create it again.
    CHECK(kv.cmd({"SET", "n", "old", "PX", "5"}) == "+OK\r\n");
    kv.advance_ms(6);
    CHECK(kv.cmd({"SET", "n", "new", "NX"}) == "+OK\r\n");
    CHECK(kv.cmd({"GET", "n"}) == "$3\r\nnew\r\n");
    CHECK(kv.cmd({"TTL", "n"}) == ":-1\r\n");
    CHECK(kv.cmd({"SET", "x", "old", "PX", "5"}) == "+OK\r\n");
    kv.advance_ms(6);
    CHECK(kv.cmd({"INCR", "x"}) == ":1\r\n");
    CHECK(kv.cmd({"TTL", "x"}) == ":-1\r\n");
    CHECK(kv.cmd({"SET", "y", "v", "PX", "5"}) == "+OK\r\n");
    kv.advance_ms(6);
    CHECK(kv.cmd({"DEL", "y"}) == ":0\r\n");
    CHECK(kv.cmd({"EXPIRE", "y", "10"}) == ":0\r\n");
}

TEST_CASE("kv active expiry: bounded steps in deadline order", "[kv][expire]") {
    Kv kv;
    for (int i = 1; i <= 100; ++i) kv.cmd({"SET", "k" + std::to_string(i), "v", "PX", std::to_string(i)});
    CHECK(kv.store.expires() == 100);
    CHECK(kv.store.next_expiry() == kv.now_ms() + 1);
    kv.advance_ms(50); // keys 1..49 are past (now > when)
    std::vector<size_t> steps;
    for (int s = 0; s < 10; ++s) steps.push_back(kv.store.expire_step(kv.now_ms(), 10));
    CHECK(steps == std::vector<size_t>{10, 10, 10, 10, 9, 0, 0, 0, 0, 0});
    CHECK(kv.store.size() == 51);
    CHECK(kv.store.stats().expired_active == 49);
    CHECK(kv.cmd({"EXISTS", "k49"}) == ":0\r\n");
    CHECK(kv.cmd({"EXISTS", "k50"}) == ":1\r\n");
    CHECK(kv.store.next_expiry() == kv.now_ms());
    kv.cmd({"FLUSHALL"});
    CHECK(kv.store.expires() == 0);
    CHECK(kv.store.next_expiry() == kNoExpire);
}

TEST_CASE("kv store: the expiry heap against a model", "[kv][expire]") {
    test::ZbufArenaFixture arena;
    Carver carver;
    Store st(carver);
    std::map<std::string, int64_t> model; // key -> expire (kNoExpire = none); all keys live
    std::mt19937_64 rng(12345);
    int64_t now = 1000000;
    auto live = [&](const std::string& k) {
        auto it = model.find(k);
        return it != model.end() && (it->second == kNoExpire || now <= it->second);
    };
    for (int op = 0; op < 20000; ++op) {
        std::string key = "k" + std::to_string(rng() % 300);
        switch (rng() % 8) {
        case 0: case 1: { // set with or without expiry
            bool created;
            Entry& e = st.upsert(key, now, &created);
            CHECK(created == !live(key));
            st.set_value(e, std::vector<Slice>{}, 0);
            st.persist(e);
            int64_t exp = kNoExpire;
            if (rng() % 2) {
                exp = now + int64_t(rng() % 500);
                st.set_expire(e, exp);
            }
            model[key] = exp;
            break;
        }
        case 2: { // change expiry
            Entry* e = st.find(key, now);
            REQUIRE((e != nullptr) == live(key));
            if (e) {
                int64_t exp = now + int64_t(rng() % 500);
                st.set_expire(*e, exp);
                model[key] = exp;
            } else {
                model.erase(key);
            }
            break;
        }
        case 3: { // persist
            Entry* e = st.find(key, now);
            REQUIRE((e != nullptr) == live(key));
            if (e) {
                CHECK(st.persist(*e) == (model[key] != kNoExpire));
                model[key] = kNoExpire;
            } else {
                model.erase(key);
            }
            break;
        }
        case 4: // delete
            CHECK(st.erase(key, now) == live(key));
            model.erase(key);
            break;
        case 5: // time passes
            now += int64_t(rng() % 50);
            break;
        case 6: { // active expiry: removes exactly the past keys, earliest first
            size_t want = 0;
            for (auto& [k, exp] : model) want += exp != kNoExpire && now > exp;
            size_t max = rng() % 20;
            size_t got = st.expire_step(now, max);
            CHECK(got == std::min(want, max));
            std::set<std::string> in_store;
            st.for_each([&](const std::string& k, const Entry&) { in_store.insert(k); });
            int64_t latest_removed = INT64_MIN;
            size_t removed = 0;
            for (auto it = model.begin(); it != model.end();) {
                if (in_store.count(it->first)) {
                    ++it;
                    continue;
                }
                CHECK((it->second != kNoExpire && now > it->second)); // only past keys go
                latest_removed = std::max(latest_removed, it->second);
                ++removed;
                it = model.erase(it);
            }
            CHECK(removed == got);
            for (auto& [k, exp] : model) // the earliest went first
                if (exp != kNoExpire && now > exp) CHECK(exp >= latest_removed);
            break;
        }
        case 7: { // heap order: next_expiry is the minimum
            int64_t min = kNoExpire;
            st.for_each([&](const std::string&, const Entry& e) {
                if (e.expire_ms != kNoExpire && (min == kNoExpire || e.expire_ms < min)) min = e.expire_ms;
            });
            CHECK(st.next_expiry() == min);
            break;
        }
        }
    }
    // The store holds the model's keys (plus expired ones nobody touched yet).
    size_t expires = 0;
    st.for_each([&](const std::string& k, const Entry& e) {
        auto it = model.find(k);
        REQUIRE(it != model.end());
        CHECK(e.expire_ms == it->second);
        expires += e.expire_ms != kNoExpire;
    });
    CHECK(st.size() == model.size());
    CHECK(st.expires() == expires);
}

TEST_CASE("kv: a long pipelined session leaks no zbuf", "[kv][leak]") {
    std::mt19937 rng(7);
    {
        Kv kv;
        const zbuf::Arena* a = zbuf::Arena::current();
        std::string batch;
        for (int i = 0; i < 2000; ++i) {
            std::string key = "key:" + std::to_string(rng() % 100);
            switch (rng() % 6) {
            case 0: batch += resp({"SET", key, std::string(rng() % 3000, 'v')}); break;
            case 1: batch += resp({"GET", key}); break;
            case 2: batch += resp({"INCR", "n:" + key}); break;
            case 3: batch += resp({"MGET", key, "key:1", "key:2"}); break;
            case 4: batch += resp({"APPEND", key, "x"}); break;
            case 5: batch += resp({"SET", key, "v", "PX", std::to_string(rng() % 20)}); break;
            }
        }
        // Fed in random pieces, replies dropped after each pump (as after a send).
        size_t pos = 0;
        while (pos < batch.size()) {
            size_t n = std::min<size_t>(batch.size() - pos, 1 + rng() % 9000);
            kv.feed(std::string_view(batch).substr(pos, n));
            kv.pump();
            pos += n;
            kv.advance_ms(1);
            kv.store.expire_step(kv.now_ms(), 5);
        }
        CHECK(kv.parser.buffered() == 0);
        CHECK(kv.stats.commands == 2000);
        CHECK(a->live() > 0);
        kv.cmd({"FLUSHALL"});
    } // the fixture checks that every obj came back
}
