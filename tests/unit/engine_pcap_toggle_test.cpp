// crescent — the run-time capture toggle (control socket "pcap on|off",
// ControlSocket::pcap_command): engine 0 switches at once, the other engines
// through their mailbox at their next loop iteration. Two engines over
// net_ring (tests/support/ring_bed.hpp), both polled from the test thread.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "stack/engine/control_socket.hpp"
#include "stack/engine/engine_impl.hpp"
#include "tests/support/echo_handlers.hpp"
#include "tests/support/ring_bed.hpp"

using namespace crescent;
using namespace std::chrono_literals;

namespace {
long file_size(const std::string& p) {
    struct stat st{};
    return ::stat(p.c_str(), &st) == 0 ? long(st.st_size) : -1;
}
} // namespace

struct Toggle {
    test::RingBed bed;
    std::string base, f0, f1;
    std::vector<Engine*> engines;
    explicit Toggle(int id)
        : bed(id), base("/tmp/crescent-pcap-toggle-" + std::to_string(::getpid()) + ".pcap"), f0(base + ".0"),
          f1(base + ".1"), engines{&bed.a(), &bed.b()} {}
    ~Toggle() {
        std::remove(f0.c_str());
        std::remove(f1.c_str());
    }
};

TEST_CASE("pcap toggle: bad requests answer an error and change nothing", "[engine][pcap]") {
    Toggle t(41);
    auto& [bed, base, f0, f1, engines] = t;
    {
        CHECK(engine::ControlSocket::answer("pcap", engines).starts_with("error: usage"));
        CHECK(engine::ControlSocket::answer("pcap on", engines).starts_with("error: usage"));
        CHECK(engine::ControlSocket::answer("pcap off now", engines).starts_with("error: usage"));
        CHECK(engine::ControlSocket::answer("pcap on " + base + " snaplen=10", engines)
                  .starts_with("error: bad pcap option 'snaplen=10'"));
        CHECK(engine::ControlSocket::answer("pcap on " + base + " max=x", engines).starts_with("error: bad pcap option"));
        const std::string r = engine::ControlSocket::answer("pcap on /nonexistent-crescent-dir/x.pcap", engines);
        CHECK(r == "error: pcap on: cannot open the capture file /nonexistent-crescent-dir/x.pcap.0: No such file "
                   "or directory\n");
        CHECK(file_size(f0) == -1);
        CHECK(file_size(f1) == -1);
    }

}

TEST_CASE("pcap toggle: on for both engines, traffic captured, off stops it", "[engine][pcap]") {
    Toggle t(42);
    auto& [bed, base, f0, f1, engines] = t;
    {
        const std::string on = engine::ControlSocket::answer("pcap on " + base + " snaplen=128", engines);
        CHECK(on == "pcap on " + f0 + " (2 engine(s), " + base + ".N each) snaplen=128 max=0\n");
        CHECK(file_size(f0) == 24);  // engine 0 at once
        CHECK(file_size(f1) == -1);  // engine 1 at its next iteration
        bed.poll();
        CHECK(file_size(f1) >= 0);

        test::EchoServer server;
        test::StreamClient client;
        client.total = 100000;
        REQUIRE(bed.b().listen(7, server) == ListenStatus::Ok);
        Conn c;
        REQUIRE(bed.a().connect(Endpoint{bed.ip_b, 7}, client, &c) == ConnectStatus::Ok);
        c.set_user(client.add(5));
        REQUIRE(bed.run_until([&] { return client.completed == 1; }, 20s));
        const uint64_t fa = bed.a().stats().pcap_frames, fb = bed.b().stats().pcap_frames;
        CHECK(fa > 10);
        CHECK(fb > 10);

        CHECK(engine::ControlSocket::answer("pcap off", engines) == "pcap off (2 engine(s))\n");
        bed.poll();
        const long s0 = file_size(f0), s1 = file_size(f1);
        // Every record: 16-byte header + at most 128 bytes.
        CHECK(s0 > 24 + long(fa) * 16);
        CHECK(s0 <= 24 + long(fa) * (16 + 128));
        CHECK(s1 > 24 + long(fb) * 16);
        // Off: more traffic adds nothing.
        Conn c2;
        REQUIRE(bed.a().connect(Endpoint{bed.ip_b, 7}, client, &c2) == ConnectStatus::Ok);
        c2.set_user(client.add(9));
        REQUIRE(bed.run_until([&] { return client.completed == 2; }, 20s));
        CHECK(file_size(f0) == s0);
        CHECK(file_size(f1) == s1);
        CHECK(client.mismatches == 0);
        REQUIRE(bed.run_until([&] { return client.closed == 2 && server.closed == 2; }, 20s));
        bed.run_for(20ms);
    }
}
