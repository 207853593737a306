// knb — command-line parsing (see options.hpp).
#include "knb/options.hpp"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace knb {

std::string_view name(Stack s) { return s == Stack::Crescent ? "crescent" : "kernel"; }
std::string_view name(Mode m) { return m == Mode::Inline ? "inline" : m == Mode::Batch ? "batch" : "copy"; }
std::string_view name(Proto p) { return p == Proto::Rpc ? "rpc" : "echo"; }
std::string_view name(Wait w) { return w == Wait::Block ? "block" : "busy"; }

bool parse_stack(std::string_view s, Stack* out) {
    if (s == "crescent") *out = Stack::Crescent;
    else if (s == "kernel") *out = Stack::Kernel;
    else return false;
    return true;
}
bool parse_mode(std::string_view s, Mode* out) {
    if (s == "inline") *out = Mode::Inline;
    else if (s == "batch") *out = Mode::Batch;
    else if (s == "copy") *out = Mode::Copy;
    else return false;
    return true;
}
bool parse_proto(std::string_view s, Proto* out) {
    if (s == "rpc") *out = Proto::Rpc;
    else if (s == "echo") *out = Proto::Echo;
    else return false;
    return true;
}
bool parse_wait(std::string_view s, Wait* out) {
    if (s == "block") *out = Wait::Block;
    else if (s == "busy") *out = Wait::Busy;
    else return false;
    return true;
}

namespace {

bool parse_uint(std::string_view s, uint64_t* out) {
    if (s.empty() || s.size() > 19) return false;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + uint64_t(c - '0');
    }
    *out = v;
    return true;
}

// Seconds on the command line <-> a Duration (microsecond resolution).
crescent::Duration from_seconds(double sec) { return std::chrono::microseconds(int64_t(std::llround(sec * 1e6))); }
std::string seconds_text(crescent::Duration d) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6f", double(std::chrono::duration_cast<std::chrono::microseconds>(d).count()) / 1e6);
    return b;
}

// "IDLE,INTERVAL,COUNT" (seconds, seconds, probes) -> keepalive on with those values.
bool parse_keepalive(std::string_view s, crescent::ConnOptions* out) {
    double t[2];
    for (double& d : t) {
        size_t comma = s.find(',');
        if (comma == std::string_view::npos) return false;
        std::string item(s.substr(0, comma));
        s = s.substr(comma + 1);
        char* end = nullptr;
        errno = 0;
        d = std::strtod(item.c_str(), &end);
        if (errno || item.empty() || *end != '\0' || !std::isfinite(d) || d < 0.01 || d > 86400) return false;
    }
    uint64_t n = 0;
    if (!parse_uint(s, &n) || n < 1 || n > 100) return false;
    out->keepalive = true;
    out->keepalive_idle = from_seconds(t[0]);
    out->keepalive_interval = from_seconds(t[1]);
    out->keepalive_count = uint32_t(n);
    return true;
}

}  // namespace

bool parse_cpu_list(std::string_view s, std::vector<unsigned>* out) {
    std::vector<unsigned> cpus;
    std::set<unsigned> seen;
    while (!s.empty()) {
        size_t comma = s.find(',');
        std::string_view item = s.substr(0, comma);
        s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
        if (comma != std::string_view::npos && s.empty()) return false;  // trailing comma
        uint64_t lo = 0, hi = 0;
        size_t dash = item.find('-');
        if (dash == std::string_view::npos) {
            if (!parse_uint(item, &lo)) return false;
            hi = lo;
        } else if (!parse_uint(item.substr(0, dash), &lo) || !parse_uint(item.substr(dash + 1), &hi) || hi < lo) {
            return false;
        }
        if (hi > 1023) return false;
        for (uint64_t c = lo; c <= hi; ++c) {
            if (!seen.insert(unsigned(c)).second) return false;
            cpus.push_back(unsigned(c));
        }
    }
    if (cpus.empty()) return false;
    *out = std::move(cpus);
    return true;
}

