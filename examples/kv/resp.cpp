// crescent-kv — incremental RESP2 request parser (see resp.hpp).
#include "examples/kv/resp.hpp"

#include <algorithm>
#include <cstring>

namespace crescent::kv {

namespace {

constexpr size_t kCopyChunk = 16384; // an arena size class in every configuration crescent uses

inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }
// C locale isspace().
inline bool c_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }
inline int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

} // namespace

// ---- Arg / Request ------------------------------------------------------------------

std::string_view Arg::view() {
    if (slices.size() == 1) return {reinterpret_cast<const char*>(slices[0].data()), slices[0].size()};
    if (slices.empty()) return {};
    flat.clear();
    append_to(flat);
    return flat;
}

bool Arg::is(std::string_view want) const {
    if (len != want.size()) return false;
    size_t pos = 0;
    for (const Slice& s : slices) {
        const char* p = reinterpret_cast<const char*>(s.data());
        for (size_t i = 0; i < s.size(); ++i)
            if (lower(p[i]) != want[pos + i]) return false;
        pos += s.size();
    }
    return true;
}

void Arg::append_to(std::string& out) const {
    for (const Slice& s : slices) out.append(reinterpret_cast<const char*>(s.data()), s.size());
}

void Arg::share_into(std::vector<Slice>& out) const {
    for (const Slice& s : slices) out.push_back(s.share());
}

Arg& Request::push() {
    if (argc_ == args_.size()) args_.emplace_back();
    Arg& a = args_[argc_++];
    a.slices.clear();
    a.len = 0;
    return a;
}

void Request::clear() {
    for (size_t i = 0; i < argc_; ++i) {
        args_[i].slices.clear();
        args_[i].len = 0;
    }
    argc_ = 0;
    inline_ = false;
    // A giant request (up to a million arguments) does not keep its slots.
    if (args_.size() > 1024) {
        args_.resize(1024);
        args_.shrink_to_fit();
    }
}

bool Request::assign(std::span<const std::string_view> args) {
    clear();
    for (std::string_view a : args) {
        Arg& arg = push();
        if (!a.empty() && !copy_to_slices(a, arg.slices)) {
            clear();
            return false;
        }
        arg.len = a.size();
    }
    return true;
}

// ---- helpers ------------------------------------------------------------------------

bool parse_ll(std::string_view s, long long* out) {
    // Same acceptance as Redis's string2ll (util.c): 1..20 characters.
    if (s.empty() || s.size() > 20) return false;
    if (s.size() == 1 && s[0] == '0') {
        *out = 0;
        return true;
    }
    size_t i = 0;
    bool neg = false;
    if (s[0] == '-') {
        neg = true;
        if (++i == s.size()) return false;
    }
    if (s[i] < '1' || s[i] > '9') return false;
    unsigned long long v = 0;
    for (; i < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
        unsigned d = unsigned(s[i] - '0');
        if (v > (~0ull - d) / 10) return false;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > 9223372036854775808ull) return false;
        *out = v == 9223372036854775808ull ? INT64_MIN : -static_cast<long long>(v);
    } else {
        if (v > 9223372036854775807ull) return false;
        *out = static_cast<long long>(v);
    }
    return true;
}

bool split_args(std::string_view line, std::string& bytes, std::vector<size_t>& ends) {
    // sdssplitargs works on a C string: a NUL ends the line.
    if (size_t nul = line.find('\0'); nul != std::string_view::npos) line = line.substr(0, nul);
    bytes.clear();
    ends.clear();
    const size_t n = line.size();
    auto at = [&](size_t i) -> char { return i < n ? line[i] : '\0'; };
    size_t i = 0;
    for (;;) {
        while (i < n && c_space(line[i])) ++i;
        if (i >= n) return true;
        bool in_dq = false, in_sq = false, done = false;
        while (!done) {
            const char c = at(i);
            if (in_dq) {
                if (c == '\\' && at(i + 1) == 'x' && hex_value(at(i + 2)) >= 0 && hex_value(at(i + 3)) >= 0) {
                    bytes.push_back(char(hex_value(at(i + 2)) * 16 + hex_value(at(i + 3))));
                    i += 3;
                } else if (c == '\\' && at(i + 1) != '\0') {
                    ++i;
                    char e = at(i);
                    switch (e) {
                    case 'n': e = '\n'; break;
                    case 'r': e = '\r'; break;
                    case 't': e = '\t'; break;
                    case 'b': e = '\b'; break;
                    case 'a': e = '\a'; break;
                    default: break;
                    }
                    bytes.push_back(e);
                } else if (c == '"') {
                    // The closing quote must be followed by a space or the end.
                    if (at(i + 1) != '\0' && !c_space(at(i + 1))) return false;
                    done = true;
                } else if (c == '\0') {
                    return false; // unterminated
                } else {
                    bytes.push_back(c);
                }
            } else if (in_sq) {
                if (c == '\\' && at(i + 1) == '\'') {
                    ++i;
                    bytes.push_back('\'');
                } else if (c == '\'') {
                    if (at(i + 1) != '\0' && !c_space(at(i + 1))) return false;
                    done = true;
                } else if (c == '\0') {
                    return false;
                } else {
                    bytes.push_back(c);
                }
            } else {
                switch (c) {
                case ' ': case '\n': case '\r': case '\t': case '\0': done = true; break;
                case '"': in_dq = true; break;
                case '\'': in_sq = true; break;
                default: bytes.push_back(c); break;
                }
            }
            if (i < n) ++i;
        }
        ends.push_back(bytes.size());
    }
}

