// docs/examples/rpc_client.cpp — the client of rpc_server.cpp: a Channel from
// one engine to the server, and four calls chained through their
// continuations: put a 100 KiB value sent from zbufs without a copy, get it
// back (the reply's data are zero-copy slices of the received buffers) and
// check every byte, get a key that is not there (the application status),
// sync (a reply the server defers). Prints the channel's per-method
// latencies; exit status 0 iff every call had the expected outcome.
//
//   rpc_client --iface IFACE --server IP [--port 7100]    crescent TCP (root)
//   rpc_client --kernel --server IP [--port 7100]         kernel TCP, no device
//
// docs/rpc-guide.md walks through it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <crescent/rpc/channel.hpp>
#include <crescent/runtime.hpp>

#include "docs/examples/blob_proto.hpp"

using namespace crescent;

constexpr uint64_t kKey = 42;
constexpr size_t kValueBytes = 100 << 10;

static std::byte pattern(size_t i) { return std::byte(i * 131 + (i >> 8)); }

struct Client {
    Runtime* rt = nullptr;
    std::unique_ptr<rpc::Channel> ch;
    std::string error;
    bool done = false;

    // Stop at the first unexpected outcome; `what` names the step.
    bool expect(rpc::Reply& r, rpc::Status want, const char* what) {
        if (r.status == want) return true;
        error = std::string(what) + ": " + std::string(rpc::status_name(r.status)) +
                (r.error.empty() ? "" : " (" + std::string(r.error) + ")");
        rt->stop();
        return false;
    }

    void put() {
        // The value in zbufs of at most 16 KiB each, filled in place and then
        // handed to the channel, which moves them to TCP untouched.
        std::vector<Slice> value;
        for (size_t off = 0; off < kValueBytes; off += 16384) {
            const size_t n = std::min<size_t>(16384, kValueBytes - off);
            Slice s = zbuf::Arena::current()->alloc_slice(n);
            if (!s) {
                error = "the zbuf arena is empty";
                rt->stop();
                return;
            }
            for (size_t i = 0; i < n; ++i) s.data()[i] = pattern(off + i);
            value.push_back(std::move(s));
        }
        auto key = blob::key_meta(kKey);
        // Ok: accepted, the continuation runs exactly once, later, from the
        // engine loop. QueueFull/Shutdown: refused now, `value` untouched.
        rpc::Status st = ch->call(blob::kPut, key, value, [this](rpc::Reply& r) {
            if (expect(r, rpc::Status::Ok, "put")) get();
        });
        if (st != rpc::Status::Ok) {
            error = "put refused: " + std::string(rpc::status_name(st));
            rt->stop();
        }
    }

    void get() {
        auto key = blob::key_meta(kKey);
        ch->call(blob::kGet, key, {}, [this](rpc::Reply& r) {
            if (!expect(r, rpc::Status::Ok, "get")) return;
            size_t off = 0;  // r.data: zero-copy slices, valid during this call
            for (const Slice& s : r.data)
                for (std::byte b : s.bytes())
                    if (b != pattern(off++) && error.empty()) error = "get: wrong bytes at " + std::to_string(off - 1);
            if (off != kValueBytes) error = "get: " + std::to_string(off) + " bytes, expected " + std::to_string(kValueBytes);
            if (!error.empty()) {
                rt->stop();
                return;
            }
            get_missing();
        });
    }

    void get_missing() {
        auto key = blob::key_meta(kKey + 1);
        ch->call(blob::kGet, key, {}, [this](rpc::Reply& r) {
            if (expect(r, blob::kNotFound, "get of a missing key")) sync();
        });
    }

    void sync() {
        ch->call(
            blob::kSync, {}, {},
            [this](rpc::Reply& r) {
                if (!expect(r, rpc::Status::Ok, "sync")) return;
                done = true;
                rt->stop();
            },
            std::chrono::milliseconds(500));  // this call's deadline (0 = the channel's)
    }
};

int main(int argc, char** argv) {
    RuntimeOptions o;
    rpc::ChannelOptions co;
    std::string server;
    co.server.port = 7100;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--iface" && i + 1 < argc) o.iface = argv[++i];
        else if (a == "--kernel") co.transport = rpc::Transport::Kernel;
        else if (a == "--server" && i + 1 < argc) server = argv[++i];
        else if (a == "--port" && i + 1 < argc) co.server.port = uint16_t(std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: rpc_client (--iface IFACE | --kernel) --server IP [--port P]\n");
            return 2;
        }
    }
    if (!Ipv4::parse(server, &co.server.ip)) {
        std::fprintf(stderr, "rpc_client: give --server IP (an IPv4 address)\n");
        return 2;
    }
    if (co.transport == rpc::Transport::Kernel) {
        o.kernel_only = true;
        o.engine.kernel_wait = KernelWait::Block;
    }
    co.server_engines = 1;                     // the server's engines: one connection to each
    co.deadline = std::chrono::seconds(5);     // per call, unless call() says otherwise

    std::string err;
    auto rt = Runtime::start(o, &err);
    if (!rt) {
        std::fprintf(stderr, "%s\n", err.c_str());
        return 1;
    }
    Client cl;
    cl.rt = rt.get();
    rt->run([&](Engine& e) {
        cl.ch = std::make_unique<rpc::Channel>(e, co);  // starts connecting at once
        // Calls made before the connection is up wait for it (until their deadline).
        cl.put();
        e.add_timer(std::chrono::seconds(10), [&] {
            if (cl.error.empty() && !cl.done) cl.error = "timed out";
            rt->stop();
        });
        e.at_stop([&cl] {  // the channel belongs to this engine's thread
            for (const rpc::MethodStats& m : cl.ch->method_stats())
                if (m.calls)
                    std::fprintf(stderr, "rpc_client: method %u: %llu call(s), p50 %llu us, max %llu us\n", m.method,
                                 (unsigned long long)m.calls, (unsigned long long)m.latency.percentile(50) / 1000,
                                 (unsigned long long)m.latency.max() / 1000);
            cl.ch.reset();
        });
    });
    if (!cl.done) {
        std::fprintf(stderr, "rpc_client: %s\n", cl.error.empty() ? "stopped" : cl.error.c_str());
        return 1;
    }
    std::printf("rpc_client: put, get (%zu bytes checked), get of a missing key, sync: all as expected\n", kValueBytes);
    return 0;
}
