// crescent — spdlog loggers per subsystem and per core.
#include <crescent/log.hpp>

#include <cstdlib>
#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace crescent::log {

namespace {
std::mutex g_mu;
spdlog::level::level_enum g_level = spdlog::level::info;
} // namespace

std::shared_ptr<spdlog::logger> get(const std::string& name) {
    std::lock_guard lk(g_mu);
    if (auto l = spdlog::get(name)) return l;
    auto l = spdlog::stderr_color_mt(name);
    l->set_level(g_level);
    l->set_pattern("[%H:%M:%S.%e] [%n] [%^%l%$] %v");
    return l;
}

std::shared_ptr<spdlog::logger> core(unsigned id) { return get("core" + std::to_string(id)); }

bool set_level(const std::string& level) {
    auto lv = spdlog::level::from_str(level);
    if (lv == spdlog::level::off && level != "off") return false;
    std::lock_guard lk(g_mu);
    g_level = lv;
    spdlog::apply_all([lv](const std::shared_ptr<spdlog::logger>& l) { l->set_level(lv); });
    return true;
}

void init_from_env() {
    if (const char* v = std::getenv("CRESCENT_LOG")) {
        if (!set_level(v)) get("crescent")->warn("CRESCENT_LOG={} is not a log level (trace, debug, info, warn, err, critical, off)", v);
    }
}

} // namespace crescent::log
