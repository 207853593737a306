// crescent-kv — commands, replies, INFO (see commands.hpp). Reply texts follow
// Redis 7.0.15 (the error strings are quoted from server.c, t_string.c,
// expire.c, db.c, networking.c, object.c, acl.c).
#include "examples/kv/commands.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <iterator>
#include <unordered_map>

#include <fmt/format.h>

namespace crescent::kv {

namespace {

constexpr std::string_view kSyntaxErr = "ERR syntax error";
constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
constexpr std::string_view kOverflow = "ERR increment or decrement would overflow";
constexpr uint64_t kProtoMaxBulkLen = 512ull << 20;
// APPEND: a value of more than this many slices is copied into fresh objs,
// so a key appended to many times does not become a huge iovec.
constexpr size_t kAppendMaxSlices = 16;

inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }
inline char upper(char c) { return (c >= 'a' && c <= 'z') ? char(c - 'a' + 'A') : c; }

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i])) return false;
    return true;
}

// What printf's "%.Ns" takes from an argument: up to the first NUL, at most `max` bytes.
std::string_view c_str_prefix(std::string_view s, size_t max) {
    size_t nul = s.find('\0');
    if (nul != std::string_view::npos) s = s.substr(0, nul);
    return s.substr(0, std::min(max, s.size()));
}

// sdsmapchars(s, "\r\n", "  "): error texts must stay on one line.
void map_newlines(std::string& s) {
    for (char& c : s)
        if (c == '\r' || c == '\n') c = ' ';
}

// addReplyErrorFormat(): \r and \n at either end are trimmed (sdstrim), the
// ones inside become spaces (Reply::error).
void error_fmt(Reply& r, std::string s) {
    size_t b = s.find_first_not_of("\r\n"), e = s.find_last_not_of("\r\n");
    r.error(b == std::string::npos ? std::string() : s.substr(b, e - b + 1));
}

// ---- shared helpers for handlers ------------------------------------------------------

// Redis's getLongLongFromObjectOrReply on an argument.
bool arg_ll(Ctx& c, size_t i, long long* v, std::string_view err = kNotInteger) {
    if (c.req[i].len > 20 || !parse_ll(c.arg(i), v)) {
        c.r.error(err);
        return false;
    }
    return true;
}

// A stored value as an integer (the bytes of at most 20 characters, string2ll).
bool value_ll(const Entry& e, long long* v) {
    if (e.len == 0 || e.len > 20) return false;
    char buf[20];
    size_t n = 0;
    for (const Slice& s : e.value) {
        std::memcpy(buf + n, s.data(), s.size());
        n += s.size();
    }
    return parse_ll({buf, n}, v);
}

Entry* lookup_read(Ctx& c, std::string_view key) {
    Entry* e = c.store().find(key, c.now_ms);
    if (e) ++c.x.stats().keyspace_hits;
    else ++c.x.stats().keyspace_misses;
    return e;
}

void reply_arity(Ctx& c) {
    c.r.error(fmt::format("ERR wrong number of arguments for '{}' command", c.cmd.fullname));
}

void reply_expire_time(Ctx& c) { c.r.error(fmt::format("ERR invalid expire time in '{}' command", c.cmd.fullname)); }

