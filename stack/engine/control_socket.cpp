// crescent — the Runtime's control socket (see control_socket.hpp): a Unix
// stream socket served from engine 0's epoll set, answering from the
// engines' published snapshots (stats_publish.hpp).
#include "stack/engine/control_socket.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <filesystem>

#include <fmt/format.h>

#include "stack/dev/stale.hpp"
#include "stack/engine/engine_impl.hpp"
#include "stack/engine/pcap.hpp"

namespace crescent::engine {

namespace {

constexpr size_t kMaxLine = 1024;
constexpr size_t kMaxOut = 4u << 20;

// mkdir -p with `mode` for the directories it creates.
bool make_dirs(const std::string& dir, mode_t mode) {
    std::string cur;
    for (size_t i = 0; i <= dir.size(); ++i) {
        if (i == dir.size() || (dir[i] == '/' && i != 0)) {
            cur = dir.substr(0, i);
            errno = 0;
            if (::mkdir(cur.c_str(), mode) == 0) ::chmod(cur.c_str(), mode);  // not narrowed by the umask
            else if (errno != EEXIST) return false;
        }
    }
    struct stat st{};
    return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string dir_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

std::string ip_port(uint32_t ip, uint16_t port) { return fmt::format("{}:{}", Ipv4{ip}.to_string(), port); }

std::string norm_state(std::string_view s) {
    std::string o;
    for (char c : s) o.push_back(c == '_' ? '-' : char(std::tolower(static_cast<unsigned char>(c))));
    return o;
}

void stats_lines(std::string& o, const std::vector<Engine*>& engines) {
    fmt::format_to(std::back_inserter(o), "pid={}\nengines={}\n", ::getpid(), engines.size());
    bool arena_done = false;
    for (Engine* e : engines) {
        EngineSnapshot s;
        const unsigned i = e->index();
        if (!e->impl().publisher().engine(&s)) {
            fmt::format_to(std::back_inserter(o), "engine.{}.published=0\n", i);
            continue;
        }
        auto put = [&](std::string_view k, uint64_t v) { fmt::format_to(std::back_inserter(o), "engine.{}.{}={}\n", i, k, v); };
        put("published", s.seq);
        put("core", s.core);
        put("mono_ns", uint64_t(s.mono_ns));
        put("engine_ns", uint64_t(s.engine_ns));
        s.stats.for_each([&](std::string_view k, uint64_t v) { put(k, v); });
        put("busy_loops", s.busy_loops);
        put("timers_pending", s.timers_pending);
        put("mem_bytes", s.mem_bytes);
        put("mem_limit_bytes", s.mem_limit_bytes);
        put("connections", s.connections);
        put("listeners", s.listeners);
        put("kernel_fds", s.kernel_fds);
        for (uint32_t c = 0; c < s.zbuf_classes; ++c)
            fmt::format_to(std::back_inserter(o), "engine.{}.zbuf.{}.live_core={}\n", i, s.zbuf[c].obj_size,
                           s.zbuf[c].live_core);
        if (!arena_done) {  // the arena is process-wide: once, from the first engine that published
            arena_done = true;
            for (uint32_t c = 0; c < s.zbuf_classes; ++c) {
                const ZbufClassSnapshot& z = s.zbuf[c];
                fmt::format_to(std::back_inserter(o),
                               "zbuf.{0}.capacity={1}\nzbuf.{0}.live={2}\nzbuf.{0}.high_water={3}\n"
                               "zbuf.{0}.alloc_failed={4}\n",
                               z.obj_size, z.capacity, z.live, z.high_water, z.alloc_failed);
            }
            fmt::format_to(std::back_inserter(o),
                           "zbuf.alloc_too_large={}\nzbuf.external_live={}\nzbuf.zones_total={}\nzbuf.zones_used={}\n",
                           s.zbuf_alloc_too_large, s.zbuf_external_live, s.zbuf_zones_total, s.zbuf_zones_used);
        }
    }
}

void conn_line(std::string& o, unsigned engine, const ConnSnapshot& c) {
    fmt::format_to(std::back_inserter(o),
                   "engine={} state={} local={} remote={} cc={} mss={} cwnd={} ssthresh={} srtt_us={} "
                   "rttvar_us={} rto_us={} backoff={} bytes_in_flight={} snd_wnd={} rcv_wnd={} wscale={},{} sack={} ts={} "
                   "ecn={} bytes_acked={} bytes_received={} bytes_sent={} bytes_retrans={} segs_in={} "
                   "segs_out={} retrans={} rto_events={} fast_recoveries={} dupacks={} drops={} send_q={} "
                   "recv_q={} reordering={} undone={} tlp_probes={} rack_losses={} ecn_ce_in={} ecn_ece_in={} "
                   "mss_blackhole={}\n",
                   engine, c.state, ip_port(c.local_ip, c.local_port), ip_port(c.remote_ip, c.remote_port), c.cc,
                   c.mss, c.cwnd, c.ssthresh, c.srtt_us, c.rttvar_us, c.rto_us, c.backoff, c.bytes_in_flight, c.snd_wnd,
                   c.rcv_wnd, c.snd_wscale, c.rcv_wscale, int(c.sack), int(c.ts), int(c.ecn), c.bytes_acked,
                   c.bytes_received, c.bytes_sent, c.bytes_retrans, c.segs_in, c.segs_out, c.retrans, c.rto_events,
                   c.fast_recoveries, c.dupacks, c.drops, c.send_q, c.recv_q, c.reordering, c.undone, c.tlp_probes,
                   c.rack_losses, c.ecn_ce_in, c.ecn_ece_in, c.mss_blackhole);
}

} // namespace

std::vector<std::string> ControlSocket::candidate_paths(int pid) {
    std::vector<std::string> v;
    v.push_back(fmt::format("/run/crescent/{}.sock", pid));
    if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x == '/')
        v.push_back(fmt::format("{}/crescent/{}.sock", x, pid));
    v.push_back(fmt::format("/tmp/crescent/{}.sock", pid));
    return v;
}

namespace {
// Sockets of crashed instances (SIGKILL leaves them): a pid that is gone.
void remove_stale_sockets(const std::string& dir) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (stale::gone(stale::pid_in(name, "", ".sock"))) std::filesystem::remove(e.path(), ec);
    }
}
} // namespace

