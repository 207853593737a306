// crescent — static control-plane configuration for devices with no kernel
// netdev (net_memif, net_ring, net_pcap, ...): the interface address, MAC, MTU,
// default gateway and neighbours are given as options, and produce the same
// Snapshot type the netlink path publishes (without a resolver: a neighbour
// that is not configured stays unresolved and its packets are dropped).
//
// Text form, comma-separated key=value pairs (also usable one option at a time
// through apply_static_option):
//   ip=10.0.0.1/24            required: address and prefix length
//   mac=02:00:00:00:00:01     required: the device's unicast MAC
//   gw=10.0.0.254             optional default gateway (on the ip= subnet)
//   neigh=10.0.0.2=02:00:00:00:00:02   repeatable static neighbour (on the subnet)
//   mtu=1500                  optional, 68..65535 (RFC 791: every host takes 68)
//   name=memif0               optional, for logs
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stack/ctrl/snapshot.hpp"
#include "stack/ctrl/types.hpp"

namespace crescent::ctrl {

struct StaticConfig {
    std::string name = "static";
    std::optional<InterfaceAddr> addr;
    std::optional<MacAddr> mac;
    uint32_t mtu = 1500;
    std::optional<Ipv4Addr> gateway;
    std::vector<Neighbour> neighbours; // state Permanent

    // A snapshot of this configuration (call validate_static_config first):
    // the connected route, a default route via `gateway`, the neighbours.
    std::unique_ptr<const Snapshot> snapshot(uint64_t generation = 1) const;
};

// "10.0.0.2=02:00:00:00:00:02" -> a Permanent neighbour; nullopt + *error otherwise.
std::optional<Neighbour> parse_static_neighbour(std::string_view s, std::string* error);

// Applies one option (key without "--", value as given). Returns false and sets
// *error to one line naming the option and the bad value.
bool apply_static_option(StaticConfig& cfg, std::string_view key, std::string_view value, std::string* error);

// Cross-checks a complete configuration (required keys present, gateway and
// neighbours on the subnet, no duplicate neighbours). Returns false + *error.
bool validate_static_config(const StaticConfig& cfg, std::string* error);

// Parses the comma-separated text form and validates it.
std::optional<StaticConfig> parse_static_config(std::string_view spec, std::string* error);

} // namespace crescent::ctrl
