// crescent-stat — look inside a running crescent process through its control
// socket (stack/engine/control_socket.hpp): counters, per-engine rates like
// top, and the connection list like `ss -ti`.
//
//   crescent-stat [PID|NAME]                    every counter (key=value)
//   crescent-stat top [-n COUNT] [PID|NAME]     per-engine rates every second, and
//                                               where a busy iteration's time went
//   crescent-stat ss [PID|NAME] [state=S] [port=N]   connections and listeners
//
// Without PID|NAME: the one crescent process that has a control socket.
// NAME matches /proc/<pid>/comm. Standard library and POSIX only.
#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;

[[noreturn]] void die(const std::string& m) {
    std::fprintf(stderr, "crescent-stat: %s\n", m.c_str());
    std::exit(1);
}

void usage(FILE* f) {
    std::fprintf(f,
                 "usage: crescent-stat [PID|NAME]                 print every counter\n"
                 "       crescent-stat top [-n COUNT] [PID|NAME]  per-engine rates every second (Ctrl-C ends)\n"
                 "       crescent-stat ss [PID|NAME] [state=S] [port=N]  connections like ss -ti\n"
                 "       crescent-stat pcap [PID|NAME] on FILE [snaplen=N] [max=BYTES]  start capturing\n"
                 "                                                (FILE.N per engine with several engines)\n"
                 "       crescent-stat pcap [PID|NAME] off        stop capturing\n");
}

// The socket paths a process may use (same order as ControlSocket::candidate_paths).
std::vector<std::string> paths_for(int pid) {
    std::vector<std::string> v{"/run/crescent/" + std::to_string(pid) + ".sock"};
    if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x == '/')
        v.push_back(std::string(x) + "/crescent/" + std::to_string(pid) + ".sock");
    v.push_back("/tmp/crescent/" + std::to_string(pid) + ".sock");
    return v;
}

bool exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

std::string comm_of(int pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
    std::string s;
    std::getline(f, s);
    return s;
}

bool all_digits(const std::string& s) {
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

// Every process with a control socket (pid from the file names in the known directories).
std::vector<int> socket_pids() {
    std::vector<int> out;
    std::vector<std::string> dirs{"/run/crescent", "/tmp/crescent"};
    if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x == '/') dirs.push_back(std::string(x) + "/crescent");
    for (const std::string& d : dirs) {
        DIR* dp = ::opendir(d.c_str());
        if (!dp) continue;
        while (dirent* e = ::readdir(dp)) {
            std::string n = e->d_name;
            if (n.size() > 5 && n.ends_with(".sock") && all_digits(n.substr(0, n.size() - 5))) {
                int pid = std::atoi(n.c_str());
                if (exists("/proc/" + std::to_string(pid))) out.push_back(pid);
            }
        }
        ::closedir(dp);
    }
    return out;
}

int resolve(const std::string& target) {
    if (target.empty()) {
        std::vector<int> pids = socket_pids();
        if (pids.empty()) die("no running crescent process has a control socket (give PID or NAME)");
        if (pids.size() > 1) die("several crescent processes are running; give one PID");
        return pids[0];
    }
    if (all_digits(target)) {
        int pid = std::atoi(target.c_str());
        if (!exists("/proc/" + target)) die("no such process: " + target);
        return pid;
    }
    std::vector<int> match;
    DIR* dp = ::opendir("/proc");
    if (!dp) die(std::string("cannot read /proc: ") + std::strerror(errno));
    while (dirent* e = ::readdir(dp)) {
        std::string n = e->d_name;
        if (all_digits(n) && comm_of(std::atoi(n.c_str())) == target) match.push_back(std::atoi(n.c_str()));
    }
    ::closedir(dp);
    if (match.empty()) die("no process named " + target);
    if (match.size() > 1) {
        // Prefer the ones that serve a control socket.
        std::vector<int> with;
        for (int p : match)
            for (const std::string& s : paths_for(p))
                if (exists(s)) {
                    with.push_back(p);
                    break;
                }
        if (with.size() == 1) return with[0];
        std::string list;
        for (int p : match) list += " " + std::to_string(p);
        die("several processes are named " + target + " (pids" + list + "); give one PID");
    }
    return match[0];
}

