// crescent — per-method RPC statistics (include/crescent/rpc/stats.hpp).
#include <crescent/rpc/stats.hpp>

namespace crescent::rpc {

uint64_t MethodStats::errors() const {
    uint64_t n = 0;
    for (uint64_t e : errors_by_status) n += e;
    return n;
}

void MethodStats::merge(const MethodStats& other) {
    if (name.empty()) name = other.name;
    calls += other.calls;
    ok += other.ok;
    for (size_t i = 0; i < kStatusSlots; ++i) errors_by_status[i] += other.errors_by_status[i];
    bytes_in += other.bytes_in;
    bytes_out += other.bytes_out;
    latency.merge(other.latency);
}

} // namespace crescent::rpc
