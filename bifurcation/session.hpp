// crescent — one process's hold on the port plan of an interface.
//
// Ties the pieces together in the order that makes crashes recoverable:
//
//   1. claim the registry entry (registry.hpp): dead processes' leftovers are
//      cleaned (their reserved ports, ntuple rules, plus a caller hook for
//      backend state such as an XDP program), and an overlapping plan of a live
//      process is refused;
//   2. record the reserved ports we are about to add, then add them to
//      net.ipv4.ip_local_reserved_ports (reserved_ports.hpp);
//   3. the caller installs a backend and record()s what a successor would need
//      to undo it (e.g. "ntuple_locs", "xdp_prog_id").
//
// The destructor undoes 2 and 1 (backends are owned and torn down by the
// caller first). If the process dies instead, step 1 of the next crescent on
// the interface undoes what is recorded.
//
// Set-up / shutdown only.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "bifurcation/plan.hpp"
#include "bifurcation/registry.hpp"
#include "bifurcation/reserved_ports.hpp"

namespace crescent::bifurcation {

struct SessionOptions {
    std::string registry_dir;                         // "" = Registry::default_dir(ifname)
    std::string sysctl_path = ReservedPorts::kSysctlPath;
    bool reserve_ports = true;                        // write the client range into the sysctl
    // Extra clean-up for a dead process's entry (runs after the built-in one:
    // reserved ports, then "ntuple_ifname"/"ntuple_locs").
    std::function<void(const RegistryEntry&)> extra_cleanup;
};

// The built-in clean-up of a dead process's entry: removes the ports it added
// to its sysctl file and the ntuple rules it recorded. Logs what it does.
void cleanup_stale_entry(const RegistryEntry& e);

class Session {
public:
    static std::optional<Session> open(const Plan& plan, const SessionOptions& opt,
                                       std::string* err);

    Session(Session&&) noexcept = default;
    Session& operator=(Session&&) = delete;
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    ~Session() = default; // members: reserved ports restored, then the entry removed

    // Store backend state in our registry entry (key/value without blanks).
    bool record(const std::string& key, const std::string& value, std::string* err);
    const Registry& registry() const { return registry_; }
    const ReservedPorts& reserved() const { return reserved_; }

private:
    Session(Registry r, ReservedPorts p) : registry_(std::move(r)), reserved_(std::move(p)) {}
    // Destroyed in reverse order: reserved_ first, then registry_.
    Registry registry_;
    ReservedPorts reserved_;
};

} // namespace crescent::bifurcation
