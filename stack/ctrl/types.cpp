// crescent — control-plane value types: names and text forms.
#include "stack/ctrl/types.hpp"

#include <charconv>
#include <cstdio>

#include <linux/neighbour.h>

namespace crescent::ctrl {

std::string_view neigh_state_name(NeighState s) {
    switch (s) {
    case NeighState::None: return "none";
    case NeighState::Incomplete: return "incomplete";
    case NeighState::Reachable: return "reachable";
    case NeighState::Stale: return "stale";
    case NeighState::Delay: return "delay";
    case NeighState::Probe: return "probe";
    case NeighState::Failed: return "failed";
    case NeighState::Noarp: return "noarp";
    case NeighState::Permanent: return "permanent";
    }
    return "?";
}

NeighState neigh_state_from_nud(uint16_t nud) {
    // Checked from the most to the least authoritative bit.
    if (nud & NUD_PERMANENT) return NeighState::Permanent;
    if (nud & NUD_NOARP) return NeighState::Noarp;
    if (nud & NUD_REACHABLE) return NeighState::Reachable;
    if (nud & NUD_PROBE) return NeighState::Probe;
    if (nud & NUD_DELAY) return NeighState::Delay;
    if (nud & NUD_STALE) return NeighState::Stale;
    if (nud & NUD_INCOMPLETE) return NeighState::Incomplete;
    if (nud & NUD_FAILED) return NeighState::Failed;
    return NeighState::None;
}

namespace {

// Parses a decimal number in [0, max] that spans all of `s` (no sign, no spaces,
// at most 3 digits so "0010" style padding stays readable but bounded).
std::optional<unsigned> parse_small_uint(std::string_view s, unsigned max) {
    if (s.empty() || s.size() > 3) return std::nullopt;
    unsigned v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
    if (ec != std::errc() || p != s.data() + s.size() || v > max) return std::nullopt;
    return v;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

} // namespace

std::optional<Ipv4Addr> parse_ipv4(std::string_view s) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
        size_t dot = s.find('.');
        std::string_view part = i < 3 ? s.substr(0, dot) : s;
        if (i < 3 && dot == std::string_view::npos) return std::nullopt;
        auto octet = parse_small_uint(part, 255);
        if (!octet) return std::nullopt;
        v = (v << 8) | *octet;
        if (i < 3) s.remove_prefix(dot + 1);
    }
    return Ipv4Addr{v};
}

std::optional<InterfaceAddr> parse_ipv4_with_len(std::string_view s) {
    size_t slash = s.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    auto a = parse_ipv4(s.substr(0, slash));
    auto len = parse_small_uint(s.substr(slash + 1), 32);
    if (!a || !len) return std::nullopt;
    return InterfaceAddr{*a, uint8_t(*len)};
}

std::optional<MacAddr> parse_mac(std::string_view s) {
    MacAddr m;
    char sep = 0;
    for (size_t i = 0; i < 6; ++i) {
        size_t n = 0;
        unsigned v = 0;
        while (n < s.size() && n < 3 && hex_digit(s[n]) >= 0) v = v * 16 + unsigned(hex_digit(s[n++]));
        if (n == 0 || n > 2) return std::nullopt;
        m.b[i] = uint8_t(v);
        s.remove_prefix(n);
        if (i == 5) break;
        if (s.empty() || (s[0] != ':' && s[0] != '-')) return std::nullopt;
        if (sep == 0) sep = s[0];
        if (s[0] != sep) return std::nullopt; // mixed separators
        s.remove_prefix(1);
    }
    if (!s.empty()) return std::nullopt;
    return m;
}

std::string to_string(Ipv4Addr a) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", a.v >> 24, (a.v >> 16) & 0xff, (a.v >> 8) & 0xff, a.v & 0xff);
    return buf;
}

std::string to_string(const MacAddr& m) {
    char buf[18];
    std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m.b[0], m.b[1], m.b[2], m.b[3], m.b[4],
                  m.b[5]);
    return buf;
}

std::string to_string(const Ipv4Prefix& p) { return to_string(p.addr) + "/" + std::to_string(p.len); }

} // namespace crescent::ctrl
