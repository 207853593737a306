// knb sweep — a grid of knb runs over a test bed, into one JSON document.
//
// For every stack variant (crescent in each --modes, kernel in each
// --kernel-waits) and every --threads, one `knb server` process is started on
// the server side of the bed; for every --sizes x --iodepths point a `knb
// client` process runs against it and writes its run document; the sweep
// collects them into {"knb":1,"kind":"sweep","bed":..,"runs":[...]}, prints a
// row per run as it ends, and at the end a side-by-side table (each crescent
// variant against each kernel variant at the same point, with ratios).
//
// The bed is described by `tools/knb-bed env BED` (shell assignments: the
// namespace wrappers, addresses, crescent device flags, file prefixes); each
// child runs as `bash -c 'eval "$(knb-bed env BED)"; eval exec ...'`, so the
// sweep knows the bed only through that script. The bed must be up
// (tools/knb-bed up BED). Kernel TCP has no memif: on that bed kernel
// variants are skipped with a note.
//
// --probe CMD runs a shell command (with the bed's variables) beside the
// first client of every crescent server, e.g. a kernel-TCP HTTP request to
// the server's address: coexistence shown, not claimed. Its exit status and
// output go into the document ("probes").
//
// --raw adds the bed's packet round-trip limit (knb raw, no TCP) beside
// crescent: after the RPC grid, for every --threads value one `knb raw
// reflect` (server side, --threads queues) runs while a `knb raw ping`
// (client side) measures each --sizes x --iodepths point once (not once per
// crescent variant), with the same wrappers, device (KNB_*_IFACE or
// KNB_*_EAL), file prefixes, CPUs, duration and warm-up as the RPC runs. The
// frame is the one that carries the RPC request — Ethernet 14 + IPv4 20 +
// TCP 20 + timestamp option 12 + RPC header 32 + knb.echo metadata 4 +
// msg_size bytes. Where the request needs more than one frame (above the
// bed's MTU + 14) it goes as a message of that many full frames, which the
// reflector answers as a whole once the last is in (knb raw ping --split; said
// in the output), as the RPC server must. The messages in flight per queue are
// what one client engine keeps in flight: iodepth x conns x threads (the
// client meshes with every server thread). --raw-args adds flags to both
// knb raw processes (--idle-sleep-us when the crescent sides nap). The
// document gets a "raw" array ({"point":{msg_size,iodepth,threads,conns},
// "frame":..,"frames":..,"frame_wanted":..,"raw_iodepth":..,"queues":..,
// "ok":..,"error":..,"result":<knb raw ping JSON>|null}) and the end-of-sweep
// table a section "crescent against the bed's raw limit" (crescent RPC/s /
// raw round trips/s) and, with kernel variants in the grid, "the bed's
// ceiling over the kernel" (raw round trips/s / kernel RPC/s: the largest
// crescent-to-kernel ratio the bed allows at that point).
//
// --kernel-client (veth) answers the issue's "a kernel client is never
// served slower by crescent than by the kernel": against every crescent
// server, each point also runs with a busy kernel client (label
// "kernel>crescent/inline"); after the grid, the busy kernel server runs on
// port 7301 of the same veth while a crescent server (napping when idle, on
// the same CPUs) keeps the steering program attached, with the same kernel
// client ("kernel>kernel/busy+xdp": what attaching XDP costs kernel flows on
// this bed). These runs go in the document's "kernel_client" array
// ({"served_by":..,"run":<client document>}), not "runs" (a kernel client's
// document says stack kernel, and the plots would take it for kernel/busy),
// and into a table beside the sweep's kernel/busy runs (sweep_report.cpp).
//
// --repeat N runs the whole grid N times in rounds (each variant's server and
// points, the raw limit, the kernel-behind-XDP control, then again), so that
// a shared machine's drift over minutes falls on every variant alike rather
// than on whichever ran last. The tables then give each point's medians over
// the rounds, and beside each ratio (and raw fraction) the range of the
// rounds' own ones; the document says "repeat" and each run's "round".
//
// A failed point is reported and the grid goes on; the exit status is 1 if
// any run (raw ones included) failed. Ctrl-C stops the current processes and
// writes what ran.
#include "knb/sweep.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "knb/options.hpp"
#include "knb/report.hpp"
#include "knb/sweep_impl.hpp"