const char* usage() {
    return "usage: knb server --stack crescent|kernel [options]\n"
           "       knb client --stack crescent|kernel --server IP [options]\n"
           "       knb sweep [options]        (knb sweep --help)\n"
           "       knb raw reflect|ping ...   (knb raw --help)\n"
           "\n"
           "both sides:\n"
           "  --stack crescent|kernel   user-space TCP (crescent) or kernel TCP sockets; same protocol and\n"
           "                            the same code above the transport\n"
           "  --proto rpc|echo          crescent's RPC (default) or an RFC 862 byte echo\n"
           "  --threads N               engines (crescent: one per core and NIC queue; kernel: one epoll\n"
           "                            thread per core) (1)\n"
           "  --mode inline|batch|copy  crescent dispatch: zero-copy inline, zero-copy batch, batch with the\n"
           "                            copy API (inline); kernel sockets always copy\n"
           "  --kernel-wait block|busy  kernel threads sleep in epoll_wait or spin on it (busy)\n"
           "  --port P                  server port (7300)\n"
           "  --cpus LIST               run on these CPUs (\"0-1\", \"2,3\"); threads take them in order\n"
           "  --iface IF | --eal ARGS   crescent's device: AF_XDP on IF with steering, or DPDK EAL\n"
           "                            arguments (then --ip A.B.C.D/LEN [--mac M] [--neighbour IP=MAC]...)\n"
           "  --file-prefix P --no-huge --burst N --arena-mb N --rx-ring N --impair SPEC   crescent tuning\n"
           "  --pcap FILE [--pcap-snaplen N] [--pcap-max-bytes N]   crescent: capture every frame to FILE\n"
           "                            (FILE.0, FILE.1... per engine with --threads > 1)\n"
           "  --metrics-port N [--metrics-bind IP]   crescent: Prometheus text on http://IP:N/metrics\n"
           "                            (IP 127.0.0.1 unless given)\n"
           "  --cc newreno|cubic|dctcp  crescent: the connections' congestion control (newreno)\n"
           "  --keepalive I,P,N         crescent: keepalive probes after I s of silence, every P s, the\n"
           "                            connection closed after N unanswered (off)\n"
           "  --user-timeout S          crescent: abort unacknowledged data no sooner than S s after the\n"
           "                            first retransmission timeout (100; 0 = after 12 of them)\n"
           "  --max-rto S               crescent: the retransmission timeout backs off to at most S s\n"
           "                            (1..120; 60)\n"
           "  --burst-flush-ns N|off    crescent: send output made during an RX burst once it has waited N ns\n"
           "                            and frames remain (0 = after every frame; off = at the burst's end;\n"
           "                            default 1000, off on AF_XDP)\n"
           "  --reply-at-once on|off    crescent: a reply to an RX burst's last frame leaves from inside the\n"
           "                            callback (Conn::send_now), not after it (on)\n"
           "  --idle-sleep-us N         crescent engines nap up to N us after 1000 idle polls (default: spin)\n"
           "  --stats                   per-engine counters on stderr at the end\n"
           "client:\n"
           "  --server IP               the server (required)\n"
           "  --msg-size N --resp-size N   request and response bytes (64; response = request)\n"
           "  --iodepth D               requests in flight per connection (1)\n"
           "  --conns C                 connections per client-thread/server-thread pair (1)\n"
           "  --server-threads N        server threads to mesh with (rpc: asked of the server; echo: 1)\n"
           "  --duration S --warmup S   seconds measured (10) and before (1)\n"
           "  --rate R                  open loop: R requests/s in all, latency from the intended send\n"
           "                            time (default: closed loop)\n"
           "  --json FILE               everything, the latency CDF and the configuration\n"
           "  --label L                 a name carried into the result\n"
           "  --progress on|off         the one-line live display (default: when stderr is a terminal)\n"
           "  --verify ends|full        check the 8 bytes at each end of every response (ends), or every byte\n";
}

namespace {

struct Parser {
    int argc;
    const char* const* argv;
    int i = 0;
    std::string* err;

