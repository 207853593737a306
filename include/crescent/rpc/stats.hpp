// crescent — per-method RPC statistics (issue 9 "Stats"): calls, outcomes by
// status, bytes, and a latency histogram. Each engine keeps its own
// MethodStats (single-threaded, no atomics) and readers merge them (bvar's
// "per-core, summed on read").
//
// Status slots (errors_by_status): index = the framework Status value
// (protocol.hpp, 1..13; slot 0 stays 0 because Ok counts in `ok`), slot 14 =
// a framework status this build does not know (14..999, from a newer peer),
// slot 15 = every application status (>= Status::kAppStatusBase).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include <crescent/rpc/histogram.hpp>
#include <crescent/rpc/protocol.hpp>

namespace crescent::rpc {

// Counters and latency of one method, server side (per Server) or client side
// (per Channel); kept on the engine thread, merged across engines on read.
struct MethodStats {
    // errors_by_status slots: status values 0..13 each have their own (0 = Ok
    // stays 0), then kOtherFrameworkSlot and kAppSlot.
    static constexpr size_t kStatusSlots = 16;
    static constexpr size_t kOtherFrameworkSlot = 14;   // 14..999: unknown framework statuses
    static constexpr size_t kAppSlot = 15;              // >= Status::kAppStatusBase

    uint32_t method = 0;     // method id (~0u: the server's unknown-method entry)
    std::string name;        // register_method()'s name ("" when not known, e.g. client side)
    uint64_t calls = 0;      // requests received (server) or issued (client)
    uint64_t ok = 0;         // outcomes with Status::Ok
    std::array<uint64_t, kStatusSlots> errors_by_status{};   // see the slot map above
    uint64_t bytes_in = 0;   // meta + data bytes received
    uint64_t bytes_out = 0;  // meta + data bytes sent
    Histogram latency;       // nanoseconds (server: request in -> reply out; client: call -> reply)

    // The slot a status value is counted in (0 for Ok).
    static constexpr size_t status_slot(uint32_t status) {
        if (status >= uint32_t(Status::kAppStatusBase)) return kAppSlot;
        if (status > uint32_t(Status::Shutdown)) return kOtherFrameworkSlot;
        return status;
    }

    // Count one outcome: Ok in `ok`, anything else in its errors_by_status
    // slot. Does not count `calls` (counted when the call starts).
    void record_status(uint32_t status) {
        if (status == uint32_t(Status::Ok)) ++ok;
        else ++errors_by_status[status_slot(status)];
    }
    uint64_t errors() const;  // outcomes other than Ok: the sum of errors_by_status
    // Sums counters and latency; keeps this method id, and takes other's name
    // when this one has none.
    void merge(const MethodStats& other);
};

static_assert(uint32_t(Status::Shutdown) < MethodStats::kOtherFrameworkSlot,
              "a framework Status no longer fits its MethodStats slot");

} // namespace crescent::rpc