bool copy_to_slices(std::string_view bytes, std::vector<Slice>& out) {
    zbuf::Arena* arena = zbuf::Arena::current();
    if (!arena) return false;
    const size_t first = out.size();
    size_t off = 0;
    while (off < bytes.size()) {
        size_t n = std::min(kCopyChunk, bytes.size() - off);
        Slice s = arena->alloc_slice(n);
        if (!s) {
            out.resize(first);
            return false;
        }
        std::memcpy(s.data(), bytes.data() + off, n);
        out.push_back(std::move(s));
        off += n;
    }
    return true;
}

std::string_view proto_error_name(ProtoError e) {
    switch (e) {
    case ProtoError::None: return "none";
    case ProtoError::InvalidMultibulkLength: return "invalid multibulk length";
    case ProtoError::InvalidBulkLength: return "invalid bulk length";
    case ProtoError::ExpectedDollar: return "expected '$'";
    case ProtoError::TooBigInline: return "too big inline request";
    case ProtoError::TooBigMbulkCount: return "too big mbulk count string";
    case ProtoError::TooBigBulkCount: return "too big bulk count string";
    case ProtoError::UnbalancedQuotes: return "unbalanced quotes in request";
    case ProtoError::OutOfMemory: return "out of memory";
    }
    return "unknown";
}

// ---- Parser -------------------------------------------------------------------------

Parser::Parser(ParserLimits lim) : lim_(lim) {}

void Parser::reset() {
    in_.clear();
    head_ = 0;
    buffered_ = 0;
    state_ = State::Start;
    error_ = ProtoError::None;
    cur_ = nullptr;
    req_.clear();
    ready_ = false;
}

std::string Parser::error_reply() const {
    std::string r;
    switch (error_) {
    case ProtoError::None: return r;
    case ProtoError::ExpectedDollar:
        r = "-ERR Protocol error: expected '$', got '";
        // addReplyErrorFormat: "%c" of a NUL ends the string (sds's printf is
        // strlen-based); \r and \n become spaces.
        if (bad_char_ == '\0') return r + "\r\n";
        r += (bad_char_ == '\r' || bad_char_ == '\n') ? ' ' : bad_char_;
        r += "'\r\n";
        return r;
    case ProtoError::OutOfMemory: return "-ERR Protocol error: out of memory for the request\r\n";
    default:
        r = "-ERR Protocol error: ";
        r += proto_error_name(error_);
        r += "\r\n";
        return r;
    }
}

void Parser::compact() {
    if (head_ == in_.size()) {
        in_.clear();
        head_ = 0;
    } else if (head_ > 0) {
        in_.erase(in_.begin(), in_.begin() + ptrdiff_t(head_));
        head_ = 0;
    }
}

void Parser::feed(std::span<Slice> data) {
    if (state_ == State::Failed) {
        for (Slice& s : data) s.reset();
        return;
    }
    compact();
    for (Slice& s : data) {
        if (s.empty()) {
            s.reset();
            continue;
        }
        buffered_ += s.size();
        in_.push_back(std::move(s));
    }
}

void Parser::consume(size_t n) {
    Slice& s = in_[head_];
    buffered_ -= n;
    if (n == s.size()) {
        s.reset();
        ++head_;
    } else {
        s.remove_prefix(n);
    }
}

Parser::Status Parser::fail(ProtoError e) {
    error_ = e;
    state_ = State::Failed;
    // Nothing more is parsed: let the input and the partial request go now.
    for (size_t i = head_; i < in_.size(); ++i) in_[i].reset();
    in_.clear();
    head_ = 0;
    buffered_ = 0;
    req_.clear();
    cur_ = nullptr;
    return Status::Error;
}

void Parser::line_bytes(const char* p, size_t n) {
    if (num_len_ < kNumMax) std::memcpy(num_ + num_len_, p, std::min(n, kNumMax - num_len_));
    num_len_ += n;
}

