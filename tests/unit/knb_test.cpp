// knb's command line (knb/options) and its JSON run document (knb/report):
// every flag parsed and bounded, every bad input a one-line error naming it,
// to_args() a faithful inverse of parse(), and the document well-formed JSON
// carrying the schema version-1 keys, with a monotone CDF that ends at 1.
#include <catch2/catch.hpp>

#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "knb/options.hpp"
#include "knb/proto.hpp"
#include "knb/report.hpp"

using namespace knb;

namespace {

bool parse_args(std::vector<std::string> a, Options* o, std::string* err) {
    std::vector<const char*> argv;
    for (auto& s : a) argv.push_back(s.c_str());
    return parse(int(argv.size()), argv.data(), o, err);
}

std::string error_of(std::vector<std::string> a) {
    Options o;
    std::string err;
    if (parse_args(std::move(a), &o, &err)) return "(accepted)";
    return err;
}

// A strict JSON reader that records every object key by its dotted path
// ("result.latency_us.p99"); arrays add "[]" ("cdf[]").
struct JsonCheck {
    const std::string& s;
    size_t i = 0;
    std::set<std::string> keys;
    std::map<std::string, std::string> scalars;  // path -> literal text
    std::vector<std::pair<double, double>> cdf;

    explicit JsonCheck(const std::string& text) : s(text) {}

    void ws() {
        while (i < s.size() && std::isspace(uint8_t(s[i]))) ++i;
    }
    bool lit(const char* w) {
        size_t n = std::strlen(w);
        if (s.compare(i, n, w) != 0) return false;
        i += n;
        return true;
    }
    bool string(std::string* out) {
        if (i >= s.size() || s[i] != '"') return false;
        ++i;
        std::string v;
        while (i < s.size() && s[i] != '"') {
            if (uint8_t(s[i]) < 0x20) return false;
            if (s[i] == '\\') {
                ++i;
                if (i >= s.size()) return false;
                if (s[i] == 'u') {
                    if (i + 4 >= s.size()) return false;
                    i += 4;
                }
            }
            v += s[i++];
        }
        if (i >= s.size()) return false;
        ++i;
        if (out) *out = v;
        return true;
    }
    bool number(double* out) {
        size_t start = i;
        if (i < s.size() && s[i] == '-') ++i;
        while (i < s.size() && (std::isdigit(uint8_t(s[i])) || s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
                                s[i] == '+' || s[i] == '-'))
            ++i;
        if (i == start) return false;
        char* end = nullptr;
        std::string t = s.substr(start, i - start);
        double d = std::strtod(t.c_str(), &end);
        if (*end) return false;
        if (out) *out = d;
        return true;
    }
    bool value(const std::string& path) {
        ws();
        if (i >= s.size()) return false;
        size_t start = i;
        bool ok;
        if (s[i] == '{') ok = object(path);
        else if (s[i] == '[') ok = array(path);
        else if (s[i] == '"') ok = string(nullptr);
        else if (lit("true") || lit("false") || lit("null")) ok = true;
        else ok = number(nullptr);
        if (ok && s[start] != '{' && s[start] != '[') scalars[path] = s.substr(start, i - start);
        return ok;
    }
    bool object(const std::string& path) {
        ++i;
        ws();
        if (i < s.size() && s[i] == '}') return ++i, true;
        for (;;) {
            ws();
            std::string k;
            if (!string(&k)) return false;
            const std::string p = path.empty() ? k : path + "." + k;
            if (!keys.insert(p).second && path.find("[]") == std::string::npos) return false;  // duplicate key
            ws();
            if (!lit(":")) return false;
            if (!value(p)) return false;
            ws();
            if (lit(",")) continue;
            return lit("}");
        }
    }
    bool array(const std::string& path) {
        ++i;
        ws();
        if (i < s.size() && s[i] == ']') return ++i, true;
        for (;;) {
            ws();
            if (path == "cdf" && i < s.size() && s[i] == '[') {  // [latency_us, fraction]
                ++i;
                double a, b;
                ws();
                if (!number(&a)) return false;
                ws();
                if (!lit(",")) return false;
                ws();
                if (!number(&b)) return false;
                ws();
                if (!lit("]")) return false;
                cdf.emplace_back(a, b);
            } else if (!value(path + "[]")) {
                return false;
            }
            ws();
            if (lit(",")) continue;
            return lit("]");
        }
    }
    bool document() {
        ws();
        if (i >= s.size() || s[i] != '{') return false;
        if (!object("")) return false;
        ws();
        return i == s.size();
    }
};

}  // namespace

