// crescent — RPC policies: prefixes, token buckets, the rate limiter and the
// allow-list ACL (include/crescent/rpc/policy.hpp; mRPC ch. 3 §3.4.2).
#include <crescent/rpc/policy.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace crescent::rpc {

namespace {

// A strict dotted quad: four decimal fields 0..255, no sign, no leading zero
// (so "010" is not silently octal or decimal), nothing else. Ipv4::parse lives
// in the DPDK part of libcrescent; the policies are pure code.
bool parse_quad(std::string_view s, uint32_t* out) {
    uint32_t v = 0;
    for (int field = 0; field < 4; ++field) {
        if (field > 0) {
            if (s.empty() || s[0] != '.') return false;
            s.remove_prefix(1);
        }
        size_t n = 0;
        uint32_t x = 0;
        while (n < s.size() && n < 4 && s[n] >= '0' && s[n] <= '9') x = x * 10 + uint32_t(s[n++] - '0');
        if (n == 0 || n > 3 || x > 255 || (n > 1 && s[0] == '0')) return false;
        s.remove_prefix(n);
        v = v << 8 | x;
    }
    if (!s.empty()) return false;
    *out = v;
    return true;
}

std::string quad(uint32_t v) {
    return fmt::format("{}.{}.{}.{}", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff);
}

bool fail(std::string* err, std::string msg) {
    if (err) *err = std::move(msg);
    return false;
}

} // namespace

// --- Prefix ------------------------------------------------------------------

bool Prefix::parse(std::string_view s, Prefix* out, std::string* err) {
    if (s.empty()) return fail(err, "empty prefix (want a.b.c.d or a.b.c.d/len)");
    const size_t slash = s.find('/');
    const std::string_view a = s.substr(0, slash);
    uint32_t addr = 0;
    if (!parse_quad(a, &addr))
        return fail(err, fmt::format("prefix '{}': bad IPv4 address '{}'", s, a));
    unsigned len = 32;
    if (slash != std::string_view::npos) {
        const std::string_view l = s.substr(slash + 1);
        len = 0;
        bool ok = !l.empty() && l.size() <= 2;
        for (char c : l) {
            if (c < '0' || c > '9') ok = false;
            else len = len * 10 + unsigned(c - '0');
        }
        if (!ok || len > 32 || (l.size() > 1 && l[0] == '0'))
            return fail(err, fmt::format("prefix '{}': bad length '{}' (want 0..32)", s, l));
    }
    Prefix p;
    p.len = uint8_t(len);
    p.addr.v = addr & p.mask();
    if (p.addr.v != addr)
        return fail(err, fmt::format("prefix '{}' has host bits set (did you mean {}?)", s, p.to_string()));
    *out = p;
    return true;
}

std::string Prefix::to_string() const {
    return fmt::format("{}/{}", quad(addr.v), len);
}

// --- TokenBucket ---------------------------------------------------------------

namespace {
constexpr double kMaxRate = 1e10;    // tokens/s: rate_ = 1e19 nano-tokens/s < 2^64
constexpr double kMaxBurst = 9e9;    // tokens: burst_ = 9e18 nano-tokens < 2^63
} // namespace

int64_t TokenBucket::units(double tokens, double max_tokens) {
    if (!(tokens > 0)) return 0;   // also NaN
    if (tokens >= max_tokens) tokens = max_tokens;
    return int64_t(tokens * double(kScale) + 0.5);
}

TokenBucket::TokenBucket(double rate_per_sec, double burst) {
    configure(rate_per_sec, burst);
    level_ = burst_;
}

void TokenBucket::configure(double rate_per_sec, double burst) {
    // rate_ may exceed INT64_MAX (up to 1e19), so it is converted here, not by units().
    const double r = !(rate_per_sec > 0) ? 0 : rate_per_sec >= kMaxRate ? kMaxRate : rate_per_sec;
    rate_ = uint64_t(r * double(kScale) + 0.5);
    burst_ = units(burst, kMaxBurst);
    // dt * rate_ + rem_ (< kScale) stays below 2^64 for dt < fast_dt_.
    fast_dt_ = rate_ == 0 ? UINT64_MAX : (UINT64_MAX - uint64_t(kScale)) / rate_;
    if (last_ == INT64_MIN) {
        level_ = burst_;   // never used: still "starts full"
        rem_ = 0;
    } else if (level_ >= burst_) {
        level_ = burst_;
        rem_ = 0;
    }
}

