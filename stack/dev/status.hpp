// crescent — set-up errors of the device layer.
//
// Start-up (EAL, ports, steering) reports failures as a `Status`: a code the
// caller can switch on and a one-line message that names the cause and what to
// do about it, ready to print as is. Nothing here throws or aborts: a failed
// start-up returns, after undoing whatever it had done (hugepage files, XDP
// program).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace crescent::dev {

enum class Errc : uint8_t {
    Ok = 0,
    BadConfig,        // inconsistent options (no interface given, 0 queues, ...)
    NotRoot,          // AF_XDP, hugepages and XDP need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)
    UnknownInterface, // no such netdev in this network namespace
    NoHugepages,      // no free hugepages (or hugetlbfs missing)
    AddressInUse,     // the interface already carries an XDP program / the DPDK prefix is taken
    EalFailed,        // rte_eal_init failed; the message quotes EAL
    AlreadyStarted,   // EAL can be initialised once per process
    NoMemory,         // mempool creation failed
    DeviceFailed,     // ethdev configure / queue setup / start failed
    SteeringFailed,   // the XDP steering program or its maps are missing
};

std::string_view errc_name(Errc e);

class [[nodiscard]] Status {
public:
    Status() = default;
    static Status error(Errc code, std::string message) { return Status(code, std::move(message)); }

    bool ok() const { return code_ == Errc::Ok; }
    explicit operator bool() const { return ok(); }
    Errc code() const { return code_; }
    // One line, no trailing newline, starts with "crescent: ".
    const std::string& message() const { return message_; }

private:
    Status(Errc c, std::string m) : code_(c), message_(std::move(m)) {}
    Errc code_ = Errc::Ok;
    std::string message_;
};

} // namespace crescent::dev
