// knb server: serve knb clients (rpc: knb.echo/info/stats; echo: RFC 862)
// on either stack until SIGINT/SIGTERM. Returns the exit status.
#pragma once

#include "knb/options.hpp"

namespace knb {

int run_server(const Options& o);

}  // namespace knb