int64_t TokenBucket::level_at(int64_t now, uint64_t* rem) const {
    uint64_t r = rem_;
    int64_t level = level_;
    if (last_ != INT64_MIN && now > last_ && level < burst_ && rate_ != 0) {
        const uint64_t dt = uint64_t(now) - uint64_t(last_);   // exact: now > last_
        const uint64_t room = uint64_t(burst_ - level);
        if (dt < fast_dt_) {
            const uint64_t p = dt * rate_ + r;
            const uint64_t add = p / uint64_t(kScale);
            if (add >= room) {
                level = burst_;
                r = 0;
            } else {
                level += int64_t(add);
                r = p % uint64_t(kScale);
            }
        } else {
            // A long idle gap: the product needs 128 bits (dt < 2^64, rate_ < 2^64).
            __extension__ using u128 = unsigned __int128;
            const u128 p = u128(dt) * rate_ + r;
            const u128 add = p / uint64_t(kScale);
            if (add >= room) {
                level = burst_;
                r = 0;
            } else {
                level += int64_t(add);
                r = uint64_t(p % uint64_t(kScale));
            }
        }
    }
    if (rem) *rem = r;
    return level;
}

void TokenBucket::refill(int64_t now) {
    if (now <= last_) return;   // same instant, or the clock went backwards
    level_ = level_at(now, &rem_);
    if (level_ == burst_) rem_ = 0;
    last_ = now;
}

bool TokenBucket::available(Instant now, double n) {
    refill(now.nanos());
    return units(n, kMaxBurst) <= level_;
}

bool TokenBucket::take(Instant now, double n) {
    refill(now.nanos());
    const int64_t need = units(n, kMaxBurst);
    if (need > level_) return false;
    level_ -= need;
    return true;
}

double TokenBucket::tokens(Instant now) const {
    return double(level_at(now.nanos())) / double(kScale);
}

// --- RateLimiter ----------------------------------------------------------------

RateLimiter::RateLimiter(size_t max_clients) : max_clients_(max_clients == 0 ? 1 : max_clients) {}

const RateLimiter::Limit* RateLimiter::limit_for(Ipv4 client) const {
    for (const Override& o : overrides_)
        if (o.prefix.contains(client)) return &o.limit;
    return has_default_ ? &default_ : nullptr;
}

void RateLimiter::erase_slot(size_t i) {
    index_.erase(slots_[i].addr);
    if (i + 1 != slots_.size()) {
        slots_[i] = slots_.back();
        index_[slots_[i].addr] = uint32_t(i);
    }
    slots_.pop_back();
    stats_.clients = slots_.size();
}

TokenBucket* RateLimiter::insert_client(Ipv4 client, const Limit& l, Instant now) {
    if (slots_.size() >= max_clients_) {
        // Full: forget one idle client whose bucket is full (a new bucket for
        // it later is identical), looking at no more than kEvictScan slots.
        bool made_room = false;
        for (size_t k = 0; k < kEvictScan && k < slots_.size(); ++k) {
            if (hand_ >= slots_.size()) hand_ = 0;
            if (slots_[hand_].bucket.full(now)) {
                erase_slot(hand_);
                ++stats_.evicted;
                made_room = true;
                break;
            }
            ++hand_;
        }
        if (!made_room) {
            ++stats_.refused_table_full;
            return nullptr;
        }
    }
    slots_.push_back(ClientSlot{client.v, TokenBucket(l.rate, l.burst)});
    index_[client.v] = uint32_t(slots_.size() - 1);
    stats_.clients = slots_.size();
    return &slots_.back().bucket;
}

