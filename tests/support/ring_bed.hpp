// crescent tests — two engines in one process over DPDK's net_ring PMD, for
// tests of the layers above the engine (rpc streams, RPC server and channel).
//
//   crescent::test::RingBed bed(1);            // engines a (10.9.1.1) and b (10.9.1.2)
//   bed.a().connect(...); bed.b().listen(...);
//   bed.run_until([&] { return done; }, 10s);  // polls both engines alternately
//
// EAL runs once per process (--no-huge --no-pci --no-shconf, one lcore); the
// arena is anonymous memory. Everything runs on the test thread, which holds
// zbuf core 0 while the bed lives: deterministic scheduling, one CPU.
//
// Options: dispatch modes per engine, an impairment spec applied to both
// devices (ImpairDevice: loss, duplication, reordering, delay), and
// stop_b()/start_b() to kill and restart engine b (its connections are reset
// and their handlers told EngineStopped, then the engine is destroyed; the
// ring port stays, so a new engine b answers at the same address).
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <crescent/engine.hpp>
#include <crescent/zbuf.hpp>

#include "stack/engine/device.hpp"
#include "stack/engine/engine_impl.hpp"
#include "stack/engine/impair.hpp"
#include "stack/engine/nexthop.hpp"
#include "tests/support/eal_cleanup.hpp"

