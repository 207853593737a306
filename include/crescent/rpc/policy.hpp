// crescent — RPC policies in the server's loop: an allow-list ACL and token-
// bucket rate limits (the mRPC idea, "RPC as a managed service" ch. 3 §3.4.2:
// policies as small engines over RPCs that are added, changed and removed at
// run time; a NullPolicy costs nothing measurable, and a removed policy costs
// nothing at all).
//
//   * Acl: (client address prefix x method set) allow rules. A client no rule
//     covers is refused at connection set-up (as vSocket refuses at its
//     handshake); a call is admitted when some rule covering the client allows
//     its method.
//   * RateLimiter: a token bucket per client address (a default for every
//     client, overridden per prefix, most specific prefix wins) and one per
//     method (shared by all clients). A call takes a token from both or from
//     neither.
//   * Policies: the two, each absent (nullptr) unless configured, so the
//     server's per-call cost without policies is one predictable branch each.
//
// Everything here is per engine and single-threaded: rules are changed from
// the engine's own thread (between calls). Set-up calls may allocate; check()
// allocates only when it sees a client address for the first time (its
// bucket). Time is passed in (Instant); nothing reads a clock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/time.hpp>

namespace crescent::rpc {

// An IPv4 prefix, host byte order; host bits are always zero.
struct Prefix {
    Ipv4 addr;          // the network address (host bits zero)
    uint8_t len = 32;   // 0..32

    // "10.0.0.0/24" or "10.0.0.7" (= /32). On failure returns false and sets
    // *err (when non-null) to a one-line reason naming the input, e.g.
    // "prefix '10.0.0.1/24' has host bits set (did you mean 10.0.0.0/24?)".
    static bool parse(std::string_view s, Prefix* out, std::string* err);

    // The netmask of len bits, host byte order (0 for /0).
    uint32_t mask() const { return len == 0 ? 0 : ~uint32_t(0) << (32 - len); }
    // `a` is inside the prefix (every address is inside /0).
    bool contains(Ipv4 a) const { return ((a.v ^ addr.v) & mask()) == 0; }
    std::string to_string() const;   // always "a.b.c.d/len"
    bool operator==(const Prefix&) const = default;  // same address and length
};

// A token bucket in integer arithmetic: the level is kept in nano-tokens
// (int64, so burst <= ~9.2e9 tokens) and the rate in nano-tokens per second
// (rate <= 1e10 tokens/s, resolution 1e-9 tokens/s); refill = elapsed_ns *
// rate / 1e9 with the remainder carried, so no fraction of a token is ever
// lost (no drift, however the refills are spaced). Starts full; never holds
// more than burst; an idle gap of any length (up to 2^64 ns) simply fills it.
// A clock that goes backwards refills nothing.
class TokenBucket {
public:
    static constexpr int64_t kScale = 1'000'000'000;  // units per token

    // rate_per_sec >= 0 (0: never refills), burst >= 0; out-of-range, NaN and
    // negative values are clamped into range.
    TokenBucket(double rate_per_sec, double burst);

    // Refill to now, then take n tokens if that many are there (else take
    // nothing and return false).
    bool take(Instant now, double n = 1);
    // Refill to now and say whether n tokens are there (takes nothing).
    bool available(Instant now, double n = 1);
    // Tokens held at now (after refilling), without changing the bucket.
    double tokens(Instant now) const;

    // New rate and burst; the current level is kept (capped at the new burst).
    void configure(double rate_per_sec, double burst);
    // Refill rate in tokens per second (after clamping).
    double rate() const { return double(rate_) / double(kScale); }
    // Capacity in tokens (after clamping).
    double burst() const { return double(burst_) / double(kScale); }
    // Full at now (an idle bucket that may be forgotten: a new one is equal).
    bool full(Instant now) const { return level_at(now.nanos()) == burst_; }

private:
    static int64_t units(double tokens, double max_tokens);
    // The level after refilling up to now (rem is the carried remainder).
    int64_t level_at(int64_t now, uint64_t* rem = nullptr) const;
    void refill(int64_t now);

    uint64_t rate_ = 0;        // nano-tokens per second
    int64_t burst_ = 0;        // nano-tokens
    int64_t level_ = 0;        // 0 <= level_ <= burst_
    uint64_t rem_ = 0;         // refill remainder, < kScale (nano-token * ns / s)
    int64_t last_ = INT64_MIN; // time of the last refill (INT64_MIN: never)
    uint64_t fast_dt_ = 0;     // elapsed times below this refill in 64-bit arithmetic
};

// A RateLimiter's counters (RateLimiter::stats()).
struct RateLimiterStats {
    uint64_t refused_client = 0;      // calls refused by the client's bucket
    uint64_t refused_method = 0;      // calls refused by the method's bucket
    uint64_t refused_table_full = 0;  // new clients refused: table full, nothing evictable (also in refused_client)
    uint64_t evicted = 0;             // idle, full client buckets forgotten to make room
    uint64_t clients = 0;             // client buckets held now
};

// Per-client and per-method token buckets for a Server (Policies::rate):
// clients get a default rule and/or per-prefix overrides, one bucket per client
// address, at most max_clients of them (idle full ones are evicted to make
// room). Single-threaded: the server's engine thread only.
class RateLimiter {
public:
    // check()'s answer: admitted, or which bucket refused.
    enum class Verdict : uint8_t { Allow, ClientLimited, MethodLimited };

