// crescent — a small non-blocking stream server on engine 0's epoll set
// (Engine::add_fd), the part the control socket (control_socket.hpp) and the
// Prometheus endpoint (metrics_http.hpp) share: the listening fd, accept4()
// up to kMaxClients clients (more are closed at once and counted in
// dropped()), edge-triggered reads until EAGAIN, sending a client's pending
// reply, closing a client, and detaching at engine 0's stop. What a client's
// bytes mean is the subclass's: on_input() runs after every event of a client
// with the bytes read so far, and decides what to answer and when to close.
// Never blocks the engine: every socket is non-blocking and each event reads
// and sends only what the kernel takes at once.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <crescent/engine.hpp>

namespace crescent::engine {

class LoopServer {
public:
    static constexpr size_t kMaxClients = 16;  // clients at once; one more is closed (dropped())

    virtual ~LoopServer();  // closes the clients and the listening fd (no engine call: e0 may be gone)
    LoopServer(const LoopServer&) = delete;
    LoopServer& operator=(const LoopServer&) = delete;

    // Engine 0's thread: serve from `e0`'s epoll; `engines` (all of them, e0
    // included) are only read through their published snapshots. Stops
    // serving (fds closed) when e0 stops. False (errno from epoll_ctl) when
    // the listening fd cannot be watched.
    bool attach(Engine& e0, std::vector<Engine*> engines);
    // Engine 0's thread: stop serving (idempotent; also run by e0's at_stop,
    // whose hook an explicit detach() cancels).
    void detach();

    uint64_t served() const { return served_; }    // requests answered
    uint64_t dropped() const { return dropped_; }  // clients closed over a limit (the subclass says which)

protected:
    struct Client {
        std::string in;         // bytes read and not consumed by on_input() yet
        std::string out;        // reply bytes the socket did not take yet
        bool answered = false;  // set by on_input(): later bytes are read and discarded
    };
    enum class Flush { Done, Again, Failed };  // c.out all sent / the socket is full (EPOLLOUT resumes) / send error

    explicit LoopServer(int listen_fd) : lfd_(listen_fd) {}

    // A client's event (`events` from epoll), after its bytes were appended
    // to c.in (unless c.answered); `eof`: the peer shut its side. The hook
    // answers into c.out, sends with flush() and may close_client(fd) (then
    // `c` is gone). Not called for EPOLLERR or a failed read (closed first).
    virtual void on_input(int fd, Client& c, uint32_t events, bool eof) = 0;

    // Sends c.out until it is empty or the socket is full; never closes.
    Flush flush(int fd, Client& c);
    // Out of the epoll set, closed, forgotten.
    void close_client(int fd);

    const std::vector<Engine*>& engines() const { return engines_; }
    uint64_t served_ = 0, dropped_ = 0;

private:
    void on_accept();
    void on_client(int fd, uint32_t events);

    int lfd_ = -1;
    Engine* e0_ = nullptr;
    std::vector<Engine*> engines_;
    std::unordered_map<int, Client> clients_;
    uint64_t stop_hook_ = 0;  // e0's at_stop() id while attached_
    bool attached_ = false;
};

} // namespace crescent::engine