std::unique_ptr<ControlSocket> ControlSocket::open(std::string* err) {
    std::string last;
    for (const std::string& path : candidate_paths(int(::getpid()))) {
        const std::string dir = dir_of(path);
        // /tmp/crescent is shared between users: sticky and world-writable like /tmp.
        if (!make_dirs(dir, dir.starts_with("/tmp/") ? 01777 : 0755) || ::access(dir.c_str(), W_OK | X_OK) != 0) {
            last = fmt::format("cannot create or write {}: {}", dir, std::strerror(errno ? errno : EACCES));
            continue;
        }
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        if (path.size() >= sizeof sa.sun_path) {
            last = fmt::format("socket path {} is longer than {} bytes", path, sizeof sa.sun_path - 1);
            continue;
        }
        std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
        int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last = fmt::format("socket(AF_UNIX): {}", std::strerror(errno));
            break;
        }
        ::unlink(path.c_str());  // left by an earlier process with our pid
        remove_stale_sockets(dir);
        if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 16) != 0) {
            last = fmt::format("bind/listen {}: {}", path, std::strerror(errno));
            ::close(fd);
            continue;
        }
        return std::unique_ptr<ControlSocket>(new ControlSocket(fd, path));
    }
    if (err) *err = fmt::format("no usable directory for the control socket ({})", last);
    return nullptr;
}

ControlSocket::~ControlSocket() {
    if (!path_.empty()) ::unlink(path_.c_str());
}

void ControlSocket::on_input(int fd, Client& c, uint32_t events, bool eof) {
    size_t nl;
    while ((nl = c.in.find('\n')) != std::string::npos) {
        std::string line = c.in.substr(0, nl);
        c.in.erase(0, nl + 1);
        c.out += answer(line, engines());
        c.out += '\n';
        ++served_;
        if (c.out.size() > kMaxOut) {  // the client does not read: drop it
            ++dropped_;
            return close_client(fd);
        }
    }
    if (c.in.size() > kMaxLine) {
        ++dropped_;
        return close_client(fd);
    }
    if (flush(fd, c) == Flush::Failed) return close_client(fd);
    if (eof || (events & (EPOLLHUP | EPOLLRDHUP))) close_client(fd);
}

