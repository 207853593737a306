// crescent-echo — an RFC 862 echo server over crescent, and a verifying
// streaming client (--client).
//
//   crescent-echo --iface IF [--port 7] [--mode inline|batch] [--cores N] [--file-prefix P]
//   crescent-echo --eal "ARGS" --ip A.B.C.D/LEN [--mac M] [--neighbour IP=MAC]... [--gateway IP] ...
//   crescent-echo ... --client HOST [--conns N] [--bytes N] [--cc newreno|cubic|dctcp]
//
// Server: every byte received on --port goes back on the same connection. In
// inline mode the received zbuf slices themselves are sent back (zero-copy);
// in batch mode the copy API (read/write) is used. Backpressure: what the
// send buffer cannot take waits until on_writable; in batch mode the
// connection stops reading meanwhile (its receive window closes); in inline
// mode the kept slices hold their bytes in the window (Conn::hold_window,
// released as they are echoed), so a peer that does not read is stopped at
// --rcv-buf either way (tests/netns/limits_test.py slow_reader checks both).
// A write() short for memory (the arena or --max-memory-mb) waits the same
// way: on_writable follows once memory may be back.
//
// Client: opens --conns connections to HOST:--port (spread over the engines),
// streams --bytes of a position-dependent pattern on each, verifies every
// echoed byte, closes, and prints one line; exit status 0 iff every byte came
// back intact.
//
// Ctrl-C / SIGTERM: the engines stop, connections are reset, and the runtime
// removes the XDP program and DPDK's files before exiting.
#include <atomic>
#include <cerrno>
#include <functional>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/runtime.hpp>

#include "examples/cli.hpp"

namespace {

using namespace crescent;

struct Options {
    RuntimeOptions rt;
    uint16_t port = 7;
    std::string client;       // empty: server
    unsigned conns = 1;
    uint64_t bytes = 16u << 20;
    bool stats = false;
    CongestionControl cc = CongestionControl::NewReno;
    double timeout = 120;     // client: give up after this many seconds
    bool show_plan = false;   // print the port plan and exit
};

[[noreturn]] void die(const std::string& msg) { examples::fail("crescent-echo", msg); }

const char* usage =
    "usage: crescent-echo (--iface IFACE | --eal \"ARGS\" --ip A.B.C.D/LEN [--mac MAC] [--neighbour IP=MAC]...\n"
    "                      [--gateway IP]) [--port P] [--mode inline|batch] [--cores N] [--file-prefix P]\n"
    "                     [--no-huge] [--burst N] [--reply-at-once on|off] [--idle-sleep-us N] [--stats] [--show-plan]\n"
    "                     [--impair loss=P,dup=P,reorder=P,delay=Nms,seed=N]   (testing: netem-like, both ways)\n"
    "                     [--pcap FILE [--pcap-snaplen N] [--pcap-max-mb N | --pcap-max-bytes N]]\n"
    "                         (every frame sent and received, as pcap; FILE.0, FILE.1... with --cores > 1)\n"
    "                     [--client HOST [--conns N] [--bytes N] [--cc newreno|cubic|dctcp] [--timeout SEC]]\n";

Options parse(int argc, char** argv) {
    Options o;
    examples::Cli cli("crescent-echo", argc, argv, usage);
    while (cli.next()) {
        if (cli.runtime_option(o.rt) || cli.engine_option(o.rt) || cli.limit_option(o.rt)) continue;
        std::string_view a = cli.flag();
        if (a == "--port") o.port = uint16_t(cli.number(1, 65535));
        else if (a == "--stats") o.stats = true;
        else if (a == "--show-plan") o.show_plan = true;
        else if (a == "--copy-rx") o.rt.zero_copy_rx = false;
        else if (a == "--client") o.client = cli.value();
        else if (a == "--conns") o.conns = unsigned(cli.number(1, 4096));
        else if (a == "--bytes") o.bytes = cli.number(1, uint64_t(1) << 40);
        else if (a == "--timeout") o.timeout = double(cli.number(1, 86400));
        else if (a == "--cc") {
            const char* v = cli.value();
            if (!parse_congestion_control(v, &o.cc)) die(std::string("--cc: '") + v + "' is not newreno, cubic or dctcp");
        } else cli.unknown();
    }
    if (o.rt.iface.empty() == o.rt.eal.empty()) die("give exactly one of --iface IFACE or --eal \"ARGS\"");
    if (!o.rt.eal.empty() && o.rt.ip.empty()) die("--eal needs --ip A.B.C.D/LEN (the device has no kernel address)");
    if (o.client.empty()) o.rt.listen_ports.push_back(o.port);
    o.rt.engine.conn.cc = o.cc;
    return o;
}

// ---- server -----------------------------------------------------------------------

class EchoServer final : public Handler {
public:
    explicit EchoServer(bool batch) : batch_(batch) {}
    uint64_t echoed = 0, accepted = 0;

private:
    struct Pending {
        std::deque<Slice> slices;      // inline: received, not yet accepted by send()
        std::vector<std::byte> buf;    // batch: read, not yet written
        size_t off = 0;
        bool peer_closed = false;      // FIN received: close once everything is echoed
    };
    void on_connected(Conn c) override {
        ++accepted;
        c.set_user(new Pending);
    }
    void on_data(Conn c, std::span<Slice> data) override {
        auto* p = static_cast<Pending*>(c.user());
        size_t n = 0;
        for (const Slice& s : data) n += s.size();
        if (p->slices.empty() && c.send(data) == SendStatus::Ok) {  // the common case: straight back
            echoed += n;
            c.send_now();  // the echo is this delivery's last output: on the wire before we return
            return;
        }
        // Kept until the send buffer takes them: their bytes stay in the
        // receive window meanwhile (released as they are echoed), so a peer
        // that does not read its echo is stopped at --rcv-buf.
        for (Slice& s : data)
            if (!s.empty()) p->slices.push_back(std::move(s));
        c.hold_window();
        drain(c, *p);
    }
    void on_readable(Conn c) override { drain(c, *static_cast<Pending*>(c.user())); }
    void on_writable(Conn c) override { drain(c, *static_cast<Pending*>(c.user())); }
    void on_peer_closed(Conn c) override {
        auto* p = static_cast<Pending*>(c.user());
        p->peer_closed = true;
        drain(c, *p);  // closes (FIN after the queued bytes) once nothing is left to echo
    }
    void on_closed(Conn c, CloseReason) override {
        delete static_cast<Pending*>(c.user());
        c.set_user(nullptr);
    }