void reply_help(Ctx& c, std::span<const std::string_view> lines) {
    std::string head;
    for (char ch : c.arg(0)) head += upper(ch);
    c.r.array(lines.size() + 3);
    c.r.simple(head + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    for (std::string_view l : lines) c.r.simple(l);
    c.r.simple("HELP");
    c.r.simple("    Prints this help.");
}

// The fresh decimal text of v as a value slice (INCR and friends).
Slice int_value(Ctx& c, long long v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    (void)ec;
    size_t n = size_t(end - buf);
    Slice s = c.x.values().carve(n);
    if (s) std::memcpy(s.data(), buf, n);
    return s;
}

// ---- connection -------------------------------------------------------------------

void cmd_ping(Ctx& c) {
    if (c.req.argc() > 2) return reply_arity(c);
    if (c.req.argc() == 1) c.r.simple("PONG");
    else c.r.bulk(c.req[1]);
}

void cmd_echo(Ctx& c) { c.r.bulk(c.req[1]); }

void cmd_quit(Ctx& c) {
    c.r.simple("OK");
    c.client.close_after_reply = true;
}

void cmd_select(Ctx& c) {
    long long id;
    if (!arg_ll(c, 1, &id)) return;
    if (id < INT_MIN || id > INT_MAX) return c.r.error("ERR value is out of range, value must between -2147483648 and 2147483647");
    if (id != 0) return c.r.error("ERR DB index is out of range");
    c.r.simple("OK");
}

bool valid_client_attr(std::string_view v) {
    for (char ch : v)
        if (ch < '!' || ch > '~') return false;
    return true;
}

bool set_client_name(Ctx& c, size_t i) {
    std::string_view name = c.arg(i);
    if (!valid_client_attr(name)) {
        c.r.error("ERR Client names cannot contain spaces, newlines or special characters.");
        return false;
    }
    c.client.name.assign(name);
    return true;
}

void cmd_hello(Ctx& c) {
    size_t next = 1;
    if (c.req.argc() >= 2) {
        long long ver;
        if (!arg_ll(c, next++, &ver, "ERR Protocol version is not an integer or out of range")) return;
        // RESP2 only: 3 is refused like an unknown version.
        if (ver != 2) return c.r.error("NOPROTO unsupported protocol version");
    }
    for (size_t j = next; j < c.req.argc(); ++j) {
        size_t more = c.req.argc() - 1 - j;
        if (c.req[j].is("auth") && more >= 2) {
            // No password is configured: the default user accepts any; other users do not exist.
            if (!c.req[j + 1].is("default"))
                return c.r.error("WRONGPASS invalid username-password pair or user is disabled.");
            j += 2;
        } else if (c.req[j].is("setname") && more >= 1) {
            if (!set_client_name(c, j + 1)) return;
            ++j;
        } else {
            return error_fmt(c.r, fmt::format("ERR Syntax error in HELLO option '{}'", c_str_prefix(c.arg(j), SIZE_MAX)));
        }
    }
    c.r.array(14);
    c.r.bulk("server");
    c.r.bulk("redis");
    c.r.bulk("version");
    c.r.bulk(kRedisVersion);
    c.r.bulk("proto");
    c.r.integer(2);
    c.r.bulk("id");
    c.r.integer((long long)c.client.id);
    c.r.bulk("mode");
    c.r.bulk("standalone");
    c.r.bulk("role");
    c.r.bulk("master");
    c.r.bulk("modules");
    c.r.array(0);
}

void cmd_auth(Ctx& c) {
    if (c.req.argc() > 3) return c.r.error(kSyntaxErr);
    if (c.req.argc() == 2)
        return c.r.error("ERR AUTH <password> called without any password configured for the default user. "
                         "Are you sure your configuration is correct?");
    if (!c.req[1].is("default")) return c.r.error("WRONGPASS invalid username-password pair or user is disabled.");
    c.r.simple("OK");
}

void cmd_client_id(Ctx& c) { c.r.integer((long long)c.client.id); }
void cmd_client_getname(Ctx& c) {
    if (c.client.name.empty()) c.r.null();
    else c.r.bulk(c.client.name);
}
void cmd_client_setname(Ctx& c) {
    if (set_client_name(c, 2)) c.r.simple("OK");
}
// Redis 7.2's CLIENT SETINFO (redis-py 5 sends it on connect; 4.x does not).
void cmd_client_setinfo(Ctx& c) {
    std::string* dest;
    if (c.req[2].is("lib-name")) dest = &c.client.lib_name;
    else if (c.req[2].is("lib-ver")) dest = &c.client.lib_ver;
    else return error_fmt(c.r, fmt::format("ERR Unrecognized option '{}'", c_str_prefix(c.arg(2), SIZE_MAX)));
    std::string_view v = c.arg(3);
    if (!valid_client_attr(v))
        return error_fmt(c.r, fmt::format("ERR {} cannot contain spaces, newlines or special characters.",
                                          c_str_prefix(c.arg(2), SIZE_MAX)));
    dest->assign(v);
    c.r.simple("OK");
}
void cmd_client_help(Ctx& c) {
    static constexpr std::string_view lines[] = {
        "GETNAME", "    Return the name of the current connection.",
        "ID", "    Return the ID of the current connection.",
        "SETINFO <option> <value>", "    Set client meta attr. Options are:",
        "    * LIB-NAME: the client lib name.", "    * LIB-VER: the client lib version.",
        "SETNAME <name>", "    Assign the name <name> to the current connection.",
    };
    reply_help(c, lines);
}

// ---- strings ---------------------------------------------------------------------

void cmd_get(Ctx& c) {
    // Only strings exist: Redis's checkType() -WRONGTYPE cannot happen here.
    Entry* e = lookup_read(c, c.arg(1));
    if (!e) return c.r.null();
    c.r.bulk(*e);
}

enum SetFlag : unsigned {
    kNx = 1, kXx = 2, kEx = 4, kPx = 8, kKeepTtl = 16, kGet = 32, kExAt = 64, kPxAt = 128,
};

// getExpireMillisecondsOrReply: the absolute expiry in Unix ms, or false (error sent).
bool expire_ms_arg(Ctx& c, size_t i, unsigned flags, bool seconds, int64_t* out) {
    long long v;
    if (!arg_ll(c, i, &v)) return false;
    if (v <= 0 || (seconds && v > LLONG_MAX / 1000)) {
        reply_expire_time(c);
        return false;
    }
    if (seconds) v *= 1000;
    if (flags & (kEx | kPx)) {
        if (__builtin_add_overflow(v, c.now_ms, &v)) v = -1;
    }
    if (v <= 0) {
        reply_expire_time(c);
        return false;
    }
    *out = v;
    return true;
}

// SET and friends after the options are known (setGenericCommand).
void set_generic(Ctx& c, unsigned flags, size_t key_i, size_t val_i, size_t expire_i, bool seconds,
                 std::string_view ok_reply, bool int_replies) {
    int64_t when = kNoExpire;
    if (expire_i && !expire_ms_arg(c, expire_i, flags, seconds, &when)) return;
    std::string_view key = c.arg(key_i);
    if (flags & kGet) {
        Entry* old = lookup_read(c, key);
        if (old) c.r.bulk(*old);
        else c.r.null();
    }
    Entry* cur = c.store().find(key, c.now_ms);
    if (((flags & kNx) && cur) || ((flags & kXx) && !cur)) {
        if (!(flags & kGet)) {
            if (int_replies) c.r.integer(0);
            else c.r.null();
        }
        return;
    }
    bool created;
    Entry& e = c.store().upsert(key, c.now_ms, &created);
    c.store().set_value(e, c.req[val_i]);
    if (!(flags & kKeepTtl)) c.store().persist(e);
    if (when != kNoExpire) {
        // An absolute time already past (EXAT/PXAT): Redis 7.0 stores it and
        // the key is gone at its next access; so is it here.
        c.store().set_expire(e, when);
    }
    if (!(flags & kGet)) {
        if (int_replies) c.r.integer(1);
        else c.r.simple(ok_reply);
    }
}

void cmd_set(Ctx& c) {
    unsigned flags = 0;
    size_t expire_i = 0;
    bool seconds = true;
    const size_t argc = c.req.argc();
    for (size_t j = 3; j < argc; ++j) {
        Arg& opt = c.req[j];
        const bool next = j + 1 < argc;
        const unsigned any_ttl = kEx | kPx | kExAt | kPxAt;
        if (opt.is("nx") && !(flags & kXx)) flags |= kNx;
        else if (opt.is("xx") && !(flags & kNx)) flags |= kXx;
        else if (opt.is("get")) flags |= kGet;
        else if (opt.is("keepttl") && !(flags & any_ttl)) flags |= kKeepTtl;
        else if (opt.is("ex") && !(flags & (kKeepTtl | (any_ttl & ~kEx))) && next) {
            flags |= kEx;
            expire_i = ++j;
            seconds = true;
        } else if (opt.is("px") && !(flags & (kKeepTtl | (any_ttl & ~kPx))) && next) {
            flags |= kPx;
            expire_i = ++j;
            seconds = false;
        } else if (opt.is("exat") && !(flags & (kKeepTtl | (any_ttl & ~kExAt))) && next) {
            flags |= kExAt;
            expire_i = ++j;
            seconds = true;
        } else if (opt.is("pxat") && !(flags & (kKeepTtl | (any_ttl & ~kPxAt))) && next) {
            flags |= kPxAt;
            expire_i = ++j;
            seconds = false;
        } else {
            return c.r.error(kSyntaxErr);
        }
    }
    set_generic(c, flags, 1, 2, expire_i, seconds, "OK", false);
}

void cmd_setnx(Ctx& c) { set_generic(c, kNx, 1, 2, 0, true, "OK", true); }
void cmd_setex(Ctx& c) { set_generic(c, kEx, 1, 3, 2, true, "OK", false); }
void cmd_psetex(Ctx& c) { set_generic(c, kPx, 1, 3, 2, false, "OK", false); }

void cmd_getset(Ctx& c) {
    std::string_view key = c.arg(1);
    Entry* old = lookup_read(c, key);
    if (old) c.r.bulk(*old);
    else c.r.null();
    bool created;
    Entry& e = c.store().upsert(key, c.now_ms, &created);
    c.store().set_value(e, c.req[2]);
    c.store().persist(e);
}

void cmd_getdel(Ctx& c) {
    std::string_view key = c.arg(1);
    Entry* e = lookup_read(c, key);
    if (!e) return c.r.null();
    c.r.bulk(*e);
    c.store().erase(*e);
}

void cmd_strlen(Ctx& c) {
    Entry* e = lookup_read(c, c.arg(1));
    c.r.integer(e ? (long long)e->len : 0);
}

void cmd_append(Ctx& c) {
    std::string_view key = c.arg(1);
    Arg& add = c.req[2];
    Entry* e = c.store().find(key, c.now_ms);
    if (!e) {
        bool created;
        Entry& n = c.store().upsert(key, c.now_ms, &created);
        size_t len = add.len;
        c.store().set_value(n, add);
        return c.r.integer((long long)len);
    }
    if (e->len + add.len > kProtoMaxBulkLen)
        return c.r.error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    // The old slices are shared, the new ones moved: nothing is written in place.
    std::vector<Slice> v;
    v.reserve(e->value.size() + add.slices.size());
    for (const Slice& s : e->value) v.push_back(s.share());
    for (Slice& s : add.slices) v.push_back(std::move(s));
    add.slices.clear();
    size_t len = e->len + add.len;
    if (v.size() > kAppendMaxSlices) {
        std::string flat;
        flat.reserve(len);
        for (const Slice& s : v) flat.append(reinterpret_cast<const char*>(s.data()), s.size());
        std::vector<Slice> compact;
        if (copy_to_slices(flat, compact)) v = std::move(compact);
    }
    c.store().set_value(*e, std::move(v), len);
    c.r.integer((long long)len);
}

void cmd_mget(Ctx& c) {
    c.r.array(c.req.argc() - 1);
    for (size_t j = 1; j < c.req.argc(); ++j) {
        Entry* e = lookup_read(c, c.arg(j));
        if (e) c.r.bulk(*e);
        else c.r.null();
    }
}

void cmd_mset(Ctx& c) {
    if (c.req.argc() % 2 == 0) return reply_arity(c);
    for (size_t j = 1; j < c.req.argc(); j += 2) {
        bool created;
        Entry& e = c.store().upsert(c.arg(j), c.now_ms, &created);
        c.store().set_value(e, c.req[j + 1]);
        c.store().persist(e);
    }
    c.r.simple("OK");
}

void incr_generic(Ctx& c, long long incr) {
    std::string_view key = c.arg(1);
    Entry* e = c.store().find(key, c.now_ms);
    long long v = 0;
    if (e && !value_ll(*e, &v)) return c.r.error(kNotInteger);
    if ((incr < 0 && v < 0 && incr < LLONG_MIN - v) || (incr > 0 && v > 0 && incr > LLONG_MAX - v))
        return c.r.error(kOverflow);
    v += incr;
    Slice s = int_value(c, v);
    if (!s) return c.r.error("ERR out of memory for the value"); // arena exhausted (counted by the Carver)
    bool created;
    Entry& n = e ? *e : c.store().upsert(key, c.now_ms, &created);
    c.store().set_value(n, std::move(s)); // the expiry stays, as in Redis
    c.r.integer(v);
}

void cmd_incr(Ctx& c) { incr_generic(c, 1); }
void cmd_decr(Ctx& c) { incr_generic(c, -1); }
void cmd_incrby(Ctx& c) {
    long long incr;
    if (arg_ll(c, 2, &incr)) incr_generic(c, incr);
}
void cmd_decrby(Ctx& c) {
    long long incr;
    if (!arg_ll(c, 2, &incr)) return;
    if (incr == LLONG_MIN) return c.r.error("ERR decrement would overflow");
    incr_generic(c, -incr);
}

// ---- keyspace --------------------------------------------------------------------

void cmd_del(Ctx& c) {
    long long n = 0;
    for (size_t j = 1; j < c.req.argc(); ++j) n += c.store().erase(c.arg(j), c.now_ms);
    c.r.integer(n);
}

void cmd_exists(Ctx& c) {
    long long n = 0;
    for (size_t j = 1; j < c.req.argc(); ++j) n += c.store().find(c.arg(j), c.now_ms) != nullptr;
    c.r.integer(n);
}

void cmd_touch(Ctx& c) { cmd_exists(c); }

void cmd_type(Ctx& c) { c.r.simple(c.store().find(c.arg(1), c.now_ms) ? "string" : "none"); }

enum ExpireFlag : unsigned { kExpNx = 1, kExpXx = 2, kExpGt = 4, kExpLt = 8 };

void expire_generic(Ctx& c, int64_t basetime, bool seconds) {
    unsigned flags = 0;
    for (size_t j = 3; j < c.req.argc(); ++j) {
        Arg& o = c.req[j];
        if (o.is("nx")) flags |= kExpNx;
        else if (o.is("xx")) flags |= kExpXx;
        else if (o.is("gt")) flags |= kExpGt;
        else if (o.is("lt")) flags |= kExpLt;
        else return error_fmt(c.r, fmt::format("ERR Unsupported option {}", c_str_prefix(c.arg(j), SIZE_MAX)));
    }
    if ((flags & kExpNx) && (flags & (kExpXx | kExpGt | kExpLt)))
        return c.r.error("ERR NX and XX, GT or LT options at the same time are not compatible");
    if ((flags & kExpGt) && (flags & kExpLt))
        return c.r.error("ERR GT and LT options at the same time are not compatible");
    long long when;
    if (!arg_ll(c, 2, &when)) return;
    if (seconds) {
        if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000) return reply_expire_time(c);
        when *= 1000;
    }
    if (when > LLONG_MAX - basetime) return reply_expire_time(c);
    when += basetime;
    Entry* e = c.store().find(c.arg(1), c.now_ms);
    if (!e) return c.r.integer(0);
    const int64_t cur = e->expire_ms;
    if ((flags & kExpNx) && cur != kNoExpire) return c.r.integer(0);
    if ((flags & kExpXx) && cur == kNoExpire) return c.r.integer(0);
    if ((flags & kExpGt) && (cur == kNoExpire || when <= cur)) return c.r.integer(0);
    if ((flags & kExpLt) && cur != kNoExpire && when >= cur) return c.r.integer(0);
    if (when <= c.now_ms) {
        // checkAlreadyExpired: deleted now.
        c.store().erase(*e);
        ++c.store().stats().expired_now;
        return c.r.integer(1);
    }
    c.store().set_expire(*e, when);
    c.r.integer(1);
}

