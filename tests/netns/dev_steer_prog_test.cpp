// crescent — the XDP steering program (bifurcation/xdp/crescent_steer.bpf.c)
// run by the kernel on crafted frames (BPF_PROG_TEST_RUN), and its user-space
// side (XdpSteer) against the program attached to `lo` of a private network
// namespace (unshare(CLONE_NEWNET): nothing to clean up, it dies with us).
//
// Each frame's verdict is read from the program's own per-CPU counters
// (redirected / passed-not-IP / not-TCP / port / malformed): with no XSK in
// xsks_map, bpf_redirect_map falls back to XDP_PASS, so the return code alone
// cannot tell a steered frame from a passed one.
#include <catch2/catch.hpp>

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <linux/if_link.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bifurcation/xdp/steer.hpp"
#include "stack/dev/runtime.hpp"
#include "tests/support/skip.hpp"

namespace bif = crescent::bifurcation;

namespace {

constexpr int kLoIfindex = 1;

struct Prog {
    bpf_object* obj = nullptr;
    int fd = -1;
    std::string error;
    ~Prog() { if (obj) bpf_object__close(obj); }
};

// Load crescent_steer.bpf.o, attach it (generic XDP) to lo of a new netns.
Prog& prog() {
    static Prog p;
    static bool done = [] {
        if (unshare(CLONE_NEWNET) != 0) { p.error = std::string("unshare: ") + std::strerror(errno); return true; }
        std::string path = crescent::dev::Runtime::default_xdp_prog();
        p.obj = bpf_object__open_file(path.c_str(), nullptr);
        if (!p.obj) { p.error = "open " + path; return true; }
        if (bpf_object__load(p.obj) != 0) { p.error = "load (verifier) " + path; return true; }
        bpf_program* bp = bpf_object__find_program_by_name(p.obj, "crescent_steer");
        if (!bp) { p.error = "no crescent_steer program"; return true; }
        p.fd = bpf_program__fd(bp);
        if (bpf_xdp_attach(kLoIfindex, p.fd, XDP_FLAGS_SKB_MODE, nullptr) != 0) p.error = "attach to lo";
        return true;
    }();
    (void)done;
    INFO(p.error);
    REQUIRE(p.error.empty());
    return p;
}

bif::XdpSteer& steer() {
    static bif::XdpSteer s;
    static std::string err;
    static int rc = [] { prog(); return s.open(kLoIfindex, &err); }();
    INFO(err);
    REQUIRE(rc == 0);
    return s;
}

// --- frame builder ---------------------------------------------------------------
struct FrameSpec {
    uint16_t ethertype = 0x0800;
    bool vlan = false;
    uint8_t version = 4;
    uint8_t ihl = 5;
    uint8_t proto = 6; // TCP
    uint16_t frag = 0; // flags+offset field, host order
    uint16_t dport = 0;
    size_t truncate_to = 0; // 0 = full length
};

std::vector<uint8_t> frame(const FrameSpec& s) {
    std::vector<uint8_t> f(14, 0);
    for (int i = 0; i < 6; i++) { f[size_t(i)] = 0x02; f[size_t(6 + i)] = 0x04; }
    auto put16 = [&](size_t at, uint16_t v) { f[at] = uint8_t(v >> 8); f[at + 1] = uint8_t(v); };
    if (s.vlan) {
        put16(12, 0x8100);
        f.resize(18);
        put16(14, 42);
        put16(16, s.ethertype);
    } else {
        put16(12, s.ethertype);
    }
    size_t ip = f.size();
    f.resize(ip + size_t(s.ihl < 5 ? 5 : s.ihl) * 4 + 20, 0);
    f[ip] = uint8_t(s.version << 4 | s.ihl);
    put16(ip + 2, uint16_t(f.size() - ip));
    put16(ip + 6, s.frag);
    f[ip + 8] = 64;
    f[ip + 9] = s.proto;
    size_t l4 = ip + size_t(s.ihl < 5 ? 5 : s.ihl) * 4;
    put16(l4, 40000);
    put16(l4 + 2, s.dport);
    f[l4 + 12] = 5 << 4;
    f[l4 + 13] = 0x02; // SYN
    if (s.truncate_to) f.resize(s.truncate_to);
    return f;
}

// Run one frame; return which counter moved.
int verdict(const std::vector<uint8_t>& f) {
    auto before = steer().stats();
    bpf_test_run_opts o{};
    o.sz = sizeof(o);
    o.data_in = f.data();
    o.data_size_in = uint32_t(f.size());
    o.repeat = 1;
    int rc = bpf_prog_test_run_opts(prog().fd, &o);
    REQUIRE(rc == 0);
    CHECK((o.retval == XDP_PASS || o.retval == XDP_REDIRECT));
    auto after = steer().stats();
    int moved = -1;
    for (int i = 0; i < CRESCENT_STEER_STAT_COUNT; i++) {
        uint64_t d = after.counters[size_t(i)] - before.counters[size_t(i)];
        if (d == 0) continue;
        REQUIRE(d == 1);
        REQUIRE(moved == -1); // exactly one counter per frame
        moved = i;
    }
    return moved;
}

void set(std::vector<bif::PortRange> r) {
    std::string err;
    INFO(err);
    REQUIRE(steer().set_ranges(r, &err) == 0);
}

} // namespace

