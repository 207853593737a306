// crescent sim — the deterministic link model (see link.hpp).
#include "tests/sim/link.hpp"

#include <algorithm>

namespace crescent::sim {

// ---- Rng -------------------------------------------------------------------------

namespace {
uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
} // namespace

Rng::Rng(uint64_t seed) {
    for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
    uint64_t result = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

uint64_t Rng::below(uint64_t n) { return uint64_t((unsigned __int128)next() * n >> 64); }

// ---- frame surgery -----------------------------------------------------------------

namespace {

// Offset of the IPv4 header in an Ethernet frame (802.1Q tolerated), or 0.
size_t ipv4_offset(const Bytes& f) {
    if (f.size() < 14 + 20) return 0;
    size_t off = 12;
    uint16_t type = uint16_t(uint16_t(f[off]) << 8 | uint16_t(f[off + 1]));
    if (type == 0x8100) {
        off += 4;
        if (f.size() < off + 2 + 20) return 0;
        type = uint16_t(uint16_t(f[off]) << 8 | uint16_t(f[off + 1]));
    }
    if (type != 0x0800) return 0;
    off += 2;
    if ((uint8_t(f[off]) >> 4) != 4) return 0;
    return off;
}

size_t ihl_bytes(const Bytes& f, size_t ip) { return size_t(uint8_t(f[ip]) & 0x0f) * 4; }

// RFC 1071 checksum of the IPv4 header, written in place.
void fix_ip_checksum(Bytes& f, size_t ip) {
    size_t n = ihl_bytes(f, ip);
    f[ip + 10] = f[ip + 11] = std::byte(0);
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < n; i += 2) sum += uint32_t(uint8_t(f[ip + i])) << 8 | uint8_t(f[ip + i + 1]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    uint16_t c = uint16_t(~sum);
    f[ip + 10] = std::byte(c >> 8);
    f[ip + 11] = std::byte(c & 0xff);
}

} // namespace

bool mark_ce(Bytes& f) {
    size_t ip = ipv4_offset(f);
    if (ip == 0) return false;
    uint8_t tos = uint8_t(f[ip + 1]);
    if ((tos & 3) == 0 || (tos & 3) == 3) return false; // Not-ECT, or already CE
    f[ip + 1] = std::byte(tos | 3);
    fix_ip_checksum(f, ip);
    return true;
}

uint8_t ecn_of(const Bytes& f) {
    size_t ip = ipv4_offset(f);
    return ip == 0 ? 0 : uint8_t(uint8_t(f[ip + 1]) & 3);
}

bool flip_l4_bit(Bytes& f, uint64_t bit) {
    size_t ip = ipv4_offset(f);
    if (ip == 0) return false;
    size_t total = size_t(uint8_t(f[ip + 2])) << 8 | uint8_t(f[ip + 3]);
    size_t ihl = ihl_bytes(f, ip);
    if (total <= ihl || ip + total > f.size()) return false;
    size_t l4 = total - ihl;
    uint64_t b = bit % (uint64_t(l4) * 8);
    f[ip + ihl + b / 8] ^= std::byte(uint8_t(1u << (b % 8)));
    return true;
}

// ---- Link ------------------------------------------------------------------------------

Link::Link(const LinkConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {}

Duration Link::serialisation(size_t bytes) const {
    if (cfg_.bits_per_sec == 0) return Duration(0);
    // + 20 bytes of preamble, SFD and inter-frame gap per Ethernet frame.
    return Duration(int64_t((bytes + 20) * 8 * 1'000'000'000ull / cfg_.bits_per_sec));
}

size_t Link::backlog(Instant now) const {
    if (tx_free_ <= now || cfg_.bits_per_sec == 0) return 0;
    return size_t(uint64_t((tx_free_ - now).count()) * cfg_.bits_per_sec / 8 / 1'000'000'000ull);
}

void Link::schedule(Instant arrival, Bytes frame) {
    q_.push(InFlight{arrival, order_++, std::move(frame)});
}

void Link::send(Instant now, Bytes frame) {
    st_.sent++;
    st_.bytes_sent += frame.size();
    if (ecn_of(frame) != 0) st_.ect++;
    size_t queued = backlog(now);
    if (queued + frame.size() > cfg_.queue_bytes) {
        st_.queue_drops++;
        return;
    }
    if (cfg_.ecn_mark_bytes != 0 && queued > cfg_.ecn_mark_bytes && mark_ce(frame)) st_.ce_marked++;
    tx_free_ = std::max(tx_free_, now) + serialisation(frame.size());
    Instant depart = tx_free_;

    if (rng_.chance(cfg_.loss)) {
        st_.lost++;
        if (on_lost_) on_lost_(now, frame);
        return;
    }
    if (rng_.chance(cfg_.corrupt) && flip_l4_bit(frame, rng_.next())) st_.corrupted++;
    Duration extra{0};
    if (rng_.chance(cfg_.reorder)) {
        st_.reordered++;
        extra = Duration(int64_t(rng_.below(uint64_t(cfg_.reorder_delay.count()) + 1)));
    }
    if (rng_.chance(cfg_.duplicate)) {
        st_.duplicated++;
        schedule(depart + cfg_.delay + extra + serialisation(frame.size()), frame);
    }
    schedule(depart + cfg_.delay + extra, std::move(frame));
}

Instant Link::next_arrival() const { return q_.empty() ? Instant::never() : q_.top().arrival; }

std::optional<Bytes> Link::pop(Instant now) {
    if (q_.empty() || q_.top().arrival > now) return std::nullopt;
    // priority_queue::top is const: move out through a const_cast of the
    // element about to be popped (it is destroyed right after).
    Bytes f = std::move(const_cast<InFlight&>(q_.top()).frame);
    q_.pop();
    st_.delivered++;
    return f;
}

} // namespace crescent::sim