class Client {
public:
    explicit Client(int pid) {
        std::string path;
        for (const std::string& p : paths_for(pid))
            if (exists(p)) {
                path = p;
                break;
            }
        if (path.empty())
            die("process " + std::to_string(pid) + " (" + comm_of(pid) +
                ") has no control socket (not crescent, started with control_socket off, or another user's "
                "$XDG_RUNTIME_DIR)");
        fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) die(std::string("socket: ") + std::strerror(errno));
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
            int e = errno;
            if (e == EACCES || e == EPERM) die("permission denied on " + path + " (run as the process's user or root)");
            die("cannot connect to " + path + ": " + std::strerror(e) + " (the process may have exited)");
        }
        timeval tv{5, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    ~Client() { ::close(fd_); }

    // The reply lines of one request (up to the empty line).
    std::vector<std::string> ask(const std::string& req) {
        std::string line = req + "\n";
        if (::send(fd_, line.data(), line.size(), MSG_NOSIGNAL) != ssize_t(line.size()))
            die(std::string("control socket write failed: ") + std::strerror(errno));
        std::vector<std::string> out;
        for (;;) {
            size_t nl;
            while ((nl = buf_.find('\n')) != std::string::npos) {
                std::string l = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                if (l.empty()) {
                    if (!out.empty() && out[0].starts_with("error: ")) die("the process answered: " + out[0].substr(7));
                    return out;
                }
                out.push_back(l);
            }
            char b[65536];
            ssize_t n = ::recv(fd_, b, sizeof b, 0);
            if (n <= 0) {
                if (n < 0 && errno == EINTR && g_stop) std::exit(0);
                die(n == 0 ? "the process closed the control socket (it exited, or the reply did not fit)"
                           : std::string("control socket read failed: ") + std::strerror(errno));
            }
            buf_.append(b, size_t(n));
        }
    }

private:
    int fd_ = -1;
    std::string buf_;
};

std::map<std::string, std::string> kv_line(const std::string& l) {
    std::map<std::string, std::string> m;
    std::istringstream in(l);
    std::string w;
    while (in >> w) {
        size_t eq = w.find('=');
        if (eq != std::string::npos) m[w.substr(0, eq)] = w.substr(eq + 1);
    }
    return m;
}

std::map<std::string, uint64_t> stats_map(Client& c) {
    std::map<std::string, uint64_t> m;
    for (const std::string& l : c.ask("stats")) {
        size_t eq = l.find('=');
        if (eq != std::string::npos) m[l.substr(0, eq)] = std::strtoull(l.c_str() + eq + 1, nullptr, 10);
    }
    return m;
}

int cmd_counters(const std::string& target) {
    Client c(resolve(target));
    for (const std::string& l : c.ask("stats")) std::printf("%s\n", l.c_str());
    return 0;
}