TEST_CASE("knb options: a client run with every flag", "[knb]") {
    Options o;
    std::string err;
    REQUIRE(parse_args({"client", "--stack", "crescent", "--iface", "veth0", "--server", "10.0.0.1", "--proto", "rpc",
                        "--mode", "batch", "--threads", "2", "--cpus", "0-1", "--msg-size", "4096", "--resp-size",
                        "128", "--iodepth", "16", "--conns", "3", "--server-threads", "2", "--duration", "2.5",
                        "--warmup", "0", "--rate", "50000", "--json", "/tmp/x.json", "--label", "a b", "--progress",
                        "off", "--port", "7400", "--rx-ring", "2048", "--burst", "64", "--arena-mb", "128",
                        "--verify", "full", "--cc", "cubic", "--keepalive", "1.5,0.25,4", "--user-timeout", "2.5",
                        "--max-rto", "2", "--burst-flush-ns", "250", "--reply-at-once", "off"},
                       &o, &err));
    CHECK(err.empty());
    CHECK(o.role == Role::Client);
    CHECK(o.stack == Stack::Crescent);
    CHECK(o.mode == Mode::Batch);
    CHECK(o.threads == 2);
    CHECK(o.cpus == std::vector<unsigned>{0, 1});
    CHECK(o.msg_size == 4096);
    CHECK(o.resp_size == 128);
    CHECK(o.iodepth == 16);
    CHECK(o.conns == 3);
    CHECK(o.server_threads == 2);
    CHECK(o.duration == 2.5);
    CHECK(o.warmup == 0);
    CHECK(o.rate == 50000);
    CHECK(o.json == "/tmp/x.json");
    CHECK(o.label == "a b");
    CHECK(o.progress == 0);
    CHECK(o.port == 7400);
    CHECK(o.rt.iface == "veth0");
    CHECK(o.rt.rx_ring == 2048);
    CHECK(o.rt.engine.burst == 64);
    CHECK(o.rt.engine.burst_flush_after == std::chrono::nanoseconds(250));
    CHECK(o.rt.engine.reply_at_once == false);
    CHECK(o.rt.arena_bytes == (size_t(128) << 20));
    CHECK(o.verify_full);
    CHECK(o.rt.engine.conn.cc == crescent::CongestionControl::Cubic);
    CHECK(o.rt.engine.conn.keepalive);
    CHECK(o.rt.engine.conn.keepalive_idle == std::chrono::milliseconds(1500));
    CHECK(o.rt.engine.conn.keepalive_interval == std::chrono::milliseconds(250));
    CHECK(o.rt.engine.conn.keepalive_count == 4);
    CHECK(o.rt.engine.conn.user_timeout == std::chrono::milliseconds(2500));
    CHECK(o.rt.engine.conn.max_rto == std::chrono::seconds(2));
}

TEST_CASE("knb options: defaults", "[knb]") {
    Options o;
    std::string err;
    REQUIRE(parse_args({"client", "--stack", "kernel", "--server", "127.0.0.1"}, &o, &err));
    CHECK(o.proto == Proto::Rpc);
    CHECK(o.mode == Mode::Copy);  // kernel sockets copy
    CHECK(o.kernel_wait == Wait::Busy);
    CHECK(o.msg_size == 64);
    CHECK(o.resp_size == 64);  // = the request
    CHECK(o.iodepth == 1);
    CHECK(o.conns == 1);
    CHECK(o.threads == 1);
    CHECK(o.server_threads == 0);  // ask the server
    CHECK(o.duration == 10);
    CHECK(o.warmup == 1);
    CHECK(o.rate == 0);
    CHECK(o.port == kDefaultPort);
    CHECK(o.progress == -1);
    CHECK(o.rt.engine.conn.cc == crescent::CongestionControl::NewReno);
    CHECK_FALSE(o.rt.engine.conn.keepalive);
    CHECK_FALSE(o.rt.engine.burst_flush_after);  // the device's default
    CHECK(o.rt.engine.reply_at_once);
    REQUIRE(parse_args({"server", "--stack", "crescent", "--eal", "--vdev=net_memif0", "--ip", "10.0.0.1/24"}, &o, &err));
    CHECK(o.role == Role::Server);
    CHECK(o.mode == Mode::Inline);
}

