// crescent — the memif goodbye (stack/dev/memif_goodbye.hpp) between two
// net_memif ports of one process: a server port polled by a thread, as an
// engine would, and a client port that closes.
//
// Checks: frames of other kinds pass the goodbye filter untouched; the
// closing port's goodbye is answered on its queue (the report says so) and
// never reaches the poller; the polled queue then sends and receives nothing
// until the link goes down, frees what was queued for the departed peer, and
// polls again. Two ports that say goodbye at once each take the other's
// goodbye as the end of the wait. Also the frame format: a foreign frame of
// the same ethertype is not taken for a goodbye.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <rte_mempool.h>

#include "stack/dev/memif_goodbye.hpp"
#include "stack/dev/runtime.hpp"

namespace dev = crescent::dev;
namespace mg = crescent::dev::memif_goodbye;
using namespace std::chrono_literals;

namespace {

const std::string& socket_path() {
    static const std::string p = fmt::format("/tmp/crescent-dev-memif-{}.sock", getpid());
    return p;
}

struct Env {
    std::unique_ptr<dev::Runtime> rt;
    std::string error;
    ~Env() {
        if (rt) rt->close_ports();
        ::unlink(socket_path().c_str());
    }
};

Env& env() {
    static Env e;
    static bool started = [] {
        dev::RuntimeConfig cfg;
        cfg.mode = dev::RuntimeConfig::Mode::Eal;
        cfg.eal_args = {"--no-pci", "--no-huge", "-m", "512", "--no-telemetry",
                        fmt::format("--vdev=net_memif0,role=server,id=0,socket={}", socket_path()),
                        fmt::format("--vdev=net_memif1,role=client,id=0,socket={}", socket_path()),
                        fmt::format("--vdev=net_memif2,role=server,id=1,socket={}", socket_path()),
                        fmt::format("--vdev=net_memif3,role=client,id=1,socket={}", socket_path())};
        cfg.cores = "0";
        cfg.handle_signals = false;
        if (dev::Status st = dev::Runtime::start(cfg, &e.rt); !st.ok()) e.error = st.message();
        return true;
    }();
    (void)started;
    INFO(e.error);
    REQUIRE(e.rt != nullptr);
    return e;
}

std::unique_ptr<dev::Port> open_port(uint16_t id) {
    dev::PortConfig pc;
    pc.rx_desc = 256;
    pc.tx_desc = 256;
    std::unique_ptr<dev::Port> p;
    dev::Status st = dev::Port::open(id, pc, &p);
    INFO(st.message());
    REQUIRE(st.ok());
    return p;
}

rte_mbuf* frame(dev::Queue& q, uint16_t type, uint8_t fill) {
    rte_mbuf* m = q.alloc_tx();
    REQUIRE(m != nullptr);
    auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 64));
    REQUIRE(d != nullptr);
    std::memset(d, fill, 64);
    d[12] = uint8_t(type >> 8);
    d[13] = uint8_t(type);
    return m;
}

// What the server-side poller saw.
struct Seen {
    std::atomic<int> plain{0};         // frames delivered to the caller
    std::atomic<int> control{0};       // goodbye frames delivered (must stay 0)
    std::atomic<bool> quiet{false};    // peer_closing() was seen
    std::atomic<bool> polling_again{false};
    std::atomic<int> rx_while_quiet{0};
    std::atomic<uint16_t> flushed_while_quiet{0};
};

} // namespace

