// crescent — the kernel-only Runtime (RuntimeOptions::kernel_only): engines
// without a device on threads of their own, serving kernel TCP only. One
// runtime of two engines: engine 0 runs an rpc::Server over Transport::Kernel
// on 127.0.0.1, engine 1 an rpc::Channel to it; calls of 64 B, 4 KiB and
// 200 KiB come back byte-exact under both wait policies. Block really sleeps
// (an idle engine loops a handful of times in 200 ms, a Busy one thousands),
// stop() and SIGTERM end a loop asleep in epoll_wait at once, and starting
// needs no EAL, no hugepage or runtime file and no root.
#include <cctype>
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <crescent/rpc/channel.hpp>
#include <crescent/rpc/server.hpp>
#include <crescent/runtime.hpp>

#include "tests/support/rpc_data.hpp"

using namespace crescent;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kEcho = 1;
const Ipv4 kLoopback{0x7f000001};

uint16_t free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(kLoopback.v);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

using crescent::test::check_data;
using crescent::test::make_data;
using crescent::test::pattern;

// Entries of a directory whose name contains this process's pid (EAL's
// default prefixes do).
size_t files_of_this_pid(const char* dir) {
    std::error_code ec;
    size_t n = 0;
    // What an EAL start with the default prefix would leave: "crescent<pid>"
    // (run directory) or "crescent<pid>map_N" (hugepage files); other tests'
    // prefixes that merely contain these digits do not count.
    const std::string prefix = "crescent" + std::to_string(::getpid());
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        n += name.starts_with(prefix) && (name.size() == prefix.size() || !std::isdigit((unsigned char)name[prefix.size()]));
    }
    return n;
}

constexpr uint32_t kSnap = 2;  // the server engine snapshots its own stats

// What the engine threads record; read on the main thread after run().
struct Outcome {
    ListenStatus listen = ListenStatus::Ok;
    ConnectStatus connect = ConnectStatus::Ok;
    uint64_t ok = 0, bad = 0, done = 0;
    std::string last_error;
    bool timed_out = false;
    // The idle window: each engine's stats at its start and end, taken on the
    // engine's own thread (engine 0 in the kSnap handler).
    EngineStats before[2], after[2];
    unsigned snaps = 0;
};

// The client on engine 1: `calls` calls cycling through 64 B, 4 KiB and
// 200 KiB, at most `depth` outstanding, each checked byte for byte; then the
// idle window (kSnap, 200 ms of nothing, kSnap), then `idle_done`.
struct Client {
    Engine* e = nullptr;
    std::unique_ptr<rpc::Channel> ch;
    Outcome* out = nullptr;
    std::atomic<bool>* idle_done = nullptr;
    unsigned calls = 0, issued = 0, depth = 4;

    void issue() {
        static constexpr size_t kSizes[] = {64, 4096, 200u << 10};
        while (issued < calls && ch->outstanding() < depth) {
            const uint64_t id = issued++;
            const size_t n = kSizes[id % 3];
            std::vector<Slice> data = make_data(id, n);
            const std::string meta = "m" + std::to_string(id);
            auto st = ch->call(kEcho, std::as_bytes(std::span(meta.data(), meta.size())), data,
                               [this, id, n, meta](rpc::Reply& r) {
                                   ++out->done;
                                   const std::string got(reinterpret_cast<const char*>(r.meta.data()), r.meta.size());
                                   if (r.status == rpc::Status::Ok && got == meta && check_data(id, r.data, n))
                                       ++out->ok;
                                   else
                                       ++out->bad, out->last_error = std::string(r.error);
                                   if (out->done == calls) snap();
                                   else issue();
                               });
            if (st != rpc::Status::Ok) {
                ++out->bad;
                out->last_error = "call() refused";
            }
        }
    }
    void snap() {
        ch->call(kSnap, {}, {}, [this](rpc::Reply&) {
            if (out->snaps == 1) {
                out->before[1] = e->stats();
                e->add_timer(200ms, [this] {
                    out->after[1] = e->stats();
                    snap();
                });
            } else {
                *idle_done = true;
            }
        });
    }
};