TEST_CASE("knb options: bad input is one line naming the problem", "[knb]") {
    CHECK(error_of({"clinet"}) == "the first argument must be server, client, sweep or raw, not 'clinet'");
    CHECK(error_of({"client", "--server", "10.0.0.1"}) == "give --stack crescent or --stack kernel");
    CHECK(error_of({"client", "--stack", "kernel"}) == "client: --server IP is required");
    CHECK(error_of({"client", "--stack", "dpdk"}) == "--stack: 'dpdk' is not crescent or kernel");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "10.0.0.300"}) ==
          "--server: '10.0.0.300' is not an IPv4 address");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--iodepth", "0"}) ==
          "--iodepth: '0' is not a number in 1..1024");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--msg-size", "2000000"}) ==
          "--msg-size: '2000000' is not a number in 1..1048576");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--duration", "abc"}) ==
          "--duration: 'abc' is not a number in 0.1..86400");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--duration"}) == "--duration needs a value");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--mode", "inline"}) ==
          "--mode inline: kernel sockets always copy (only --mode copy applies to --stack kernel)");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--iface", "eth0"}).rfind(
              "--iface/--eal", 0) == 0);
    CHECK(error_of({"client", "--stack", "crescent", "--server", "1.2.3.4"}) ==
          "--stack crescent needs exactly one of --iface IFACE or --eal \"ARGS\"");
    CHECK(error_of({"client", "--stack", "crescent", "--eal", "--vdev=x", "--server", "1.2.3.4"}) ==
          "--eal needs --ip A.B.C.D/LEN (the device has no kernel address)");
    CHECK(error_of({"server", "--stack", "kernel", "--iodepth", "4"}) ==
          "--iodepth is a client option (the server answers what it is asked)");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--bogus"}) ==
          "unknown option '--bogus' (see knb --help)");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--cpus", "3-1"}) ==
          "--cpus: '3-1' is not a CPU list like 0-3 or 1,3 (CPUs 0..1023, no repeats)");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--threads", "4", "--cpus", "0,1"}) ==
          "--cpus names 2 CPU(s) for --threads 4");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--proto", "echo", "--resp-size", "9"}) ==
          "--proto echo: the response is the request (--resp-size must equal --msg-size)");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--iodepth", "1024", "--conns", "256"}) ==
          "--iodepth x --conns x --server-threads x --threads is above 65536 requests in flight");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--rx-ring", "1000"}) ==
          "--rx-ring: '1000' is not a power of two in 64..4096");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--progress", "maybe"}) ==
          "--progress: 'maybe' is not on or off");
    CHECK(error_of({"client", "--stack", "kernel", "--server", "1.2.3.4", "--verify", "some"}) ==
          "--verify: 'some' is not ends or full");
    CHECK(error_of({"server", "--stack", "crescent", "--iface", "v", "--cc", "bbr"}) ==
          "--cc: 'bbr' is not newreno, cubic or dctcp");
    for (const char* ka : {"1,1", "1,1,0", "0,1,3", "1,x,3", "1,1,3,4", ",1,3"})
        CHECK(error_of({"server", "--stack", "crescent", "--iface", "v", "--keepalive", ka}) ==
              std::string("--keepalive: '") + ka +
                  "' is not IDLE,INTERVAL,COUNT (seconds, seconds, probes: 0.01..86400, 0.01..86400, 1..100)");
    CHECK(error_of({"server", "--stack", "kernel", "--cc", "cubic"}).rfind("--iface/--eal", 0) == 0);
    for (const char* f : {"x", "-1", "1000000001", "12us", ""})
        CHECK(error_of({"server", "--stack", "crescent", "--iface", "v", "--burst-flush-ns", f}) ==
              std::string("--burst-flush-ns: '") + f + "' is not a number of ns in 0..1000000000 or 'off'");
    for (const char* f : {"yes", "1", ""})
        CHECK(error_of({"server", "--stack", "crescent", "--iface", "v", "--reply-at-once", f}) ==
              std::string("--reply-at-once: '") + f + "' is not 'on' or 'off'");
}

