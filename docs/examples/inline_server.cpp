// docs/examples/inline_server.cpp — the smallest complete crescent server, in
// inline mode: an echo service (RFC 862) whose replies are the very buffers
// the NIC received into, sent back without a copy.
//
//   inline_server IFACE [PORT]        (root: AF_XDP on IFACE, default port 7)
//
// docs/api-guide.md walks through it. Built with crescent (docs/meson.build),
// so it keeps compiling against the current API.
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/runtime.hpp>

using namespace crescent;

// One Handler serves every connection of its engine; each connection's own
// state hangs off Conn::set_user(). Every callback runs on the engine thread.
class Echo final : public Handler {
    struct State {
        std::deque<Slice> unsent;  // received, not yet accepted by send()
        bool peer_closed = false;  // FIN seen: close once everything is echoed
    };

    void on_connected(Conn c) override { c.set_user(new State); }

    // Inline mode: runs inside packet processing. `data` are zero-copy views
    // of the received zbufs, owned by the engine for this call only.
    void on_data(Conn c, std::span<Slice> data) override {
        State& st = *static_cast<State*>(c.user());
        // The common case: send the received slices straight back. On Ok
        // they moved into the send queue, and TCP holds them until the peer
        // acknowledges them (no copy, no allocation).
        if (st.unsent.empty() && c.send(data) == SendStatus::Ok) return;
        // WouldBlock: nothing moved. Keep the slices by moving them out of
        // `data` (the engine drops whatever is left there when we return)
        // and continue in on_writable(). Their bytes stay in the receive
        // window until we release them (else it would reopen as soon as we
        // return, and a peer that never reads its echo would fill `unsent`).
        for (Slice& s : data)
            if (!s.empty()) st.unsent.push_back(std::move(s));
        c.hold_window();
        flush(c, st);
    }

    void on_writable(Conn c) override { flush(c, *static_cast<State*>(c.user())); }

    void on_peer_closed(Conn c) override {
        State& st = *static_cast<State*>(c.user());
        st.peer_closed = true;
        flush(c, st);
    }

    void on_closed(Conn c, CloseReason) override {
        delete static_cast<State*>(c.user());
        c.set_user(nullptr);
    }

    static void flush(Conn c, State& st) {
        while (!st.unsent.empty()) {
            // All or nothing per call: on WouldBlock the slice stays here and
            // on_writable() fires once send space is back.
            const size_t n = st.unsent.front().size();
            if (c.send(std::span<Slice>(&st.unsent.front(), 1)) != SendStatus::Ok) return;
            st.unsent.pop_front();
            c.release_window(n);  // the window reopens by what went out
        }
        if (st.peer_closed) c.close();  // FIN after the queued bytes
    }
};

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::fprintf(stderr, "usage: inline_server IFACE [PORT]\n");
        return 2;
    }
    const uint16_t port = argc == 3 ? uint16_t(std::atoi(argv[2])) : 7;

    RuntimeOptions o;
    o.iface = argv[1];          // AF_XDP on this interface; the kernel keeps it
    o.listen_ports = {port};    // steered to crescent by the XDP program
    o.cores = 1;                // engines: one RX/TX queue pair and one CPU each
    std::string err;
    std::unique_ptr<Runtime> rt = Runtime::start(o, &err);
    if (!rt) {                  // one line naming the cause and what to do
        std::fprintf(stderr, "%s\n", err.c_str());
        return 1;
    }
    std::fprintf(stderr, "inline_server: %s\n", rt->describe().c_str());

    std::vector<Echo> handlers(rt->engine_count());  // share-nothing: one per engine
    bool listening = true;
    // Runs the lambda on every engine's own thread, then its loop, until
    // Ctrl-C / SIGTERM / rt->stop().
    rt->run([&](Engine& e) {
        if (e.listen(port, handlers[e.index()]) != ListenStatus::Ok) {
            listening = false;
            rt->stop();
        }
    });
    if (!listening) {
        std::fprintf(stderr, "inline_server: port %u is already in use\n", port);
        return 1;
    }
    return 0;
}
