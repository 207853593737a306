// Command-line plumbing shared by the crescent examples: one-line errors that
// name the problem (exit status 2), bounded integers, and the RuntimeOptions
// flags every example takes (device, addressing, port plan, testing aids).
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <crescent/engine.hpp>
#include <crescent/runtime.hpp>

namespace crescent::examples {

// "<prog>: <msg>" on stderr, exit status 2.
[[noreturn]] inline void fail(const char* prog, const std::string& msg) {
    std::fprintf(stderr, "%s: %s\n", prog, msg.c_str());
    std::exit(2);
}

// `--show-plan`: print the port plan of `o` and exit 0 (nothing is started).
// Otherwise start the Runtime, or print its one-line error and exit 1; on
// success the device line goes to stderr and the Runtime is returned.
inline std::unique_ptr<Runtime> start_or_exit(const char* prog, const RuntimeOptions& o, bool show_plan) {
    std::string err;
    if (show_plan) {
        std::string plan = Runtime::describe_plan(o, &err);
        if (plan.empty()) {
            std::fprintf(stderr, "%s\n", err.c_str());
            std::exit(1);
        }
        std::printf("%s\n", plan.c_str());
        std::exit(0);
    }
    auto rt = Runtime::start(o, &err);
    if (!rt) {
        std::fprintf(stderr, "%s\n", err.c_str());
        std::exit(1);
    }
    std::fprintf(stderr, "%s: %s\n", prog, rt->describe().c_str());
    return rt;
}

// One stderr line with an engine's non-zero counters (for --stats).
inline void print_engine_stats(Engine& e) {
    std::fprintf(stderr, "engine %u:", e.index());
    e.stats().for_each([](std::string_view name, uint64_t v) {
        if (v) std::fprintf(stderr, " %.*s=%llu", int(name.size()), name.data(), (unsigned long long)v);
    });
    std::fprintf(stderr, "\n");
}

// Usage lines of Cli::limit_option(), for the servers' --help.
inline constexpr const char* kLimitUsage =
    "  limits (per engine; per connection for the buffers):\n"
    "    --max-conns N             connections at once, TIME-WAIT included (default 1048576)\n"
    "    --backlog N               per listener: half-open + not yet accepted (default 1024)\n"
    "    --syn-cookies on|off      answer SYNs with cookies when the backlog is full (default on)\n"
    "    --max-memory-mb N         zbuf memory of the engine's core, whole 2 MiB zones (default 0 = no cap)\n"
    "    --snd-buf BYTES           send buffer (default 1048576)\n"
    "    --rcv-buf BYTES           receive window ceiling (default 1048576)\n"
    "    --reassembly-bytes N      out-of-order bytes held (default 4194304)\n"
    "    --reassembly-segments N   out-of-order segments held (default 1024)\n";

class Cli {
public:
    Cli(const char* prog, int argc, char** argv, const char* usage)
        : prog_(prog), argc_(argc), argv_(argv), usage_(usage) {}

    // Advance to the next flag; false when the arguments are exhausted.
    bool next() { return ++i_ < argc_ && (flag_ = argv_[i_], true); }
    std::string_view flag() const { return flag_; }
    bool is(std::string_view f) const { return flag_ == f; }

    // The current flag's value (the next argument), or a one-line error.
    const char* value() {
        if (i_ + 1 >= argc_) die(std::string(flag_) + " needs a value");
        return argv_[++i_];
    }
    uint64_t number(uint64_t lo, uint64_t hi) {
        const char* v = value();
        char* end = nullptr;
        errno = 0;
        unsigned long long n = std::strtoull(v, &end, 10);
        if (errno || end == v || *end != '\0' || n < lo || n > hi)
            die(std::string(flag_) + ": '" + v + "' is not a number in " + std::to_string(lo) + ".." +
                std::to_string(hi));
        return n;
    }

    [[noreturn]] void die(const std::string& msg) const { fail(prog_, msg); }
    // -h/--help prints the usage and exits 0; anything else is an unknown option.
    [[noreturn]] void unknown() const {
        if (flag_ == "-h" || flag_ == "--help") {
            std::fputs(usage_, stdout);
            if (limits_) std::fputs(kLimitUsage, stdout);
            std::exit(0);
        }
        die("unknown option '" + std::string(flag_) + "' (see --help)");
    }

