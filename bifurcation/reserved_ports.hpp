// crescent — keeping kernel clients out of the client port range.
//
// net.ipv4.ip_local_reserved_ports is a per-network-namespace bitmap of ports
// the kernel never picks as an ephemeral (auto-bound) local port
// (Documentation/networking/ip-sysctl.rst). Its text form is a comma-separated
// list of ports and inclusive ranges, e.g. "1,5-9,61440-65535"; reading gives
// the canonical form (sorted, merged), writing replaces the whole set.
//
// ReservedPorts adds the application's client range to the set, remembers
// exactly which ports it added (those not reserved before), and removes exactly
// those again on destruction. When nobody else touched the sysctl meanwhile this
// restores the previous value byte for byte; ports another process reserved in
// between are left alone. A process that died without running its destructor is
// cleaned up by the next one through the registry (registry.hpp records the
// added set; remove_ports() takes it away).
//
// Set-up / shutdown only (file I/O).
#pragma once

#include <bitset>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bifurcation/plan.hpp"

namespace crescent::bifurcation {

// A set of ports 0..65535.
class PortSet {
public:
    PortSet() = default;
    explicit PortSet(PortSpan s) { add(s); }

    // Parses the kernel syntax: "" / "\n" (empty), "80", "1,5-9,61440-65535";
    // blanks around items and a trailing newline are accepted. nullopt and *err
    // on anything else ("5-", "9-5", "70000", "a").
    static std::optional<PortSet> parse(std::string_view text, std::string* err = nullptr);
    // The canonical kernel form: sorted, maximal ranges, no newline; "" if empty.
    std::string format() const;

    void add(PortSpan s);
    void add(const PortSet& o) { bits_ |= o.bits_; }
    void remove(const PortSet& o) { bits_ &= ~o.bits_; }
    PortSet minus(const PortSet& o) const { PortSet r = *this; r.remove(o); return r; }
    bool contains(uint16_t p) const { return bits_.test(p); }
    bool empty() const { return bits_.none(); }
    size_t count() const { return bits_.count(); }
    std::vector<PortSpan> spans() const; // maximal ranges, ascending
    bool operator==(const PortSet&) const = default;

private:
    std::bitset<65536> bits_;
};

class ReservedPorts {
public:
    static constexpr const char* kSysctlPath = "/proc/sys/net/ipv4/ip_local_reserved_ports";

    // `path`: the sysctl file of the current network namespace, or any file in
    // the same format (unit tests).
    explicit ReservedPorts(std::string path = kSysctlPath) : path_(std::move(path)) {}
    ReservedPorts(const ReservedPorts&) = delete;
    ReservedPorts& operator=(const ReservedPorts&) = delete;
    ReservedPorts(ReservedPorts&& o) noexcept;
    ReservedPorts& operator=(ReservedPorts&&) = delete;
    ~ReservedPorts(); // restore(); errors are logged

    // Adds `want` to the reserved set. added() becomes the ports of `want` that
    // were not reserved before (they may already be, e.g. by an admin). Can be
    // called again to reserve more. false and *err when the file cannot be read
    // or written.
    bool reserve(const PortSet& want, std::string* err);
    bool reserve(PortSpan s, std::string* err) { return reserve(PortSet(s), err); }
    const PortSet& added() const { return added_; }
    const std::string& path() const { return path_; }

    // Removes added() from the reserved set and forgets it. Idempotent.
    bool restore(std::string* err);

    // Read / write the whole set; remove `ports` from it (crash recovery).
    static std::optional<PortSet> read(const std::string& path, std::string* err);
    static bool write(const std::string& path, const PortSet& set, std::string* err);
    static bool remove_ports(const std::string& path, const PortSet& ports, std::string* err);

private:
    std::string path_;
    PortSet added_;
};

} // namespace crescent::bifurcation