void cmd_expire(Ctx& c) { expire_generic(c, c.now_ms, true); }
void cmd_pexpire(Ctx& c) { expire_generic(c, c.now_ms, false); }
void cmd_expireat(Ctx& c) { expire_generic(c, 0, true); }
void cmd_pexpireat(Ctx& c) { expire_generic(c, 0, false); }

void ttl_generic(Ctx& c, bool ms, bool abs) {
    Entry* e = c.store().find(c.arg(1), c.now_ms);
    if (!e) return c.r.integer(-2);
    if (e->expire_ms == kNoExpire) return c.r.integer(-1);
    long long ttl = abs ? e->expire_ms : e->expire_ms - c.now_ms;
    if (ttl < 0) ttl = 0;
    c.r.integer(ms ? ttl : (ttl + 500) / 1000);
}

void cmd_ttl(Ctx& c) { ttl_generic(c, false, false); }
void cmd_pttl(Ctx& c) { ttl_generic(c, true, false); }
void cmd_expiretime(Ctx& c) { ttl_generic(c, false, true); }
void cmd_pexpiretime(Ctx& c) { ttl_generic(c, true, true); }

void cmd_persist(Ctx& c) {
    Entry* e = c.store().find(c.arg(1), c.now_ms);
    c.r.integer(e && c.store().persist(*e) ? 1 : 0);
}