TEST_CASE("steer: the verifier accepts the program and XdpSteer finds its maps", "[steer]") {
    Prog& p = prog();
    CHECK(p.fd >= 0);
    bif::XdpSteer& s = steer();
    CHECK(s.is_open());
    uint32_t id = 0;
    std::string name;
    REQUIRE(bif::xdp_attached_prog(kLoIfindex, &id, &name) == 0);
    CHECK(id == s.prog_id());
    CHECK(name == "crescent_steer");
}

TEST_CASE("steer: TCP to a port in a range is redirected, range edges included", "[steer]") {
    set({{5000, 5009}, {61440, 65535}});
    CHECK(steer().ranges() == std::vector<bif::PortRange>{{5000, 5009}, {61440, 65535}});
    for (uint16_t p : {5000, 5005, 5009, 61440, 65535}) {
        FrameSpec s;
        s.dport = p;
        INFO("port " << p);
        CHECK(verdict(frame(s)) == CRESCENT_STEER_REDIRECTED);
    }
    for (uint16_t p : {4999, 5010, 61439, 80, 22}) {
        FrameSpec s;
        s.dport = p;
        INFO("port " << p);
        CHECK(verdict(frame(s)) == CRESCENT_STEER_PASS_PORT);
    }
}

TEST_CASE("steer: ARP, IPv6, UDP, ICMP and fragments go to the kernel", "[steer]") {
    set({{1, 65535}}); // every port: only the protocol decides
    FrameSpec arp;
    arp.ethertype = 0x0806;
    CHECK(verdict(frame(arp)) == CRESCENT_STEER_PASS_NOT_IP);
    FrameSpec v6;
    v6.ethertype = 0x86dd;
    CHECK(verdict(frame(v6)) == CRESCENT_STEER_PASS_NOT_IP);
    FrameSpec udp;
    udp.proto = 17;
    udp.dport = 5000;
    CHECK(verdict(frame(udp)) == CRESCENT_STEER_PASS_NOT_TCP);
    FrameSpec icmp;
    icmp.proto = 1;
    CHECK(verdict(frame(icmp)) == CRESCENT_STEER_PASS_NOT_TCP);
    FrameSpec mf;
    mf.dport = 5000;
    mf.frag = 0x2000; // MF
    CHECK(verdict(frame(mf)) == CRESCENT_STEER_PASS_NOT_TCP);
    FrameSpec off;
    off.dport = 5000;
    off.frag = 0x0010; // offset 128 bytes
    CHECK(verdict(frame(off)) == CRESCENT_STEER_PASS_NOT_TCP);
    FrameSpec df;
    df.dport = 5000;
    df.frag = 0x4000; // DF alone is not a fragment
    CHECK(verdict(frame(df)) == CRESCENT_STEER_REDIRECTED);
}

TEST_CASE("steer: one VLAN tag and IPv4 options are parsed", "[steer]") {
    set({{7000, 7000}});
    FrameSpec v;
    v.vlan = true;
    v.dport = 7000;
    CHECK(verdict(frame(v)) == CRESCENT_STEER_REDIRECTED);
    v.dport = 7001;
    CHECK(verdict(frame(v)) == CRESCENT_STEER_PASS_PORT);
    FrameSpec opt;
    opt.ihl = 7; // 8 bytes of options before TCP
    opt.dport = 7000;
    CHECK(verdict(frame(opt)) == CRESCENT_STEER_REDIRECTED);
}