TEST_CASE("knb proto: a request's ends, stamped and checked a word at a time", "[knb]") {
    for (uint64_t n : {uint64_t(0), uint64_t(1), uint64_t(0x0102030405060708), ~uint64_t(0), uint64_t(123456789)}) {
        for (size_t size : {16, 17, 23, 40, 64}) {
            std::vector<std::byte> m(size, std::byte(0xee));
            knb::stamp_ends(m.data(), m.data() + size - 8, n);
            // The rule in proto.hpp, byte by byte.
            for (size_t p = 0; p < 8; ++p) CHECK(std::to_integer<uint8_t>(m[p]) == uint8_t(n >> (8 * p)));
            for (size_t back = 0; back < 8; ++back)
                CHECK(std::to_integer<uint8_t>(m[size - 1 - back]) == uint8_t(uint8_t(n >> (8 * back)) ^ 0x5a));
            for (size_t p = 8; p + 8 < size; ++p) CHECK(std::to_integer<uint8_t>(m[p]) == 0xee);  // between: untouched
            CHECK(knb::ends_match(m.data(), m.data() + size - 8, n));
            CHECK_FALSE(knb::ends_match(m.data(), m.data() + size - 8, n + 1));
            for (size_t p : {size_t(0), size_t(7), size - 8, size - 1}) {
                m[p] ^= std::byte(1);
                CHECK_FALSE(knb::ends_match(m.data(), m.data() + size - 8, n));
                m[p] ^= std::byte(1);
            }
        }
    }
}

TEST_CASE("knb options: CPU lists", "[knb]") {
    std::vector<unsigned> c;
    CHECK(parse_cpu_list("0", &c));
    CHECK(c == std::vector<unsigned>{0});
    CHECK(parse_cpu_list("2,0-1,5", &c));
    CHECK(c == std::vector<unsigned>{2, 0, 1, 5});
    CHECK_FALSE(parse_cpu_list("", &c));
    CHECK_FALSE(parse_cpu_list("1,", &c));
    CHECK_FALSE(parse_cpu_list("1,1", &c));
    CHECK_FALSE(parse_cpu_list("0-1,1", &c));
    CHECK_FALSE(parse_cpu_list("a", &c));
    CHECK_FALSE(parse_cpu_list("1024", &c));
    CHECK_FALSE(parse_cpu_list("-1", &c));
}

