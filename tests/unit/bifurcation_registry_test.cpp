// Unit tests of the cross-process registry (bifurcation/registry.hpp) and of the
// ip_local_reserved_ports merge / restore (bifurcation/reserved_ports.hpp),
// on files in a temporary directory instead of /run and /proc.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bifurcation/registry.hpp"
#include "bifurcation/reserved_ports.hpp"
#include "bifurcation/session.hpp"

using namespace crescent::bifurcation;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        char tmpl[] = "/tmp/crescent-bifurcation-XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void put(const fs::path& p, const std::string& text) {
    std::ofstream f(p, std::ios::trunc);
    f << text;
}

// A pid that is certainly dead: a child that exited and was reaped.
pid_t dead_pid() {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return pid;
}

RegistryEntry entry(pid_t pid, PortSpan client, std::vector<uint16_t> listen = {}) {
    RegistryEntry e;
    e.pid = pid;
    e.start_time = process_start_time(pid);
    e.app = "app" + std::to_string(pid);
    e.client = client;
    e.listen = std::move(listen);
    return e;
}

} // namespace

// ---------------------------------------------------------------------------
// PortSet: the kernel's list syntax.

TEST_CASE("PortSet parses and re-emits the kernel syntax") {
    std::string err;
    auto s = PortSet::parse("1,5-9,61440-65535\n", &err);
    REQUIRE(s);
    CHECK(s->count() == 1 + 5 + 4096);
    CHECK(s->contains(1));
    CHECK(!s->contains(2));
    CHECK(s->contains(9));
    CHECK(!s->contains(10));
    CHECK(s->format() == "1,5-9,61440-65535");

    // Unsorted, overlapping, adjacent, blanks: canonical output merges them.
    s = PortSet::parse(" 9-12, 5-9 ,13,100 , 100-100\n", &err);
    REQUIRE(s);
    CHECK(s->format() == "5-13,100");

    s = PortSet::parse("\n", &err);
    REQUIRE(s);
    CHECK(s->empty());
    CHECK(s->format().empty());
    s = PortSet::parse("0-65535", &err);
    REQUIRE(s);
    CHECK(s->count() == 65536);
    CHECK(s->format() == "0-65535");
}

TEST_CASE("PortSet refuses malformed lists") {
    for (const char* bad : {"5-", "-5", "9-5", "70000", "a", "1,,2", "1;2", "1-2-3", "65536"}) {
        INFO(bad);
        std::string err;
        CHECK(!PortSet::parse(bad, &err));
        CHECK_THAT(err, Catch::Contains("bad port list item"));
    }
}

TEST_CASE("PortSet set operations") {
    PortSet a(PortSpan{10, 20});
    PortSet b(PortSpan{15, 30});
    PortSet u = a;
    u.add(b);
    CHECK(u.format() == "10-30");
    CHECK(u.minus(a).format() == "21-30");
    CHECK(a.minus(b).format() == "10-14");
    CHECK(a.spans() == std::vector<PortSpan>{{10, 20}});
}

// ---------------------------------------------------------------------------
// ReservedPorts on a plain file.

TEST_CASE("ReservedPorts merges with the existing list and restores it exactly") {
    TempDir tmp;
    const std::string path = tmp.path / "ip_local_reserved_ports";
    put(path, "1,5-9,61500-61600\n");
    {
        ReservedPorts rp(path);
        std::string err;
        REQUIRE(rp.reserve(PortSpan{61440, 65535}, &err));
        CHECK(slurp(path) == "1,5-9,61440-65535\n");
        // Only what was not there before counts as ours.
        CHECK(rp.added().format() == "61440-61499,61601-65535");
    }
    CHECK(slurp(path) == "1,5-9,61500-61600\n");
}

TEST_CASE("ReservedPorts leaves ports others reserved meanwhile") {
    TempDir tmp;
    const std::string path = tmp.path / "rp";
    put(path, "\n");
    ReservedPorts rp(path);
    std::string err;
    REQUIRE(rp.reserve(PortSpan{61440, 65535}, &err));
    CHECK(slurp(path) == "61440-65535\n");
    put(path, "22,61440-65535\n"); // an admin reserves 22 while we run
    REQUIRE(rp.restore(&err));
    CHECK(slurp(path) == "22\n");
    REQUIRE(rp.restore(&err)); // idempotent
    CHECK(slurp(path) == "22\n");
}

