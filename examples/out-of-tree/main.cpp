// A program outside crescent's tree, built only with
//   g++ -std=c++20 main.cpp $(pkg-config --cflags --libs crescent)
// (or `make` here: README.md). CI builds it shared and static against the
// installed library and runs it (tools/check-install).
#include <cstdio>
#include <cstring>
#include <string>

#include <crescent/rpc/channel.hpp>
#include <crescent/rpc/server.hpp>
#include <crescent/zbuf.hpp>

int main() {
    crescent::zbuf::Config cfg;
    cfg.backing = crescent::zbuf::Backing::Anonymous;
    cfg.bytes = 8u << 20;
    std::string err;
    auto arena = crescent::zbuf::Arena::create(cfg, &err);
    if (!arena) {
        std::fprintf(stderr, "arena: %s\n", err.c_str());
        return 1;
    }
    crescent::zbuf::CoreScope core(0);
    crescent::Slice s = arena->alloc_slice(100);
    if (!s) return 1;
    std::memcpy(s.data(), "hello", 5);
    crescent::Slice t = s.share();
    bool ok = crescent::zbuf::refcount(t.data()) == 2 && crescent::zbuf::obj_base(t.data() + 3) == s.data();
    s.reset();
    t.reset();
    ok = ok && arena->live() == 0;
    // The RPC headers install and link: a wire header round trip, a histogram, a policy prefix.
    crescent::rpc::Header h;
    h.method = 7;
    h.call_id = 42;
    std::byte wire[crescent::rpc::kHeaderSize];
    h.encode(wire);
    crescent::rpc::Header back = crescent::rpc::Header::decode(wire);
    crescent::rpc::Histogram hist;
    for (uint64_t v = 1; v <= 1000; ++v) hist.record(v);
    crescent::rpc::Prefix p;
    ok = ok && back.method == 7 && back.call_id == 42 && hist.count() == 1000 && hist.percentile(50) >= 490 &&
         hist.percentile(50) <= 510 && crescent::rpc::Prefix::parse("10.0.0.0/8", &p, &err) &&
         crescent::rpc::status_name(crescent::rpc::Status::QueueFull) == "QueueFull";
    std::printf("out-of-tree consumer: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