void cmd_dbsize(Ctx& c) { c.r.integer((long long)c.store().size()); }

void cmd_flushall(Ctx& c) {
    // SYNC and ASYNC both free at once (values are references: cheap to drop).
    if (c.req.argc() > 2 || (c.req.argc() == 2 && !c.req[1].is("sync") && !c.req[1].is("async")))
        return c.r.error(kSyntaxErr);
    c.store().flush();
    c.r.simple("OK");
}

// ---- server ----------------------------------------------------------------------

void cmd_time(Ctx& c) {
    c.r.array(2);
    c.r.bulk(fmt::format("{}", c.now_us / 1000000));
    c.r.bulk(fmt::format("{}", c.now_us % 1000000));
}

void cmd_info(Ctx& c) {
    std::vector<std::string_view> sections;
    for (size_t j = 1; j < c.req.argc(); ++j) sections.push_back(c.arg(j));
    // view() of a split argument lives in the argument's own buffer: all stay valid.
    c.r.bulk(c.x.info(sections, c.now_us));
}

// CONFIG GET answers for what clients ask at start (redis-benchmark: save,
// appendonly) and a few more; CONFIG SET is not supported.
struct ConfigParam {
    std::string_view name;
    std::string_view value; // empty: computed
};
constexpr ConfigParam kConfig[] = {
    {"appendonly", "no"},         {"save", ""},
    {"databases", "1"},           {"maxmemory", "0"},
    {"maxmemory-policy", "noeviction"}, {"port", ""},
    {"proto-max-bulk-len", "536870912"}, {"timeout", "0"},
    {"maxclients", ""},           {"hz", ""},
};

void cmd_config_get(Ctx& c) {
    std::vector<std::pair<std::string_view, std::string>> out;
    for (const ConfigParam& p : kConfig) {
        bool match = false;
        for (size_t j = 2; j < c.req.argc() && !match; ++j) match = glob_match(c.arg(j), p.name, true);
        if (!match) continue;
        std::string v(p.value);
        if (p.name == "port") v = std::to_string(c.x.server_info().tcp_port);
        else if (p.name == "maxclients") v = std::to_string(c.x.server_info().maxclients);
        else if (p.name == "hz") v = std::to_string(c.x.server_info().hz);
        out.emplace_back(p.name, std::move(v));
    }
    c.r.array(out.size() * 2);
    for (auto& [k, v] : out) {
        c.r.bulk(k);
        c.r.bulk(v);
    }
}

void cmd_config_resetstat(Ctx& c) {
    ServerStats& s = c.x.stats();
    const uint64_t connected = s.connected_clients;
    s = ServerStats{};
    s.connected_clients = connected;
    c.store().stats() = StoreStats{};
    c.r.simple("OK");
}

void cmd_config_help(Ctx& c) {
    static constexpr std::string_view lines[] = {
        "GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
        "RESETSTAT", "    Reset statistics reported by the INFO command.",
    };
    reply_help(c, lines);
}

const char* flag_names[] = {"write", "readonly", "denyoom", "admin", "noscript", "loading",
                            "stale", "fast", "no_auth", "sentinel", "allow_busy"};

void command_entry(Reply& r, const Command& cmd) {
    r.array(10);
    r.bulk(cmd.fullname);
    r.integer(cmd.arity);
    size_t nflags = 0;
    for (unsigned b = 0; b < std::size(flag_names); ++b) nflags += (cmd.flags >> b) & 1;
    r.array(nflags);
    for (unsigned b = 0; b < std::size(flag_names); ++b)
        if ((cmd.flags >> b) & 1) r.simple(flag_names[b]);
    r.integer(cmd.first_key);
    r.integer(cmd.last_key);
    r.integer(cmd.key_step);
    // ACL categories in Redis's bit order: keyspace, read, write, string,
    // admin, fast|slow, connection.
    std::string_view cats[6];
    size_t ncat = 0;
    if (cmd.group == "generic") cats[ncat++] = "@keyspace";
    if (cmd.flags & kReadOnly) cats[ncat++] = "@read";
    if (cmd.flags & kWrite) cats[ncat++] = "@write";
    if (cmd.group == "string") cats[ncat++] = "@string";
    if (cmd.flags & kAdmin) cats[ncat++] = "@admin";
    cats[ncat++] = (cmd.flags & kFast) ? "@fast" : "@slow";
    if (cmd.group == "connection") cats[ncat++] = "@connection";
    r.array(ncat);
    for (size_t i = 0; i < ncat; ++i) r.simple(cats[i]);
    r.array(0); // tips
    r.array(0); // key specifications (not described)
    r.array(cmd.subcommands.size());
    for (const Command& sub : cmd.subcommands) command_entry(r, sub);
}

void command_docs(Reply& r, const Command& cmd) {
    r.array(cmd.subcommands.empty() ? 6 : 8);
    r.bulk("summary");
    r.bulk(cmd.summary);
    r.bulk("since");
    r.bulk(cmd.since);
    r.bulk("group");
    r.bulk(cmd.group);
    if (!cmd.subcommands.empty()) {
        r.bulk("subcommands");
        r.array(cmd.subcommands.size() * 2);
        for (const Command& sub : cmd.subcommands) {
            r.bulk(sub.fullname);
            command_docs(r, sub);
        }
    }
}

