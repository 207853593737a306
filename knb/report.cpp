// knb — results as a table, as JSON, as a progress line (see report.hpp).
#include "knb/report.hpp"

#include <cerrno>
#include <cinttypes>
#include <cstring>

namespace knb {

std::string json_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (uint8_t(c) < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", unsigned(uint8_t(c)));
            out += b;
        } else {
            out += c;
        }
    }
    return out;
}

namespace {

struct Json {
    std::string s;
    bool first = true;

    void sep() {
        if (!first) s += ',';
        first = false;
    }
    void key(std::string_view k) {
        sep();
        s += '"';
        s += k;
        s += "\":";
    }
    Json& str(std::string_view k, std::string_view v) {
        key(k);
        s += '"' + json_escape(v) + '"';
        return *this;
    }
    Json& u64(std::string_view k, uint64_t v) {
        key(k);
        s += std::to_string(v);
        return *this;
    }
    Json& real(std::string_view k, double v) {
        key(k);
        char b[40];
        std::snprintf(b, sizeof b, "%.6g", v);
        s += b;
        return *this;
    }
    Json& boolean(std::string_view k, bool v) {
        key(k);
        s += v ? "true" : "false";
        return *this;
    }
    Json& null(std::string_view k) {
        key(k);
        s += "null";
        return *this;
    }
    Json& opt(std::string_view k, const std::optional<double>& v) { return v ? real(k, *v) : null(k); }
    Json& opt(std::string_view k, const std::optional<uint64_t>& v) { return v ? u64(k, *v) : null(k); }
    Json& raw(std::string_view k, std::string_view v) {
        key(k);
        s += v;
        return *this;
    }
    Json& open(std::string_view k) {
        key(k);
        s += '{';
        first = true;
        return *this;
    }
    Json& close() {
        s += '}';
        first = false;
        return *this;
    }
};

double us(uint64_t ns) { return double(ns) / 1e3; }

std::string cdf_json(const crescent::rpc::Histogram& h) {
    std::string s = "[";
    const double total = double(h.count());
    uint64_t cum = 0;
    bool first = true;
    h.for_each_bucket([&](uint64_t, uint64_t hi, uint64_t n) {
        cum += n;
        char b[64];
        std::snprintf(b, sizeof b, "%s[%.4g,%.6g]", first ? "" : ",", us(hi), double(cum) / total);
        s += b;
        first = false;
    });
    return s + "]";
}

std::string device_of(const Options& o) {
    if (o.stack == Stack::Kernel) return "kernel sockets";
    return o.rt.iface.empty() ? "eal: " + o.rt.eal : "af_xdp: " + o.rt.iface;
}

}  // namespace

std::string to_json(const Result& r) {
    const Options& c = r.cfg;
    Json j;
    j.s = "{";
    j.u64("knb", 1).str("kind", "run");
    j.open("config")
        .str("role", "client")
        .str("stack", name(c.stack))
        .str("proto", name(c.proto))
        .str("mode", name(c.mode))
        .str("kernel_wait", name(c.kernel_wait))
        .u64("threads", c.threads)
        .u64("server_threads", r.server_threads)
        .u64("conns", c.conns)
        .u64("msg_size", c.msg_size)
        .u64("resp_size", c.resp_size)
        .u64("iodepth", c.iodepth)
        .real("duration", c.duration)
        .real("warmup", c.warmup)
        .real("rate", c.rate)
        .str("loop", c.rate > 0 ? "open" : "closed")
        .str("verify", c.verify_full ? "full" : "ends")
        .str("server", c.server)
        .u64("port", c.port);
    std::string cpus = "[";
    for (size_t i = 0; i < c.cpus.size(); ++i) cpus += (i ? "," : "") + std::to_string(c.cpus[i]);
    j.raw("cpus", cpus + "]").str("label", c.label).str("device", r.device.empty() ? device_of(c) : r.device);
    j.close();
    if (r.server.known) {
        j.open("server")
            .str("stack", r.server.stack)
            .str("mode", r.server.mode)
            .str("kernel_wait", r.server.wait)
            .u64("threads", r.server.threads)
            .u64("version", r.server.version)
            .close();
    } else {
        j.null("server");
    }
    const crescent::rpc::Histogram& h = r.latency;
    j.open("result")
        .boolean("ok", r.ok)
        .str("error", r.error)
        .real("seconds", r.seconds)
        .u64("requests", r.requests)
        .u64("completed", r.completed)
        .u64("verified", r.verified)
        .u64("errors", r.errors)
        .real("rps", r.rps())
        .real("gbit_s", r.gbit_s());
    j.open("latency_us")
        .real("min", us(h.min()))
        .real("mean", h.mean() / 1e3)
        .real("p50", us(h.percentile(50)))
        .real("p90", us(h.percentile(90)))
        .real("p99", us(h.percentile(99)))
        .real("p999", us(h.percentile(99.9)))
        .real("max", us(h.max()))
        .close();
    const double rps_total = double(r.requests);
    auto per_rpc = [&](std::optional<double> cpu) -> std::optional<double> {
        if (!cpu || rps_total == 0) return std::nullopt;
        return *cpu * 1e6 / rps_total;
    };
    j.open("cpu_s").real("client", r.client_cpu_s).opt("server", r.server_cpu_s).close();
    j.open("cpu_us_per_rpc").opt("client", per_rpc(r.client_cpu_s)).opt("server", per_rpc(r.server_cpu_s)).close();
    j.open("busy_us_per_rpc").opt("client", per_rpc(r.client_busy_s)).opt("server", per_rpc(r.server_busy_s)).close();
    j.open("retrans").u64("client", r.retrans_client).opt("server", r.retrans_server).close();
    j.open("retrans_timeout").opt("client", r.timeouts_client).opt("server", r.timeouts_server).close();
    j.open("drops").opt("client", r.drops_client).opt("server", r.drops_server).close();
    j.open("phase_ns");
    for (const auto& [side, p] : {std::pair{"client", &r.client_phases}, std::pair{"server", &r.server_phases}}) {
        if (!*p) {
            j.null(side);
            continue;
        }
        const PhaseSums& s = **p;
        j.open(side).u64("samples", s.samples);
        for (size_t i = 0; i < s.ns.size(); ++i) {
            const std::string_view name = crescent::EngineStats::phase_name(i);
            if (s.samples == 0) j.null(name);
            else j.real(name, double(s.ns[i]) / double(s.samples));
        }
        j.close();
    }
    j.close();
    j.close();
    j.raw("cdf", cdf_json(h));
    return j.s + "}";
}