TEST_CASE("steer: truncated and malformed frames are passed, counted as malformed", "[steer]") {
    set({{7000, 7000}});
    FrameSpec s;
    s.dport = 7000;
    s.truncate_to = 14 + 10; // IPv4 header cut
    CHECK(verdict(frame(s)) == CRESCENT_STEER_PASS_MALFORMED);
    s.truncate_to = 14 + 20 + 10; // TCP header cut
    CHECK(verdict(frame(s)) == CRESCENT_STEER_PASS_MALFORMED);
    FrameSpec opt;
    opt.ihl = 15; // options claim 40 bytes; TCP header then runs past the end
    opt.dport = 7000;
    opt.truncate_to = 14 + 60 + 10;
    CHECK(verdict(frame(opt)) == CRESCENT_STEER_PASS_MALFORMED);
    FrameSpec bad_ihl;
    bad_ihl.ihl = 4;
    bad_ihl.dport = 7000;
    CHECK(verdict(frame(bad_ihl)) == CRESCENT_STEER_PASS_MALFORMED);
    FrameSpec v5;
    v5.version = 5;
    v5.dport = 7000;
    CHECK(verdict(frame(v5)) == CRESCENT_STEER_PASS_MALFORMED);
    FrameSpec vcut;
    vcut.vlan = true;
    vcut.truncate_to = 16; // tag cut
    CHECK(verdict(frame(vcut)) == CRESCENT_STEER_PASS_MALFORMED);
}

TEST_CASE("steer: ranges are rewritten without reloading; bad ranges refused", "[steer]") {
    uint32_t id = steer().prog_id();
    FrameSpec s;
    s.dport = 9000;
    set({{9000, 9000}});
    CHECK(verdict(frame(s)) == CRESCENT_STEER_REDIRECTED);
    set({});
    CHECK(steer().ranges().empty());
    CHECK(verdict(frame(s)) == CRESCENT_STEER_PASS_PORT);
    std::vector<bif::PortRange> many;
    for (uint16_t i = 0; i < CRESCENT_STEER_MAX_RANGES; i++) many.push_back({uint16_t(100 + 2 * i), uint16_t(100 + 2 * i)});
    set(many);
    s.dport = uint16_t(100 + 2 * (CRESCENT_STEER_MAX_RANGES - 1)); // the last slot is looked at
    CHECK(verdict(frame(s)) == CRESCENT_STEER_REDIRECTED);
    s.dport = 101;
    CHECK(verdict(frame(s)) == CRESCENT_STEER_PASS_PORT);
    std::string err;
    many.push_back({60000, 60000});
    CHECK(steer().set_ranges(many, &err) != 0);
    CHECK(err.find("at most") != std::string::npos);
    std::vector<bif::PortRange> inverted{{10, 5}}, zero{{0, 5}};
    CHECK(steer().set_ranges(inverted, &err) != 0);
    CHECK(steer().set_ranges(zero, &err) != 0);
    CHECK(steer().ranges().size() == CRESCENT_STEER_MAX_RANGES); // refused updates change nothing
    uint32_t now = 0;
    REQUIRE(bif::xdp_attached_prog(kLoIfindex, &now) == 0);
    CHECK(now == id); // same program all along
}

TEST_CASE("steer: detach removes only our program", "[steer]") {
    bif::XdpSteer& s = steer();
    CHECK(bif::xdp_detach_if(kLoIfindex, s.prog_id() + 1000) == 0); // not ours: untouched
    uint32_t id = 0;
    REQUIRE(bif::xdp_attached_prog(kLoIfindex, &id) == 0);
    CHECK(id == s.prog_id());
    std::string err;
    CHECK(s.detach(&err) == 0);
    REQUIRE(bif::xdp_attached_prog(kLoIfindex, &id) == 0);
    CHECK(id == 0);
}

const char* crescent_test_skip_reason() { return geteuid() != 0 ? "needs root" : nullptr; }
