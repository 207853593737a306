// crescent — logging through spdlog.
//
// One logger per subsystem ("zbuf", "tcp", "ctrl", "dev", ...) and one per
// engine core ("core3"). Nothing logs on the data path at the default level
// (info): per-packet events are trace/debug only, and drops are counters.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace crescent::log {

// The named logger, created on first use (thread-safe).
std::shared_ptr<spdlog::logger> get(const std::string& name);
// The logger of engine core `id` ("core<id>").
std::shared_ptr<spdlog::logger> core(unsigned id);
// Set the level of every crescent logger (and future ones), e.g. from
// CRESCENT_LOG=debug. Unknown names are rejected (returns false).
bool set_level(const std::string& level);
// Apply CRESCENT_LOG from the environment if set.
void init_from_env();

} // namespace crescent::log