    bool fail(std::string m) {
        *err = std::move(m);
        return false;
    }
    bool value(const char** v) {
        if (i + 1 >= argc) return fail(std::string(argv[i]) + " needs a value");
        *v = argv[++i];
        return true;
    }
    bool number(uint64_t lo, uint64_t hi, uint64_t* out) {
        const char* v;
        if (!value(&v)) return false;
        uint64_t n;
        if (!parse_uint(v, &n) || n < lo || n > hi)
            return fail(std::string(argv[i - 1]) + ": '" + v + "' is not a number in " + std::to_string(lo) + ".." +
                        std::to_string(hi));
        *out = n;
        return true;
    }
    bool real(double lo, double hi, double* out) {
        const char* v;
        if (!value(&v)) return false;
        char* end = nullptr;
        errno = 0;
        double d = std::strtod(v, &end);
        if (errno || end == v || *end != '\0' || !std::isfinite(d) || d < lo || d > hi) {
            char range[64];
            std::snprintf(range, sizeof range, "%g..%g", lo, hi);
            return fail(std::string(argv[i - 1]) + ": '" + v + "' is not a number in " + range);
        }
        *out = d;
        return true;
    }
    // real() as a Duration of that many seconds.
    bool seconds(double lo, double hi, crescent::Duration* out) {
        double d = 0;
        if (!real(lo, hi, &d)) return false;
        *out = from_seconds(d);
        return true;
    }
};

}  // namespace