std::string ControlSocket::answer(std::string_view line, const std::vector<Engine*>& engines) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    std::vector<std::string_view> words;
    for (size_t i = 0; i < line.size();) {
        size_t j = line.find(' ', i);
        if (j == std::string_view::npos) j = line.size();
        if (j > i) words.push_back(line.substr(i, j - i));
        i = j + 1;
    }
    std::string o;
    if (words.empty() || words[0] == "help") {
        o = "commands:\n"
            "stats                      every counter of every engine (key=value)\n"
            "conns [state=S] [port=N]   connections and listeners, one line each (key=value)\n"
            "pcap on FILE [snaplen=N] [max=BYTES]\n"
            "                           capture every engine's frames (FILE.N with several engines)\n"
            "pcap off                   stop capturing\n"
            "help                       this text\n";
        return o;
    }
    if (words[0] == "stats") {
        if (words.size() > 1) return "error: stats takes no argument\n";
        stats_lines(o, engines);
        return o;
    }
    if (words[0] == "conns") {
        std::string state;
        long port = -1;
        for (size_t k = 1; k < words.size(); ++k) {
            std::string_view w = words[k];
            if (w.starts_with("state=") && w.size() > 6) {
                state = norm_state(w.substr(6));
            } else if (w.starts_with("port=")) {
                char* end = nullptr;
                std::string p(w.substr(5));
                port = std::strtol(p.c_str(), &end, 10);
                if (p.empty() || *end != '\0' || port < 0 || port > 65535)
                    return fmt::format("error: bad port filter '{}' (give port=0..65535)\n", w);
            } else {
                return fmt::format("error: unknown conns filter '{}' (give state=S or port=N)\n", w);
            }
        }
        std::vector<ConnSnapshot> recs;
        for (Engine* e : engines) {
            ConnTableHead h;
            if (!e->impl().publisher().conns(&h, &recs)) continue;
            for (const ConnSnapshot& c : recs) {
                if (!state.empty() && !norm_state(c.state).starts_with(state)) continue;
                if (port >= 0 && c.local_port != port && c.remote_port != port) continue;
                conn_line(o, e->index(), c);
            }
            if (h.total > recs.size())
                fmt::format_to(std::back_inserter(o), "# engine={} truncated total={} listed={}\n", e->index(),
                               h.total, recs.size());
        }
        return o;
    }
    if (words[0] == "pcap") return pcap_command(words, engines);
    return fmt::format("error: unknown command '{}' (try help)\n", words[0]);
}

// "pcap on FILE [snaplen=N] [max=BYTES]" / "pcap off". Called on engine 0's
// thread (the socket is served from its epoll): engine 0 switches at once,
// so a file that cannot be opened is answered as an error and nothing
// changes anywhere; the other engines get the toggle through their mailbox
// (EngineImpl::post_pcap) and switch at the end of their next loop iteration.
std::string ControlSocket::pcap_command(const std::vector<std::string_view>& words,
                                        const std::vector<Engine*>& engines) {
    const bool on = words.size() >= 2 && words[1] == "on";
    std::string why;
    if (words.size() < 2 || (!on && words[1] != "off") || (on && words.size() < 3) || (!on && words.size() > 2)) {
        why = "usage: pcap on FILE [snaplen=N] [max=BYTES] | pcap off";
        return "error: " + why + "\n";
    }
    EngineImpl::PcapToggle t;
    t.on = on;
    if (on) {
        t.path = std::string(words[2]);
        for (size_t k = 3; k < words.size(); ++k) {
            const std::string_view w = words[k];
            const bool snap = w.starts_with("snaplen="), max = w.starts_with("max=");
            const std::string v(w.substr(w.find('=') + 1));
            char* end = nullptr;
            errno = 0;
            const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
            const bool ok = (snap || max) && !v.empty() && v[0] != '-' && *end == '\0' && errno == 0 &&
                            (snap ? n >= 64 && n <= PcapWriter::kDefaultSnaplen : n >= PcapWriter::kFileHeaderLen);
            if (!ok) {
                why = fmt::format("bad pcap option '{}' (give snaplen=64..262144 or max=BYTES)", w);
                return "error: " + why + "\n";
            }
            if (snap) t.snaplen = uint32_t(n);
            else t.max_bytes = uint64_t(n);
        }
    }
    // engines[i] writes pcap_path(FILE, i, count) (the Runtime lists them by index, as --pcap names them).
    Engine* e0 = engines.empty() ? nullptr : engines[0];
    if (e0 == nullptr || e0->impl().kernel_only()) {
        why = "pcap needs a device (a kernel-only runtime has no frames to capture)";
        return "error: " + why + "\n";
    }
    const unsigned count = unsigned(engines.size());
    EngineImpl::PcapToggle t0 = t;
    if (on) t0.path = pcap_path(t.path, 0, count);
    if (!e0->impl().pcap_switch(t0, &why)) return fmt::format("error: pcap on: {}\n", why);
    for (unsigned i = 1; i < count; ++i) {
        auto te = std::make_unique<EngineImpl::PcapToggle>(t);
        if (on) te->path = pcap_path(t.path, i, count);
        engines[i]->impl().post_pcap(std::move(te));
    }
    if (!on) return fmt::format("pcap off ({} engine(s))\n", count);
    return fmt::format("pcap on {} ({} engine(s){}) snaplen={} max={}\n", t0.path, count,
                       count > 1 ? fmt::format(", {}.N each", t.path) : std::string(),
                       t.snaplen ? t.snaplen : PcapWriter::kDefaultSnaplen, t.max_bytes);
}

} // namespace crescent::engine
