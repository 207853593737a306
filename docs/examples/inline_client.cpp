// docs/examples/inline_client.cpp — the smallest complete crescent client, in
// inline mode: one connection to an echo server (inline_server, batch_server,
// crescent-echo or any RFC 862 server), a message written straight into zbufs
// and sent without a copy, the echo checked byte for byte as it arrives.
//
//   inline_client IFACE SERVER_IP [PORT] [BYTES]     (root; default port 7, 1 MiB)
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

// The byte at offset i of the message.
static std::byte pattern(size_t i) { return std::byte('a' + i % 26); }

class Client final : public Handler {
public:
    Client(Runtime& rt, size_t total) : rt_(rt), total_(total) {}
    bool ok = false;
    std::string error;

private:
    void on_connected(Conn c) override { pump(c); }
    void on_writable(Conn c) override { pump(c); }  // after a WouldBlock

    void on_data(Conn c, std::span<Slice> data) override {
        for (const Slice& s : data) {  // zero-copy views of the received bytes
            for (std::byte b : s.bytes())
                if (b != pattern(received_++) && error.empty())
                    error = "echo differs at byte " + std::to_string(received_ - 1);
        }
        if (received_ >= total_) {
            ok = error.empty();
            c.close();  // on_closed follows once both FINs are acknowledged
        }
    }

    void on_closed(Conn, CloseReason why) override {
        if (!ok && error.empty()) error = "connection closed: " + std::string(close_reason_name(why));
        next_.reset();  // zbufs are freed on their engine's thread
        rt_.stop();     // run() returns on every engine
    }

    // Build the message in zbufs from the arena and hand them to TCP, which
    // keeps a reference until the peer acknowledges the bytes.
    void pump(Conn c) {
        while (sent_ < total_) {
            if (!next_) {
                const size_t n = std::min(size_t(16384), total_ - sent_);
                next_ = zbuf::Arena::current()->alloc_slice(n);
                if (!next_) {
                    error = "the zbuf arena is empty";
                    c.abort();
                    return;
                }
                for (size_t i = 0; i < n; ++i) next_.data()[i] = pattern(sent_ + i);
            }
            const size_t n = next_.size();
            // All or nothing. WouldBlock: `next_` stays ours, and on_writable()
            // fires once n bytes fit (a refused send is what arms it: do not
            // wait for send_space() instead). Ok: `next_` moved into the send
            // queue and is empty; we never write to those bytes again, since
            // the NIC and every retransmission read them in place.
            if (c.send(std::span<Slice>(&next_, 1)) != SendStatus::Ok) return;
            sent_ += n;
        }
    }

    Runtime& rt_;
    size_t total_, sent_ = 0, received_ = 0;
    Slice next_;  // the next chunk, filled, until send() takes it
};

int main(int argc, char** argv) {
    if (argc < 3 || argc > 5) {
        std::fprintf(stderr, "usage: inline_client IFACE SERVER_IP [PORT] [BYTES]\n");
        return 2;
    }
    Ipv4 server;
    if (!Ipv4::parse(argv[2], &server)) {
        std::fprintf(stderr, "inline_client: '%s' is not an IPv4 address\n", argv[2]);
        return 2;
    }
    const uint16_t port = argc >= 4 ? uint16_t(std::atoi(argv[3])) : 7;
    const size_t bytes = argc >= 5 ? size_t(std::strtoull(argv[4], nullptr, 10)) : size_t(1) << 20;

    RuntimeOptions o;
    o.iface = argv[1];  // no listen_ports: a client's ports come from the port plan
    std::string err;
    std::unique_ptr<Runtime> rt = Runtime::start(o, &err);
    if (!rt) {
        std::fprintf(stderr, "%s\n", err.c_str());
        return 1;
    }

    Client client(*rt, bytes);
    rt->run([&](Engine& e) {
        Conn c;
        // From this engine's client-port sub-range, so the replies come back
        // to this engine's queue; on_connected() or on_closed() follows.
        if (e.connect(Endpoint{server, port}, client, &c) != ConnectStatus::Ok) {
            client.error = "connect failed (no route to the server, or no free client port)";
            rt->stop();
            return;
        }
        e.add_timer(std::chrono::seconds(10), [&] {  // runs on this engine's thread
            if (client.error.empty()) client.error = "timed out";
            rt->stop();
        });
    });
    if (!client.ok) {
        std::fprintf(stderr, "inline_client: %s\n", client.error.c_str());
        return 1;
    }
    std::printf("inline_client: %zu bytes echoed intact\n", bytes);
    return 0;
}