    static constexpr size_t kDefaultMaxClients = 65536;  // client buckets held at most, by default
    // How many buckets one new client may inspect to find an evictable one.
    static constexpr size_t kEvictScan = 64;

    // No rules (every call allowed); at most `max_clients` client buckets.
    explicit RateLimiter(size_t max_clients = kDefaultMaxClients);

    // Client rules. Changing them re-applies the rules to every client bucket
    // held (levels kept, capped at the new bursts; clients no rule covers any
    // more are dropped).
    void set_client_default(double rate_per_sec, double burst);
    void clear_client_default();  // no default: only clients an override covers are limited
    // Override for a prefix (replaces an override for the same prefix).
    void set_client(Prefix p, double rate_per_sec, double burst);
    bool remove_client(Prefix p);   // false if there was no such override

    // Method rules: one bucket per method, shared by all clients.
    void set_method(uint32_t method, double rate_per_sec, double burst);
    bool remove_method(uint32_t method);  // false if the method had no rule

    // Admit one call: takes a token from the client's bucket and the method's
    // bucket only when both have one (a missing rule counts as "has one").
    // The client is checked first: ClientLimited leaves the method bucket
    // untouched and vice versa. Refusals are counted in stats().
    Verdict check(Ipv4 client, uint32_t method, Instant now);

    // No rule at all (check() always allows).
    bool empty() const { return !has_default_ && overrides_.empty() && methods_.empty(); }
    // Counters, live.
    const RateLimiterStats& stats() const { return stats_; }
    // The constructor's bound.
    size_t max_clients() const { return max_clients_; }

private:
    struct Limit {
        double rate = 0, burst = 0;
    };
    struct Override {
        Prefix prefix;
        Limit limit;
    };
    struct ClientSlot {
        uint32_t addr;
        TokenBucket bucket;
    };
    struct MethodSlot {
        uint32_t method;
        TokenBucket bucket;
    };
    bool has_client_rules() const { return has_default_ || !overrides_.empty(); }
    const Limit* limit_for(Ipv4 client) const;
    TokenBucket* insert_client(Ipv4 client, const Limit& l, Instant now);   // nullptr: table full
    void erase_slot(size_t i);
    void reapply_client_rules();

    size_t max_clients_;
    bool has_default_ = false;
    Limit default_;
    std::vector<Override> overrides_;   // longest prefix first (first match wins)
    std::vector<ClientSlot> slots_;     // dense; index_ maps address -> position
    std::unordered_map<uint32_t, uint32_t> index_;
    size_t hand_ = 0;                   // eviction cursor into slots_
    std::vector<MethodSlot> methods_;   // sorted by method id
    RateLimiterStats stats_;
};

// Allow-list of (client prefix, method set) rules. Lookups scan a flat vector
// of rules: the intended rule sets are small (tens of rules), where a scan of
// contiguous (addr, mask) pairs beats any tree; method sets are sorted vectors
// searched by bisection.
class Acl {
public:
    // Allow `methods` (empty: every method) to clients in p. Replaces the
    // rule for the same prefix, if any.
    void allow(Prefix p, std::vector<uint32_t> methods);
    bool remove(Prefix p);   // false if no rule had that prefix
    // Drops every rule: the ACL then refuses every client.
    void clear() { rules_.clear(); }
    // Rules held.
    size_t size() const { return rules_.size(); }

    // Some rule's prefix contains the client (checked at connection set-up).
    bool client_known(Ipv4 client) const;
    // Some rule containing the client allows the method.
    bool call_allowed(Ipv4 client, uint32_t method) const;

private:
    struct Rule {
        Prefix prefix;
        std::vector<uint32_t> methods;   // sorted, unique; empty = all
    };
    std::vector<Rule> rules_;
};

// The server's policies: each absent unless configured, so the per-call cost
// of an absent one is a single well-predicted branch on a null pointer.
// Installed, replaced and removed (reset()) from the engine's thread.
struct Policies {
    std::unique_ptr<Acl> acl;            // null: every client and method allowed
    std::unique_ptr<RateLimiter> rate;   // null: no rate limits

    // admit_call()'s answer (the Status sent for a refusal: PermissionDenied,
    // RateLimited).
    enum class Decision : uint8_t { Allow, Denied, RateLimited };

    // At connection set-up: false = refuse the client (the ACL does not know it).
    bool admit_client(Ipv4 client) const { return !acl || acl->client_known(client); }
    // Per call: the ACL first (a denied call takes no token), then the rates.
    Decision admit_call(Ipv4 client, uint32_t method, Instant now) {
        if (acl && !acl->call_allowed(client, method)) return Decision::Denied;
        if (rate && rate->check(client, method, now) != RateLimiter::Verdict::Allow)
            return Decision::RateLimited;
        return Decision::Allow;
    }
};

} // namespace crescent::rpc