namespace knb {

namespace {

using namespace std::chrono_literals;
using namespace sweep;

std::atomic<bool> g_interrupted{false};
void on_signal(int) { g_interrupted.store(true); }

const char* kUsage =
    "usage: knb sweep --bed veth|memif --json FILE [options]\n"
    "  --stacks LIST        crescent,kernel (both)\n"
    "  --modes LIST         crescent modes: inline,batch,copy (inline)\n"
    "  --kernel-waits LIST  kernel variants: busy,block (busy,block)\n"
    "  --sizes LIST         message sizes, bytes, up to 1048576 (64,4096)\n"
    "  --resp-size N        every response N bytes (default: the request's size); e.g. 64 with\n"
    "                       --sizes 65536: a one-way stream of 64 KiB messages\n"
    "  --iodepths LIST      requests in flight per connection (1,16)\n"
    "  --threads LIST       threads per side (1)\n"
    "  --conns N            connections per thread pair (1)\n"
    "  --proto rpc|echo     (rpc)\n"
    "  --duration S --warmup S   per point (3, 1)\n"
    "  --repeat N           the whole grid N times in rounds (1..100; 1), every variant once per round,\n"
    "                       so a noisy machine's drift falls on all of them alike; the tables give\n"
    "                       each point's medians over the rounds and the range of the per-round ratios\n"
    "  --server-cpus LIST --client-cpus LIST   pin each side (e.g. 0 and 1)\n"
    "  --out DIR            logs and per-run documents (a temporary directory)\n"
    "  --probe CMD          shell command run beside the first client of every crescent server\n"
    "  --bed-script PATH    tools/knb-bed (from the source tree)\n"
    "  --knb PATH           the knb binary children run (this one)\n"
    "  --server-args ARGS --client-args ARGS   extra flags for every server / client\n"
    "  --raw                also measure the bed's packet round-trip limit (knb raw reflect/ping, no\n"
    "                       TCP) once per size x iodepth x threads point crescent runs, with the frame\n"
    "                       of the RPC request (102 B of headers + size; above the MTU + 14, a\n"
    "                       message of that many frames, answered as a whole) and iodepth x conns x\n"
    "                       threads of them in flight per queue (with --resp-size, each answered\n"
    "                       by one frame of 102 B + N: no larger than the request's frames); the table puts\n"
    "                       crescent's RPC/s beside it as a fraction\n"
    "  --raw-args ARGS      extra flags for knb raw reflect and ping (e.g. --idle-sleep-us 20 when the\n"
    "                       crescent sides nap: more threads than CPUs; --touch: the reflector reads every\n"
    "                       frame it answers, as a TCP receiver's checksum must)\n"
    "  --kernel-client      (veth) also a busy kernel client against every crescent server, and\n"
    "                       against the busy kernel server on the same veth while crescent's\n"
    "                       steering program is attached (kernel/busy+xdp: the bed's cost for\n"
    "                       kernel flows); a table puts them beside the kernel/busy runs (needs\n"
    "                       kernel in --stacks and busy in --kernel-waits)\n"
    "  --loss PCT           lose PCT % (0 < PCT <= 50) of the frames each way, independently: crescent\n"
    "                       through its engine's --impair (on RX and TX of both sides), kernel TCP in\n"
    "                       netfilter's input hook of both namespaces (tools/knb-bed kernel-loss; the\n"
    "                       frames it saw and dropped go in each kernel run's document)\n"
    "  --kernel-rto-min MS  (veth) kernel runs with the route's minimum RTO at MS ms (1..1000) instead of\n"
    "                       the kernel's 200 ms (crescent's default floor is 5 ms)\n"
    "The bed must be up: tools/knb-bed up veth|memif.\n";

// The frame that carries a knb RPC request of `size` bytes (crescent sends
// the TCP timestamp option): Ethernet + IPv4 + TCP + timestamps + RPC
// header (rpc/frame) + knb.echo's 4-byte metadata.
constexpr uint64_t kRpcFrameOverhead = 14 + 20 + 20 + 12 + 32 + 4;
constexpr uint64_t kRawMaxDepth = 4096;  // knb raw ping --iodepth bound

bool split_list(std::string_view s, std::vector<std::string>* out) {
    out->clear();
    while (!s.empty()) {
        size_t c = s.find(',');
        std::string item(s.substr(0, c));
        if (item.empty()) return false;
        out->push_back(item);
        if (c == std::string_view::npos) break;
        s = s.substr(c + 1);
        if (s.empty()) return false;
    }
    return !out->empty();
}

bool number_list(std::string_view s, uint64_t lo, uint64_t hi, std::vector<uint64_t>* out) {
    std::vector<std::string> items;
    if (!split_list(s, &items)) return false;
    out->clear();
    for (const std::string& i : items) {
        char* end = nullptr;
        errno = 0;
        unsigned long long v = std::strtoull(i.c_str(), &end, 10);
        if (errno || *end || i[0] == '-' || v < lo || v > hi) return false;
        out->push_back(v);
    }
    return true;
}

bool parse_sweep(int argc, char** argv, Sweep* sw, std::string* err) {
    auto fail = [&](std::string m) {
        *err = std::move(m);
        return false;
    };
    for (int i = 1; i < argc; ++i) {
        std::string f = argv[i];
        if (f == "-h" || f == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        if (f == "--raw") {
            sw->raw = true;
            continue;
        }
        if (f == "--kernel-client") {
            sw->kernel_client = true;
            continue;
        }
        if (i + 1 >= argc) return fail(f + " needs a value (or is unknown: see knb sweep --help)");
        std::string v = argv[++i];
        std::vector<std::string> items;
        auto bad = [&](const char* what) { return fail(f + ": '" + v + "' is not " + what); };
        if (f == "--bed") {
            if (v != "veth" && v != "memif") return bad("veth or memif");
            sw->bed = v;
        } else if (f == "--json") {
            sw->json = v;
        } else if (f == "--stacks") {
            if (!split_list(v, &items)) return bad("a list like crescent,kernel");
            sw->stacks.clear();
            for (auto& s : items) {
                Stack st;
                if (!parse_stack(s, &st)) return bad("a list of crescent and kernel");
                sw->stacks.push_back(st);
            }
        } else if (f == "--modes") {
            if (!split_list(v, &items)) return bad("a list like inline,batch,copy");
            sw->modes.clear();
            for (auto& s : items) {
                Mode m;
                if (!parse_mode(s, &m)) return bad("a list of inline, batch and copy");
                sw->modes.push_back(m);
            }
        } else if (f == "--kernel-waits") {
            if (!split_list(v, &items)) return bad("a list like busy,block");
            sw->waits.clear();
            for (auto& s : items) {
                Wait w;
                if (!parse_wait(s, &w)) return bad("a list of busy and block");
                sw->waits.push_back(w);
            }
        } else if (f == "--sizes") {
            if (!number_list(v, 1, kMaxMessage, &sw->sizes)) return bad("a list of sizes in 1..1048576");
        } else if (f == "--resp-size") {
            std::vector<uint64_t> r;
            if (!number_list(v, 1, kMaxMessage, &r) || r.size() != 1) return bad("a size in 1..1048576");
            sw->resp_size = r[0];
        } else if (f == "--iodepths") {
            if (!number_list(v, 1, 1024, &sw->iodepths)) return bad("a list of iodepths in 1..1024");
        } else if (f == "--threads") {
            if (!number_list(v, 1, 64, &sw->threads)) return bad("a list of thread counts in 1..64");
        } else if (f == "--conns") {
            std::vector<uint64_t> c;
            if (!number_list(v, 1, 256, &c) || c.size() != 1) return bad("a number in 1..256");
            sw->conns = unsigned(c[0]);
        } else if (f == "--repeat") {
            std::vector<uint64_t> n;
            if (!number_list(v, 1, 100, &n) || n.size() != 1) return bad("a number of rounds in 1..100");
            sw->repeat = unsigned(n[0]);
        } else if (f == "--proto") {
            if (!parse_proto(v, &sw->proto)) return bad("rpc or echo");
        } else if (f == "--duration" || f == "--warmup") {
            char* end = nullptr;
            double d = std::strtod(v.c_str(), &end);
            if (*end || !std::isfinite(d) || d < (f == "--duration" ? 0.1 : 0) || d > 3600)
                return bad("a number of seconds in 0.1..3600");
            (f == "--duration" ? sw->duration : sw->warmup) = d;
        } else if (f == "--server-cpus" || f == "--client-cpus") {
            std::vector<unsigned> cpus;
            if (!parse_cpu_list(v, &cpus)) return bad("a CPU list like 0 or 0-1");
            (f == "--server-cpus" ? sw->server_cpus : sw->client_cpus) = v;
        } else if (f == "--out") {
            sw->out = v;
        } else if (f == "--probe") {
            sw->probe = v;
        } else if (f == "--bed-script") {
            sw->bed_script = v;
        } else if (f == "--knb") {
            sw->knb_path = v;
        } else if (f == "--server-args") {
            sw->server_args = v;
        } else if (f == "--client-args") {
            sw->client_args = v;
        } else if (f == "--raw-args") {
            sw->raw_args = v;
        } else if (f == "--loss") {
            char* end = nullptr;
            double d = std::strtod(v.c_str(), &end);
            if (*end || !std::isfinite(d) || d <= 0 || d > 50) return bad("a percentage above 0 and at most 50");
            sw->loss = d;
        } else if (f == "--kernel-rto-min") {
            std::vector<uint64_t> ms;
            if (!number_list(v, 1, 1000, &ms) || ms.size() != 1) return bad("a number of milliseconds in 1..1000");
            sw->kernel_rto_min = unsigned(ms[0]);
        } else {
            return fail("unknown option '" + f + "' (see knb sweep --help)");
        }
    }
    for (const std::string* v :
         {&sw->knb_path, &sw->bed_script, &sw->json, &sw->out, &sw->server_args, &sw->client_args, &sw->raw_args})
        if (v->find_first_of("\"\\`") != std::string::npos)
            return fail("'" + *v + "': double quotes, backslashes and backquotes are not supported in sweep arguments");
    if (sw->bed.empty()) return fail("give --bed veth or --bed memif");
    if (sw->json.empty()) return fail("give --json FILE (the sweep's document)");
    if (sw->raw && std::find(sw->stacks.begin(), sw->stacks.end(), Stack::Crescent) == sw->stacks.end())
        return fail("--raw puts crescent beside the bed's raw limit: add crescent to --stacks");
    if (!sw->raw && !sw->raw_args.empty()) return fail("--raw-args is for the --raw runs: give --raw too");
    if (sw->resp_size != 0 && sw->proto == Proto::Echo)
        return fail("--resp-size is for --proto rpc: an echo's response is its request");
    if (sw->raw && sw->resp_size > *std::min_element(sw->sizes.begin(), sw->sizes.end()))
        return fail("--raw with --resp-size " + std::to_string(sw->resp_size) +
                    ": knb raw answers with a frame of the request, cut, so no response may be larger than a "
                    "request (the smallest of --sizes)");
    if (sw->kernel_client) {
        auto has = [](const auto& v, auto x) { return std::find(v.begin(), v.end(), x) != v.end(); };
        if (sw->bed != "veth") return fail("--kernel-client needs --bed veth: kernel TCP has no memif device");
        if (!has(sw->stacks, Stack::Crescent) || !has(sw->stacks, Stack::Kernel) || !has(sw->waits, Wait::Busy))
            return fail("--kernel-client puts a kernel client served by crescent beside one served by the busy "
                        "kernel: give --stacks crescent,kernel and busy in --kernel-waits");
    }
    if (sw->loss > 0) {
        if (sw->kernel_client)
            return fail("--loss with --kernel-client is not supported: crescent's impairment and the kernel's "
                        "netfilter loss would both fall on the same frames");
        if (sw->raw) return fail("--loss with --raw: the raw limit is the lossless bed's; measure it without --loss");
        if (sw->server_args.find("--impair") != std::string::npos ||
            sw->client_args.find("--impair") != std::string::npos)
            return fail("--loss sets crescent's --impair itself: leave it out of --server-args and --client-args");
    }
    if (sw->kernel_rto_min != 0) {
        if (sw->bed != "veth") return fail("--kernel-rto-min needs --bed veth: kernel TCP has no memif device");
        if (std::find(sw->stacks.begin(), sw->stacks.end(), Stack::Kernel) == sw->stacks.end())
            return fail("--kernel-rto-min tunes the kernel runs: add kernel to --stacks");
    }
    if (access(sw->bed_script.c_str(), X_OK) != 0)
        return fail("--bed-script: " + sw->bed_script + " is not an executable script");
    return true;
}

std::string sh_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) {
        if (c == '\'') q += "'\\''";
        else q += c;
    }
    return q + "'";
}

// A child: bash -c SCRIPT, stdout+stderr to `log`. Returns its pid (-1 on failure).
pid_t spawn(const std::string& script, const std::string& log) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    execl("/bin/bash", "bash", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
}

// "status 3", "signal 11 (Segmentation fault)": how a child ended.
std::string describe_status(int status) {
    if (WIFEXITED(status)) return "status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    return "status " + std::to_string(status);
}

// Waits up to `limit` for `pid`; kills it (INT, then KILL) when over. Exit status or -1.
int wait_for(pid_t pid, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    int status = 0;
    bool sent_int = false;
    auto kill_at = until;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (r < 0) return -1;
        const auto now = std::chrono::steady_clock::now();
        if (!sent_int && (now >= until || g_interrupted.load())) {
            kill(pid, SIGINT);
            sent_int = true;
            kill_at = now + 10s;
        } else if (sent_int && now >= kill_at) {
            kill(pid, SIGKILL);
        }
        std::this_thread::sleep_for(20ms);
    }
}