TEST_CASE("memif goodbye: a closing port is answered, its peer's queue is quiet until the link goes down", "[dev]") {
    env();
    auto server = open_port(0);
    auto client = open_port(1);  // waits for the server's handshake
    REQUIRE(server->driver() == "net_memif");
    for (int i = 0; i < 200 && !(server->link().up && client->link().up); ++i) std::this_thread::sleep_for(10ms);
    REQUIRE(server->link().up);
    REQUIRE(client->link().up);

    dev::Queue& sq = server->queue(0);
    Seen seen;
    std::atomic<bool> stop{false};
    std::thread poller([&] {
        sq.bind_to_current_thread();
        rte_mbuf* pkts[32];
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (!stop.load() && std::chrono::steady_clock::now() < deadline) {
            const bool was_quiet = sq.peer_closing();
            const uint16_t n = sq.rx_burst(pkts, 32);
            for (uint16_t i = 0; i < n; ++i) {
                mg::Message msg{};
                if (mg::parse(pkts[i], &msg)) ++seen.control;
                else ++seen.plain;
                rte_pktmbuf_free(pkts[i]);
            }
            if (sq.peer_closing()) {
                if (!seen.quiet.exchange(true)) {
                    // Output for the departed peer: queued, not sent, freed when it is gone.
                    REQUIRE(sq.tx_enqueue(frame(sq, 0x0800, 0x11)) == dev::TxResult::Queued);
                    seen.flushed_while_quiet += sq.flush();
                }
                if (was_quiet) seen.rx_while_quiet += n;
            } else if (seen.quiet.load()) {
                seen.polling_again = true;
                break;
            }
        }
    });

    // Frames of other kinds pass: IPv4, knb raw's ethertype, and a foreign
    // 0x88B6 frame without the magic.
    dev::Queue& cq = client->queue(0);
    cq.bind_to_current_thread();
    for (uint16_t type : {uint16_t(0x0800), uint16_t(0x88B5), mg::kEtherType})
        REQUIRE(cq.tx_enqueue(frame(cq, type, 0x5a)) == dev::TxResult::Queued);
    REQUIRE(cq.flush() == 3);
    for (int i = 0; i < 200 && seen.plain.load() < 3; ++i) std::this_thread::sleep_for(5ms);
    CHECK(seen.plain.load() == 3);

    const dev::Port::GoodbyeReport r = client->say_goodbye();
    CHECK(r.queues == 1);
    CHECK(r.quiet == 1);
    CHECK(r.answered == 1);
    CHECK(client->say_goodbye().queues == 0);  // said once
    client.reset();  // stop + close: the server's PMD disconnects and unmaps

    poller.join();
    CHECK(seen.quiet.load());
    CHECK(seen.polling_again.load());  // the link went down well inside kQuietMax
    CHECK(seen.control.load() == 0);   // the goodbye never reached the caller
    CHECK(seen.rx_while_quiet.load() == 0);
    CHECK(seen.flushed_while_quiet.load() == 0);
    const dev::QueueStats& st = sq.stats();
    CHECK(st.peer_goodbyes == 1);
    CHECK(st.tx_freed_peer_gone == 1);
    CHECK(!server->link().up);
    // No peer: the server's own close says nothing.
    CHECK(server->say_goodbye().queues == 0);
}

TEST_CASE("memif goodbye: two ports that close at once take each other's goodbye as the answer", "[dev]") {
    env();
    auto server = open_port(2);
    auto client = open_port(3);
    for (int i = 0; i < 200 && !(server->link().up && client->link().up); ++i) std::this_thread::sleep_for(10ms);
    REQUIRE(server->link().up);
    REQUIRE(client->link().up);
    dev::Port::GoodbyeReport rs, rc;
    std::thread ts([&] { rs = server->say_goodbye(); });
    std::thread tc([&] { rc = client->say_goodbye(); });
    ts.join();
    tc.join();
    // Each side is quiet on its one queue: the other's goodbye, or its answer,
    // ended the wait (a wait that ran out would leave it not quiet).
    CHECK(rs.queues == 1);
    CHECK(rs.quiet == 1);
    CHECK(rc.queues == 1);
    CHECK(rc.quiet == 1);
    client.reset();
    server.reset();
}

TEST_CASE("memif goodbye: frames of the ethertype are parsed only with the magic and a known kind", "[dev]") {
    env();
    rte_mempool* pool = rte_pktmbuf_pool_create("mg_parse", 64, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    REQUIRE(pool != nullptr);
    const rte_ether_addr mac{{0x02, 0, 0, 0, 0, 0x01}};
    rte_mbuf* m = mg::build(pool, mac, {mg::Kind::Ack, 0x0102});
    REQUIRE(m != nullptr);
    CHECK(m->data_len == mg::kFrameLen);
    mg::Message msg{};
    REQUIRE(mg::parse(m, &msg));
    CHECK(msg.kind == mg::Kind::Ack);
    CHECK(msg.queue == 0x0102);
    auto* p = rte_pktmbuf_mtod(m, uint8_t*);
    p[RTE_ETHER_HDR_LEN + sizeof(mg::kMagic)] = 7;  // unknown kind
    CHECK(!mg::parse(m, &msg));
    p[RTE_ETHER_HDR_LEN + sizeof(mg::kMagic)] = uint8_t(mg::Kind::Goodbye);
    CHECK(mg::parse(m, &msg));
    p[RTE_ETHER_HDR_LEN] ^= 0xff;  // not our magic
    CHECK(!mg::parse(m, &msg));
    p[RTE_ETHER_HDR_LEN] ^= 0xff;
    rte_pktmbuf_trim(m, 1);  // shorter than a control frame
    CHECK(!mg::parse(m, &msg));
    rte_pktmbuf_free(m);
    rte_mempool_free(pool);
}