TEST_CASE("ReservedPorts reports unreadable and malformed files") {
    TempDir tmp;
    std::string err;
    ReservedPorts missing((tmp.path / "nope").string());
    CHECK(!missing.reserve(PortSpan{61440, 65535}, &err));
    CHECK_THAT(err, Catch::Contains("cannot read"));
    const std::string path = tmp.path / "bad";
    put(path, "1,x\n");
    ReservedPorts bad(path);
    CHECK(!bad.reserve(PortSpan{61440, 65535}, &err));
    CHECK_THAT(err, Catch::Contains("bad port list item"));
    CHECK(slurp(path) == "1,x\n"); // untouched
}

// ---------------------------------------------------------------------------
// Registry.

TEST_CASE("RegistryEntry round-trips through its text form") {
    RegistryEntry e = entry(::getpid(), {61440, 63487}, {80, 1234});
    e.slot = 1;
    e.reserved_added = "61440-63487";
    e.reserved_path = "/proc/sys/net/ipv4/ip_local_reserved_ports";
    e.extra["ntuple_locs"] = "1023,1022";
    std::string err;
    auto back = RegistryEntry::parse(e.serialize(), &err);
    REQUIRE(back);
    CHECK(back->pid == e.pid);
    CHECK(back->start_time == e.start_time);
    CHECK(back->app == e.app);
    CHECK(back->slot == 1);
    CHECK(back->client == e.client);
    CHECK(back->listen == e.listen);
    CHECK(back->reserved_added == e.reserved_added);
    CHECK(back->reserved_path == e.reserved_path);
    CHECK(back->extra == e.extra);
    CHECK(!RegistryEntry::parse("pid 0\nclient 1-2\n", &err));
    CHECK(!RegistryEntry::parse("app x\n", &err));
}

TEST_CASE("process_alive tells live, dead and reused pids apart") {
    CHECK(process_alive(::getpid(), process_start_time(::getpid())));
    CHECK(process_start_time(::getpid()) != 0);
    CHECK(!process_alive(dead_pid(), 0));
    // Same pid, other start time: the pid was reused by another process.
    CHECK(!process_alive(::getpid(), process_start_time(::getpid()) + 1));
}

TEST_CASE("Registry refuses overlapping plans with a clear message") {
    TempDir tmp;
    const std::string dir = tmp.path / "veth0";
    // Another live process (our parent stands in for it) holds slot 0.
    const pid_t other = ::getppid();
    {
        std::string err;
        RegistryEntry theirs = entry(other, {61440, 63487}, {80});
        theirs.app = "alpha";
        fs::create_directories(dir);
        put(fs::path(dir) / (std::to_string(other) + ".entry"), theirs.serialize());
    }
    std::string err;
    RegistryEntry mine = entry(::getpid(), {62000, 65535});
    mine.app = "beta";
    CHECK(!Registry::claim(dir, "veth0", mine, nullptr, &err));
    CHECK_THAT(err, Catch::Contains("\"beta\" on veth0 overlaps application \"alpha\""));
    CHECK_THAT(err, Catch::Contains("client ports 62000-65535 and 61440-63487"));

    mine = entry(::getpid(), {63488, 65535}, {80});
    CHECK(!Registry::claim(dir, "veth0", mine, nullptr, &err));
    CHECK_THAT(err, Catch::Contains("both listen on port 80"));

    mine = entry(::getpid(), {63488, 65535}, {61500});
    CHECK(!Registry::claim(dir, "veth0", mine, nullptr, &err));
    CHECK_THAT(err, Catch::Contains("listen port 61500 lies in its client ports"));

    // Disjoint: accepted, and visible to the next process; released on scope exit.
    mine = entry(::getpid(), {63488, 65535}, {8080});
    {
        auto reg = Registry::claim(dir, "veth0", mine, nullptr, &err);
        REQUIRE(reg);
        CHECK(fs::exists(fs::path(dir) / (std::to_string(::getpid()) + "-0.entry")));
        CHECK(Registry::list(dir).size() == 2);
        RegistryEntry upd = reg->entry();
        upd.reserved_added = "63488-65535";
        REQUIRE(reg->update(upd, &err));
        bool found = false;
        for (const RegistryEntry& e : Registry::list(dir))
            if (e.pid == ::getpid()) found = e.reserved_added == "63488-65535";
        CHECK(found);
    }
    CHECK(!fs::exists(fs::path(dir) / (std::to_string(::getpid()) + "-0.entry")));
    CHECK(Registry::list(dir).size() == 1);
}

