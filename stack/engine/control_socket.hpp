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
#include <vector>

#include <crescent/engine.hpp>

#include "stack/engine/loop_server.hpp"

namespace crescent::engine {

// attach() / detach() / served() / dropped(): LoopServer (loop_server.hpp).
class ControlSocket : public LoopServer {
public:
    // Binds and listens (non-blocking) on the first usable directory; nullptr
    // and *err (one line) when none works.
    static std::unique_ptr<ControlSocket> open(std::string* err);
    // The directory candidates, in order, for `pid` (crescent-stat searches
    // the same list).
    static std::vector<std::string> candidate_paths(int pid);
    ~ControlSocket() override;  // removes the socket file

    const std::string& path() const { return path_; }

    // The reply to one request line, without the terminating empty line.
    static std::string answer(std::string_view line, const std::vector<Engine*>& engines);
    // "pcap on FILE [snaplen=N] [max=BYTES]" / "pcap off" (engine 0's thread).
    static std::string pcap_command(const std::vector<std::string_view>& words, const std::vector<Engine*>& engines);

private:
    ControlSocket(int fd, std::string path) : LoopServer(fd), path_(std::move(path)) {}
    // The line protocol: answers every complete line, closes at EOF once the replies are out.
    void on_input(int fd, Client& c, uint32_t events, bool eof) override;

    std::string path_;
};

} // namespace crescent::engine
