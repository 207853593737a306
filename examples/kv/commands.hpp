// crescent-kv — the command table, the reply builder and the executor: Redis
// 7.0's string and keyspace commands as unmodified clients use them
// (redis-cli, redis-benchmark, redis-py), with Redis's exact reply bytes and
// error texts (server.c processCommand, t_string.c, expire.c, db.c,
// networking.c; RESP2 only).
//
// Replies are built into a std::vector<Slice> that the server hands to one
// send per batch of requests: small replies are copied into reply blocks
// carved from arena objs like a bump allocator (consecutive pieces of the same
// block merge into one slice, so 16 pipelined "+OK\r\n" are one 80-byte
// slice); GET/MGET values go out as new references to the stored slices
// between a carved "$len\r\n" and "\r\n" — a value's bytes are never copied.
//
// Commands (arity as Redis: negative = at least -arity arguments):
//   connection  PING ECHO QUIT SELECT HELLO AUTH CLIENT ID|GETNAME|SETNAME|SETINFO|HELP
//   strings     GET SET(EX PX EXAT PXAT NX XX GET KEEPTTL) SETNX SETEX PSETEX GETSET
//               GETDEL MGET MSET APPEND STRLEN INCR DECR INCRBY DECRBY
//   keyspace    DEL UNLINK EXISTS TOUCH TYPE EXPIRE PEXPIRE EXPIREAT PEXPIREAT (NX XX GT LT)
//               TTL PTTL EXPIRETIME PEXPIRETIME PERSIST DBSIZE FLUSHALL FLUSHDB
//   server      INFO TIME COMMAND [COUNT|INFO|DOCS|LIST|HELP] CONFIG GET|RESETSTAT|HELP
// Only strings exist, so "-WRONGTYPE Operation against a key holding the
// wrong kind of value" is never sent: it is where Redis's checkType() would
// reply it (GET, INCR, APPEND, ... on a list, hash, set) — see kWrongType.
// HELLO answers for protocol 2 only; HELLO 3 gets -NOPROTO (RESP2-only, as a
// client falling back to RESP2 expects).
//
// Threads: an Executor, its Store and Carvers belong to one engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <crescent/zbuf.hpp>

#include "examples/kv/resp.hpp"
#include "examples/kv/store.hpp"

namespace crescent::kv {

inline constexpr std::string_view kRedisVersion = "7.0.15"; // the behaviour emulated (INFO, HELLO)
inline constexpr std::string_view kKvVersion = "0.1.0";
inline constexpr std::string_view kWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value";

// Appends RESP2 replies to `out`.
class Reply {
public:
    Reply(std::vector<Slice>& out, Carver& carver) : out_(&out), carver_(&carver) {}

    void raw(std::string_view s);        // bytes as they are
    void simple(std::string_view s);     // +s\r\n
    void error(std::string_view msg);    // -msg\r\n; msg starts with its code ("ERR ...")
    void integer(long long v);           // :v\r\n
    void bulk(std::string_view s);       // $len\r\n s \r\n (copied)
    void bulk(const Arg& a);             // same, sharing the argument's slices
    void bulk(const Entry& e);           // same, sharing the stored slices
    void null();                         // $-1\r\n
    void array(size_t n);                // *n\r\n
    void null_array();                   // *-1\r\n