bool parse(int argc, const char* const* argv, Options* out, std::string* err) {
    Options o;
    if (argc < 1) {
        *err = "give a role: server, client, sweep or raw (see --help)";
        return false;
    }
    std::string_view role = argv[0];
    if (role == "server") o.role = Role::Server;
    else if (role == "client") o.role = Role::Client;
    else {
        *err = "the first argument must be server, client, sweep or raw, not '" + std::string(role) + "'";
        return false;
    }
    const bool client = o.role == Role::Client;
    bool stack_given = false, crescent_dev = false;
    Parser p{argc, argv, 0, err};
    uint64_t n = 0;
    const char* v = nullptr;
    for (p.i = 1; p.i < argc; ++p.i) {
        std::string_view f = argv[p.i];
        auto bad = [&](std::string_view what) {
            return p.fail(std::string(f) + ": '" + v + "' is not " + std::string(what));
        };
        if (f == "--stack") {
            if (!p.value(&v)) return false;
            if (!parse_stack(v, &o.stack)) return bad("crescent or kernel");
            stack_given = true;
        } else if (f == "--proto") {
            if (!p.value(&v)) return false;
            if (!parse_proto(v, &o.proto)) return bad("rpc or echo");
        } else if (f == "--mode") {
            if (!p.value(&v)) return false;
            if (!parse_mode(v, &o.mode)) return bad("inline, batch or copy");
            o.mode_given = true;
        } else if (f == "--kernel-wait") {
            if (!p.value(&v)) return false;
            if (!parse_wait(v, &o.kernel_wait)) return bad("block or busy");
        } else if (f == "--threads") {
            if (!p.number(1, 64, &n)) return false;
            o.threads = unsigned(n);
        } else if (f == "--port") {
            if (!p.number(1, 65535, &n)) return false;
            o.port = uint16_t(n);
        } else if (f == "--cpus") {
            if (!p.value(&v)) return false;
            if (!parse_cpu_list(v, &o.cpus)) return bad("a CPU list like 0-3 or 1,3 (CPUs 0..1023, no repeats)");
        } else if (f == "--stats") {
            o.stats = true;
        } else if (f == "--iface") {
            if (!p.value(&v)) return false;
            o.rt.iface = v, crescent_dev = true;
        } else if (f == "--eal") {
            if (!p.value(&v)) return false;
            o.rt.eal = v, crescent_dev = true;
        } else if (f == "--ip") {
            if (!p.value(&v)) return false;
            o.rt.ip = v, crescent_dev = true;
        } else if (f == "--mac") {
            if (!p.value(&v)) return false;
            o.rt.mac = v, crescent_dev = true;
        } else if (f == "--gateway") {
            if (!p.value(&v)) return false;
            o.rt.gateway = v, crescent_dev = true;
        } else if (f == "--neighbour" || f == "--neighbor") {
            if (!p.value(&v)) return false;
            o.rt.neighbours.push_back(v), crescent_dev = true;
        } else if (f == "--file-prefix") {
            if (!p.value(&v)) return false;
            o.rt.file_prefix = v;
        } else if (f == "--no-huge") {
            o.rt.no_huge = true;
        } else if (f == "--impair") {
            if (!p.value(&v)) return false;
            o.rt.impair = v, crescent_dev = true;
        } else if (f == "--cc") {
            if (!p.value(&v)) return false;
            if (!crescent::parse_congestion_control(v, &o.rt.engine.conn.cc)) return bad("newreno, cubic or dctcp");
            crescent_dev = true;
        } else if (f == "--keepalive") {
            if (!p.value(&v)) return false;
            if (!parse_keepalive(v, &o.rt.engine.conn))
                return bad("IDLE,INTERVAL,COUNT (seconds, seconds, probes: 0.01..86400, 0.01..86400, 1..100)");
            crescent_dev = true;
        } else if (f == "--user-timeout") {
            if (!p.seconds(0, 86400, &o.rt.engine.conn.user_timeout)) return false;
            crescent_dev = true;
        } else if (f == "--max-rto") {
            if (!p.seconds(1, 120, &o.rt.engine.conn.max_rto)) return false;
            crescent_dev = true;
        } else if (f == "--pcap") {
            if (!p.value(&v)) return false;
            o.rt.pcap = v, crescent_dev = true;
        } else if (f == "--pcap-snaplen") {
            if (!p.number(64, 262144, &n)) return false;
            o.rt.pcap_snaplen = uint32_t(n), crescent_dev = true;
        } else if (f == "--pcap-max-bytes") {
            if (!p.number(24, uint64_t(1) << 50, &n)) return false;
            o.rt.pcap_max_bytes = n, crescent_dev = true;
        } else if (f == "--metrics-port") {
            if (!p.number(1, 65535, &n)) return false;
            o.rt.metrics_port = uint16_t(n);
        } else if (f == "--metrics-bind") {
            if (!p.value(&v)) return false;
            o.rt.metrics_bind = v;
        } else if (f == "--burst") {
            if (!p.number(1, 512, &n)) return false;
            o.rt.engine.burst = uint16_t(n);
        } else if (f == "--burst-flush-ns") {
            if (!p.value(&v)) return false;
            const std::string a(v);
            if (a == "off") {
                o.rt.engine.burst_flush_after = crescent::Duration::max();
            } else {
                char* end = nullptr;
                errno = 0;
                unsigned long long ns = std::strtoull(a.c_str(), &end, 10);
                if (a.empty() || a[0] < '0' || a[0] > '9' || *end != '\0' || errno != 0 || ns > 1000000000ull)
                    return p.fail("--burst-flush-ns: '" + a + "' is not a number of ns in 0..1000000000 or 'off'");
                o.rt.engine.burst_flush_after = std::chrono::nanoseconds(ns);
            }
        } else if (f == "--reply-at-once") {
            if (!p.value(&v)) return false;
            const std::string_view a(v);
            if (a != "on" && a != "off") return p.fail("--reply-at-once: '" + std::string(a) + "' is not 'on' or 'off'");
            o.rt.engine.reply_at_once = a == "on";
        } else if (f == "--arena-mb") {
            if (!p.number(16, 1u << 20, &n)) return false;
            o.rt.arena_bytes = size_t(n) << 20;
        } else if (f == "--idle-sleep-us") {
            if (!p.number(1, 1000000, &n)) return false;
            o.rt.engine.idle_spin = 1000;
            o.rt.engine.idle_sleep = std::chrono::microseconds(n);
        } else if (f == "--rx-ring") {
            if (!p.number(64, 4096, &n)) return false;
            if (n & (n - 1)) return p.fail("--rx-ring: '" + std::to_string(n) + "' is not a power of two in 64..4096");
            o.rt.rx_ring = uint16_t(n);
        } else if (client && f == "--server") {
            if (!p.value(&v)) return false;
            crescent::Ipv4 ip;
            if (!crescent::Ipv4::parse(v, &ip)) return bad("an IPv4 address");
            o.server = v;
        } else if (client && f == "--msg-size") {
            if (!p.number(1, kMaxMessage, &n)) return false;
            o.msg_size = n;
        } else if (client && f == "--resp-size") {
            if (!p.number(0, kMaxMessage, &n)) return false;
            o.resp_size = n, o.resp_given = true;
        } else if (client && f == "--iodepth") {
            if (!p.number(1, 1024, &n)) return false;
            o.iodepth = uint32_t(n);
        } else if (client && f == "--conns") {
            if (!p.number(1, 256, &n)) return false;
            o.conns = unsigned(n);
        } else if (client && f == "--server-threads") {
            if (!p.number(1, 64, &n)) return false;
            o.server_threads = unsigned(n);
        } else if (client && f == "--duration") {
            if (!p.real(0.1, 86400, &o.duration)) return false;
        } else if (client && f == "--warmup") {
            if (!p.real(0, 3600, &o.warmup)) return false;
        } else if (client && f == "--rate") {
            if (!p.real(1, 1e9, &o.rate)) return false;
        } else if (client && f == "--json") {
            if (!p.value(&v)) return false;
            o.json = v;
        } else if (client && f == "--label") {
            if (!p.value(&v)) return false;
            o.label = v;
        } else if (client && f == "--verify") {
            if (!p.value(&v)) return false;
            std::string_view s = v;
            if (s == "full") o.verify_full = true;
            else if (s == "ends") o.verify_full = false;
            else return bad("ends or full");
        } else if (client && f == "--progress") {
            if (!p.value(&v)) return false;
            std::string_view s = v;
            if (s == "on") o.progress = 1;
            else if (s == "off") o.progress = 0;
            else return bad("on or off");
        } else {
            if (!client && (f == "--server" || f == "--msg-size" || f == "--resp-size" || f == "--iodepth" ||
                            f == "--conns" || f == "--duration" || f == "--warmup" || f == "--rate" ||
                            f == "--json" || f == "--server-threads" || f == "--label" || f == "--progress" ||
                            f == "--verify"))
                return p.fail(std::string(f) + " is a client option (the server answers what it is asked)");
            return p.fail("unknown option '" + std::string(f) + "' (see knb --help)");
        }
    }
    if (!stack_given) return p.fail("give --stack crescent or --stack kernel");
    if (o.stack == Stack::Crescent) {
        if (o.rt.iface.empty() == o.rt.eal.empty())
            return p.fail("--stack crescent needs exactly one of --iface IFACE or --eal \"ARGS\"");
        if (!o.rt.eal.empty() && o.rt.ip.empty())
            return p.fail("--eal needs --ip A.B.C.D/LEN (the device has no kernel address)");
    } else {
        if (crescent_dev)
            return p.fail("--iface/--eal/--ip/--mac/--neighbour/--impair/--pcap/--cc/--keepalive/--user-timeout/--max-rto are crescent options; "
                          "--stack kernel uses the kernel's interfaces");
        if (o.mode_given && o.mode != Mode::Copy)
            return p.fail("--mode " + std::string(name(o.mode)) +
                          ": kernel sockets always copy (only --mode copy applies to --stack kernel)");
        o.mode = Mode::Copy;
    }
    if (!o.cpus.empty() && o.cpus.size() < o.threads)
        return p.fail("--cpus names " + std::to_string(o.cpus.size()) + " CPU(s) for --threads " +
                      std::to_string(o.threads));
    if (client) {
        if (o.server.empty()) return p.fail("client: --server IP is required");
        if (!o.resp_given) o.resp_size = o.msg_size;
        if (o.proto == Proto::Echo) {
            if (o.resp_given && o.resp_size != o.msg_size)
                return p.fail("--proto echo: the response is the request (--resp-size must equal --msg-size)");
        }
        const uint64_t mesh = o.server_threads ? o.server_threads : 1;
        if (uint64_t(o.iodepth) * o.conns * mesh * o.threads > 65536)
            return p.fail("--iodepth x --conns x --server-threads x --threads is above 65536 requests in flight");
    }
    *out = std::move(o);
    return true;
}