    void drain(Conn c, Pending& p) {
        if (echo(c, p) && p.peer_closed && c.readable() == 0) c.close();
    }
    // True when nothing is left to send.
    bool echo(Conn c, Pending& p) {
        if (!batch_) {
            while (!p.slices.empty()) {
                Slice& s = p.slices.front();
                size_t n = s.size();
                if (c.send(std::span<Slice>(&s, 1)) == SendStatus::Ok) {
                    echoed += n;
                    c.release_window(n);
                    p.slices.pop_front();
                    continue;
                }
                // Refused (and on_writable armed): send the part that fits, if any.
                size_t space = c.send_space();
                if (space == 0 || space >= n) return false;
                if (c.send(s.sub(0, space)) != SendStatus::Ok) return false;
                s.remove_prefix(space);
                echoed += space;
                c.release_window(space);
            }
            return true;
        }
        for (;;) {
            if (p.off < p.buf.size()) {
                size_t w = c.write(p.buf.data() + p.off, p.buf.size() - p.off);
                p.off += w;
                echoed += w;
                if (p.off < p.buf.size()) return false;  // on_writable continues
            }
            p.buf.resize(64 * 1024);
            size_t r = c.read(p.buf.data(), p.buf.size());
            p.buf.resize(r);
            p.off = 0;
            if (r == 0) return true;
        }
    }

    bool batch_;
};

// ---- client ------------------------------------------------------------------------

inline uint8_t pattern(uint64_t off, uint32_t seed) { return uint8_t((off * 2654435761u >> 13) ^ (off >> 11) ^ seed); }

class StreamClient final : public Handler {
public:
    StreamClient(uint64_t total, bool conn_stats) : total_(total), conn_stats_(conn_stats) {}
    struct State {
        uint32_t seed;
        uint64_t sent = 0, received = 0;
        bool done = false;
    };
    std::vector<std::unique_ptr<State>> conns;
    uint64_t completed = 0, failed = 0, mismatches = 0, closed = 0;
    std::string error;