TEST_CASE("knb options: to_args gives back the same options", "[knb]") {
    const std::vector<std::vector<std::string>> cases = {
        {"client", "--stack", "crescent", "--eal", "--no-pci --vdev=net_memif0,role=client", "--ip", "10.88.0.2/24",
         "--mac", "02:00:00:00:00:02", "--neighbour", "10.88.0.1=02:00:00:00:00:01", "--file-prefix", "p",
         "--server", "10.88.0.1", "--mode", "copy", "--msg-size", "100", "--resp-size", "7", "--iodepth", "3",
         "--rate", "1234.5", "--duration", "0.25", "--warmup", "0.125", "--threads", "2", "--cpus", "1,0",
         "--verify", "full", "--pcap", "/tmp/k.pcap", "--pcap-snaplen", "128", "--pcap-max-bytes", "100000",
         "--metrics-port", "9464", "--metrics-bind", "0.0.0.0", "--cc", "dctcp", "--keepalive", "2,0.5,5",
         "--burst-flush-ns", "off"},
        {"server", "--stack", "crescent", "--iface", "v", "--burst-flush-ns", "0", "--reply-at-once", "off"},
        {"server", "--stack", "kernel", "--kernel-wait", "block", "--threads", "3", "--proto", "echo", "--port", "9"},
    };
    for (const auto& args : cases) {
        Options a, b;
        std::string err;
        REQUIRE(parse_args(args, &a, &err));
        std::vector<std::string> again = to_args(a);
        REQUIRE(parse_args(again, &b, &err));
        CHECK(to_args(b) == again);
        CHECK(b.role == a.role);
        CHECK(b.stack == a.stack);
        CHECK(b.mode == a.mode);
        CHECK(b.kernel_wait == a.kernel_wait);
        CHECK(b.proto == a.proto);
        CHECK(b.threads == a.threads);
        CHECK(b.cpus == a.cpus);
        CHECK(b.msg_size == a.msg_size);
        CHECK(b.resp_size == a.resp_size);
        CHECK(b.rate == a.rate);
        CHECK(b.duration == a.duration);
        CHECK(b.warmup == a.warmup);
        CHECK(b.rt.pcap == a.rt.pcap);
        CHECK(b.rt.pcap_snaplen == a.rt.pcap_snaplen);
        CHECK(b.rt.pcap_max_bytes == a.rt.pcap_max_bytes);
        CHECK(b.rt.metrics_port == a.rt.metrics_port);
        CHECK(b.rt.metrics_bind == a.rt.metrics_bind);
        CHECK(b.rt.eal == a.rt.eal);
        CHECK(b.rt.neighbours == a.rt.neighbours);
        CHECK(b.port == a.port);
        CHECK(b.verify_full == a.verify_full);
        CHECK(b.rt.engine.conn.cc == a.rt.engine.conn.cc);
        CHECK(b.rt.engine.conn.keepalive == a.rt.engine.conn.keepalive);
        CHECK(b.rt.engine.conn.keepalive_idle == a.rt.engine.conn.keepalive_idle);
        CHECK(b.rt.engine.conn.keepalive_interval == a.rt.engine.conn.keepalive_interval);
        CHECK(b.rt.engine.conn.keepalive_count == a.rt.engine.conn.keepalive_count);
        CHECK(b.rt.engine.burst_flush_after == a.rt.engine.burst_flush_after);
        CHECK(b.rt.engine.reply_at_once == a.rt.engine.reply_at_once);
    }
}