void cmd_command(Ctx& c) {
    auto table = command_table();
    c.r.array(table.size());
    for (const Command& cmd : table) command_entry(c.r, cmd);
}

void cmd_command_count(Ctx& c) { c.r.integer((long long)command_table().size()); }

void cmd_command_info(Ctx& c) {
    if (c.req.argc() == 2) return cmd_command(c);
    c.r.array(c.req.argc() - 2);
    for (size_t j = 2; j < c.req.argc(); ++j) {
        const Command* cmd = find_command(c.arg(j));
        if (cmd) command_entry(c.r, *cmd);
        else c.r.null_array();
    }
}

void cmd_command_docs(Ctx& c) {
    std::vector<const Command*> list;
    if (c.req.argc() == 2) {
        for (const Command& cmd : command_table()) list.push_back(&cmd);
    } else {
        for (size_t j = 2; j < c.req.argc(); ++j)
            if (const Command* cmd = find_command(c.arg(j))) list.push_back(cmd);
    }
    c.r.array(list.size() * 2);
    for (const Command* cmd : list) {
        c.r.bulk(cmd->name);
        command_docs(c.r, *cmd);
    }
}

void cmd_command_list(Ctx& c) {
    if (c.req.argc() > 2) return c.r.error(kSyntaxErr); // FILTERBY is not supported
    auto table = command_table();
    size_t n = 0;
    for (const Command& cmd : table) n += 1 + cmd.subcommands.size();
    c.r.array(n);
    for (const Command& cmd : table) {
        c.r.bulk(cmd.fullname);
        for (const Command& sub : cmd.subcommands) c.r.bulk(sub.fullname);
    }
}

void cmd_command_help(Ctx& c) {
    static constexpr std::string_view lines[] = {
        "(no subcommand)", "    Return details about all Redis commands.",
        "COUNT", "    Return the total number of commands in this Redis server.",
        "LIST", "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]", "    Return details about multiple Redis commands.",
        "    If no command names are given, documentation details for all", "    commands are returned.",
        "DOCS [<command-name> ...]", "    Return documentation details about multiple Redis commands.",
        "    If no command names are given, documentation details for all", "    commands are returned.",
    };
    reply_help(c, lines);
}

// ---- the table -----------------------------------------------------------------------

constexpr uint32_t kConnFlags = kLoading | kStale | kFast;

const Command kClientSub[] = {
    {"getname", "client|getname", 2, kNoScript | kLoading | kStale, cmd_client_getname, 0, 0, 0, "connection", "2.6.9", "Get the current connection name", {}},
    {"help", "client|help", 2, kLoading | kStale, cmd_client_help, 0, 0, 0, "connection", "5.0.0", "Show helpful text about the different subcommands", {}},
    {"id", "client|id", 2, kNoScript | kLoading | kStale, cmd_client_id, 0, 0, 0, "connection", "5.0.0", "Returns the client ID for the current connection", {}},
    {"setinfo", "client|setinfo", 4, kNoScript | kLoading | kStale, cmd_client_setinfo, 0, 0, 0, "connection", "7.2.0", "Set client or connection specific info", {}},
    {"setname", "client|setname", 3, kNoScript | kLoading | kStale, cmd_client_setname, 0, 0, 0, "connection", "2.6.9", "Set the current connection name", {}},
};

const Command kConfigSub[] = {
    {"get", "config|get", -3, kAdmin | kNoScript | kLoading | kStale, cmd_config_get, 0, 0, 0, "server", "2.0.0", "Get the values of configuration parameters", {}},
    {"help", "config|help", 2, kLoading | kStale, cmd_config_help, 0, 0, 0, "server", "5.0.0", "Show helpful text about the different subcommands", {}},
    {"resetstat", "config|resetstat", 2, kAdmin | kNoScript | kLoading | kStale, cmd_config_resetstat, 0, 0, 0, "server", "2.0.0", "Reset the stats returned by INFO", {}},
};

const Command kCommandSub[] = {
    {"count", "command|count", 2, kLoading | kStale, cmd_command_count, 0, 0, 0, "server", "2.8.13", "Get total number of Redis commands", {}},
    {"docs", "command|docs", -2, kLoading | kStale, cmd_command_docs, 0, 0, 0, "server", "7.0.0", "Get array of specific Redis command documentation", {}},
    {"help", "command|help", 2, kLoading | kStale, cmd_command_help, 0, 0, 0, "server", "5.0.0", "Show helpful text about the different subcommands", {}},
    {"info", "command|info", -2, kLoading | kStale, cmd_command_info, 0, 0, 0, "server", "2.8.13", "Get array of specific Redis command details, or all when no argument is given.", {}},
    {"list", "command|list", -2, kLoading | kStale, cmd_command_list, 0, 0, 0, "server", "7.0.0", "Get an array of Redis command names", {}},
};