TEST_CASE("Registry: the last release removes .lock and the directories; two holders share them") {
    TempDir tmp;
    const fs::path ns = tmp.path / "net-4026531840"; // default_dir()'s layout
    const std::string dir = ns / "veth0";
    std::string err;
    RegistryEntry first = entry(::getpid(), {61440, 63487}, {80});
    RegistryEntry second = entry(::getpid(), {63488, 65535}, {81});
    second.slot = 1;
    {
        auto a = Registry::claim(dir, "veth0", first, nullptr, &err);
        REQUIRE(a);
        auto b = Registry::claim(dir, "veth0", second, nullptr, &err);
        REQUIRE(b);
        CHECK(Registry::list(dir).size() == 2);
        a->release();
        // The other holder keeps the directory, its lock and its entry.
        CHECK(fs::exists(fs::path(dir) / ".lock"));
        REQUIRE(Registry::list(dir).size() == 1);
        CHECK(Registry::list(dir)[0].slot == 1);
        RegistryEntry upd = b->entry();
        upd.extra["xdp_prog_id"] = "42";
        CHECK(b->update(upd, &err));
        // A claim after a release works next to the remaining holder.
        auto c = Registry::claim(dir, "veth0", first, nullptr, &err);
        REQUIRE(c);
        CHECK(Registry::list(dir).size() == 2);
    } // c, then b: the last one out removes everything
    CHECK(!fs::exists(dir));
    CHECK(!fs::exists(ns));
    CHECK(fs::exists(tmp.path));

    // Claiming again re-creates it all.
    {
        auto a = Registry::claim(dir, "veth0", first, nullptr, &err);
        REQUIRE(a);
        CHECK(fs::exists(fs::path(dir) / ".lock"));
        // Another interface in the same namespace keeps the namespace's directory.
        const std::string other = ns / "veth1";
        {
            auto o = Registry::claim(other, "veth1", first, nullptr, &err);
            REQUIRE(o);
        }
        CHECK(!fs::exists(other));
        CHECK(fs::exists(dir));
    }
    CHECK(!fs::exists(ns));

    // A directory holding anything but the lock (here a stray file) stays, and
    // a parent not named net-* is never removed.
    const std::string plain = tmp.path / "reg" / "veth0";
    {
        auto a = Registry::claim(plain, "veth0", first, nullptr, &err);
        REQUIRE(a);
        put(fs::path(plain) / "notes", "x\n");
    }
    CHECK(fs::exists(fs::path(plain) / "notes"));
    fs::remove(fs::path(plain) / "notes");
    {
        auto a = Registry::claim(plain, "veth0", first, nullptr, &err);
        REQUIRE(a);
    }
    CHECK(!fs::exists(plain));
    CHECK(fs::exists(tmp.path / "reg"));
}

TEST_CASE("Registry: concurrent claims and last releases never fail and leave nothing behind") {
    TempDir tmp;
    const fs::path ns = tmp.path / "net-1";
    const std::string dir = ns / "veth0";
    constexpr int kProcs = 4, kRounds = 400;
    std::vector<pid_t> kids;
    for (int i = 0; i < kProcs; ++i) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            // Each process its own slot and ports; most rounds it is the last
            // one out, so the directory is removed and re-created under the
            // others' feet.
            RegistryEntry mine = entry(::getpid(), {uint16_t(60000 + 100 * i), uint16_t(60099 + 100 * i)});
            mine.slot = uint16_t(i);
            int status = 0;
            for (int round = 0; round < kRounds && status == 0; ++round) {
                std::string err;
                auto r = Registry::claim(dir, "veth0", mine, nullptr, &err);
                if (!r) {
                    std::fprintf(stderr, "child %d round %d: claim failed: %s\n", i, round, err.c_str());
                    status = 1;
                    break;
                }
                bool seen = false;
                for (const RegistryEntry& e : Registry::list(dir)) seen |= e.pid == ::getpid();
                if (!seen || !fs::exists(fs::path(dir) / ".lock")) {
                    std::fprintf(stderr, "child %d round %d: own entry or lock missing\n", i, round);
                    status = 2;
                }
                RegistryEntry upd = r->entry();
                upd.extra["round"] = std::to_string(round);
                if (!r->update(upd, &err)) {
                    std::fprintf(stderr, "child %d round %d: update failed: %s\n", i, round, err.c_str());
                    status = 3;
                }
            }
            ::_exit(status);
        }
        kids.push_back(pid);
    }
    for (pid_t k : kids) {
        int st = 0;
        REQUIRE(::waitpid(k, &st, 0) == k);
        CHECK(WIFEXITED(st));
        CHECK(WEXITSTATUS(st) == 0);
    }
    CHECK(!fs::exists(dir));
    CHECK(!fs::exists(ns));
}