// A kernel-only runtime of two engines with `wait`: echo served on engine 0
// over kernel TCP, called from engine 1, an idle window, then the end from
// another thread (stop() or SIGTERM) while both loops are idle.
void serve_and_call(KernelWait wait, bool by_signal) {
    RuntimeOptions o;
    o.kernel_only = true;
    o.cores = 2;
    o.engine.kernel_wait = wait;
    o.arena_bytes = 64u << 20;
    std::string err;
    const auto t0 = Clock::now();
    auto rt = Runtime::start(o, &err);
    const auto start_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    INFO(err);
    REQUIRE(rt);
    CHECK(start_ms < 500);
    const std::string w(kernel_wait_name(wait));
    CHECK(rt->describe() == "kernel TCP only (no device), 2 engines, wait " + w);
    CHECK(rt->local_ip().v == 0);
    CHECK(rt->engine_count() == 2);
    CHECK(files_of_this_pid("/dev/hugepages") == 0);
    CHECK(files_of_this_pid("/var/run/dpdk") == 0);
    zbuf::Arena* arena = zbuf::Arena::current();
    REQUIRE(arena);
    const uint64_t live0 = arena->live();

    Outcome out;
    // The server on engine 0, from this thread: run() makes it engine 0's.
    const uint16_t port = free_port();
    std::unique_ptr<rpc::Server> srv;
    {
        zbuf::CoreScope core(rt->engine(0).core());
        srv = std::make_unique<rpc::Server>(rt->engine(0));
        REQUIRE(srv->register_method(kEcho, "echo", [](rpc::Call& c) {
            std::vector<std::byte> meta(c.meta().begin(), c.meta().end());
            c.reply(meta, c.data());
        }));
        Engine* e0 = &rt->engine(0);
        REQUIRE(srv->register_method(kSnap, "snap", [&out, e0](rpc::Call& c) {
            (out.snaps++ == 0 ? out.before[0] : out.after[0]) = e0->stats();
            c.reply();
        }));
        REQUIRE(srv->listen(rpc::Transport::Kernel, port, &err, kLoopback));
    }

    std::atomic<bool> idle_done{false};
    Client cl;
    cl.out = &out;
    cl.calls = 150;
    cl.idle_done = &idle_done;
    // The stopper: once the idle window is over, let both loops go idle
    // again, then end the run from outside.
    Clock::time_point stop_at{};
    std::thread stopper([&] {
        const auto deadline = Clock::now() + 60s;
        while (!idle_done && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
        std::this_thread::sleep_for(50ms);
        stop_at = Clock::now();
        if (by_signal) ::kill(::getpid(), SIGTERM);
        else rt->stop();
    });
    Handler nobody;
    rt->run([&](Engine& e) {
        if (e.index() != 1) return;
        // No device: crescent connections are refused, cleanly.
        out.listen = e.listen(7, nobody);
        Conn c;
        out.connect = e.connect(Endpoint{kLoopback, port}, nobody, &c);
        cl.e = &e;
        rpc::ChannelOptions co;
        co.server = {kLoopback, port};
        co.transport = rpc::Transport::Kernel;
        co.deadline = 20s;
        cl.ch = std::make_unique<rpc::Channel>(e, co);
        cl.issue();
    });
    const auto returned_at = Clock::now();
    stopper.join();
    const auto stop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(returned_at - stop_at).count();
    INFO("run() returned " << stop_ms << " ms after the stop");
    REQUIRE(idle_done);
    CHECK(stop_ms < 100);
    if (by_signal) CHECK(Runtime::stop_requested());

    CHECK(out.listen == ListenStatus::InvalidArgument);
    CHECK(out.connect == ConnectStatus::NoRoute);
    INFO(out.last_error);
    CHECK(out.done == cl.calls);
    CHECK(out.ok == cl.calls);
    CHECK(out.bad == 0);
    CHECK(srv->stats().requests == cl.calls + 2);
    CHECK(out.snaps == 2);

    for (unsigned i = 0; i < 2; ++i) {
        const EngineStats& b = out.before[i];
        const EngineStats& a = out.after[i];
        const EngineStats fin = rt->engine(i).stats();
        const uint64_t loops = a.loops - b.loops, sleeps = a.sleeps - b.sleeps;
        INFO(w << " engine " << i << ": " << loops << " loops, " << sleeps << " sleeps, "
               << (a.epoll_events - b.epoll_events) << " events in the idle 200 ms");
        CHECK(fin.epoll_waits == fin.loops);  // exactly one epoll_wait per iteration
        CHECK(fin.epoll_events > 0);
        if (wait == KernelWait::Block) {
            CHECK(loops < 40);  // a wake-up per timer or event, nothing else
            CHECK(sleeps > 0);
        } else {
            CHECK(loops > 2000);  // spinning
            CHECK(sleeps == 0);
            CHECK(fin.sleeps == 0);
        }
    }

    // Tear down as each engine's zbuf core (the loops have returned).
    {
        zbuf::CoreScope core(1);
        cl.ch.reset();
        arena->drain_returns();
    }
    {
        zbuf::CoreScope core(0);
        srv.reset();
        arena->drain_returns();
    }
    CHECK(arena->live() == live0);
    rt.reset();
    CHECK(zbuf::Arena::current() == nullptr);
}

} // namespace

