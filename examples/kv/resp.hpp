// crescent-kv — the request side of RESP2 (the Redis protocol), parsed
// incrementally from zbuf slices as they arrive.
//
// What is accepted is what Redis 7.0 accepts from a client (networking.c
// processMultibulkBuffer / processInlineBuffer, sds.c sdssplitargs):
//
//   multibulk  *<count>\r\n then <count> times $<len>\r\n<len bytes>\r\n
//   inline     a line of space-separated arguments ending in \n (a \r before
//              it is dropped), with "double quotes" (\n \r \t \b \a \xHH and
//              \<c> escapes) and 'single quotes' (only \' is an escape)
//
// A request may be split at any byte across feeds, and one feed may hold many
// requests (pipelining): next() returns them one by one.
//
// Zero-copy: a multibulk argument is a vector of slices that share the objs
// the transport received (one per obj it spans). An inline argument needs
// unescaping, so its bytes are copied into a fresh arena obj that the
// arguments of the line share. Arg::view() gives short arguments (command
// names, numbers, keys) contiguously, copying only when they are split.
//
// Limits (Redis's, some configurable): a bulk length above max_bulk_len
// (512 MiB, Redis's proto-max-bulk-len) and a multibulk count above
// max_multibulk (1024*1024, as Redis <= 6.2; 7.0 allows INT_MAX) are protocol
// errors; so is a line (inline request, or a count line) longer than 64 KiB
// (PROTO_INLINE_MAX_SIZE). After a protocol error the parser stays failed: the
// server sends error_reply() (Redis's exact text) and closes the connection.
//
// Quirks kept from Redis: the byte after the \r of a count line and the two
// bytes after a bulk are skipped without being checked; a count <= 0 is an
// empty request that is silently skipped; an empty inline line is skipped; an
// inline line ends at a NUL byte (sdssplitargs sees a C string).
// Differences: a line longer than 64 KiB is refused even when its terminator
// arrived in the same read (Redis's check depends on its 16 KiB read size:
// this parser behaves like Redis fed one byte at a time, so the result does not
// depend on how the bytes were split); a NUL right where '$' is expected is
// reported as "expected '$', got '" (Redis's printf truncates at the NUL; Redis
// itself waits for more input there, because strchr() stops at the NUL).
//
// Threads: one parser per connection, used on its engine's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <crescent/zbuf.hpp>

namespace crescent::kv {

// One argument of a request.
struct Arg {
    std::vector<Slice> slices; // the bytes in order; no empty slice; none when len == 0
    size_t len = 0;            // sum of the slices' sizes

    // The bytes contiguously: the single slice in place, or a copy in `flat`
    // (its capacity is reused) when the argument spans several slices. Valid
    // until the argument changes or view() is called again.
    std::string_view view();
    // ASCII case-insensitive equality with `lower` (which must be lower case);
    // no copy.
    bool is(std::string_view lower) const;
    // Appends the bytes to `out`.
    void append_to(std::string& out) const;
    // New references to the bytes (for keeping them: SET).
    void share_into(std::vector<Slice>& out) const;

    std::string flat; // view()'s copy of a split argument
};

// A parsed request: argc() arguments, argument 0 is the command name.
class Request {
public:
    size_t argc() const { return argc_; }
    Arg& operator[](size_t i) { return args_[i]; }
    const Arg& operator[](size_t i) const { return args_[i]; }
    std::string_view view(size_t i) { return args_[i].view(); }
    bool is_inline() const { return inline_; }

    // Test helper: a request from plain strings (bytes copied into arena objs).
    // False when the arena has no room.
    bool assign(std::span<const std::string_view> args);

private:
    friend class Parser;
    Arg& push();  // the next argument slot (its vectors' capacity reused)
    void clear(); // drops the argument bytes, keeps the vectors