std::string read_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string last_line(const std::string& text) {
    size_t end = text.find_last_not_of("\r\n ");
    if (end == std::string::npos) return {};
    size_t start = text.find_last_of('\n', end);
    return text.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

class Runner {
public:
    explicit Runner(Sweep s) : sw(std::move(s)) {}

    int run() {
        if (sw.out.empty()) {
            char tmpl[] = "/tmp/knb-sweep-XXXXXX";
            if (!mkdtemp(tmpl)) return die("cannot make a temporary directory");
            sw.out = tmpl;
        } else if (mkdir(sw.out.c_str(), 0755) != 0 && errno != EEXIST) {
            return die("--out " + sw.out + ": " + std::strerror(errno));
        }
        if (sw.knb_path.empty()) {
            char buf[4096];
            ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
            if (n <= 0) return die("cannot find this binary (give --knb PATH)");
            sw.knb_path.assign(buf, size_t(n));
        }
        std::fprintf(stderr, "knb sweep: bed %s, logs and run documents in %s\n", sw.bed.c_str(), sw.out.c_str());
        if (sw.kernel_rto_min != 0) {
            const auto [rc, out] = bed_cmd("kernel-rto-min", std::to_string(sw.kernel_rto_min));
            if (rc != 0) return die("cannot set the kernel's minimum RTO: " + last_line(out));
        }
        print_sweep_header();
        if (sw.bed == "memif" && std::find(sw.stacks.begin(), sw.stacks.end(), Stack::Kernel) != sw.stacks.end())
            std::fprintf(stderr, "knb sweep: kernel TCP has no memif device: kernel runs skipped on this bed\n");
        for (round = 1; round <= sw.repeat && !g_interrupted; ++round) {
            if (sw.repeat > 1) std::printf("# round %u of %u\n", round, sw.repeat);
            run_round();
        }
        // The bed as it was: no loss rules, the kernel's own minimum RTO.
        if (sw.kernel_rto_min != 0) bed_cmd("kernel-rto-min", "0");
        if (sw.loss > 0 && has_kernel_runs()) bed_cmd("kernel-loss", "0");
        write_document(sw, res);
        print_comparison(sw, res);
        print_raw_comparison(sw, res);
        print_kernel_client_comparison(sw, res);
        unsigned failed = 0;
        for (const Point& p : res.points) failed += !p.ok;
        for (const RawPoint& r : res.raws) failed += !r.ok;
        const size_t runs = res.points.size() + res.raws.size();
        if (g_interrupted) {
            std::fprintf(stderr, "knb sweep: interrupted; %zu run(s) written to %s\n", runs, sw.json.c_str());
            return 130;
        }
        std::fprintf(stderr, "knb sweep: %zu run(s)%s, %u failed; written to %s\n", runs,
                     sw.raw ? (" (" + std::to_string(res.raws.size()) + " raw)").c_str() : "", failed, sw.json.c_str());
        return failed ? 1 : 0;
    }

private:
    Sweep sw;
    Results res;
    unsigned serial = 0;
    unsigned round = 1;  // of sw.repeat: finish() and finish_raw() stamp it on what they record
    unsigned impair_seed = 0;  // --loss: each crescent process draws its own losses

    // The grid once: every stack variant's server and its points, then the
    // raw limit and the kernel-behind-XDP control.
    void run_round() {
        for (Stack st : sw.stacks) {
            if (st == Stack::Kernel && sw.bed == "memif") continue;
            const size_t variants = st == Stack::Crescent ? sw.modes.size() : sw.waits.size();
            for (size_t v = 0; v < variants && !g_interrupted; ++v)
                for (uint64_t t : sw.threads) {
                    if (g_interrupted) break;
                    Point base{st, st == Stack::Crescent ? sw.modes[v] : Mode::Copy,
                               st == Stack::Kernel ? sw.waits[v] : Wait::Busy, t, 0, 0};
                    run_server_and_clients(base);
                }
        }
        if (sw.raw)
            for (uint64_t t : sw.threads) {
                if (g_interrupted) break;
                run_raw(t);
            }
        if (sw.kernel_client)
            for (uint64_t t : sw.threads) {
                if (g_interrupted) break;
                run_kernel_behind_xdp(t);
            }
    }

    bool has_kernel_runs() const {
        return sw.bed == "veth" && std::find(sw.stacks.begin(), sw.stacks.end(), Stack::Kernel) != sw.stacks.end();
    }

    // `knb-bed CMD BED [ARG]`, run to its end: its exit status and output.
    std::pair<int, std::string> bed_cmd(const std::string& cmd, const std::string& arg = "") const {
        std::string line = sh_quote(sw.bed_script) + " " + cmd + " " + sw.bed;
        if (!arg.empty()) line += " " + sh_quote(arg);
        FILE* f = popen((line + " 2>&1").c_str(), "r");
        if (!f) return {-1, "popen failed"};
        std::string out;
        char buf[512];
        while (size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
        const int st = pclose(f);
        return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
    }

    // --loss for crescent: each frame crosses two impairments (the sender's
    // TX, the receiver's RX), each losing q, so that 1 - (1 - q)^2 = loss.
    // The spec ("loss=Q,seed=N"), each process its own seed.
    std::string impair_spec() {
        const double q = 100.0 * (1.0 - std::sqrt(1.0 - sw.loss / 100.0));
        char b[64];
        std::snprintf(b, sizeof b, "loss=%.6g,seed=%u", q, ++impair_seed);
        return b;
    }

    // --loss as given ("1", "0.5"): for tools/knb-bed and the run documents.
    std::string loss_pct() const {
        char b[32];
        std::snprintf(b, sizeof b, "%g", sw.loss);
        return b;
    }

    // The run rows' first column: wide enough for "kernel>crescent/inline".
    int vw() const { return sw.kernel_client ? 24 : 16; }

    int die(const std::string& m) {
        std::fprintf(stderr, "knb sweep: %s\n", m.c_str());
        return 1;
    }

    // bash: the bed's variables, then `exec` of the command. The variables
    // expand inside the double quotes first and eval parses the result, so
    // the quoting inside the device flags (--eal "...") survives; `cmd` holds
    // no double quotes, backslashes or backquotes of its own.
    std::string bed_env() const { return "eval \"$(" + sh_quote(sw.bed_script) + " env " + sw.bed + ")\" || exit 3; "; }
    std::string script(const std::string& cmd) const { return bed_env() + "eval \"exec " + cmd + "\""; }

    std::string common(const Point& p) const {
        std::string a = " --stack " + std::string(name(p.stack)) + " --proto " + std::string(name(sw.proto)) +
                        " --threads " + std::to_string(p.threads);
        if (p.stack == Stack::Crescent) a += " --mode " + std::string(name(p.mode));
        else a += " --kernel-wait " + std::string(name(p.wait));
        return a;
    }

    // Starts `cmd` (a knb server) and waits for its ready line; its pid (-1
    // if it exited or could not start), with *why saying what went wrong.
    pid_t start_server(const std::string& cmd, const std::string& slog, const std::string& tag, std::string* why) {
        pid_t srv = spawn(script(cmd), slog);
        if (srv < 0) {
            *why = "cannot start the " + tag + " server: fork failed";
            return -1;
        }
        // Ready line, or the server's own last words.
        const auto until = std::chrono::steady_clock::now() + 30s;
        while (!g_interrupted) {
            const std::string text = read_file(slog);
            if (text.find("knb server: ready") != std::string::npos) return srv;
            int status;
            if (waitpid(srv, &status, WNOHANG) == srv) {
                *why = "the " + tag + " server exited: " + last_line(text);
                return -1;
            }
            if (std::chrono::steady_clock::now() > until) {
                *why = "the " + tag + " server did not say ready within 30 s: " + last_line(text);
                return srv;  // stopped by stop_server()
            }
            std::this_thread::sleep_for(50ms);
        }
        *why = "interrupted";
        return srv;
    }

    void stop_server(pid_t srv, const std::string& tag, const std::string& slog) {
        if (srv <= 0) return;
        kill(srv, SIGINT);
        const int rc = wait_for(srv, 15s);
        if (rc != 0 && rc != 130)
            std::fprintf(stderr, "knb sweep: the %s server exited with status %d (log: %s)\n", tag.c_str(), rc,
                         slog.c_str());
    }

    std::string server_cmd(const Point& base) {
        std::string cmd = "$KNB_SERVER_WRAP " + sh_quote(sw.knb_path) + " server" + common(base);
        if (base.stack == Stack::Crescent) cmd += " $KNB_SERVER_DEV_ARGS --file-prefix $KNB_SERVER_PREFIX";
        if (!sw.server_cpus.empty()) cmd += " --cpus " + sw.server_cpus;
        if (!sw.server_args.empty()) cmd += " " + sw.server_args;
        if (sw.loss > 0 && base.stack == Stack::Crescent) cmd += " --impair " + impair_spec();
        return cmd;
    }

    // "-r2" in a log's name for round 2 of a --repeat sweep; "" without one.
    std::string round_suffix() const { return sw.repeat > 1 ? "-r" + std::to_string(round) : ""; }

    std::string log_name(const std::string& what, const std::string& tag) const {
        std::string slug = tag;
        for (char& c : slug)
            if (c == '/' || c == '+') c = '-';
        return sw.out + "/" + what + "-" + slug + ".log";
    }

    // Every --sizes x --iodepths point of `base` against a ready server (or
    // each failed with `why`).
    void run_points(const Point& base, bool ready, const std::string& why) {
        bool probed = false;
        for (uint64_t size : sw.sizes)
            for (uint64_t qd : sw.iodepths) {
                if (g_interrupted) break;
                Point p = base;
                p.size = size;
                p.iodepth = qd;
                if (!ready) {
                    p.error = why.empty() ? "interrupted" : why;
                    finish(std::move(p));
                    continue;
                }
                const bool probe = !probed && base.stack == Stack::Crescent && !sw.probe.empty();
                probed = probed || probe;
                run_client(std::move(p), probe);
            }
    }

    // A busy kernel client, as the kernel/busy runs have it, served by `server`.
    Point kernel_client_of(const Point& server, std::string served_by) const {
        Point k = server;
        k.stack = Stack::Kernel;
        k.wait = Wait::Busy;
        k.mode = Mode::Copy;
        k.served_by = std::move(served_by);
        return k;
    }

    void run_server_and_clients(const Point& base) {
        const std::string tag = variant(base) + "/t" + std::to_string(base.threads);
        const std::string slog = log_name("server", tag + round_suffix());
        std::string why;
        pid_t srv = start_server(server_cmd(base), slog, tag, &why);
        const bool ready = srv > 0 && why.empty();
        run_points(base, ready, why);
        if (sw.kernel_client && base.stack == Stack::Crescent)
            run_points(kernel_client_of(base, variant(base)), ready, why);
        stop_server(srv, tag, slog);
    }

    // --kernel-client's control: the busy kernel server on port+1 of the same
    // veth while a crescent server (napping when idle, on the same CPUs)
    // keeps the steering program attached, and a busy kernel client against it.
    void run_kernel_behind_xdp(uint64_t threads) {
        Point holder{Stack::Crescent, Mode::Inline, Wait::Busy, threads, 0, 0};
        Point kernel{Stack::Kernel, Mode::Copy, Wait::Busy, threads, 0, 0};
        const std::string tag = std::string(kKernelBehindXdp) + "/t" + std::to_string(threads);
        const std::string hlog = log_name("server-xdp-holder", tag + round_suffix()),
                          slog = log_name("server", tag + round_suffix());
        std::string why;
        pid_t h = start_server(server_cmd(holder) + " --idle-sleep-us 10000", hlog, "steering holder (crescent)", &why);
        pid_t srv = -1;
        if (h > 0 && why.empty())
            srv = start_server(server_cmd(kernel) + " --port " + std::to_string(kBehindXdpPort), slog, tag, &why);
        run_points(kernel_client_of(kernel, kKernelBehindXdp), srv > 0 && why.empty(), why);
        stop_server(srv, tag, slog);
        stop_server(h, "steering holder (crescent)", hlog);
    }

    void run_client(Point p, bool probe) {
        const std::string id = std::to_string(++serial);
        const std::string doc = sw.out + "/run-" + id + ".json";
        const std::string log = sw.out + "/client-" + id + ".log";
        std::remove(doc.c_str());
        char num[64];
        std::string cmd = "$KNB_CLIENT_WRAP " + sh_quote(sw.knb_path) + " client" + common(p) +
                          " --server $KNB_SERVER_IP --msg-size " + std::to_string(p.size) + " --iodepth " +
                          std::to_string(p.iodepth) + " --conns " + std::to_string(sw.conns);
        if (sw.resp_size != 0) cmd += " --resp-size " + std::to_string(sw.resp_size);
        std::snprintf(num, sizeof num, " --duration %g --warmup %g", sw.duration, sw.warmup);
        cmd += num;
        cmd += " --json " + sh_quote(doc) + " --progress off --label " + sh_quote(variant(p));
        if (p.stack == Stack::Crescent) cmd += " $KNB_CLIENT_DEV_ARGS --file-prefix $KNB_CLIENT_PREFIX";
        if (p.served_by == kKernelBehindXdp) cmd += " --port " + std::to_string(kBehindXdpPort);
        if (!sw.client_cpus.empty()) cmd += " --cpus " + sw.client_cpus;
        if (!sw.client_args.empty()) cmd += " " + sw.client_args;
        if (sw.loss > 0 && p.stack == Stack::Crescent) {
            const std::string spec = impair_spec();
            cmd += " --impair " + spec;
            p.loss_json = "{\"pct\":" + loss_pct() + ",\"impair\":\"" + spec + "\"}";
        }
        if (sw.loss > 0 && p.stack == Stack::Kernel) {
            // Fresh rules (their counters from 0) for this run only.
            const auto [rc, out] = bed_cmd("kernel-loss", loss_pct());
            if (rc != 0) {
                p.error = "cannot set the kernel's loss: " + last_line(out);
                finish(std::move(p));
                return;
            }
        }
        pid_t cl = spawn(script(cmd), log);
        pid_t pr = -1;
        const std::string plog = sw.out + "/probe-" + id + ".log";
        if (probe) {
            std::this_thread::sleep_for(std::chrono::milliseconds(int64_t(1000 * sw.warmup) + 300));
            pr = spawn(bed_env() + sw.probe, plog);
        }
        const auto limit = std::chrono::milliseconds(int64_t(1000 * (sw.duration + sw.warmup)) + 45000);
        const int rc = cl < 0 ? -1 : wait_for(cl, limit);
        if (pr > 0) {
            const int prc = wait_for(pr, 20s);
            const std::string out = read_file(plog);
            res.probes.push_back("{\"during\":\"" + json_escape(variant(p)) + "\",\"command\":\"" +
                                 json_escape(sw.probe) + "\",\"exit\":" + std::to_string(prc) + ",\"output\":\"" +
                                 json_escape(last_line(out)) + "\"}");
            std::fprintf(stderr, "knb sweep: probe during the %s run: %s (exit %d): %s\n", variant(p).c_str(),
                         prc == 0 ? "answered" : "FAILED", prc, last_line(out).c_str());
        }
        if (sw.loss > 0 && p.stack == Stack::Kernel) note_kernel_loss(p);
        p.doc = read_file(doc);
        while (!p.doc.empty() && (p.doc.back() == '\n' || p.doc.back() == ' ')) p.doc.pop_back();
        if (rc == 0 && !p.doc.empty()) {
            p.ok = true;
        } else {
            const std::string l = last_line(read_file(log));
            p.error = rc == 130 ? "interrupted" : (l.empty() ? "client exited with status " + std::to_string(rc) : l);
        }
        finish(std::move(p));
    }

    // The kernel run's frames seen and dropped by the bed's loss rules (then removed).
    void note_kernel_loss(Point& p) {
        const auto [rc, out] = bed_cmd("kernel-loss-count");
        unsigned long long seen = 0, dropped = 0;
        if (rc != 0 || std::sscanf(out.c_str(), "%llu %llu", &seen, &dropped) != 2) {
            std::fprintf(stderr, "knb sweep: cannot read the kernel's loss counters: %s\n", last_line(out).c_str());
            p.loss_json = "{\"pct\":" + loss_pct() + "}";
        } else {
            p.loss_json = "{\"pct\":" + loss_pct() + ",\"frames\":" + std::to_string(seen) +
                          ",\"dropped\":" + std::to_string(dropped) + "}";
            std::fprintf(stderr, "knb sweep: %s %" PRIu64 " B qd %" PRIu64 ": netfilter dropped %llu of %llu TCP frames "
                         "(%.2f %%)\n", variant(p).c_str(), p.size, p.iodepth, dropped, seen,
                         seen ? 100.0 * double(dropped) / double(seen) : 0.0);
        }
        bed_cmd("kernel-loss", "0");
    }

    // --raw: one reflector for `threads` queues on the server side, a ping per size x iodepth point.
    // DPDK 22.11's memif server can crash when a client disconnects while its
    // queue is polled (the PMD unmaps the shared rings in its interrupt thread
    // with no wait for the data path: SIGSEGV reading a ring's head). A ping
    // that exits cleanly says goodbye first (stack/dev/memif_goodbye.hpp); for
    // one killed outright, a reflector found dead before a ping is said on
    // stderr and started again, so one disconnect does not fail the points
    // after it.
    void run_raw(uint64_t threads) {
        const std::string t = std::to_string(threads);
        const std::string rlog = sw.out + "/raw-reflect-t" + t + round_suffix() + ".log";
        std::string why, log = rlog;
        int starts = 1;
        pid_t refl = start_reflector(threads, log, &why);
        for (uint64_t size : sw.sizes)
            for (uint64_t qd : sw.iodepths) {
                if (g_interrupted) break;
                RawPoint r{size, qd, threads};
                r.frame_wanted = kRpcFrameOverhead + size;
                if (sw.resp_size != 0) r.resp_frame = kRpcFrameOverhead + sw.resp_size;
                r.raw_iodepth = qd * sw.conns * threads;
                if (r.raw_iodepth > kRawMaxDepth) {
                    std::fprintf(stderr, "knb sweep: raw: %" PRIu64 " frames in flight per queue lowered to %" PRIu64
                                 " (knb raw's bound)\n", r.raw_iodepth, kRawMaxDepth);
                    r.raw_iodepth = kRawMaxDepth;
                }
                int status = 0;
                if (refl > 0 && waitpid(refl, &status, WNOHANG) == refl) {
                    log = sw.out + "/raw-reflect-t" + t + round_suffix() + "-" + std::to_string(++starts) + ".log";
                    std::fprintf(stderr, "knb sweep: raw: the reflector has exited (%s); starting it again (logs: %s, "
                                 "%s)\n", describe_status(status).c_str(), rlog.c_str(), log.c_str());
                    refl = start_reflector(threads, log, &why);
                }
                if (!why.empty()) {
                    r.error = why;
                    finish_raw(std::move(r));
                    continue;
                }
                run_ping(std::move(r), raw_device("CLIENT"));
            }
        if (refl > 0) {
            kill(refl, SIGINT);
            const int rc = wait_for(refl, 15s);
            if (rc != 0 && rc != 130)
                std::fprintf(stderr, "knb sweep: the raw reflector exited with status %d (log: %s)\n", rc, log.c_str());
            // Its own phase split, over the points since it (last) started.
            const std::string text = read_file(log);
            const size_t at = text.find("sampled (1 in ");
            const size_t from = at == std::string::npos ? at : text.find("poll ", at);
            if (from != std::string::npos)
                res.raw_phases.push_back((sw.repeat > 1 ? "round " + std::to_string(round) + ", " : std::string()) + t +
                                         " queue(s): " + text.substr(from, text.find('\n', from) - from));
        }
    }

    // The bed's device for knb raw: AF_XDP on the veth end, or the memif EAL arguments.
    static std::string raw_device(const char* side) {
        return "if [ -n \"$KNB_" + std::string(side) + "_IFACE\" ]; then set -- --iface \"$KNB_" + side +
               "_IFACE\"; else set -- --eal \"$KNB_" + side + "_EAL\"; fi; ";
    }

    // Starts `knb raw reflect` with `threads` queues and waits until it
    // reflects; its pid, or -1 with *why saying what went wrong.
    pid_t start_reflector(uint64_t threads, const std::string& rlog, std::string* why) {
        const std::string t = std::to_string(threads);
        std::string cmd = bed_env() + raw_device("SERVER") + "exec $KNB_SERVER_WRAP " + sh_quote(sw.knb_path) +
                          " raw reflect \"$@\" --queues " + t + " --file-prefix \"$KNB_SERVER_PREFIX\"";
        if (!sw.server_cpus.empty()) cmd += " --cpus " + sh_quote(sw.server_cpus);
        if (!sw.raw_args.empty()) cmd += " " + sw.raw_args;
        pid_t refl = spawn(cmd, rlog);
        if (refl < 0) {
            *why = "cannot start the raw reflector: fork failed";
            return -1;
        }
        const auto until = std::chrono::steady_clock::now() + 30s;
        while (!g_interrupted) {
            const std::string text = read_file(rlog);
            if (text.find("reflecting ethertype") != std::string::npos) return refl;
            int status;
            if (waitpid(refl, &status, WNOHANG) == refl) {
                *why = "the raw reflector (" + t + " queue(s)) exited: " + last_line(text);
                return -1;
            }
            if (std::chrono::steady_clock::now() > until) {
                *why = "the raw reflector did not start within 30 s: " + last_line(text);
                return refl;  // killed at the end
            }
            std::this_thread::sleep_for(50ms);
        }
        return refl;
    }

    void run_ping(RawPoint r, const std::string& device) {
        const std::string id = std::to_string(++serial);
        const std::string doc = sw.out + "/raw-" + id + ".json";
        const std::string log = sw.out + "/raw-ping-" + id + ".log";
        std::remove(doc.c_str());
        char num[96];
        std::snprintf(num, sizeof num, " --duration %g --warmup %g", sw.duration, sw.warmup);
        std::string cmd = bed_env() + device + "exec $KNB_CLIENT_WRAP " + sh_quote(sw.knb_path) +
                          " raw ping \"$@\" --queues " + std::to_string(r.threads) + " --size " +
                          std::to_string(r.frame_wanted) + " --split --iodepth " + std::to_string(r.raw_iodepth) +
                          (r.resp_frame != 0 ? " --resp-size " + std::to_string(r.resp_frame) : std::string()) + num +
                          " --bed " + sh_quote(sw.bed) + " --json " + sh_quote(doc) +
                          " --file-prefix \"$KNB_CLIENT_PREFIX\"";
        if (!sw.client_cpus.empty()) cmd += " --cpus " + sh_quote(sw.client_cpus);
        if (!sw.raw_args.empty()) cmd += " " + sw.raw_args;
        pid_t pg = spawn(cmd, log);
        // The link wait of knb raw ping (10 s) on top of the run.
        const auto limit = std::chrono::milliseconds(int64_t(1000 * (sw.duration + sw.warmup)) + 30000);
        const int rc = pg < 0 ? -1 : wait_for(pg, limit);
        r.doc = read_file(doc);
        while (!r.doc.empty() && (r.doc.back() == '\n' || r.doc.back() == ' ')) r.doc.pop_back();
        if (rc == 0 && !r.doc.empty()) {
            r.ok = true;
        } else {
            const std::string l = last_line(read_file(log));
            r.error = rc == 130 ? "interrupted" : (l.empty() ? "knb raw ping exited with status " + std::to_string(rc) : l);
        }
        finish_raw(std::move(r));
    }

    void finish_raw(RawPoint r) {
        r.round = round;
        auto num = [&](const char* key) { return json_number(r.doc, key); };
        if (!r.doc.empty()) {
            r.rps = num("rps").value_or(0);
            r.frame = uint64_t(num("size").value_or(0));
            r.frames = uint64_t(num("frames").value_or(1));
        }
        const std::string name = "raw/" + frame_label(r);
        if (r.ok) {
            if (r.frames > 1)
                std::fprintf(stderr, "knb sweep: raw: the %" PRIu64 " B request needs a %" PRIu64 " B frame; sent as a "
                             "message of %" PRIu64 " frames of up to %" PRIu64 " B (the bed's MTU %.0f + 14), "
                             "answered as a whole\n",
                             r.size, r.frame_wanted, r.frames, r.frame, num("mtu").value_or(0));
            std::printf("%-*s %6" PRIu64 " %4" PRIu64 " %3" PRIu64 " %11.0f %8s %7.1f %7.1f %7.1f %8.1f %7s %7s %7s\n",
                        vw(), name.c_str(), r.size, r.iodepth, r.threads, r.rps, "-", num("p50_us").value_or(0),
                        num("p90_us").value_or(0), num("p99_us").value_or(0), num("p999_us").value_or(0), "-", "-", "-");
        } else {
            std::printf("%-*s %6" PRIu64 " %4" PRIu64 " %3" PRIu64 "  FAILED: %s\n", vw(), name.c_str(), r.size,
                        r.iodepth, r.threads, r.error.c_str());
        }
        std::fflush(stdout);
        res.raws.push_back(std::move(r));
    }

    void print_sweep_header() const {
        std::printf("# one row per run as it ends: RPC/s, payload Gbit/s (both directions), latency us, CPU us per RPC "
                    "on each side (getrusage over the window), retransmissions client+server\n");
        if (sw.resp_size != 0)
            std::printf("# size is the request's; every response is %" PRIu64 " B (--resp-size)\n", sw.resp_size);
        if (sw.loss > 0)
            std::printf("# --loss %g: %g %% of the frames lost each way (crescent: --impair on both sides' RX and "
                        "TX; kernel TCP: nftables in both namespaces' input hook)\n", sw.loss, sw.loss);
        if (sw.kernel_rto_min != 0)
            std::printf("# kernel runs with rto_min %u ms on the bed's route (--kernel-rto-min)\n", sw.kernel_rto_min);
        std::printf("%-*s %6s %4s %3s %11s %8s %7s %7s %7s %8s %7s %7s %7s\n", vw(), "variant", "size", "qd", "thr",
                    "RPC/s", "Gbit/s", "p50", "p90", "p99", "p99.9", "cpu-c", "cpu-s", "retrans");
    }

    void finish(Point p) {
        p.round = round;
        auto num = [&](const char* key, const char* within) { return json_number(p.doc, key, within); };
        if (!p.doc.empty()) {
            p.rps = num("rps", "result").value_or(0);
            p.p50 = num("p50", "latency_us").value_or(0);
            p.p99 = num("p99", "latency_us").value_or(0);
        }
        if (p.ok) {
            auto cell = [](std::optional<double> v, const char* fmt) {
                char b[32] = "-";
                if (v) std::snprintf(b, sizeof b, fmt, *v);
                return std::string(b);
            };
            const double retrans = num("client", "retrans").value_or(0) + num("server", "retrans").value_or(0);
            std::printf("%-*s %6" PRIu64 " %4" PRIu64 " %3" PRIu64 " %11.0f %8.3f %7.1f %7.1f %7.1f %8.1f %7s %7s %7.0f\n",
                        vw(), variant(p).c_str(), p.size, p.iodepth, p.threads, p.rps, num("gbit_s", "result").value_or(0),
                        p.p50, num("p90", "latency_us").value_or(0), p.p99, num("p999", "latency_us").value_or(0),
                        cell(num("client", "cpu_us_per_rpc"), "%.2f").c_str(),
                        cell(num("server", "cpu_us_per_rpc"), "%.2f").c_str(), retrans);
        } else {
            std::printf("%-*s %6" PRIu64 " %4" PRIu64 " %3" PRIu64 "  FAILED: %s\n", vw(), variant(p).c_str(), p.size,
                        p.iodepth, p.threads, p.error.c_str());
        }
        std::fflush(stdout);
        res.points.push_back(std::move(p));
    }
};

}  // namespace

int sweep_main(int argc, char** argv) {
    Sweep sw;
    std::string err;
    if (!parse_sweep(argc, argv, &sw, &err)) {
        std::fprintf(stderr, "knb sweep: %s\n", err.c_str());
        return 2;
    }
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return Runner(std::move(sw)).run();
}

}  // namespace knb