Parser::Status Parser::next() {
    if (state_ == State::Failed) return Status::Error;
    if (ready_) {
        req_.clear();
        ready_ = false;
    }
    for (;;) {
        if (head_ == in_.size()) return Status::NeedMore;
        Slice& s = in_[head_];
        const char* p = reinterpret_cast<const char*>(s.data());
        const size_t n = s.size();

        switch (state_) {
        case State::Start:
            if (p[0] == '*') {
                state_ = State::MbCount;
                line_len_ = 1;
                num_len_ = 0;
                consume(1);
            } else {
                state_ = State::Inline;
                line_.clear();
            }
            break;

        case State::MbCount:
        case State::BulkLine: {
            const bool mb = state_ == State::MbCount;
            const void* cr = std::memchr(p, '\r', n);
            size_t k = cr ? size_t(static_cast<const char*>(cr) - p) : n;
            size_t skip = 0;
            if (!mb && line_len_ == 0 && k > 0) {
                first_ = p[0]; // the type byte, not part of the number
                skip = 1;
            }
            line_bytes(p + skip, k - skip);
            line_len_ += k;
            if (line_len_ > lim_.max_line)
                return fail(mb ? ProtoError::TooBigMbulkCount : ProtoError::TooBigBulkCount);
            if (!cr) {
                consume(k);
                break;
            }
            consume(k + 1);
            state_ = mb ? State::MbCountLf : State::BulkLineLf;
            break;
        }

        case State::MbCountLf: {
            consume(1); // Redis assumes the byte after \r is \n and skips it
            long long count = 0;
            if (num_len_ > kNumMax || !parse_ll({num_, num_len_}, &count) ||
                (count > 0 && uint64_t(count) > lim_.max_multibulk))
                return fail(ProtoError::InvalidMultibulkLength);
            if (count <= 0) {
                state_ = State::Start; // an empty request: nothing to run
                break;
            }
            mb_left_ = uint64_t(count);
            state_ = State::BulkLine;
            line_len_ = 0;
            num_len_ = 0;
            first_ = '\r'; // an empty line: Redis reports the \r it finds first
            break;
        }

        case State::BulkLineLf: {
            consume(1);
            if (first_ != '$') {
                bad_char_ = first_;
                return fail(ProtoError::ExpectedDollar);
            }
            long long len = 0;
            if (num_len_ > kNumMax || !parse_ll({num_, num_len_}, &len) || len < 0 ||
                uint64_t(len) > lim_.max_bulk_len)
                return fail(ProtoError::InvalidBulkLength);
            cur_ = &req_.push();
            bulk_left_ = uint64_t(len);
            crlf_left_ = 2;
            state_ = len > 0 ? State::Bulk : State::BulkCrlf;
            break;
        }

        case State::Bulk: {
            size_t k = size_t(std::min<uint64_t>(n, bulk_left_));
            if (k == n) {
                // The whole slice belongs to the argument: move it, no new reference.
                buffered_ -= k;
                cur_->slices.push_back(std::move(s));
                ++head_;
            } else {
                cur_->slices.push_back(s.sub(0, k));
                consume(k);
            }
            cur_->len += k;
            bulk_left_ -= k;
            if (bulk_left_ == 0) state_ = State::BulkCrlf;
            break;
        }

        case State::BulkCrlf: {
            size_t k = std::min<size_t>(n, crlf_left_); // not checked, as in Redis
            consume(k);
            crlf_left_ = uint8_t(crlf_left_ - k);
            if (crlf_left_ > 0) break;
            cur_ = nullptr;
            if (--mb_left_ > 0) {
                state_ = State::BulkLine;
                line_len_ = 0;
                num_len_ = 0;
                first_ = '\r';
                break;
            }
            state_ = State::Start;
            ready_ = true;
            ++requests_;
            return Status::Ready;
        }

        case State::Inline: {
            const void* nl = std::memchr(p, '\n', n);
            size_t k = nl ? size_t(static_cast<const char*>(nl) - p) : n;
            if (line_.size() + k > lim_.max_line) return fail(ProtoError::TooBigInline);
            line_.append(p, k);
            if (!nl) {
                consume(k);
                break;
            }
            consume(k + 1);
            Status st = finish_inline();
            if (st != Status::NeedMore) return st;
            state_ = State::Start; // an empty line
            break;
        }

        case State::Failed:
            return Status::Error;
        }
    }
}

Parser::Status Parser::finish_inline() {
    std::string_view line = line_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!split_args(line, unescaped_, ends_)) return fail(ProtoError::UnbalancedQuotes);
    if (ends_.empty()) return Status::NeedMore;
    chunks_.clear();
    if (!copy_to_slices(unescaped_, chunks_)) return fail(ProtoError::OutOfMemory);
    // Each argument: sub-slices of the chunks covering [begin, end).
    size_t begin = 0;
    for (size_t end : ends_) {
        Arg& a = req_.push();
        a.len = end - begin;
        size_t pos = begin;
        while (pos < end) {
            size_t c = pos / kCopyChunk, off = pos % kCopyChunk;
            size_t k = std::min(end - pos, chunks_[c].size() - off);
            a.slices.push_back(chunks_[c].sub(off, k));
            pos += k;
        }
        begin = end;
    }
    chunks_.clear();
    req_.inline_ = true;
    state_ = State::Start;
    ready_ = true;
    ++requests_;
    ++inline_requests_;
    return Status::Ready;
}

} // namespace crescent::kv