const Command kTable[] = {
    // connection
    {"auth", "auth", -2, kNoScript | kConnFlags | kNoAuth, cmd_auth, 0, 0, 0, "connection", "1.0.0", "Authenticate to the server", {}},
    {"client", "client", -2, kSentinel, nullptr, 0, 0, 0, "connection", "2.4.0", "A container for client connection commands", kClientSub},
    {"echo", "echo", 2, kConnFlags, cmd_echo, 0, 0, 0, "connection", "1.0.0", "Echo the given string", {}},
    {"hello", "hello", -1, kNoScript | kConnFlags | kNoAuth | kSentinel | kAllowBusy, cmd_hello, 0, 0, 0, "connection", "6.0.0", "Handshake with Redis", {}},
    {"ping", "ping", -1, kFast | kSentinel, cmd_ping, 0, 0, 0, "connection", "1.0.0", "Ping the server", {}},
    {"quit", "quit", -1, kAllowBusy | kNoScript | kConnFlags | kNoAuth, cmd_quit, 0, 0, 0, "connection", "1.0.0", "Close the connection", {}},
    {"select", "select", 2, kConnFlags, cmd_select, 0, 0, 0, "connection", "1.0.0", "Change the selected database for the current connection", {}},
    // strings
    {"append", "append", 3, kWrite | kDenyOom | kFast, cmd_append, 1, 1, 1, "string", "2.0.0", "Append a value to a key", {}},
    {"decr", "decr", 2, kWrite | kDenyOom | kFast, cmd_decr, 1, 1, 1, "string", "1.0.0", "Decrement the integer value of a key by one", {}},
    {"decrby", "decrby", 3, kWrite | kDenyOom | kFast, cmd_decrby, 1, 1, 1, "string", "1.0.0", "Decrement the integer value of a key by the given number", {}},
    {"get", "get", 2, kReadOnly | kFast, cmd_get, 1, 1, 1, "string", "1.0.0", "Get the value of a key", {}},
    {"getdel", "getdel", 2, kWrite | kFast, cmd_getdel, 1, 1, 1, "string", "6.2.0", "Get the value of a key and delete the key", {}},
    {"getset", "getset", 3, kWrite | kDenyOom | kFast, cmd_getset, 1, 1, 1, "string", "1.0.0", "Set the string value of a key and return its old value", {}},
    {"incr", "incr", 2, kWrite | kDenyOom | kFast, cmd_incr, 1, 1, 1, "string", "1.0.0", "Increment the integer value of a key by one", {}},
    {"incrby", "incrby", 3, kWrite | kDenyOom | kFast, cmd_incrby, 1, 1, 1, "string", "1.0.0", "Increment the integer value of a key by the given amount", {}},
    {"mget", "mget", -2, kReadOnly | kFast, cmd_mget, 1, -1, 1, "string", "1.0.0", "Get the values of all the given keys", {}},
    {"mset", "mset", -3, kWrite | kDenyOom, cmd_mset, 1, -1, 2, "string", "1.0.1", "Set multiple keys to multiple values", {}},
    {"psetex", "psetex", 4, kWrite | kDenyOom, cmd_psetex, 1, 1, 1, "string", "2.6.0", "Set the value and expiration in milliseconds of a key", {}},
    {"set", "set", -3, kWrite | kDenyOom, cmd_set, 1, 1, 1, "string", "1.0.0", "Set the string value of a key", {}},
    {"setex", "setex", 4, kWrite | kDenyOom, cmd_setex, 1, 1, 1, "string", "2.0.0", "Set the value and expiration of a key", {}},
    {"setnx", "setnx", 3, kWrite | kDenyOom | kFast, cmd_setnx, 1, 1, 1, "string", "1.0.0", "Set the value of a key, only if the key does not exist", {}},
    {"strlen", "strlen", 2, kReadOnly | kFast, cmd_strlen, 1, 1, 1, "string", "2.2.0", "Get the length of the value stored in a key", {}},
    // keyspace
    {"del", "del", -2, kWrite, cmd_del, 1, -1, 1, "generic", "1.0.0", "Delete a key", {}},
    {"exists", "exists", -2, kReadOnly | kFast, cmd_exists, 1, -1, 1, "generic", "1.0.0", "Determine if a key exists", {}},
    {"expire", "expire", -3, kWrite | kFast, cmd_expire, 1, 1, 1, "generic", "1.0.0", "Set a key's time to live in seconds", {}},
    {"expireat", "expireat", -3, kWrite | kFast, cmd_expireat, 1, 1, 1, "generic", "1.2.0", "Set the expiration for a key as a UNIX timestamp", {}},
    {"expiretime", "expiretime", 2, kReadOnly | kFast, cmd_expiretime, 1, 1, 1, "generic", "7.0.0", "Get the expiration Unix timestamp for a key", {}},
    {"persist", "persist", 2, kWrite | kFast, cmd_persist, 1, 1, 1, "generic", "2.2.0", "Remove the expiration from a key", {}},
    {"pexpire", "pexpire", -3, kWrite | kFast, cmd_pexpire, 1, 1, 1, "generic", "2.6.0", "Set a key's time to live in milliseconds", {}},
    {"pexpireat", "pexpireat", -3, kWrite | kFast, cmd_pexpireat, 1, 1, 1, "generic", "2.6.0", "Set the expiration for a key as a UNIX timestamp specified in milliseconds", {}},
    {"pexpiretime", "pexpiretime", 2, kReadOnly | kFast, cmd_pexpiretime, 1, 1, 1, "generic", "7.0.0", "Get the expiration Unix timestamp for a key in milliseconds", {}},
    {"pttl", "pttl", 2, kReadOnly | kFast, cmd_pttl, 1, 1, 1, "generic", "2.6.0", "Get the time to live for a key in milliseconds", {}},
    {"touch", "touch", -2, kReadOnly | kFast, cmd_touch, 1, -1, 1, "generic", "3.2.1", "Alters the last access time of a key(s). Returns the number of existing keys specified.", {}},
    {"ttl", "ttl", 2, kReadOnly | kFast, cmd_ttl, 1, 1, 1, "generic", "1.0.0", "Get the time to live for a key in seconds", {}},
    {"type", "type", 2, kReadOnly | kFast, cmd_type, 1, 1, 1, "generic", "1.0.0", "Determine the type stored at key", {}},
    {"unlink", "unlink", -2, kWrite | kFast, cmd_del, 1, -1, 1, "generic", "4.0.0", "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.", {}},
    // server
    {"command", "command", -1, kLoading | kStale | kSentinel, cmd_command, 0, 0, 0, "server", "2.8.13", "Get array of Redis command details", kCommandSub},
    {"config", "config", -2, 0, nullptr, 0, 0, 0, "server", "2.0.0", "A container for server configuration commands", kConfigSub},
    {"dbsize", "dbsize", 1, kReadOnly | kFast, cmd_dbsize, 0, 0, 0, "server", "1.0.0", "Return the number of keys in the selected database", {}},
    {"flushall", "flushall", -1, kWrite, cmd_flushall, 0, 0, 0, "server", "1.0.0", "Remove all keys from all databases", {}},
    {"flushdb", "flushdb", -1, kWrite, cmd_flushall, 0, 0, 0, "server", "1.0.0", "Remove all keys from the current database", {}},
    {"info", "info", -1, kLoading | kStale | kSentinel, cmd_info, 0, 0, 0, "server", "1.0.0", "Get information and statistics about the server", {}},
    {"time", "time", 1, kLoading | kStale | kFast, cmd_time, 0, 0, 0, "server", "2.6.0", "Return the current server time", {}},
};

} // namespace

// ---- Reply ---------------------------------------------------------------------------

void Reply::append(const char* p, size_t n) {
    if (failed_) return;
    while (n > 0) {
        size_t k = std::min(n, carver_->block_size());
        if (!carver_->ensure(k)) {
            failed_ = true;
            return;
        }
        std::byte* dst = carver_->cursor();
        std::memcpy(dst, p, k);
        // Bytes right after the previous piece of the same obj: grow that slice.
        if (!out_->empty()) {
            Slice& last = out_->back();
            if (last.buf().data() == carver_->block().data() && last.data() + last.size() == dst) {
                last.set_size(last.size() + k);
                carver_->advance(k);
                p += k;
                n -= k;
                continue;
            }
        }
        out_->emplace_back(carver_->block().share(), carver_->used(), k);
        carver_->advance(k);
        p += k;
        n -= k;
    }
}

