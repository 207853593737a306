// crescent — static control-plane configuration (no kernel netdev).
#include "stack/ctrl/static_config.hpp"

#include <charconv>

namespace crescent::ctrl {

namespace {

bool fail(std::string* error, std::string msg) {
    if (error != nullptr) *error = std::move(msg);
    return false;
}

bool is_unicast(const MacAddr& m) { return (m.b[0] & 0x01) == 0 && m != MacAddr{}; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

} // namespace

std::optional<Neighbour> parse_static_neighbour(std::string_view s, std::string* error) {
    size_t eq = s.find('=');
    if (eq == std::string_view::npos) {
        fail(error, "static config: neighbour '" + std::string(s) + "' is not IP=MAC (e.g. 10.0.0.2=02:00:00:00:00:02)");
        return std::nullopt;
    }
    auto ip = parse_ipv4(s.substr(0, eq));
    if (!ip) {
        fail(error, "static config: neighbour '" + std::string(s) + "': bad IPv4 address '" +
                        std::string(s.substr(0, eq)) + "'");
        return std::nullopt;
    }
    auto mac = parse_mac(s.substr(eq + 1));
    if (!mac) {
        fail(error, "static config: neighbour '" + std::string(s) + "': bad MAC '" + std::string(s.substr(eq + 1)) +
                        "' (expected six hex octets, e.g. 02:00:00:00:00:02)");
        return std::nullopt;
    }
    if (!is_unicast(*mac)) {
        fail(error, "static config: neighbour '" + std::string(s) + "': MAC must be unicast and non-zero");
        return std::nullopt;
    }
    return Neighbour{*ip, *mac, NeighState::Permanent};
}

bool apply_static_option(StaticConfig& cfg, std::string_view key, std::string_view value, std::string* error) {
    const std::string v(value);
    if (key == "ip") {
        if (cfg.addr) return fail(error, "static config: ip= given twice");
        auto a = parse_ipv4_with_len(value);
        if (!a) return fail(error, "static config: bad ip '" + v + "' (expected a.b.c.d/len, len 0..32)");
        if (a->prefix_len == 0) return fail(error, "static config: ip '" + v + "' has prefix length 0");
        cfg.addr = a;
        return true;
    }
    if (key == "mac") {
        if (cfg.mac) return fail(error, "static config: mac= given twice");
        auto m = parse_mac(value);
        if (!m) return fail(error, "static config: bad mac '" + v + "' (expected six hex octets, e.g. 02:00:00:00:00:01)");
        if (!is_unicast(*m)) return fail(error, "static config: mac '" + v + "' must be unicast and non-zero");
        cfg.mac = m;
        return true;
    }
    if (key == "gw" || key == "gateway") {
        if (cfg.gateway) return fail(error, "static config: gw= given twice");
        auto g = parse_ipv4(value);
        if (!g) return fail(error, "static config: bad gw '" + v + "' (expected a.b.c.d)");
        cfg.gateway = g;
        return true;
    }
    if (key == "neigh" || key == "neighbour" || key == "neighbor") {
        auto n = parse_static_neighbour(value, error);
        if (!n) return false;
        cfg.neighbours.push_back(*n);
        return true;
    }
    if (key == "mtu") {
        unsigned mtu = 0;
        auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), mtu, 10);
        if (value.empty() || ec != std::errc() || p != value.data() + value.size() || mtu < 68 || mtu > 65535)
            return fail(error, "static config: bad mtu '" + v + "' (expected 68..65535)");
        cfg.mtu = mtu;
        return true;
    }
    if (key == "name") {
        if (value.empty()) return fail(error, "static config: empty name");
        cfg.name = v;
        return true;
    }
    return fail(error, "static config: unknown option '" + std::string(key) + "' (known: ip, mac, gw, neigh, mtu, name)");
}

bool validate_static_config(const StaticConfig& cfg, std::string* error) {
    if (!cfg.addr) return fail(error, "static config: ip= is required (e.g. ip=10.0.0.1/24)");
    if (!cfg.mac) return fail(error, "static config: mac= is required (e.g. mac=02:00:00:00:00:01)");
    const Ipv4Prefix subnet = cfg.addr->subnet();
    if (cfg.gateway) {
        if (*cfg.gateway == cfg.addr->addr)
            return fail(error, "static config: gw " + to_string(*cfg.gateway) + " is the interface's own address");
        if (!subnet.contains(*cfg.gateway))
            return fail(error, "static config: gw " + to_string(*cfg.gateway) + " is not on " + to_string(subnet));
    }
    for (size_t i = 0; i < cfg.neighbours.size(); ++i) {
        const Neighbour& n = cfg.neighbours[i];
        if (!subnet.contains(n.ip))
            return fail(error, "static config: neighbour " + to_string(n.ip) + " is not on " + to_string(subnet));
        if (n.ip == cfg.addr->addr)
            return fail(error, "static config: neighbour " + to_string(n.ip) + " is the interface's own address");
        for (size_t j = 0; j < i; ++j)
            if (cfg.neighbours[j].ip == n.ip)
                return fail(error, "static config: neighbour " + to_string(n.ip) + " given twice");
    }
    return true;
}

std::optional<StaticConfig> parse_static_config(std::string_view spec, std::string* error) {
    StaticConfig cfg;
    while (!spec.empty()) {
        size_t comma = spec.find(',');
        std::string_view item = trim(spec.substr(0, comma));
        spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
        if (item.empty()) continue;
        size_t eq = item.find('=');
        if (eq == std::string_view::npos) {
            fail(error, "static config: '" + std::string(item) + "' is not key=value");
            return std::nullopt;
        }
        if (!apply_static_option(cfg, trim(item.substr(0, eq)), trim(item.substr(eq + 1)), error))
            return std::nullopt;
    }
    if (!validate_static_config(cfg, error)) return std::nullopt;
    return cfg;
}

std::unique_ptr<const Snapshot> StaticConfig::snapshot(uint64_t generation) const {
    InterfaceInfo iface;
    iface.name = name;
    iface.ifindex = 0;
    iface.mac = mac.value_or(MacAddr{});
    iface.mtu = mtu;
    iface.admin_up = iface.oper_up = true;
    std::vector<Route> routes;
    if (addr) {
        iface.addrs.push_back(*addr);
        Route connected;
        connected.dst = addr->subnet();
        connected.prefsrc = addr->addr;
        routes.push_back(connected);
        if (gateway) {
            Route def;
            def.dst = Ipv4Prefix{};
            def.gateway = *gateway;
            def.prefsrc = addr->addr;
            routes.push_back(def);
        }
    }
    return std::make_unique<const Snapshot>(std::move(iface), std::move(routes), neighbours, /*can_resolve=*/false,
                                            generation);
}

} // namespace crescent::ctrl
