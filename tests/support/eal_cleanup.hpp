// crescent tests — rte_eal_cleanup() and the run directory EAL leaves behind.
//
// Tests that start EAL themselves (a file prefix of their own per process)
// would otherwise leave one empty /var/run/dpdk/<prefix> (or
// $XDG_RUNTIME_DIR/dpdk/<prefix>) per run; crescent's own dev::Runtime
// removes its directory at shutdown.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include <rte_eal.h>

namespace crescent::test {

inline void eal_cleanup_with_run_dir() {
    const std::string dir = rte_eal_get_runtime_dir();  // EAL's buffer: copied before cleanup
    rte_eal_cleanup();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

} // namespace crescent::test