namespace crescent::test {

struct RingEnv {
    std::unique_ptr<zbuf::Arena> arena;
    rte_mempool* pool = nullptr;
    bool ok = false;
    bool eal = false;
    std::string error;
    ~RingEnv() {
        arena.reset();
        if (pool) rte_mempool_free(pool);
        if (eal) eal_cleanup_with_run_dir();
    }
    static RingEnv& get() {
        static RingEnv e;
        static bool init = false;
        if (!init) {
            init = true;
            std::vector<std::string> args = {"ring_bed", "--no-huge", "--no-pci", "--no-shconf",
                                             "--file-prefix=ringbed" + std::to_string(getpid()),
                                             "-m", "512", "-l", "0", "--log-level=error", "--no-telemetry"};
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            if (rte_eal_init(int(argv.size()), argv.data()) < 0) {
                e.error = "rte_eal_init failed";
                return e;
            }
            e.eal = true;
            e.pool = rte_pktmbuf_pool_create("ring_bed_pool", 32767, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
            if (!e.pool) {
                e.error = "mbuf pool";
                return e;
            }
            zbuf::Config zc;
            zc.backing = zbuf::Backing::Anonymous;
            zc.bytes = 256u << 20;
            e.arena = zbuf::Arena::create(zc, &e.error);
            e.ok = e.arena != nullptr;
        }
        return e;
    }
};

struct RingBedOptions {
    DispatchMode mode_a = DispatchMode::Inline;
    DispatchMode mode_b = DispatchMode::Inline;
    std::string impair;          // "" = a perfect wire; else an ImpairSpec for both devices
    bool multi_segs = true;      // zero-copy TX chains
    ConnOptions conn;            // engine defaults (accepted connections)
    // Last word on each engine's EngineConfig (limits, ...).
    std::function<void(EngineConfig& cfg, bool is_a)> tune;
    // Engine b on zbuf core 1 (its polls run in a nested CoreScope(1)), so
    // each engine allocates from zones of its own, as on two cores; by
    // default both run on core 0 and share its zones (and a max_memory cap).
    bool b_own_core = false;
    rte_mempool* pool = nullptr; // TX/RX mbuf pool of both ports (nullptr = the shared one)
};

class RingBed {
public:
    explicit RingBed(int id, RingBedOptions o = {}) : id_(id), o_(std::move(o)), core_(0) {
        RingEnv& e = RingEnv::get();
        REQUIRE(e.ok);
        std::string n = std::to_string(id);
        ab_ = rte_ring_create(("rb_ab" + n).c_str(), 8192, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        ba_ = rte_ring_create(("rb_ba" + n).c_str(), 8192, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        REQUIRE(ab_);
        REQUIRE(ba_);
        int pa = rte_eth_from_rings(("rbA" + n).c_str(), &ba_, 1, &ab_, 1, SOCKET_ID_ANY);
        int pb = rte_eth_from_rings(("rbB" + n).c_str(), &ab_, 1, &ba_, 1, SOCKET_ID_ANY);
        REQUIRE(pa >= 0);
        REQUIRE(pb >= 0);
        port_a_ = uint16_t(pa);
        port_b_ = uint16_t(pb);
        rte_ether_addr ma{{0x02, 0, 0, 0, uint8_t(id), 0x0a}}, mb{{0x02, 0, 0, 0, uint8_t(id), 0x0b}};
        rte_eth_dev_default_mac_addr_set(port_a_, &ma);
        rte_eth_dev_default_mac_addr_set(port_b_, &mb);
        REQUIRE(start_port(port_a_));
        REQUIRE(start_port(port_b_));
        ports_ = true;
        ip_a = Ipv4{0x0a090001u | uint32_t(uint8_t(id)) << 8};
        ip_b = Ipv4{0x0a090002u | uint32_t(uint8_t(id)) << 8};
        a_ = make(true);
        b_ = make(false);
    }
    ~RingBed() {
        stop(a_);
        stop(b_);
        if (o_.b_own_core) {  // b's objs freed by core 0 (e.g. a's copies of b's TX chains) wait in core 1's ring
            zbuf::CoreScope b_core(1);
            if (zbuf::Arena* a = zbuf::Arena::current()) a->drain_returns();
        }
        if (ports_)
            for (uint16_t p : {port_a_, port_b_}) {
                rte_eth_dev_stop(p);
                rte_eth_dev_close(p);
            }
        for (rte_ring* r : {ab_, ba_}) {
            if (!r) continue;
            void* m;
            while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
            rte_ring_free(r);
        }
    }
    RingBed(const RingBed&) = delete;
    RingBed& operator=(const RingBed&) = delete;

    Engine& a() { return *a_->engine; }
    Engine& b() { return *b_->engine; }
    bool b_running() const { return b_ != nullptr; }
    Ipv4 ip_a, ip_b;

    // One iteration of each engine.
    void poll() {
        if (a_) a_->engine->poll_once();
        if (b_) {
            if (o_.b_own_core) {
                zbuf::CoreScope b_core(1);
                b_->engine->poll_once();
            } else {
                b_->engine->poll_once();
            }
        }
    }
    // Poll until pred() or the timeout; returns pred().
    bool run_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!pred()) {
            if (std::chrono::steady_clock::now() > deadline) return pred();
            poll();
        }
        return true;
    }
    void run_for(std::chrono::milliseconds d) {
        auto deadline = std::chrono::steady_clock::now() + d;
        while (std::chrono::steady_clock::now() < deadline) poll();
    }
    // Kill engine b: its connections are reset (handlers told EngineStopped)
    // and the engine destroyed. `silent`: no RST reaches the wire (the frames
    // it sends while stopping are dropped), as when a machine vanishes.
    void stop_b(bool silent = false) {
        if (!b_) return;
        size_t before = rte_ring_count(ba_);
        stop(b_);
        if (silent) {
            void* m;
            while (rte_ring_count(ba_) > before && rte_ring_dequeue(ba_, &m) == 0)
                rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
        }
    }
    void start_b() {
        if (!b_) b_ = make(false);
    }

private:
    struct Side {
        std::unique_ptr<engine::EthdevDevice> eth;
        std::unique_ptr<engine::Device> dev;  // eth, or an ImpairDevice owning a second wrapper
        std::unique_ptr<engine::StaticNextHop> nh;
        std::unique_ptr<Engine> engine;
    };
    bool start_port(uint16_t port) {
        rte_eth_conf conf{};
        if (rte_eth_dev_configure(port, 1, 1, &conf) != 0) return false;
        if (rte_eth_rx_queue_setup(port, 0, 2048, SOCKET_ID_ANY, nullptr, pool()) != 0) return false;
        if (rte_eth_tx_queue_setup(port, 0, 2048, SOCKET_ID_ANY, nullptr) != 0) return false;
        return rte_eth_dev_start(port) == 0;
    }
    rte_mempool* pool() const { return o_.pool ? o_.pool : RingEnv::get().pool; }
    std::unique_ptr<Side> make(bool is_a) {
        RingEnv& e = RingEnv::get();
        auto s = std::make_unique<Side>();
        engine::DeviceCaps caps;
        caps.mtu = 1500;
        caps.multi_segs = o_.multi_segs;
        uint16_t port = is_a ? port_a_ : port_b_;
        engine::Device* dev;
        if (o_.impair.empty()) {
            s->eth = std::make_unique<engine::EthdevDevice>(port, 0, pool(), caps);
            dev = s->eth.get();
        } else {
            std::string err;
            auto spec = engine::parse_impair(o_.impair, &err);
            REQUIRE(spec);
            spec->seed += is_a ? 0 : 1000;
            s->dev = std::make_unique<engine::ImpairDevice>(
                std::make_unique<engine::EthdevDevice>(port, 0, pool(), caps), *spec);
            dev = s->dev.get();
        }
        const Ipv4 me = is_a ? ip_a : ip_b, peer = is_a ? ip_b : ip_a;
        wire::MacAddr peer_mac;
        rte_ether_addr pm;
        rte_eth_macaddr_get(is_a ? port_b_ : port_a_, &pm);
        for (int i = 0; i < 6; ++i) peer_mac.b[i] = pm.addr_bytes[i];
        s->nh = std::make_unique<engine::StaticNextHop>(
            wire::Ipv4Addr{me.v}, 24, std::vector<engine::StaticNextHop::Entry>{{wire::Ipv4Addr{peer.v}, peer_mac}});
        engine::EngineParams p;
        p.cfg.mode = is_a ? o_.mode_a : o_.mode_b;
        p.cfg.conn = o_.conn;
        if (o_.tune) o_.tune(p.cfg, is_a);
        p.ip = wire::Ipv4Addr{me.v};
        p.dev = dev;
        p.nexthop = s->nh.get();
        p.arena = e.arena.get();
        p.secret = {0x1234u + uint64_t(id_) + (is_a ? 0 : 77) + restarts_++, 0x5678};
        p.core = !is_a && o_.b_own_core ? 1 : 0;
        s->engine = engine::make_engine(p);
        return s;
    }
    void stop(std::unique_ptr<Side>& s) {
        if (!s) return;
        s->engine->impl().close_all();
        for (int i = 0; i < 4; ++i) s->engine->poll_once();  // run the RSTs' callbacks and timers
        s.reset();
    }

    int id_;
    RingBedOptions o_;
    zbuf::CoreScope core_;
    rte_ring* ab_ = nullptr;
    rte_ring* ba_ = nullptr;
    uint16_t port_a_ = 0, port_b_ = 0;
    bool ports_ = false;
    unsigned restarts_ = 0;
    std::unique_ptr<Side> a_, b_;
};

} // namespace crescent::test