int cmd_top(const std::string& target, long count) {
    int pid = resolve(target);
    Client c(pid);
    std::map<std::string, uint64_t> prev = stats_map(c);
    for (long i = 0; count < 0 || i < count; ++i) {
        ::sleep(1);
        if (g_stop) break;
        std::map<std::string, uint64_t> cur = stats_map(c);
        unsigned n = unsigned(cur["engines"]);
        std::printf("crescent-stat top: pid %d (%s), %u engines\n", pid, comm_of(pid).c_str(), n);
        std::printf("%-6s %12s %12s %10s %10s %7s %7s %10s %8s %8s %8s %8s\n", "engine", "rx_pps", "tx_pps",
                    "rx_Mbit/s", "tx_Mbit/s", "busy%", "conns", "epoll_ev/s", "poll_ns", "rx_ns", "out_ns",
                    "flush_ns");
        for (unsigned e = 0; e < n; ++e) {
            std::string k = "engine." + std::to_string(e) + ".";
            auto d = [&](const char* name) {
                uint64_t a = prev[k + name], b = cur[k + name];
                return b >= a ? double(b - a) : 0.0;
            };
            double secs = d("mono_ns") / 1e9;
            if (secs <= 0) secs = 1;
            // The share of the interval spent in iterations that found work
            // (a polling engine's CPU is 100 % busy to the kernel either way).
            double busy = std::min(100.0, 100.0 * d("busy_ns") / (secs * 1e9));
            std::printf("%-6u %12.0f %12.0f %10.2f %10.2f %7.1f %7llu %10.0f", e, d("rx_packets") / secs,
                        d("tx_packets") / secs, d("rx_bytes") * 8 / secs / 1e6, d("tx_bytes") * 8 / secs / 1e6, busy,
                        (unsigned long long)cur[k + "connections"], d("epoll_events") / secs);
            // Where an iteration that received frames spent its time, means of
            // the ones the engine timed this interval (EngineStats::phase_ns):
            // the device's poll, the stack and handlers (parse + tcp + app),
            // TCP output and frame building, the device's send. "-" when none
            // was timed.
            const double timed = d("phase_samples");
            const double phases[] = {d("phase_poll_ns"), d("phase_parse_ns") + d("phase_tcp_ns") + d("phase_app_ns"),
                                     d("phase_output_ns"), d("phase_flush_ns")};
            for (double ns : phases) {
                if (timed > 0) std::printf(" %8.0f", ns / timed);
                else std::printf(" %8s", "-");
            }
            std::printf("\n");
        }
        std::fflush(stdout);
        prev = std::move(cur);
    }
    return 0;
}

int cmd_ss(const std::string& target, const std::string& filters) {
    Client c(resolve(target));
    std::vector<std::string> lines = c.ask("conns" + filters);
    std::printf("%-12s %-6s %8s %8s %-21s %-21s\n", "State", "Engine", "Recv-Q", "Send-Q", "Local", "Peer");
    for (const std::string& l : lines) {
        if (l.starts_with("#")) {
            std::printf("%s\n", l.c_str());
            continue;
        }
        auto m = kv_line(l);
        std::printf("%-12s %-6s %8s %8s %-21s %-21s\n", m["state"].c_str(), m["engine"].c_str(), m["recv_q"].c_str(),
                    m["send_q"].c_str(), m["local"].c_str(), m["remote"].c_str());
        if (m["state"] == "LISTEN") continue;
        auto ms = [&](const char* k) { return std::strtod(m[k].c_str(), nullptr) / 1000.0; };
        // Linux's ss prints backoff only while the RTO is backed off.
        const std::string backoff = m["backoff"].empty() || m["backoff"] == "0" ? "" : " backoff:" + m["backoff"];
        // And reordering only when the path raised it above the default 3; crescent's own
        // counters of spurious responses undone, tail loss probes and holes RACK's
        // reordering window found lost only when non-zero.
        std::string extra;
        auto unless = [&](const char* key, const char* usual, const char* label) {
            if (!m[key].empty() && m[key] != usual) extra += std::string(" ") + label + ":" + m[key];
        };
        unless("reordering", "3", "reordering");
        unless("undone", "0", "undone");
        unless("tlp_probes", "0", "tlp_probes");
        unless("rack_losses", "0", "rack_losses");
        // ECN marks seen each way (Linux's ss shows ecnseen; these count them).
        unless("ecn_ce_in", "0", "ce_in");
        unless("ecn_ece_in", "0", "ece_in");
        // The MSS halved after repeated timeouts (ConnOptions::mtu_blackhole); mss: shows what is left.
        unless("mss_blackhole", "0", "mss_blackhole");
        std::printf("\t %s %s%s%swscale:%s rto:%.3f%s rtt:%.3f/%.3f mss:%s cwnd:%s ssthresh:%s bytes_sent:%s "
                    "bytes_retrans:%s bytes_acked:%s bytes_received:%s segs_out:%s segs_in:%s retrans:%s "
                    "unacked:%s snd_wnd:%s rcv_wnd:%s%s\n",
                    m["cc"].c_str(), m["sack"] == "1" ? "sack " : "", m["ts"] == "1" ? "ts " : "",
                    m["ecn"] == "1" ? "ecn " : "", m["wscale"].c_str(), ms("rto_us"), backoff.c_str(), ms("srtt_us"),
                    ms("rttvar_us"), m["mss"].c_str(), m["cwnd"].c_str(), m["ssthresh"].c_str(),
                    m["bytes_sent"].c_str(), m["bytes_retrans"].c_str(), m["bytes_acked"].c_str(),
                    m["bytes_received"].c_str(), m["segs_out"].c_str(), m["segs_in"].c_str(), m["retrans"].c_str(),
                    m["bytes_in_flight"].c_str(), m["snd_wnd"].c_str(), m["rcv_wnd"].c_str(), extra.c_str());
    }
    return 0;
}

