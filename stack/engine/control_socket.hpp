// crescent — the Runtime's control socket: a Unix stream socket that
// crescent-stat (tools/crescent-stat.cpp) connects to, served from engine 0's
// epoll set (Engine::add_fd) without ever blocking that engine.
//
// Where: /run/crescent/<pid>.sock; when that directory cannot be made or
// written (not root), $XDG_RUNTIME_DIR/crescent/<pid>.sock, then
// /tmp/crescent/<pid>.sock. The file is removed when the Runtime goes away.
//
// Protocol: one request per line, each answered by zero or more lines and
// then an empty line (the end of the reply):
//   stats                          key=value lines: "engine.<i>.<counter>=<n>"
//                                  for every engine, "zbuf.<size>.<field>=<n>"
//                                  for the arena, "pid=", "engines="
//   conns [state=X] [port=N]       one line per connection (and listener) of
//                                  every engine, space-separated key=value
//                                  pairs (engine= state= local= remote= cc=
//                                  cwnd= ...); state matches case-insensitively
//                                  ("established", "ESTABLISHED", "estab"
//                                  prefix), port either end
//   pcap on FILE [snaplen=N] [max=BYTES]
//                                  start capturing every engine's frames
//                                  (FILE.N with several engines; engine 0
//                                  at once, the others at their next loop
//                                  iteration); "pcap off" stops; answers one
//                                  line, or "error: ..." (nothing changed)
//   help                           the commands
// An unknown command answers "error: <text>" then the empty line. Replies
// come from the engines' last publications (stats_publish.hpp: at most 10 ms
// old, connections 100 ms). A reply that does not fit the client's socket
// and a bounded output buffer (4 MiB), a request line longer than 1 KiB, or
// more than 16 clients at once: that client is closed (counted in dropped()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <crescent/engine.hpp>

namespace crescent::engine {

class ControlSocket {
public:
    // Binds and listens (non-blocking) on the first usable directory; nullptr
    // and *err (one line) when none works.
    static std::unique_ptr<ControlSocket> open(std::string* err);
    // The directory candidates, in order, for `pid` (crescent-stat searches
    // the same list).
    static std::vector<std::string> candidate_paths(int pid);
    ~ControlSocket();
    ControlSocket(const ControlSocket&) = delete;
    ControlSocket& operator=(const ControlSocket&) = delete;

    const std::string& path() const { return path_; }

    // Engine 0's thread: serve from `e0`'s epoll; `engines` (all of them,
    // e0 included) are only read through their published snapshots. Stops
    // serving (fds closed) when e0 stops.
    bool attach(Engine& e0, std::vector<Engine*> engines);
    // Engine 0's thread: stop serving (idempotent; also run by e0's at_stop).
    void detach();

    // The reply to one request line, without the terminating empty line.
    static std::string answer(std::string_view line, const std::vector<Engine*>& engines);
    // "pcap on FILE [snaplen=N] [max=BYTES]" / "pcap off" (engine 0's thread).
    static std::string pcap_command(const std::vector<std::string_view>& words, const std::vector<Engine*>& engines);

    uint64_t served() const { return served_; }    // requests answered
    uint64_t dropped() const { return dropped_; }  // clients closed for a full buffer / long line / limit

private:
    struct Client {
        std::string in;    // bytes of a request line not complete yet
        std::string out;   // reply bytes the socket did not take yet
    };
    ControlSocket(int fd, std::string path) : lfd_(fd), path_(std::move(path)) {}
    void on_accept();
    void on_client(int fd, uint32_t events);
    void close_client(int fd);
    bool flush(int fd, Client& c);  // false: the client is gone

    int lfd_ = -1;
    std::string path_;
    Engine* e0_ = nullptr;
    std::vector<Engine*> engines_;
    std::unordered_map<int, Client> clients_;
    uint64_t stop_hook_ = 0;
    bool attached_ = false;
    uint64_t served_ = 0, dropped_ = 0;
};

} // namespace crescent::engine