TEST_CASE("knb report: the run document is JSON with the version-1 schema", "[knb]") {
    Result r;
    std::string err;
    REQUIRE(parse_args({"client", "--stack", "kernel", "--server", "10.0.0.1", "--label", "quote\" and \\ and \n",
                        "--cpus", "1"},
                       &r.cfg, &err));
    r.ok = true;
    r.seconds = 2;
    r.requests = 1000;
    r.completed = 1100;
    r.verified = 1100;
    r.server.known = true;
    r.server.version = 1;
    r.server.stack = "kernel";
    r.server.threads = 1;
    for (uint64_t v = 1000; v < 1000 + 1000 * 97; v += 97) r.latency.record(v);  // 1000 samples, 1..98 us
    r.client_cpu_s = 1.5;
    r.server_cpu_s = 2.0;
    r.client_busy_s = 0.25;  // crescent's client: engines busy a quarter of a second
    r.retrans_server = 3;
    r.timeouts_client = 2;  // crescent's client; the kernel server's are not known
    PhaseSums ph;  // the client's engines: 4 iterations timed, 1000 ns of poll and 2000 of parse in all
    ph.samples = 4;
    ph.ns[0] = 1000;
    ph.ns[1] = 2000;
    r.client_phases = ph;
    r.server_phases = PhaseSums{};  // a crescent server none of whose iterations was timed

    const std::string doc = to_json(r);
    JsonCheck j(doc);
    REQUIRE(j.document());
    for (const char* k :
         {"knb", "kind", "config.role", "config.stack", "config.proto", "config.mode", "config.kernel_wait",
          "config.threads", "config.server_threads", "config.conns", "config.msg_size", "config.resp_size",
          "config.iodepth", "config.duration", "config.warmup", "config.rate", "config.loop", "config.verify",
          "config.server",
          "config.port", "config.cpus", "config.label", "config.device", "server.stack", "server.mode",
          "server.kernel_wait", "server.threads", "server.version", "result.ok", "result.error", "result.seconds",
          "result.requests", "result.completed", "result.verified", "result.errors", "result.rps", "result.gbit_s",
          "result.latency_us.min", "result.latency_us.mean", "result.latency_us.p50", "result.latency_us.p90",
          "result.latency_us.p99", "result.latency_us.p999", "result.latency_us.max", "result.cpu_s.client",
          "result.cpu_s.server", "result.cpu_us_per_rpc.client", "result.cpu_us_per_rpc.server",
          "result.busy_us_per_rpc.client", "result.busy_us_per_rpc.server",
          "result.retrans.client", "result.retrans.server", "result.drops.client", "result.drops.server",
          "result.retrans_timeout.client", "result.retrans_timeout.server",
          "result.phase_ns.client.samples", "result.phase_ns.client.poll", "result.phase_ns.client.parse",
          "result.phase_ns.client.tcp", "result.phase_ns.client.app", "result.phase_ns.client.timers",
          "result.phase_ns.client.output", "result.phase_ns.client.flush", "result.phase_ns.client.rest",
          "result.phase_ns.server.samples", "result.phase_ns.server.parse", "cdf"})
        CHECK(j.keys.count(k) == 1);
    CHECK(j.scalars["knb"] == "1");
    CHECK(j.scalars["kind"] == "\"run\"");
    CHECK(j.scalars["result.rps"] == "500");
    CHECK(j.scalars["result.requests"] == "1000");
    CHECK(j.scalars["result.drops.client"] == "null");  // kernel: not known
    CHECK(j.scalars["result.retrans.server"] == "3");
    CHECK(j.scalars["result.retrans_timeout.client"] == "2");
    CHECK(j.scalars["result.retrans_timeout.server"] == "null");
    CHECK(j.scalars["result.cpu_us_per_rpc.server"] == "2000");
    CHECK(j.scalars["result.busy_us_per_rpc.client"] == "250");
    CHECK(j.scalars["result.busy_us_per_rpc.server"] == "null");  // kernel: not known
    CHECK(j.scalars["result.phase_ns.client.samples"] == "4");
    CHECK(j.scalars["result.phase_ns.client.poll"] == "250");  // means per timed iteration
    CHECK(j.scalars["result.phase_ns.client.parse"] == "500");
    CHECK(j.scalars["result.phase_ns.client.tcp"] == "0");
    CHECK(j.scalars["result.phase_ns.client.flush"] == "0");
    CHECK(j.scalars["result.phase_ns.server.samples"] == "0");
    CHECK(j.scalars["result.phase_ns.server.parse"] == "null");  // no mean of nothing
    CHECK(j.scalars["config.loop"] == "\"closed\"");
    CHECK(j.scalars["config.cpus[]"] == "1");
    // The CDF: increasing latencies, a non-decreasing fraction ending at 1.
    REQUIRE(j.cdf.size() > 10);
    for (size_t i = 1; i < j.cdf.size(); ++i) {
        CHECK(j.cdf[i].first > j.cdf[i - 1].first);
        CHECK(j.cdf[i].second >= j.cdf[i - 1].second);
    }
    CHECK(j.cdf.back().second == Approx(1.0));
    CHECK(j.cdf.front().first == Approx(1.0).epsilon(0.02));
    CHECK(j.cdf.back().first == Approx(97.03).epsilon(0.02));

    // A failed run: not ok, the error carried, an unknown server is null.
    Result f;
    f.cfg = r.cfg;
    f.error = "the server went away mid-run";
    const std::string fdoc = to_json(f);
    JsonCheck fj(fdoc);
    REQUIRE(fj.document());
    CHECK(fj.scalars["result.ok"] == "false");
    CHECK(fj.scalars["server"] == "null");
    CHECK(fj.scalars["result.phase_ns.client"] == "null");  // kernel, or not measured
    CHECK(fj.scalars["result.error"] == "\"the server went away mid-run\"");
    CHECK(fj.cdf.empty());
}

TEST_CASE("knb report: the progress line", "[knb]") {
    CHECK(progress_line(1.5, 11, 123456, 41.25, false) ==
          "knb running   1.5/11 s        123456 RPC/s  p99     41.2 us");
    CHECK(progress_line(0.2, 11, 0, 0, true).rfind("knb warm-up", 0) == 0);
}
