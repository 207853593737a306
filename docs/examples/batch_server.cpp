// docs/examples/batch_server.cpp — the echo server of inline_server.cpp in
// batch mode: the handlers run after the whole RX burst (epoll/libev style)
// and pull the received bytes themselves, still without a copy
// (Conn::read_slices). Bytes nobody has read stay queued in TCP and close the
// receive window, which is the backpressure inline mode does not have.
//
//   batch_server IFACE [PORT]         (root: AF_XDP on IFACE, default port 7)
//
// docs/api-guide.md walks through it.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/runtime.hpp>

using namespace crescent;

class Echo final : public Handler {
    struct State {
        std::vector<Slice> unsent;  // read, not yet accepted by send()
        bool peer_closed = false;
    };

    void on_connected(Conn c) override { c.set_user(new State); }

    // Batch mode: level-triggered after each burst that brought data.
    void on_readable(Conn c) override { pump(c, *static_cast<State*>(c.user())); }
    void on_writable(Conn c) override { pump(c, *static_cast<State*>(c.user())); }

    void on_peer_closed(Conn c) override {
        State& st = *static_cast<State*>(c.user());
        st.peer_closed = true;
        pump(c, st);
    }

    void on_closed(Conn c, CloseReason) override {
        delete static_cast<State*>(c.user());
        c.set_user(nullptr);
    }

    static void pump(Conn c, State& st) {
        for (;;) {
            if (!st.unsent.empty()) {
                // All or nothing. WouldBlock: the slices stay in `unsent`, we
                // stop reading (the peer's window closes: backpressure), and
                // on_writable() fires once they fit. A refused send is what
                // arms on_writable(), so try it rather than poll send_space().
                if (c.send(st.unsent) != SendStatus::Ok) return;
                st.unsent.clear();  // the entries were moved out (left empty)
            }
            // Up to 64 KiB of the received bytes, as the received slices
            // themselves; the receive window reopens by what we take.
            if (c.read_slices(st.unsent, 64 * 1024) == 0) break;
        }
        if (st.peer_closed && st.unsent.empty() && c.readable() == 0) c.close();
    }
};

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::fprintf(stderr, "usage: batch_server IFACE [PORT]\n");
        return 2;
    }
    const uint16_t port = argc == 3 ? uint16_t(std::atoi(argv[2])) : 7;

    RuntimeOptions o;
    o.iface = argv[1];
    o.listen_ports = {port};
    o.engine.mode = DispatchMode::Batch;  // every engine runs its handlers after the burst
    std::string err;
    std::unique_ptr<Runtime> rt = Runtime::start(o, &err);
    if (!rt) {
        std::fprintf(stderr, "%s\n", err.c_str());
        return 1;
    }
    std::fprintf(stderr, "batch_server: %s\n", rt->describe().c_str());

    std::vector<Echo> handlers(rt->engine_count());
    bool listening = true;
    rt->run([&](Engine& e) {
        if (e.listen(port, handlers[e.index()]) != ListenStatus::Ok) {
            listening = false;
            rt->stop();
        }
    });
    if (!listening) {
        std::fprintf(stderr, "batch_server: port %u is already in use\n", port);
        return 1;
    }
    return 0;
}