TEST_CASE("kernel-only runtime: rpc over kernel TCP, busy wait; stop() ends the loops", "[runtime][kernel]") {
    serve_and_call(KernelWait::Busy, false);
}

TEST_CASE("kernel-only runtime: rpc over kernel TCP, blocking wait; stop() wakes a sleeping loop",
          "[runtime][kernel]") {
    serve_and_call(KernelWait::Block, false);
}

TEST_CASE("kernel-only runtime: SIGTERM wakes a blocked loop and run() returns", "[runtime][kernel]") {
    serve_and_call(KernelWait::Block, true);
}

TEST_CASE("kernel-only runtime: options are checked; the device runtime's error is unchanged", "[runtime][kernel]") {
    std::string err;
    RuntimeOptions o;
    CHECK_FALSE(Runtime::start(o, &err));
    CHECK(err == "crescent: give exactly one of --iface IFACE or --eal \"ARGS\"");
    o.kernel_only = true;
    o.iface = "lo";
    CHECK_FALSE(Runtime::start(o, &err));
    CHECK(err.find("kernel-only runtime has no device") != std::string::npos);
    o.iface.clear();
    o.impair = "loss=1";
    CHECK_FALSE(Runtime::start(o, &err));
    CHECK(err.find("--impair needs a device") != std::string::npos);
    o.impair.clear();
    o.cores = 0;
    CHECK_FALSE(Runtime::start(o, &err));
    CHECK(err.find("out of range") != std::string::npos);
    o.cores = 4096;
    CHECK_FALSE(Runtime::start(o, &err));
    // After every refusal nothing is left: a good start works.
    o.cores = 1;
    auto rt = Runtime::start(o, &err);
    INFO(err);
    REQUIRE(rt);
    CHECK(rt->describe() == "kernel TCP only (no device), 1 engines, wait busy");
    KernelWait kw;
    CHECK(parse_kernel_wait("block", &kw));
    CHECK(kw == KernelWait::Block);
    CHECK(parse_kernel_wait("busy", &kw));
    CHECK(kw == KernelWait::Busy);
    CHECK_FALSE(parse_kernel_wait("sleepy", &kw));
}

TEST_CASE("kernel-only runtime: starts and runs as an unprivileged user", "[runtime][kernel]") {
    if (::geteuid() != 0) {
        // Already unprivileged: start and stop here.
        RuntimeOptions o;
        o.kernel_only = true;
        std::string err;
        auto rt = Runtime::start(o, &err);
        INFO(err);
        REQUIRE(rt);
        rt->run([&](Engine& e) { e.add_timer(10ms, [&] { rt->stop(); }); });
        return;
    }
    // Root: a child drops to nobody (65534) first. No Catch2 in the child.
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
        RuntimeOptions o;
        o.kernel_only = true;
        o.engine.kernel_wait = KernelWait::Block;
        std::string err;
        auto rt = Runtime::start(o, &err);
        if (!rt) {
            std::fprintf(stderr, "child: %s\n", err.c_str());
            ::_exit(3);
        }
        bool fired = false;
        rt->run([&](Engine& e) {
            e.add_timer(10ms, [&] {
                fired = true;
                rt->stop();
            });
        });
        ::_exit(fired ? 0 : 4);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