    void on_connected(Conn c) override { pump(c); }
    void on_writable(Conn c) override { pump(c); }
    void on_acked(Conn c, size_t) override { pump(c); }
    void on_data(Conn c, std::span<Slice> data) override {
        for (const Slice& s : data) verify(c, s.data(), s.size());
    }
    void on_readable(Conn c) override {
        std::byte buf[16384];
        while (size_t n = c.read(buf, sizeof buf)) verify(c, buf, n);
    }
    void on_closed(Conn c, CloseReason why) override {
        ++closed;
        auto* st = static_cast<State*>(c.user());
        if (st && !st->done) {
            ++failed;
            if (error.empty())
                error = std::string("connection closed (") + std::string(close_reason_name(why)) + ") after " +
                        std::to_string(st->received) + " of " + std::to_string(total_) + " bytes";
        }
    }
    bool finished() const { return closed == conns.size(); }

private:
    void pump(Conn c) {
        auto* st = static_cast<State*>(c.user());
        if (!st) return;
        while (st->sent < total_) {
            size_t n = size_t(std::min<uint64_t>({uint64_t(64 * 1024), total_ - st->sent, c.send_space()}));
            if (n == 0) return;
            buf_.resize(n);
            for (size_t i = 0; i < n; ++i) buf_[i] = std::byte(pattern(st->sent + i, st->seed));
            if (c.send_copy(std::span<const std::byte>(buf_)) != SendStatus::Ok) return;
            st->sent += n;
        }
    }
    void verify(Conn c, const std::byte* p, size_t n) {
        auto* st = static_cast<State*>(c.user());
        if (!st) return;
        for (size_t i = 0; i < n; ++i)
            if (std::to_integer<uint8_t>(p[i]) != pattern(st->received + i, st->seed) && mismatches++ == 0)
                error = "echo differs at byte " + std::to_string(st->received + i);
        st->received += n;
        if (st->received >= total_ && !st->done) {
            st->done = true;
            ++completed;
            if (conn_stats_) print_conn(c);
            c.close();
        }
    }
    // --stats: the TCP side of each connection as it completes.
    static void print_conn(Conn c) {
        ConnStats x = c.stats();
        std::fprintf(stderr,
                     "conn :%u: srtt=%lldus rto=%lldus cwnd=%u ssthresh=%u segs_out=%llu retrans(rto/fast/sack)=%llu/%llu/%llu "
                     "bytes_retransmitted=%llu fast_recoveries=%llu dupacks=%llu ooo_in=%llu "
                     "drops(window/paws/room/all)=%llu/%llu/%llu/%llu dsacks=%llu rescue=%llu undone(recovery/rto)=%llu/%llu "
                     "reordering=%u tlp(probes/recovered)=%llu/%llu rack_losses=%llu "
                     "negotiated(ts/sack/ecn)=%d/%d/%d wscale(snd/rcv)=%u/%u ecn(ce_in/ece_in)=%llu/%llu mss=%u "
                     "mss_blackhole=%llu\n",
                     c.local().port, (long long)(x.srtt.count() / 1000), (long long)(x.rto.count() / 1000), x.cwnd,
                     x.ssthresh, (unsigned long long)x.segs_out, (unsigned long long)x.retrans_timeout,
                     (unsigned long long)x.retrans_fast, (unsigned long long)x.retrans_sack,
                     (unsigned long long)x.bytes_retransmitted, (unsigned long long)x.fast_recoveries,
                     (unsigned long long)x.dupacks, (unsigned long long)x.ooo_segments,
                     (unsigned long long)x.drop_out_of_window, (unsigned long long)x.drop_paws,
                     (unsigned long long)x.drop_no_room, (unsigned long long)x.drops, (unsigned long long)x.dsacks_sent,
                     (unsigned long long)x.retrans_rescue, (unsigned long long)x.undo_recoveries,
                     (unsigned long long)x.undo_rtos, x.reordering, (unsigned long long)x.tlp_probes,
                     (unsigned long long)x.tlp_recoveries, (unsigned long long)x.rack_losses, int(x.ts_ok),
                     int(x.sack_ok), int(x.ecn_ok), unsigned(x.snd_wscale), unsigned(x.rcv_wscale),
                     (unsigned long long)x.ecn_ce_received, (unsigned long long)x.ecn_ece_received, x.snd_mss,
                     (unsigned long long)x.mss_blackhole);
    }
    uint64_t total_;
    bool conn_stats_;
    std::vector<std::byte> buf_;
};

void print_stats(Runtime& rt) {
    for (unsigned i = 0; i < rt.engine_count(); ++i) examples::print_engine_stats(rt.engine(i));
}

} // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    Ipv4 server_ip;
    if (!o.client.empty() && !Ipv4::parse(o.client, &server_ip))
        die("--client: '" + o.client + "' is not an IPv4 address");

    auto rt = examples::start_or_exit("crescent-echo", o.rt, o.show_plan);
    const bool batch = o.rt.engine.mode == DispatchMode::Batch;

    if (o.client.empty()) {
        std::vector<std::unique_ptr<EchoServer>> servers;
        for (unsigned i = 0; i < rt->engine_count(); ++i) servers.push_back(std::make_unique<EchoServer>(batch));
        bool listen_failed = false;
        rt->run([&](Engine& e) {
            ListenStatus st = e.listen(o.port, *servers[e.index()]);
            if (st != ListenStatus::Ok) {
                listen_failed = true;
                rt->stop();
                return;
            }
            if (e.index() == 0)
                std::fprintf(stderr, "crescent-echo: listening on %s:%u (%s mode, %u engine%s)\n",
                             rt->local_ip().to_string().c_str(), o.port, batch ? "batch" : "inline",
                             rt->engine_count(), rt->engine_count() > 1 ? "s" : "");
        });
        if (o.stats) print_stats(*rt);
        if (listen_failed) {
            std::fprintf(stderr, "crescent-echo: port %u is already in use\n", o.port);
            return 1;
        }
        return 0;
    }

    // Client.
    std::vector<std::unique_ptr<StreamClient>> clients;
    for (unsigned i = 0; i < rt->engine_count(); ++i) clients.push_back(std::make_unique<StreamClient>(o.bytes, o.stats));
    std::atomic<unsigned> engines_done{0};
    std::string connect_error;
    auto t0 = std::chrono::steady_clock::now();
    const ConnOptions copts = o.rt.engine.conn;  // --cc, --snd-buf, --rcv-buf, --reassembly-*
    rt->run([&](Engine& e) {
        StreamClient& cl = *clients[e.index()];
        unsigned n = o.conns / rt->engine_count() + (e.index() < o.conns % rt->engine_count() ? 1 : 0);
        for (unsigned k = 0; k < n; ++k) {
            Conn c;
            ConnectStatus st = e.connect(Endpoint{server_ip, o.port}, cl, &c, &copts);
            if (st != ConnectStatus::Ok) {
                connect_error = "connect failed (no route or no free client port)";
                break;
            }
            cl.conns.push_back(std::make_unique<StreamClient::State>());
            cl.conns.back()->seed = e.index() * 1000 + k;
            c.set_user(cl.conns.back().get());
        }
        // Poll for completion and the overall deadline on this engine's wheel.
        auto check = std::make_shared<std::function<void()>>();
        *check = [&, check, &e = e, &cl = cl] {
            double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (cl.finished() || secs > o.timeout) {
                if (!cl.finished() && cl.error.empty()) cl.error = "timed out";
                if (++engines_done == rt->engine_count()) rt->stop();
                return;
            }
            e.add_timer(std::chrono::milliseconds(5), *check);
        };
        e.add_timer(std::chrono::milliseconds(5), *check);
    });
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint64_t completed = 0, total_conns = 0, mismatches = 0;
    std::string error = connect_error;
    for (auto& cl : clients) {
        completed += cl->completed;
        total_conns += cl->conns.size();
        mismatches += cl->mismatches;
        if (error.empty() && !cl->error.empty()) error = cl->error;
    }
    if (o.stats) print_stats(*rt);
    bool ok = error.empty() && completed == o.conns && total_conns == o.conns && mismatches == 0;
    double mbps = secs > 0 ? double(completed * o.bytes) * 8 / secs / 1e6 : 0;
    std::printf("{\"ok\":%s,\"conns\":%u,\"completed\":%llu,\"bytes_per_conn\":%llu,\"seconds\":%.3f,"
                "\"echo_mbit_s\":%.1f,\"mismatches\":%llu%s%s%s}\n",
                ok ? "true" : "false", o.conns, (unsigned long long)completed, (unsigned long long)o.bytes, secs, mbps,
                (unsigned long long)mismatches, error.empty() ? "" : ",\"error\":\"", error.c_str(),
                error.empty() ? "" : "\"");
    return ok ? 0 : 1;
}