void Reply::share(std::span<const Slice> v) {
    if (failed_) return;
    for (const Slice& s : v) out_->push_back(s.share());
}

void Reply::raw(std::string_view s) { append(s.data(), s.size()); }

void Reply::simple(std::string_view s) {
    char buf[64];
    if (s.size() + 3 <= sizeof buf) {
        buf[0] = '+';
        std::memcpy(buf + 1, s.data(), s.size());
        std::memcpy(buf + 1 + s.size(), "\r\n", 2);
        return append(buf, s.size() + 3);
    }
    append("+", 1);
    append(s.data(), s.size());
    append("\r\n", 2);
}

void Reply::error(std::string_view msg) {
    ++errors_;
    append("-", 1);
    // An error is one line: \r and \n from user input become spaces (sdsmapchars).
    size_t start = 0;
    for (size_t i = 0; i < msg.size(); ++i) {
        if (msg[i] != '\r' && msg[i] != '\n') continue;
        append(msg.data() + start, i - start);
        append(" ", 1);
        start = i + 1;
    }
    append(msg.data() + start, msg.size() - start);
    append("\r\n", 2);
}

void Reply::integer(long long v) {
    char buf[32];
    buf[0] = ':';
    auto [end, ec] = std::to_chars(buf + 1, buf + sizeof buf - 2, v);
    (void)ec;
    std::memcpy(end, "\r\n", 2);
    append(buf, size_t(end + 2 - buf));
}

namespace {
size_t len_header(char* buf, char type, size_t n) {
    buf[0] = type;
    auto [end, ec] = std::to_chars(buf + 1, buf + 30, n);
    (void)ec;
    std::memcpy(end, "\r\n", 2);
    return size_t(end + 2 - buf);
}
} // namespace

void Reply::bulk(std::string_view s) {
    char buf[32];
    append(buf, len_header(buf, '$', s.size()));
    append(s.data(), s.size());
    append("\r\n", 2);
}

void Reply::bulk(const Arg& a) {
    char buf[32];
    append(buf, len_header(buf, '$', a.len));
    share(a.slices);
    append("\r\n", 2);
}

void Reply::bulk(const Entry& e) {
    char buf[32];
    append(buf, len_header(buf, '$', e.len));
    share(e.value);
    append("\r\n", 2);
}

void Reply::null() { append("$-1\r\n", 5); }

void Reply::array(size_t n) {
    char buf[32];
    append(buf, len_header(buf, '*', n));
}

void Reply::null_array() { append("*-1\r\n", 5); }

// ---- lookup, execute -----------------------------------------------------------------

std::span<const Command> command_table() { return kTable; }

const Command* find_command(std::string_view name) {
    static const auto* index = [] {
        auto* m = new std::unordered_map<std::string_view, const Command*>();
        for (const Command& c : kTable) (*m)[c.name] = &c;
        return m;
    }();
    char buf[16];
    if (name.size() > sizeof buf) return nullptr;
    for (size_t i = 0; i < name.size(); ++i) buf[i] = lower(name[i]);
    auto it = index->find(std::string_view(buf, name.size()));
    return it == index->end() ? nullptr : it->second;
}

void Executor::execute(Request& req, Client& c, Reply& r, int64_t now_us) {
    ++stats_.commands;
    const uint64_t errors_before = r.errors();
    std::string_view name = req.view(0);

    // Cross-protocol scripting (an HTTP request sent to the port): close, no
    // reply (securityWarningCommand).
    if (iequals(name, "post") || iequals(name, "host:")) {
        c.close_now = true;
        return;
    }

    const Command* cmd = find_command(name);
    if (cmd && !cmd->subcommands.empty() && req.argc() > 1) {
        const Command* sub = nullptr;
        for (const Command& s : cmd->subcommands)
            if (req[1].is(s.name)) sub = &s;
        if (!sub) {
            std::string up;
            for (char ch : c_str_prefix(name, SIZE_MAX)) up += upper(ch);
            std::string err = fmt::format("ERR unknown subcommand '{}'. Try {} HELP.", c_str_prefix(req.view(1), 128), up);
            map_newlines(err);
            r.error(err);
            ++stats_.unknown_commands;
            stats_.error_replies += r.errors() - errors_before;
            return;
        }
        cmd = sub;
    }
    if (!cmd) {
        // "unknown command '%.128s', with args beginning with: " + "'%.*s' " per
        // argument while the list is shorter than 128, each cut to what is left.
        std::string args;
        for (size_t i = 1; i < req.argc() && args.size() < 128; ++i) {
            size_t room = 128 - args.size();
            args += '\'';
            args += c_str_prefix(req.view(i), room);
            args += "' ";
        }
        std::string err = fmt::format("ERR unknown command '{}', with args beginning with: {}",
                                      c_str_prefix(req.view(0), 128), args);
        map_newlines(err);
        r.error(err);
        ++stats_.unknown_commands;
        stats_.error_replies += r.errors() - errors_before;
        return;
    }
    const long long argc = (long long)req.argc();
    if ((cmd->arity > 0 && cmd->arity != argc) || argc < -cmd->arity || !cmd->fn) {
        r.error(fmt::format("ERR wrong number of arguments for '{}' command", cmd->fullname));
        ++stats_.arity_errors;
        stats_.error_replies += r.errors() - errors_before;
        return;
    }
    Ctx ctx{*this, req, c, r, now_us, now_us / 1000, *cmd};
    cmd->fn(ctx);
    stats_.error_replies += r.errors() - errors_before;
}

// ---- INFO ----------------------------------------------------------------------------

std::string bytes_to_human(uint64_t n) {
    const double d = double(n);
    if (n < 1024) return fmt::format("{}B", n);
    if (n < (1ull << 20)) return fmt::format("{:.2f}K", d / 1024);
    if (n < (1ull << 30)) return fmt::format("{:.2f}M", d / (1ull << 20));
    if (n < (1ull << 40)) return fmt::format("{:.2f}G", d / (1ull << 30));
    if (n < (1ull << 50)) return fmt::format("{:.2f}T", d / (1ull << 40));
    if (n < (1ull << 60)) return fmt::format("{:.2f}P", d / (1ull << 50));
    return fmt::format("{}B", n);
}

