// A program outside crescent's tree, built only with
//   g++ -std=c++20 main.cpp $(pkg-config --cflags --libs crescent)
// CI builds and runs it against the installed library (tools/check-install).
#include <cstdio>
#include <cstring>
#include <string>

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
    std::printf("out-of-tree consumer: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