RateLimiter::Verdict RateLimiter::check(Ipv4 client, uint32_t method, Instant now) {
    TokenBucket* cb = nullptr;
    if (has_client_rules()) {
        auto it = index_.find(client.v);
        if (it != index_.end()) {
            cb = &slots_[it->second].bucket;
        } else if (const Limit* l = limit_for(client)) {
            cb = insert_client(client, *l, now);
            if (cb == nullptr) {   // table full
                ++stats_.refused_client;
                return Verdict::ClientLimited;
            }
        }
    }
    TokenBucket* mb = nullptr;
    if (!methods_.empty()) {
        auto it = std::lower_bound(methods_.begin(), methods_.end(), method,
                                   [](const MethodSlot& m, uint32_t id) { return m.method < id; });
        if (it != methods_.end() && it->method == method) mb = &it->bucket;
    }
    if (cb && !cb->available(now)) {
        ++stats_.refused_client;
        return Verdict::ClientLimited;
    }
    if (mb && !mb->available(now)) {
        ++stats_.refused_method;
        return Verdict::MethodLimited;
    }
    if (cb) cb->take(now);
    if (mb) mb->take(now);
    return Verdict::Allow;
}

void RateLimiter::reapply_client_rules() {
    for (size_t i = slots_.size(); i-- > 0;) {
        if (const Limit* l = limit_for(Ipv4{slots_[i].addr}))
            slots_[i].bucket.configure(l->rate, l->burst);
        else
            erase_slot(i);   // moves a slot already visited into i
    }
    if (slots_.empty()) index_ = {};
    hand_ = 0;
}

void RateLimiter::set_client_default(double rate_per_sec, double burst) {
    has_default_ = true;
    default_ = Limit{rate_per_sec, burst};
    reapply_client_rules();
}

void RateLimiter::clear_client_default() {
    has_default_ = false;
    reapply_client_rules();
}

void RateLimiter::set_client(Prefix p, double rate_per_sec, double burst) {
    auto same = std::find_if(overrides_.begin(), overrides_.end(), [&](const Override& o) { return o.prefix == p; });
    if (same != overrides_.end()) {
        same->limit = Limit{rate_per_sec, burst};
    } else {
        // Longest prefix first: the first containing override is the most specific.
        auto pos = std::find_if(overrides_.begin(), overrides_.end(),
                                [&](const Override& o) { return o.prefix.len < p.len; });
        overrides_.insert(pos, Override{p, Limit{rate_per_sec, burst}});
    }
    reapply_client_rules();
}

bool RateLimiter::remove_client(Prefix p) {
    auto it = std::find_if(overrides_.begin(), overrides_.end(), [&](const Override& o) { return o.prefix == p; });
    if (it == overrides_.end()) return false;
    overrides_.erase(it);
    reapply_client_rules();
    return true;
}

void RateLimiter::set_method(uint32_t method, double rate_per_sec, double burst) {
    auto it = std::lower_bound(methods_.begin(), methods_.end(), method,
                               [](const MethodSlot& m, uint32_t id) { return m.method < id; });
    if (it != methods_.end() && it->method == method)
        it->bucket.configure(rate_per_sec, burst);
    else
        methods_.insert(it, MethodSlot{method, TokenBucket(rate_per_sec, burst)});
}

bool RateLimiter::remove_method(uint32_t method) {
    auto it = std::lower_bound(methods_.begin(), methods_.end(), method,
                               [](const MethodSlot& m, uint32_t id) { return m.method < id; });
    if (it == methods_.end() || it->method != method) return false;
    methods_.erase(it);
    return true;
}

// --- Acl ------------------------------------------------------------------------

void Acl::allow(Prefix p, std::vector<uint32_t> methods) {
    std::sort(methods.begin(), methods.end());
    methods.erase(std::unique(methods.begin(), methods.end()), methods.end());
    for (Rule& r : rules_) {
        if (r.prefix == p) {
            r.methods = std::move(methods);
            return;
        }
    }
    rules_.push_back(Rule{p, std::move(methods)});
}

bool Acl::remove(Prefix p) {
    auto it = std::find_if(rules_.begin(), rules_.end(), [&](const Rule& r) { return r.prefix == p; });
    if (it == rules_.end()) return false;
    rules_.erase(it);
    return true;
}

bool Acl::client_known(Ipv4 client) const {
    for (const Rule& r : rules_)
        if (r.prefix.contains(client)) return true;
    return false;
}

bool Acl::call_allowed(Ipv4 client, uint32_t method) const {
    for (const Rule& r : rules_) {
        if (!r.prefix.contains(client)) continue;
        if (r.methods.empty() || std::binary_search(r.methods.begin(), r.methods.end(), method)) return true;
    }
    return false;
}

} // namespace crescent::rpc