    // The Runtime flags shared by the examples; true when the current flag was one.
    bool runtime_option(RuntimeOptions& rt) {
        if (is("--iface")) rt.iface = value();
        else if (is("--eal")) rt.eal = value();
        else if (is("--cores")) rt.cores = unsigned(number(1, 64));
        else if (is("--file-prefix")) rt.file_prefix = value();
        else if (is("--ip")) rt.ip = value();
        else if (is("--mac")) rt.mac = value();
        else if (is("--gateway")) rt.gateway = value();
        else if (is("--neighbour") || is("--neighbor")) rt.neighbours.push_back(value());
        else if (is("--no-huge")) rt.no_huge = true;
        else if (is("--app-slot")) rt.app_slot = uint16_t(number(0, 255));
        else if (is("--app-slots")) rt.app_slots = uint16_t(number(1, 256));
        else if (is("--impair")) rt.impair = value();
        else if (is("--pcap")) rt.pcap = value();
        else if (is("--pcap-snaplen")) rt.pcap_snaplen = uint32_t(number(64, 262144));
        else if (is("--pcap-max-mb")) rt.pcap_max_bytes = number(1, 1u << 20) << 20;
        else if (is("--pcap-max-bytes")) rt.pcap_max_bytes = number(24, uint64_t(1) << 50);
        else if (is("--metrics-port")) rt.metrics_port = uint16_t(number(1, 65535));
        else if (is("--metrics-bind")) rt.metrics_bind = value();
        else return false;
        return true;
    }

    // The engine-loop flags of the examples that serve in either dispatch
    // mode: --mode inline|batch, --burst N, --idle-sleep-us N (spin 1000
    // empty iterations, then nap in epoll up to N us), --arena-mb N,
    // --reply-at-once on|off (EngineConfig::reply_at_once).
    bool engine_option(RuntimeOptions& rt) {
        if (is("--mode")) {
            const char* v = value();
            if (!parse_dispatch_mode(v, &rt.engine.mode)) die(std::string("--mode: '") + v + "' is not inline or batch");
        } else if (is("--burst")) {
            rt.engine.burst = uint16_t(number(1, 512));
        } else if (is("--idle-sleep-us")) {
            rt.engine.idle_sleep = std::chrono::microseconds(number(1, 1000000));
            rt.engine.idle_spin = 1000;
        } else if (is("--arena-mb")) {
            rt.arena_bytes = size_t(number(16, 1u << 20)) << 20;
        } else if (is("--reply-at-once")) {
            rt.engine.reply_at_once = on_off();
        } else {
            return false;
        }
        return true;
    }

    // The limits of a server's engines (EngineConfig, ConnOptions; see
    // kLimitUsage): true when the current flag was one. Ranges are those of
    // check_engine_config(), so a bad value fails here, naming the flag.
    bool limit_option(RuntimeOptions& rt) {
        limits_ = true;  // --help lists them
        EngineConfig& e = rt.engine;
        if (is("--max-conns")) e.max_connections = uint32_t(number(1, 1u << 24));
        else if (is("--backlog")) e.backlog = uint32_t(number(1, 65535));
        else if (is("--syn-cookies")) e.syn_cookies = on_off();
        else if (is("--max-memory-mb")) e.max_memory = size_t(number(0, 1u << 20)) << 20;
        else if (is("--snd-buf")) e.conn.snd_buf = uint32_t(number(4096, 1u << 30));
        else if (is("--rcv-buf")) e.conn.rcv_buf = uint32_t(number(4096, 1u << 30));
        else if (is("--reassembly-bytes")) e.conn.reassembly_bytes = uint32_t(number(0, 1u << 30));
        else if (is("--reassembly-segments")) e.conn.reassembly_segments = uint32_t(number(0, 65536));
        else return false;
        if (is("--max-memory-mb") && e.max_memory != 0 && e.max_memory < (2u << 20))
            die("--max-memory-mb: give 0 (no cap) or at least 2 (one zone)");
        return true;
    }
    // "on" or "off" (the current flag's value).
    bool on_off() {
        std::string_view v = value();
        if (v == "on") return true;
        if (v == "off") return false;
        die(std::string(flag_) + ": '" + std::string(v) + "' is not on or off");
    }

private:
    const char* prog_;
    int argc_;
    char** argv_;
    const char* usage_;
    int i_ = 0;
    std::string_view flag_;
    bool limits_ = false;  // limit_option() is in use
};

} // namespace crescent::examples
