// knb client: load a server with long-lived connections from --threads
// engines (a full mesh with the server's threads), closed or open loop,
// verify every response, and measure (report.hpp). Returns the exit status:
// 0, 1 for a failed run (partial results are still reported), 130 when
// interrupted.
#pragma once

#include "knb/options.hpp"
#include "knb/report.hpp"

namespace knb {

int run_client(const Options& o, Result* out);

}  // namespace knb
