// crescent — leftovers of crashed instances: what a process that died without
// cleaning up (SIGKILL, OOM) leaves behind is named by its pid; a new
// instance removes the files of pids that are gone.
#pragma once

#include <sys/types.h>
#include <signal.h>

#include <cerrno>
#include <charconv>
#include <string_view>

namespace crescent::stale {

// The pid that `name` carries after `prefix` and before `suffix`
// ("crescent1234", "1234.sock"); 0 when it is not that shape.
inline pid_t pid_in(std::string_view name, std::string_view prefix, std::string_view suffix) {
    if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) return 0;
    std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    long v = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc{} || end != digits.data() + digits.size() || v <= 0) return 0;
    return pid_t(v);
}

// No process with this pid exists in our pid namespace (EPERM: it exists).
inline bool gone(pid_t pid) { return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH; }

} // namespace crescent::stale