bool write_file(const std::string& path, const std::string& doc, std::string* err) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
        *err = "cannot write " + path + ": " + std::strerror(errno);
        return false;
    }
    bool ok = std::fputs(doc.c_str(), f) >= 0 && std::fputc('\n', f) != EOF;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) *err = "cannot write " + path + ": " + std::strerror(errno);
    return ok;
}

void print_header(FILE* f) {
    std::fprintf(f,
                 "# RPC/s and Gbit/s (request + response payload) over the measured window; latency in us from a\n"
                 "# log-bucketed histogram (<= 1/64 error); CPU = seconds of CPU each process used in the window\n"
                 "# (getrusage); retrans/drops = client+server (the stack's own counters; '-' = not known)\n");
    std::fprintf(f, "%-26s %6s %6s %3s %4s %11s %8s %7s %7s %7s %7s %8s %8s %6s %6s %7s %6s %4s\n", "run", "size",
                 "resp", "qd", "thr", "RPC/s", "Gbit/s", "min", "p50", "p90", "p99", "p99.9", "max", "cpu-c", "cpu-s",
                 "retrans", "drops", "err");
}

void print_row(FILE* f, const Result& r) {
    const Options& c = r.cfg;
    std::string run = c.label;
    if (run.empty()) {
        run = std::string(name(c.stack)) + "/" + std::string(name(c.proto));
        run += c.stack == Stack::Kernel ? "/" + std::string(name(c.kernel_wait)) : "/" + std::string(name(c.mode));
        if (c.rate > 0) run += "/open";
    }
    const crescent::rpc::Histogram& h = r.latency;
    char cpu_s[16] = "-", retr[24] = "-", drops[24] = "-";
    if (r.server_cpu_s) std::snprintf(cpu_s, sizeof cpu_s, "%.2f", *r.server_cpu_s);
    std::snprintf(retr, sizeof retr, "%" PRIu64 "%s", r.retrans_client + r.retrans_server.value_or(0),
                  r.retrans_server ? "" : "+?");
    if (r.drops_client || r.drops_server)
        std::snprintf(drops, sizeof drops, "%" PRIu64 "%s", r.drops_client.value_or(0) + r.drops_server.value_or(0),
                      r.drops_client && r.drops_server ? "" : "+?");
    std::fprintf(f, "%-26s %6" PRIu64 " %6" PRIu64 " %3u %4u %11.0f %8.3f %7.1f %7.1f %7.1f %7.1f %8.1f %8.1f %6.2f %6s %7s %6s %4" PRIu64 "\n",
                 run.c_str(), c.msg_size, c.resp_size, c.iodepth, c.threads, r.rps(), r.gbit_s(), us(h.min()),
                 us(h.percentile(50)), us(h.percentile(90)), us(h.percentile(99)), us(h.percentile(99.9)), us(h.max()),
                 r.client_cpu_s, cpu_s, retr, drops, r.errors);
    std::fflush(f);
}

std::string progress_line(double elapsed, double total, double rps, double p99_us, bool warmup) {
    char b[160];
    std::snprintf(b, sizeof b, "knb %s %5.1f/%.0f s  %12.0f RPC/s  p99 %8.1f us", warmup ? "warm-up" : "running",
                  elapsed, total, rps, p99_us);
    return b;
}

}  // namespace knb
