// crescent — registry + reserved ports for one process. See session.hpp.
#include "bifurcation/session.hpp"

#include <charconv>

#include <fmt/format.h>

#include <crescent/log.hpp>

#include "bifurcation/ntuple.hpp"

namespace crescent::bifurcation {

void cleanup_stale_entry(const RegistryEntry& e) {
    auto lg = log::get("bifurcation");
    if (!e.reserved_added.empty() && !e.reserved_path.empty()) {
        std::string err;
        std::optional<PortSet> ports = PortSet::parse(e.reserved_added, &err);
        if (!ports)
            lg->error("stale entry of pid {}: {}", e.pid, err);
        else if (!ReservedPorts::remove_ports(e.reserved_path, *ports, &err))
            lg->error("stale entry of pid {}: {}", e.pid, err);
        else
            lg->warn("removed reserved ports {} left by dead pid {} from {}", e.reserved_added,
                     e.pid, e.reserved_path);
    }
    auto ifname = e.extra.find("ntuple_ifname");
    auto locs = e.extra.find("ntuple_locs");
    if (ifname != e.extra.end() && locs != e.extra.end() && !locs->second.empty()) {
        std::vector<uint32_t> list;
        size_t pos = 0;
        const std::string& s = locs->second;
        while (pos < s.size()) {
            size_t comma = s.find(',', pos);
            if (comma == std::string::npos) comma = s.size();
            uint32_t v = 0;
            if (std::from_chars(s.data() + pos, s.data() + comma, v).ec == std::errc())
                list.push_back(v);
            pos = comma + 1;
        }
        std::string err;
        if (NtupleRules::remove_locations(ifname->second, list, &err) < 0)
            lg->error("stale entry of pid {}: {}", e.pid, err);
        else
            lg->warn("removed {} ntuple rule(s) left by dead pid {} on {}", list.size(), e.pid,
                     ifname->second);
    }
}

std::optional<Session> Session::open(const Plan& plan, const SessionOptions& opt,
                                     std::string* err) {
    const std::string& ifname = plan.config().ifname;
    const std::string dir = opt.registry_dir.empty() ? Registry::default_dir(ifname)
                                                     : opt.registry_dir;
    RegistryEntry mine = RegistryEntry::for_plan(plan);
    const PortSet want(plan.app_range());
    if (opt.reserve_ports) {
        // Record what we are about to add before adding it.
        std::optional<PortSet> cur = ReservedPorts::read(opt.sysctl_path, err);
        if (!cur) return std::nullopt;
        mine.reserved_added = want.minus(*cur).format();
        mine.reserved_path = opt.sysctl_path;
    }
    auto cleanup = [&](const RegistryEntry& e) {
        cleanup_stale_entry(e);
        if (opt.extra_cleanup) opt.extra_cleanup(e);
    };
    std::optional<Registry> reg = Registry::claim(dir, ifname, std::move(mine), cleanup, err);
    if (!reg) return std::nullopt;

    ReservedPorts rp(opt.sysctl_path);
    if (opt.reserve_ports) {
        // A stale entry cleaned just now may have released some of our ports:
        // reserve() recomputes what is really ours.
        if (!rp.reserve(want, err)) return std::nullopt; // reg's destructor removes the entry
        if (rp.added().format() != reg->entry().reserved_added) {
            RegistryEntry e = reg->entry();
            e.reserved_added = rp.added().format();
            if (!reg->update(e, err)) return std::nullopt;
        }
    }
    log::get("bifurcation")
        ->info("{} holds client ports {} on {} (registry {})", plan.config().app_name,
               to_string(plan.app_range()), ifname, dir);
    return Session(std::move(*reg), std::move(rp));
}

bool Session::record(const std::string& key, const std::string& value, std::string* err) {
    RegistryEntry e = registry_.entry();
    e.extra[key] = value;
    return registry_.update(e, err);
}

} // namespace crescent::bifurcation
