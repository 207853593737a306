// docs/examples/rpc_server.cpp — a small RPC service on crescent: a blob
// store (blob_proto.hpp) that shows the three things a storage server does
// with the RPC layer:
//
//   put   keeps the request's data slices as the stored value: zero-copy in;
//   get   replies with shares of the stored slices: zero-copy out;
//   sync  answers later, from a timer, the way a handler answers after disk
//         I/O (deferred replies: a Call outlives its handler).
//
//   rpc_server --iface IFACE [--port 7100]    crescent TCP over AF_XDP (root)
//   rpc_server --kernel [--port 7100]         kernel TCP in the same loop: no
//                                             device, no root, no hugepages
//
// One engine: the store is per engine (share-nothing), and a client's calls
// may take any of its connections. docs/rpc-guide.md walks through it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <crescent/rpc/server.hpp>
#include <crescent/runtime.hpp>

#include "docs/examples/blob_proto.hpp"

using namespace crescent;

// Everything one engine serves. Lives as long as the Runtime; touched only
// on its engine's thread.
struct BlobService {
    std::unique_ptr<rpc::Server> srv;
    std::unordered_map<uint64_t, std::vector<Slice>> store;
    std::vector<rpc::Call> syncing;  // deferred: answered by the next sync timer
    bool sync_armed = false;

    bool start(Engine& e, rpc::Transport t, uint16_t port, std::string* err) {
        srv = std::make_unique<rpc::Server>(e);
        srv->register_method(blob::kPut, "put", [this](rpc::Call& c) {
            uint64_t key;
            if (!blob::parse_key(c.meta(), &key)) {
                c.fail(rpc::Status::BadRequest, "put: the metadata is an 8-byte key");
                return;
            }
            // The received slices become the value: moved out of the Call,
            // they stay valid after the handler returns. A new value replaces
            // the old slices instead of writing into them, so a get reply
            // still in flight keeps reading the bytes it was given.
            std::vector<Slice>& v = store[key];
            v.clear();
            for (Slice& s : c.data()) v.push_back(std::move(s));
            c.reply();
        });
        srv->register_method(blob::kGet, "get", [this](rpc::Call& c) {
            uint64_t key;
            if (!blob::parse_key(c.meta(), &key)) {
                c.fail(rpc::Status::BadRequest, "get: the metadata is an 8-byte key");
                return;
            }
            auto it = store.find(key);
            if (it == store.end()) {
                c.reply({}, {}, blob::kNotFound);  // an application status
                return;
            }
            // share(): one more reference per slice, no copy. TCP drops them
            // when the peer has acknowledged the reply.
            std::vector<Slice> out;
            for (const Slice& s : it->second) out.push_back(s.share());
            c.reply({}, out);
        });
        srv->register_method(blob::kSync, "sync", [this, &e](rpc::Call& c) {
            // Keep the Call (move-only) and answer it later. Here a 1 ms timer
            // stands in for the disk: every sync that arrived meanwhile is
            // answered by the same "flush" (group commit).
            syncing.push_back(std::move(c));
            if (sync_armed) return;
            sync_armed = true;
            e.add_timer(std::chrono::milliseconds(1), [this] {
                sync_armed = false;
                for (rpc::Call& call : syncing) call.reply();
                syncing.clear();
            });
        });
        return srv->listen(t, port, err);
    }

    // On the engine thread when it stops: the Server must outlive the Calls
    // it handed out, so the deferred ones go first (a dropped Call answers
    // Internal, if its connection is still there). The stored slices are
    // dropped here too: an obj goes back to its free list when it is freed on
    // the engine thread that allocated it; freed later from main(), it would
    // wait for an engine that no longer runs.
    void stop() {
        syncing.clear();
        srv.reset();
        store.clear();
    }
};

int main(int argc, char** argv) {
    RuntimeOptions o;
    rpc::Transport transport = rpc::Transport::Crescent;
    uint16_t port = 7100;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--iface" && i + 1 < argc) o.iface = argv[++i];
        else if (a == "--kernel") transport = rpc::Transport::Kernel;
        else if (a == "--port" && i + 1 < argc) port = uint16_t(std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: rpc_server (--iface IFACE | --kernel) [--port P]\n");
            return 2;
        }
    }
    if (transport == rpc::Transport::Kernel) {
        o.kernel_only = true;                         // engines without a device
        o.engine.kernel_wait = KernelWait::Block;     // sleep in epoll_wait when idle
    } else {
        o.listen_ports = {port};                      // steered to crescent
    }
    std::string err;
    auto rt = Runtime::start(o, &err);
    if (!rt) {
        std::fprintf(stderr, "%s\n", err.c_str());
        return 1;
    }

    BlobService svc;
    std::string listen_err;
    rt->run([&](Engine& e) {
        if (!svc.start(e, transport, port, &listen_err)) {
            rt->stop();
            return;
        }
        e.at_stop([&svc] { svc.stop(); });
        std::fprintf(stderr, "rpc_server: listening on port %u over %s (%s)\n", port,
                     std::string(rpc::transport_name(transport)).c_str(), rt->describe().c_str());
    });
    if (!listen_err.empty()) {
        std::fprintf(stderr, "rpc_server: %s\n", listen_err.c_str());
        return 1;
    }
    return 0;
}