std::string Executor::info(std::span<const std::string_view> sections, int64_t now_us) const {
    static constexpr std::string_view kDefault[] = {"server", "clients", "memory", "stats", "keyspace"};
    bool want[std::size(kDefault)] = {};
    if (sections.empty()) {
        for (bool& w : want) w = true;
    }
    for (std::string_view s : sections) {
        if (iequals(s, "default") || iequals(s, "all") || iequals(s, "everything")) {
            for (bool& w : want) w = true;
            continue;
        }
        for (size_t i = 0; i < std::size(kDefault); ++i)
            if (iequals(s, kDefault[i])) want[i] = true;
    }
    std::string out;
    auto o = std::back_inserter(out);
    int n = 0;
    auto section = [&](size_t i, std::string_view title) {
        if (!want[i]) return false;
        if (n++) out += "\r\n";
        fmt::format_to(o, "# {}\r\n", title);
        return true;
    };
    auto extra = [&](std::string_view s) {
        if (info_.extra) info_.extra(s, out);
    };
    const int64_t now_ms = now_us / 1000;
    const int64_t uptime = info_.start_us ? (now_us - info_.start_us) / 1000000 : 0;

    if (section(0, "Server")) {
        static const std::string os = [] {
            struct utsname u;
            if (uname(&u) != 0) return std::string("Linux");
            return fmt::format("{} {} {}", u.sysname, u.release, u.machine);
        }();
        fmt::format_to(o,
                       "redis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\n"
                       "redis_mode:standalone\r\nos:{}\r\narch_bits:{}\r\nmonotonic_clock:crescent engine clock\r\n"
                       "multiplexing_api:crescent\r\natomicvar_api:c11-builtin\r\ngcc_version:{}.{}.{}\r\n"
                       "process_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\n"
                       "server_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:{}\r\n"
                       "configured_hz:{}\r\nlru_clock:0\r\nexecutable:{}\r\nconfig_file:\r\nio_threads_active:0\r\n"
                       "crescent_kv_version:{}\r\n",
                       kRedisVersion, os, sizeof(void*) * 8, __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__,
                       getpid(), info_.run_id, info_.tcp_port, now_us, uptime, uptime / 86400, info_.hz, info_.hz,
                       info_.executable, kKvVersion);
        extra("server");
    }
    if (section(1, "Clients")) {
        fmt::format_to(o,
                       "connected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\n"
                       "client_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\n"
                       "blocked_clients:0\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n",
                       stats_.connected_clients, info_.maxclients);
        extra("clients");
    }
    if (section(2, "Memory")) {
        // Keys and the value bytes referenced; the zbuf objs those bytes pin
        // (received buffers shared by several values) are in the program's
        // zbuf_* lines.
        const uint64_t used = store_.key_bytes() + store_.value_bytes() + store_.size() * 96;
        fmt::format_to(o,
                       "used_memory:{}\r\nused_memory_human:{}\r\nused_memory_dataset:{}\r\n"
                       "maxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\n"
                       "mem_allocator:crescent-zbuf\r\nkv_key_bytes:{}\r\nkv_value_bytes:{}\r\n"
                       "kv_values_zero_copy:{}\r\nkv_values_copied_small:{}\r\nkv_values_copied_rx:{}\r\n"
                       "kv_value_copy_failed:{}\r\nkv_rx_pinned_slices:{}\r\n",
                       used, bytes_to_human(used), store_.value_bytes(), store_.key_bytes(), store_.value_bytes(),
                       store_.stats().zero_copy, store_.stats().copied_small, store_.stats().copied_rx,
                       store_.stats().copy_failed, store_.rx_pinned());
        extra("memory");
    }
    if (section(3, "Stats")) {
        const StoreStats& ss = store_.stats();
        fmt::format_to(o,
                       "total_connections_received:{}\r\ntotal_commands_processed:{}\r\n"
                       "instantaneous_ops_per_sec:0\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\n"
                       "rejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:0\r\nkeyspace_hits:{}\r\n"
                       "keyspace_misses:{}\r\ntotal_error_replies:{}\r\ntotal_reads_processed:{}\r\n"
                       "total_writes_processed:{}\r\nunknown_commands:{}\r\nprotocol_errors:{}\r\n"
                       "reply_out_of_memory:{}\r\n",
                       stats_.connections_received, stats_.commands, stats_.net_input_bytes,
                       stats_.net_output_bytes, stats_.rejected_connections, ss.expired_keys(), stats_.keyspace_hits,
                       stats_.keyspace_misses, stats_.error_replies, stats_.reads, stats_.writes,
                       stats_.unknown_commands, stats_.protocol_errors, stats_.reply_oom);
        extra("stats");
    }
    if (section(4, "Keyspace")) {
        if (store_.size() > 0)
            fmt::format_to(o, "db0:keys={},expires={},avg_ttl={}\r\n", store_.size(), store_.expires(),
                           store_.avg_ttl(now_ms));
    }
    return out;
}

// ---- glob ----------------------------------------------------------------------------

bool glob_match(std::string_view p, std::string_view s, bool nocase) {
    auto eq = [nocase](char a, char b) { return nocase ? lower(a) == lower(b) : a == b; };
    size_t pi = 0, si = 0;
    size_t star_p = std::string_view::npos, star_s = 0;
    while (si < s.size()) {
        if (pi < p.size()) {
            char pc = p[pi];
            if (pc == '*') {
                star_p = pi++;
                star_s = si;
                continue;
            }
            if (pc == '?') {
                ++pi;
                ++si;
                continue;
            }
            if (pc == '[') {
                size_t q = pi + 1;
                bool neg = q < p.size() && p[q] == '^';
                if (neg) ++q;
                bool match = false;
                while (q < p.size() && p[q] != ']') {
                    if (p[q] == '\\' && q + 1 < p.size()) {
                        ++q;
                        match |= eq(p[q], s[si]);
                    } else if (q + 2 < p.size() && p[q + 1] == '-') {
                        char lo = p[q], hi = p[q + 2];
                        if (lo > hi) std::swap(lo, hi);
                        char ch = s[si];
                        if (nocase) {
                            lo = lower(lo);
                            hi = lower(hi);
                            ch = lower(ch);
                        }
                        match |= ch >= lo && ch <= hi;
                        q += 2;
                    } else {
                        match |= eq(p[q], s[si]);
                    }
                    ++q;
                }
                if (neg) match = !match;
                if (match) {
                    pi = q < p.size() ? q + 1 : q;
                    ++si;
                    continue;
                }
            } else {
                if (pc == '\\' && pi + 1 < p.size()) pc = p[++pi];
                if (eq(pc, s[si])) {
                    ++pi;
                    ++si;
                    continue;
                }
            }
        }
        if (star_p == std::string_view::npos) return false;
        pi = star_p + 1;
        si = ++star_s;
    }
    while (pi < p.size() && p[pi] == '*') ++pi;
    return pi == p.size();
}

} // namespace crescent::kv