TEST_CASE("Registry cleans the entries of dead processes and undoes their reserved ports") {
    TempDir tmp;
    const std::string dir = tmp.path / "veth0";
    const std::string sysctl = tmp.path / "ip_local_reserved_ports";
    fs::create_directories(dir);
    put(sysctl, "22,61440-65535\n");

    // A crashed crescent: same client ports as ours, it had added 61440-65535.
    const pid_t gone = dead_pid();
    RegistryEntry dead = entry(gone, {61440, 65535}, {80});
    dead.start_time = 12345;
    dead.reserved_added = "61440-65535";
    dead.reserved_path = sysctl;
    put(fs::path(dir) / (std::to_string(gone) + ".entry"), dead.serialize());
    // A pid-reuse case: the pid is alive (ours... our parent) but the start time differs.
    RegistryEntry reused = entry(::getppid(), {1, 2});
    reused.start_time = process_start_time(::getppid()) + 7;
    put(fs::path(dir) / (std::to_string(::getppid()) + ".entry"), reused.serialize());
    // Garbage is removed too.
    put(fs::path(dir) / "999999.entry", "nonsense\n");

    std::vector<pid_t> cleaned;
    auto cleanup = [&](const RegistryEntry& e) {
        cleaned.push_back(e.pid);
        auto ports = PortSet::parse(e.reserved_added);
        REQUIRE(ports);
        std::string err;
        if (!e.reserved_path.empty()) REQUIRE(ReservedPorts::remove_ports(e.reserved_path, *ports, &err));
    };
    std::string err;
    RegistryEntry mine = entry(::getpid(), {61440, 65535}, {80});
    auto reg = Registry::claim(dir, "veth0", mine, cleanup, &err);
    REQUIRE(reg);
    std::sort(cleaned.begin(), cleaned.end());
    std::vector<pid_t> want{gone, ::getppid()};
    std::sort(want.begin(), want.end());
    CHECK(cleaned == want);
    CHECK(slurp(sysctl) == "22\n");
    const auto left = Registry::list(dir);
    REQUIRE(left.size() == 1);
    CHECK(left[0].pid == ::getpid());
}

TEST_CASE("Session: reserve, record, refuse a second overlapping session, restore") {
    TempDir tmp;
    const std::string sysctl = tmp.path / "ip_local_reserved_ports";
    put(sysctl, "22\n");
    PlanConfig c;
    c.ifname = "veth0";
    c.app_name = "one";
    c.app_slots = 2;
    c.engines = 2;
    c.listen_ports = {80};
    auto plan = Plan::compute(c, nullptr);
    REQUIRE(plan);
    SessionOptions opt;
    opt.registry_dir = tmp.path / "reg" / "veth0";
    opt.sysctl_path = sysctl;
    std::string err;
    {
        auto s = Session::open(*plan, opt, &err);
        REQUIRE(s);
        CHECK(slurp(sysctl) == "22,61440-63487\n");
        CHECK(s->registry().entry().reserved_added == "61440-63487");
        REQUIRE(s->record("ntuple_locs", "7,8", &err));
        const auto entries = Registry::list(opt.registry_dir);
        REQUIRE(entries.size() == 1);
        CHECK(entries[0].extra.at("ntuple_locs") == "7,8");
        CHECK(entries[0].reserved_path == sysctl);
        // A second, overlapping session (same process here) is refused and
        // leaves the first one's entry and ports alone.
        auto second = Session::open(*plan, opt, &err);
        CHECK(!second);
        CHECK_THAT(err, Catch::Contains("overlaps application \"one\""));
        CHECK(Registry::list(opt.registry_dir).size() == 1);
        CHECK(slurp(sysctl) == "22,61440-63487\n");
        // Slot 1 with another listen port is fine next to it.
        PlanConfig c1 = c;
        c1.app_slot = 1;
        c1.app_name = "two";
        c1.listen_ports = {81};
        auto plan1 = Plan::compute(c1, nullptr);
        REQUIRE(plan1);
        {
            auto third = Session::open(*plan1, opt, &err);
            REQUIRE(third);
            CHECK(slurp(sysctl) == "22,61440-65535\n");
            CHECK(Registry::list(opt.registry_dir).size() == 2);
        }
        CHECK(slurp(sysctl) == "22,61440-63487\n");
        CHECK(Registry::list(opt.registry_dir).size() == 1);
    }
    CHECK(slurp(sysctl) == "22\n");
    CHECK(Registry::list(opt.registry_dir).empty());
}