    // A reply block could not be allocated: the reply is incomplete and the
    // connection must be closed.
    bool failed() const { return failed_; }
    uint64_t errors() const { return errors_; }
    std::vector<Slice>& out() { return *out_; }

private:
    void append(const char* p, size_t n);
    void share(std::span<const Slice> v);
    std::vector<Slice>* out_;
    Carver* carver_;
    bool failed_ = false;
    uint64_t errors_ = 0;
};

// Per connection.
struct Client {
    uint64_t id = 0;
    std::string name, lib_name, lib_ver;
    bool close_after_reply = false; // QUIT: send what is queued, then close
    bool close_now = false;         // "POST"/"Host:" (cross-protocol scripting): close, no reply
};

// What INFO server reports; the program fills it once.
struct ServerInfo {
    uint16_t tcp_port = 6379;
    int64_t start_us = 0;            // Unix time of the start
    std::string executable;
    std::string run_id;              // 40 hex characters
    unsigned hz = 10;                // active-expiry steps per second
    unsigned maxclients = 10000;
    // Extra "name:value\r\n" lines the program appends to a section
    // ("server", "clients", "memory", "stats"); may be empty.
    std::function<void(std::string_view section, std::string& out)> extra;
};

// Counters of one engine's keyspace (INFO stats / clients).
struct ServerStats {
    uint64_t connections_received = 0;
    uint64_t connected_clients = 0;
    uint64_t rejected_connections = 0;
    uint64_t commands = 0;          // requests executed (errors included)
    uint64_t error_replies = 0;     // replies starting with '-'
    uint64_t unknown_commands = 0;
    uint64_t arity_errors = 0;
    uint64_t protocol_errors = 0;   // connections closed for a protocol error
    uint64_t reply_oom = 0;         // replies cut short: no arena obj for the reply text
    uint64_t keyspace_hits = 0, keyspace_misses = 0;
    uint64_t net_input_bytes = 0, net_output_bytes = 0;
    uint64_t reads = 0, writes = 0;
};

struct Ctx;
using HandlerFn = void (*)(Ctx&);

enum CommandFlag : uint32_t {
    kWrite = 1u << 0, kReadOnly = 1u << 1, kDenyOom = 1u << 2, kAdmin = 1u << 3, kNoScript = 1u << 4,
    kLoading = 1u << 5, kStale = 1u << 6, kFast = 1u << 7, kNoAuth = 1u << 8, kSentinel = 1u << 9,
    kAllowBusy = 1u << 10,
};

struct Command {
    std::string_view name;      // lower case ("get"; "get" of "config|get" for a subcommand)
    std::string_view fullname;  // "get", "config|get"
    int arity;                  // as Redis: -N = at least N arguments, the name included
    uint32_t flags;             // CommandFlag bits
    HandlerFn fn;               // nullptr for a container without its own handler (CONFIG, CLIENT)
    int first_key, last_key, key_step;
    std::string_view group;     // "string", "generic", "connection", "server"
    std::string_view since;
    std::string_view summary;
    std::span<const Command> subcommands;
};

std::span<const Command> command_table();
// Case-insensitive lookup of a top-level command; nullptr when unknown.
const Command* find_command(std::string_view name);

class Executor {
public:
    Executor(Store& store, Carver& values, const ServerInfo& info, ServerStats& stats)
        : store_(store), values_(values), info_(info), stats_(stats) {}

    // Run one request and append its reply. `now_us`: Unix time in µs (the
    // server's clock; expiry uses now_us / 1000 as Redis's mstime()).
    void execute(Request& req, Client& c, Reply& r, int64_t now_us);

    // The INFO text for `sections` (empty = default), as Redis formats it.
    std::string info(std::span<const std::string_view> sections, int64_t now_us) const;

    Store& store() { return store_; }
    Carver& values() { return values_; }
    const ServerInfo& server_info() const { return info_; }
    ServerStats& stats() { return stats_; }

private:
    Store& store_;
    Carver& values_;
    const ServerInfo& info_;
    ServerStats& stats_;
};

// The context a handler gets.
struct Ctx {
    Executor& x;
    Request& req;
    Client& client;
    Reply& r;
    int64_t now_us;
    int64_t now_ms;
    const Command& cmd;
    Store& store() { return x.store(); }
    std::string_view arg(size_t i) { return req[i].view(); }
};

// Redis's stringmatchlen() subset used by CONFIG GET: '*', '?', '[...]' (with
// '^' and ranges) and '\' escapes; `nocase` folds ASCII case.
bool glob_match(std::string_view pattern, std::string_view s, bool nocase);

// Redis's bytesToHuman(): "123B", "1.21K", "3.00M", ...
std::string bytes_to_human(uint64_t n);

} // namespace crescent::kv