std::vector<std::string> to_args(const Options& o) {
    std::vector<std::string> a;
    auto add = [&](std::string f, std::string v) {
        a.push_back(std::move(f));
        a.push_back(std::move(v));
    };
    auto num = [](double d) {
        char b[32];
        std::snprintf(b, sizeof b, "%.17g", d);
        return std::string(b);
    };
    a.push_back(o.role == Role::Server ? "server" : "client");
    add("--stack", std::string(name(o.stack)));
    add("--proto", std::string(name(o.proto)));
    if (o.stack == Stack::Crescent) add("--mode", std::string(name(o.mode)));
    add("--kernel-wait", std::string(name(o.kernel_wait)));
    add("--threads", std::to_string(o.threads));
    add("--port", std::to_string(o.port));
    if (!o.cpus.empty()) {
        std::string l;
        for (unsigned c : o.cpus) l += (l.empty() ? "" : ",") + std::to_string(c);
        add("--cpus", l);
    }
    if (o.stats) a.push_back("--stats");
    if (!o.rt.iface.empty()) add("--iface", o.rt.iface);
    if (!o.rt.eal.empty()) add("--eal", o.rt.eal);
    if (!o.rt.ip.empty()) add("--ip", o.rt.ip);
    if (!o.rt.mac.empty()) add("--mac", o.rt.mac);
    if (!o.rt.gateway.empty()) add("--gateway", o.rt.gateway);
    for (const std::string& nb : o.rt.neighbours) add("--neighbour", nb);
    if (!o.rt.file_prefix.empty()) add("--file-prefix", o.rt.file_prefix);
    if (o.rt.no_huge) a.push_back("--no-huge");
    const crescent::ConnOptions& c = o.rt.engine.conn;
    if (o.stack == Stack::Crescent) add("--cc", std::string(crescent::congestion_control_name(c.cc)));
    if (c.keepalive)
        add("--keepalive", seconds_text(c.keepalive_idle) + "," + seconds_text(c.keepalive_interval) + "," +
                               std::to_string(c.keepalive_count));
    const crescent::ConnOptions conn_defaults;
    if (c.user_timeout != conn_defaults.user_timeout) add("--user-timeout", seconds_text(c.user_timeout));
    if (c.max_rto != conn_defaults.max_rto) add("--max-rto", seconds_text(c.max_rto));
    if (!o.rt.impair.empty()) add("--impair", o.rt.impair);
    if (!o.rt.pcap.empty()) add("--pcap", o.rt.pcap);
    if (o.rt.pcap_snaplen) add("--pcap-snaplen", std::to_string(o.rt.pcap_snaplen));
    if (o.rt.pcap_max_bytes) add("--pcap-max-bytes", std::to_string(o.rt.pcap_max_bytes));
    const crescent::RuntimeOptions defaults;
    if (o.rt.metrics_port) add("--metrics-port", std::to_string(o.rt.metrics_port));
    if (o.rt.metrics_bind != defaults.metrics_bind) add("--metrics-bind", o.rt.metrics_bind);
    if (o.rt.engine.burst != defaults.engine.burst) add("--burst", std::to_string(o.rt.engine.burst));
    if (const auto& f = o.rt.engine.burst_flush_after)
        add("--burst-flush-ns", *f == crescent::Duration::max() ? std::string("off") : std::to_string(f->count()));
    if (!o.rt.engine.reply_at_once) add("--reply-at-once", "off");
    if (o.rt.arena_bytes != defaults.arena_bytes) add("--arena-mb", std::to_string(o.rt.arena_bytes >> 20));
    if (o.rt.rx_ring) add("--rx-ring", std::to_string(o.rt.rx_ring));
    if (o.rt.engine.idle_spin)
        add("--idle-sleep-us",
            std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(o.rt.engine.idle_sleep).count()));
    if (o.role == Role::Client) {
        add("--server", o.server);
        add("--msg-size", std::to_string(o.msg_size));
        add("--resp-size", std::to_string(o.resp_size));
        add("--iodepth", std::to_string(o.iodepth));
        add("--conns", std::to_string(o.conns));
        if (o.server_threads) add("--server-threads", std::to_string(o.server_threads));
        add("--duration", num(o.duration));
        add("--warmup", num(o.warmup));
        if (o.rate > 0) add("--rate", num(o.rate));
        if (!o.json.empty()) add("--json", o.json);
        if (!o.label.empty()) add("--label", o.label);
        if (o.progress >= 0) add("--progress", o.progress ? "on" : "off");
        if (o.verify_full) add("--verify", "full");
    }
    return a;
}

}  // namespace knb