// "pcap [PID|NAME] on FILE [snaplen=N] [max=BYTES]" / "pcap [PID|NAME] off": the
// control socket's pcap command; FILE relative to this directory, not the process's.
int cmd_pcap(std::vector<std::string> args) {
    std::string target;
    if (!args.empty() && args[0] != "on" && args[0] != "off") {
        target = args[0];
        args.erase(args.begin());
    }
    if (args.empty() || (args[0] == "on" && args.size() < 2) || (args[0] == "off" && args.size() != 1) ||
        (args[0] != "on" && args[0] != "off")) {
        usage(stderr);
        die("pcap needs 'on FILE [snaplen=N] [max=BYTES]' or 'off'");
    }
    std::string req = "pcap " + args[0];
    if (args[0] == "on") {
        std::string file = args[1];
        if (file.find(' ') != std::string::npos) die("the capture file name must not contain spaces: " + file);
        if (!file.starts_with("/")) {
            char cwd[4096];
            if (::getcwd(cwd, sizeof cwd) == nullptr) die(std::string("getcwd: ") + std::strerror(errno));
            file = std::string(cwd) + "/" + file;
        }
        req += " " + file;
        for (size_t i = 2; i < args.size(); ++i) {
            if (!args[i].starts_with("snaplen=") && !args[i].starts_with("max=")) {
                usage(stderr);
                die("unexpected argument '" + args[i] + "'");
            }
            req += " " + args[i];
        }
    }
    Client c(resolve(target));
    for (const std::string& l : c.ask(req)) std::printf("%s\n", l.c_str());
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    struct sigaction sa{};
    sa.sa_handler = [](int) { g_stop = 1; };
    sigaction(SIGINT, &sa, nullptr);  // no SA_RESTART: sleep()/recv() return
    sigaction(SIGTERM, &sa, nullptr);
    if (!args.empty() && (args[0] == "-h" || args[0] == "--help" || args[0] == "help")) {
        usage(stdout);
        return 0;
    }
    if (!args.empty() && args[0] == "pcap") return cmd_pcap(std::vector<std::string>(args.begin() + 1, args.end()));
    std::string mode = "counters";
    if (!args.empty() && (args[0] == "top" || args[0] == "ss")) {
        mode = args[0];
        args.erase(args.begin());
    }
    std::string target, filters;
    long count = -1;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (mode == "top" && a == "-n") {
            if (i + 1 >= args.size() || !all_digits(args[i + 1])) die("-n needs a count of refreshes");
            count = std::atol(args[++i].c_str());
        } else if (mode == "ss" && (a.starts_with("state=") || a.starts_with("port="))) {
            filters += " " + a;
        } else if (!a.starts_with("-") && target.empty()) {
            target = a;
        } else {
            usage(stderr);
            die("unexpected argument '" + a + "'");
        }
    }
    if (mode == "top") return cmd_top(target, count);
    if (mode == "ss") return cmd_ss(target, filters);
    return cmd_counters(target);
}
