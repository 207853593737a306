// crescent — IPv4 header rules shared by the general parser (ipv4.cpp) and the
// established segment's shortcut (ts_frame.cpp). Internal to stack/wire.
#pragma once

#include <cstdint>

#include "stack/wire/wire.hpp"

namespace crescent::wire::detail {

inline constexpr uint16_t kFlagDf = 0x4000;
inline constexpr uint16_t kFlagMf = 0x2000;
inline constexpr uint16_t kFragOffsetMask = 0x1fff;

// RFC 1122 §3.2.1.3 / RFC 1812 §5.3.7: addresses that are never a host's
// source: "this network" 0/8, loopback 127/8, multicast 224/4, reserved
// 240/4 (which holds the limited broadcast 255.255.255.255). As Linux's
// martian-source check, also a packet that claims our own destination as its
// source (a "land" packet).
inline bool martian_source(Ipv4Addr src, Ipv4Addr dst)
{
    const uint32_t top = src.v >> 24;
    return top == 0 || top == 127 || top >= 224 || src == dst;
}

} // namespace crescent::wire::detail
