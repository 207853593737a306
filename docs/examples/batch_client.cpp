// docs/examples/batch_client.cpp — the client of inline_client.cpp in batch
// mode with the socket-like copy API: write() copies what fits into zbufs
// from the arena, read() copies the received bytes out. The easiest port of
// code written for kernel sockets; the zero-copy calls (send, read_slices)
// stay available in batch mode.
//
//   batch_client IFACE SERVER_IP [PORT] [BYTES]      (root; default port 7, 1 MiB)
//
// Exit status 0 iff every byte came back intact within 10 s.
// docs/api-guide.md walks through it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <crescent/engine.hpp>
#include <crescent/runtime.hpp>

using namespace crescent;

class Client final : public Handler {
public:
    Client(Runtime& rt, size_t total) : rt_(rt), message_(total, '\0') {
        for (size_t i = 0; i < total; ++i) message_[i] = char('a' + i % 26);
    }
    bool ok = false;
    std::string error;

private:
    void on_connected(Conn c) override { pump(c); }
    void on_writable(Conn c) override { pump(c); }

    // Level-triggered after each burst that brought data: read until empty.
    void on_readable(Conn c) override {
        char buf[16384];
        while (size_t n = c.read(buf, sizeof buf)) {  // the window reopens as we read
            if (message_.compare(received_, n, buf, n) != 0 && error.empty())
                error = "echo differs near byte " + std::to_string(received_);
            received_ += n;
        }
        if (received_ >= message_.size()) {
            ok = error.empty();
            c.close();
        }
    }

    void on_closed(Conn, CloseReason why) override {
        if (!ok && error.empty()) error = "connection closed: " + std::string(close_reason_name(why));
        rt_.stop();
    }

    void pump(Conn c) {
        // write() takes as much as fits (0 when the send buffer is full:
        // on_writable() follows); the bytes are copied, so `message_` stays ours.
        while (sent_ < message_.size()) {
            const size_t n = c.write(message_.data() + sent_, message_.size() - sent_);
            if (n == 0) return;
            sent_ += n;
        }
    }

    Runtime& rt_;
    std::string message_;
    size_t sent_ = 0, received_ = 0;
};

int main(int argc, char** argv) {
    if (argc < 3 || argc > 5) {
        std::fprintf(stderr, "usage: batch_client IFACE SERVER_IP [PORT] [BYTES]\n");
        return 2;
    }
    Ipv4 server;
    if (!Ipv4::parse(argv[2], &server)) {
        std::fprintf(stderr, "batch_client: '%s' is not an IPv4 address\n", argv[2]);
        return 2;
    }
    const uint16_t port = argc >= 4 ? uint16_t(std::atoi(argv[3])) : 7;
    const size_t bytes = argc >= 5 ? size_t(std::strtoull(argv[4], nullptr, 10)) : size_t(1) << 20;

    RuntimeOptions o;
    o.iface = argv[1];
    o.engine.mode = DispatchMode::Batch;
    std::string err;
    std::unique_ptr<Runtime> rt = Runtime::start(o, &err);
    if (!rt) {
        std::fprintf(stderr, "%s\n", err.c_str());
        return 1;
    }

    Client client(*rt, bytes);
    rt->run([&](Engine& e) {
        Conn c;
        if (e.connect(Endpoint{server, port}, client, &c) != ConnectStatus::Ok) {
            client.error = "connect failed (no route to the server, or no free client port)";
            rt->stop();
            return;
        }
        e.add_timer(std::chrono::seconds(10), [&] {
            if (client.error.empty()) client.error = "timed out";
            rt->stop();
        });
    });
    if (!client.ok) {
        std::fprintf(stderr, "batch_client: %s\n", client.error.c_str());
        return 1;
    }
    std::printf("batch_client: %zu bytes echoed intact\n", bytes);
    return 0;
}