    std::vector<Arg> args_; // the first argc_ are in use; capacity reused
    size_t argc_ = 0;
    bool inline_ = false;
};

struct ParserLimits {
    uint64_t max_bulk_len = 512ull << 20; // Redis proto-max-bulk-len
    uint64_t max_multibulk = 1024 * 1024; // arguments per request
    size_t max_line = 64 * 1024;          // PROTO_INLINE_MAX_SIZE: inline request or count line
};

enum class ProtoError : uint8_t {
    None,
    InvalidMultibulkLength, // "*" line not a number, or above max_multibulk
    InvalidBulkLength,      // "$" line not a number, negative, or above max_bulk_len
    ExpectedDollar,         // a bulk line that does not start with '$'
    TooBigInline,           // inline line longer than max_line
    TooBigMbulkCount,       // "*" line longer than max_line
    TooBigBulkCount,        // "$" line longer than max_line
    UnbalancedQuotes,       // inline line with an open quote, or a quote not followed by a space
    OutOfMemory,            // no arena obj for an inline request's bytes
};
std::string_view proto_error_name(ProtoError e);

class Parser {
public:
    enum class Status : uint8_t {
        NeedMore, // everything fed so far is consumed (or held by a partial request)
        Ready,    // request() is a complete request
        Error,    // protocol error: send error_reply(), then close
    };

    explicit Parser(ParserLimits lim = {});
    Parser(const Parser&) = delete;
    Parser& operator=(const Parser&) = delete;

    // Queue received bytes: the slices are moved out (the span's entries are
    // left empty). Ignored after an error.
    void feed(std::span<Slice> data);
    void feed(Slice&& s) { feed(std::span<Slice>(&s, 1)); }

    // Parse the next request from what was fed. A Ready request stays valid
    // until the next call to next() (feed() may be called meanwhile).
    Status next();
    Request& request() { return req_; }

    ProtoError error() const { return error_; }
    // The reply Redis sends for the error, e.g. "-ERR Protocol error: invalid
    // bulk length\r\n"; empty when there is no error.
    std::string error_reply() const;

    // Bytes fed and not yet parsed (the partial request's argument bytes are
    // not counted: they are in request()).
    size_t buffered() const { return buffered_; }
    uint64_t requests() const { return requests_; }
    uint64_t inline_requests() const { return inline_requests_; }
    // Drop everything (input, partial request, error).
    void reset();

private:
    enum class State : uint8_t { Start, MbCount, MbCountLf, BulkLine, BulkLineLf, Bulk, BulkCrlf, Inline, Failed };

    void consume(size_t n);
    void compact();
    Status fail(ProtoError e);
    void line_bytes(const char* p, size_t n); // append to the number buffer
    Status finish_inline();

    ParserLimits lim_;
    std::vector<Slice> in_;    // fed slices; [0, head_) are consumed (empty)
    size_t head_ = 0;
    size_t buffered_ = 0;      // bytes in in_[head_..]
    State state_ = State::Start;
    ProtoError error_ = ProtoError::None;
    char bad_char_ = 0;        // ExpectedDollar: the byte found instead

    // A count line ("*N" / "$N") being read.
    size_t line_len_ = 0;      // bytes of the line so far, its type byte included
    char first_ = 0;           // BulkLine: the line's first byte
    static constexpr size_t kNumMax = 24; // longer than any valid number (20 chars + sign)
    char num_[kNumMax];
    size_t num_len_ = 0;       // may exceed kNumMax (then the number is invalid)

    uint64_t mb_left_ = 0;     // arguments still to come in the multibulk request
    uint64_t bulk_left_ = 0;   // bytes of the current bulk still to come
    uint8_t crlf_left_ = 0;    // bytes after the bulk still to skip
    Arg* cur_ = nullptr;       // the argument being filled

    std::string line_;         // Inline: the line so far (capacity reused)
    std::string unescaped_;    // Inline: the arguments' bytes back to back
    std::vector<size_t> ends_; // Inline: end offset of each argument in unescaped_
    std::vector<Slice> chunks_;

    Request req_;
    bool ready_ = false;       // req_ was returned by the last next()
    uint64_t requests_ = 0, inline_requests_ = 0;
};

// Redis's string2ll rules: optional '-', no '+', no leading zeros (except
// "0"), no spaces, at most 20 characters, within int64. False otherwise.
bool parse_ll(std::string_view s, long long* out);

// sdssplitargs: splits an inline line. The arguments' bytes go back to back
// into `bytes`, their end offsets into `ends`. False on unbalanced quotes.
bool split_args(std::string_view line, std::string& bytes, std::vector<size_t>& ends);

// Copies `bytes` into fresh arena objs (chunks of at most 16 KiB), appended to
// `out`. False when the arena has no room (out unchanged).
bool copy_to_slices(std::string_view bytes, std::vector<Slice>& out);

} // namespace crescent::kv
