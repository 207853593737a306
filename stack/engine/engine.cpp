// crescent — the per-core run-to-completion loop (Luna §5) and the public
// Engine / Conn API on top of it. See engine_impl.hpp for the structure;
// TX frames are built in tx_frame.cpp.
#include "stack/engine/engine_impl.hpp"
#include "stack/engine/phase_timer.hpp"

#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <rte_errno.h>

#include <crescent/log.hpp>

#include "stack/engine/null_device.hpp"
#include "stack/engine/pcap.hpp"
#include "zbuf/dpdk.hpp"

namespace crescent {
namespace engine {

namespace {

CloseReason map_reason(tcp::CloseReason r) {
    switch (r) {
    case tcp::CloseReason::None:
    case tcp::CloseReason::Normal: return CloseReason::Normal;
    case tcp::CloseReason::ResetByPeer: return CloseReason::ResetByPeer;
    case tcp::CloseReason::Refused: return CloseReason::Refused;
    case tcp::CloseReason::ConnectTimeout: return CloseReason::ConnectTimeout;
    case tcp::CloseReason::RetransmitTimeout: return CloseReason::RetransmitTimeout;
    case tcp::CloseReason::KeepaliveTimeout: return CloseReason::KeepaliveTimeout;
    case tcp::CloseReason::FinWait2Timeout: return CloseReason::FinWait2Timeout;
    case tcp::CloseReason::AbortedLocally: return CloseReason::AbortedLocally;
    }
    return CloseReason::Normal;
}

bool opening(tcp::EventKind k) { return k == tcp::EventKind::Connected || k == tcp::EventKind::Acceptable; }

} // namespace

EngineImpl::EngineImpl(const EngineParams& p)
    : p_(p), host_(host_config(p)), dev_(p.dev ? p.dev : &NullDevice::instance()),
      nexthop_(p.nexthop ? p.nexthop : &NullNextHop::instance()), arena_(p.arena), mac_(dev_->mac()),
      caps_(dev_->caps()), wheel_(clock_.now()), pub_(p.cfg.stats_interval) {
    kernel_only_ = p.dev == nullptr;
    burst_flush_after_ = p_.cfg.burst_flush_after.value_or(
        caps_.tx_syscall ? Duration::max() : Duration(std::chrono::microseconds(1)));
    reply_at_once_ = p_.cfg.mode == DispatchMode::Inline && p_.cfg.reply_at_once;
    if (p_.cfg.burst == 0) p_.cfg.burst = 32;
    if (p_.cfg.burst > 512) p_.cfg.burst = 512;
    if (p_.client_port_lo != 0) {
        port_lo_ = p_.client_port_lo;
        port_hi_ = p_.client_port_hi;
    } else {
        std::tie(port_lo_, port_hi_) = client_port_subrange(p_.index, p_.count);
    }
    rx_pkts_.resize(p_.cfg.burst);
    txq_.reserve(1024);
    act_.segments.reserve(64);
    app_act_.segments.reserve(64);
    if (rte_mempool* pool = dev_->tx_pool()) {
        frame_room_ = uint16_t(rte_pktmbuf_data_room_size(pool) - RTE_PKTMBUF_HEADROOM);
        // rte_pktmbuf_init's layout: the data room follows the mbuf and its
        // private area, and a reset mbuf's data starts RTE_PKTMBUF_HEADROOM in.
        tx_data_at_ = uint32_t(sizeof(rte_mbuf) + rte_pktmbuf_priv_size(pool) + RTE_PKTMBUF_HEADROOM);
    }
    if (caps_.multi_segs) {
        // Enough for a full TX ring plus the backlog at a few views per
        // segment; running dry only falls back to copying.
        static std::atomic<uint32_t> seq{0};
        std::string name = fmt::format("crx_att_{}_{}", p_.index, seq.fetch_add(1, std::memory_order_relaxed));
        attach_pool_ = zbuf::dpdk::create_attach_pool(name, 16383, 256, SOCKET_ID_ANY);
        if (!attach_pool_)
            log::core(p_.core)->warn("attach pool {}: {}; zero-copy TX disabled (segments are copied)", name,
                                     rte_strerror(rte_errno));
    }
    // EngineConfig::max_memory: this core's share of the arena (engines that
    // share a zbuf core, as in tests, share the cap).
    if (arena_ && p_.cfg.max_memory != 0) {
        arena_->set_core_limit(p_.core, p_.cfg.max_memory);
        rx_headroom_ = std::max<size_t>(p_.cfg.max_memory / 8, 128u << 10);
        const std::vector<uint32_t>& classes = arena_->config().size_classes;
        while (copy_class_ + 1 < classes.size() && classes[copy_class_] < caps_.mtu) ++copy_class_;
    }
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) log::core(p_.core)->warn("epoll_create1 failed: {}; add_fd() unavailable", std::strerror(errno));
    if (kernel_only_ && epfd_ >= 0 && !wake_.open(epfd_))
        log::core(p_.core)->warn("wake-up eventfd: {}; a blocked loop ends at its next timer", std::strerror(errno));
}

EngineImpl::~EngineImpl() {
    if (arena_ && p_.cfg.max_memory != 0) arena_->set_core_limit(p_.core, 0);
    for (rte_mbuf* m : txq_) rte_pktmbuf_free(m);
    if (tx_spare_) rte_mbuf_raw_free(tx_spare_);
    for (auto& pf : pending_) rte_pktmbuf_free(pf.m);
    // Frames the device still holds point into the pools; freeing them under
    // those would be a use-after-free at their TX completion, so pools still
    // in use are left to EAL teardown.
    if (attach_pool_ && !zbuf::dpdk::free_attach_pool(attach_pool_))
        log::core(p_.core)->warn("attach pool: mbufs still held by the device at engine exit; pool kept");
    if (epfd_ >= 0) ::close(epfd_);
    delete pcap_toggle_.exchange(nullptr, std::memory_order_acq_rel);
}

// ---- connection table ----------------------------------------------------------

EngineImpl::ConnState& EngineImpl::register_conn(tcp::ConnId id, Handler* h) {
    if (id.index >= conns_.size()) conns_.resize(std::max<size_t>(id.index + 1, conns_.size() * 2));
    ConnState& s = conns_[id.index];
    s = ConnState{};
    s.gen = id.gen;
    s.live = true;
    s.handler = h;
    ++st_.conns_opened;
    return s;
}

// ---- listen / connect / timers / fds --------------------------------------------

ListenStatus EngineImpl::listen(uint16_t port, Handler& h) {
    if (port == 0 || kernel_only_) return ListenStatus::InvalidArgument;
    if (listeners_.count(port)) return ListenStatus::AddressInUse;
    switch (host_.listen(port, p_.cfg.backlog)) {
    case tcp::ListenResult::Ok: break;
    case tcp::ListenResult::AddressInUse: return ListenStatus::AddressInUse;
    case tcp::ListenResult::InvalidArgument: return ListenStatus::InvalidArgument;
    }
    listeners_[port] = &h;
    return ListenStatus::Ok;
}

void EngineImpl::unlisten(uint16_t port) {
    if (listeners_.erase(port)) host_.unlisten(port, clock_.now(), app_act_);
}

ConnectStatus EngineImpl::connect(Endpoint remote, Handler& h, Conn* out, const ConnOptions* opts,
                                  uint16_t local_port) {
    if (remote.port == 0 || remote.ip.v == 0) return ConnectStatus::InvalidArgument;
    if (local_port != 0 && (local_port < port_lo_ || local_port > port_hi_)) return ConnectStatus::InvalidArgument;
    Instant now = clock_.now();
    wire::MacAddr mac;
    if (nexthop_->resolve(wire::Ipv4Addr{remote.ip.v}, now, &mac) == Resolve::NoRoute) {
        ++st_.drop_no_route;
        return ConnectStatus::NoRoute;
    }
    const ConnOptions& o = opts ? *opts : p_.cfg.conn;
    if (opts && !check_conn_options(*opts, nullptr)) return ConnectStatus::InvalidArgument;
    tcp::Config cfg = tcp_config(o, caps_);
    const uint32_t span = local_port != 0 ? 1 : uint32_t(port_hi_ - port_lo_) + 1;
    for (uint32_t i = 0; i < span; ++i) {
        uint16_t lport = local_port != 0 ? local_port : uint16_t(port_lo_ + (port_cursor_++ % span));
        tcp::ConnId id;
        switch (host_.connect(wire::Ipv4Addr{remote.ip.v}, remote.port, lport, now, app_act_, &id, &cfg)) {
        case tcp::ConnectResult::Ok: {
            ConnState& s = register_conn(id, &h);
            s.snd_buf = o.snd_buf;
            if (out) *out = handle(id);
            return ConnectStatus::Ok;
        }
        case tcp::ConnectResult::AddressInUse: continue;
        case tcp::ConnectResult::TooManyConnections: return ConnectStatus::TooManyConnections;
        case tcp::ConnectResult::InvalidArgument: return ConnectStatus::InvalidArgument;
        }
    }
    ++st_.connect_no_port;
    return ConnectStatus::NoPort;
}

TimerId EngineImpl::add_timer(Duration after, std::function<void()> fn) {
    return wheel_.add(clock_.now() + after, std::move(fn));
}

bool EngineImpl::add_fd(int fd, uint32_t events, std::function<void(uint32_t)> fn) {
    if (epfd_ < 0 || fd < 0 || fds_.count(fd)) return false;
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) return false;
    fds_.emplace(fd, std::move(fn));
    return true;
}

bool EngineImpl::remove_fd(int fd) {
    auto it = fds_.find(fd);
    if (it == fds_.end()) return false;
    epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
    fds_.erase(it);
    return true;
}

void EngineImpl::poll_fds(Duration timeout) {
    epoll_event evs[64];
    int max = int(std::min<uint32_t>(p_.cfg.epoll_batch ? p_.cfg.epoll_batch : 16, 64));
    timespec ts{time_t(timeout.count() / 1'000'000'000), long(timeout.count() % 1'000'000'000)};
    int n = epoll_pwait2(epfd_, evs, max, &ts, nullptr);
    ++st_.epoll_waits;
    if (n <= 0) return;
    loop_now_ = clock_.now();  // the wait may have slept
    const Dispatching dispatching(dispatching_);
    st_.epoll_events += uint64_t(n);
    for (int i = 0; i < n; ++i) {
        auto it = fds_.find(evs[i].data.fd);
        if (it == fds_.end()) continue;  // removed by an earlier callback
        auto fn = it->second;            // the callback may remove its own fd
        fn(evs[i].events);
    }
}

// ---- the loop ----------------------------------------------------------------------

size_t EngineImpl::poll_once() {
    size_t work = 0;
    Instant now = clock_.now();
    loop_now_ = now;
    const Dispatching dispatching(dispatching_);
    uint16_t n = dev_->rx_burst(rx_pkts_.data(), p_.cfg.burst);
    PhaseTimer& phases = phases_;
    if (n) {
        if (--phase_countdown_ == 0) [[unlikely]] {
            phase_countdown_ = EngineStats::kPhaseSampleEvery;
            phases.start(now);
        }
        if (p_.pcap) p_.pcap->write_mbufs(rx_pkts_.data(), n, now);  // as received
        rx(now, n);
        work += n;
        phases.end(Phase::App);  // what the burst's last frame left after its events
    }
    // Timers: the Host's earliest TCP deadline, then the wheel (app timers).
    if (now >= host_.next_deadline()) {
        host_.on_timer(now, act_);
        ++st_.tcp_timer_runs;
        process(act_, now);
        act_.clear();
        ++work;
    }
    if (wheel_.may_be_due(now)) {
        size_t ran = wheel_.advance(now);
        st_.timers_fired += ran;
        work += ran;
    }
    if (!pending_.empty()) retry_pending(now);
    phases.end(Phase::Timers);
    pump(now);
    phases.end(Phase::Output);
    if (!txq_.empty()) flush_tx();
    else if (dev_->tx_pending()) dev_->flush();
    phases.end(Phase::Flush);
    if (pool_to_check_) [[unlikely]] check_rx_pool();
    nexthop_->quiescent();
    if (!fds_.empty() && now - last_fd_poll_ >= p_.cfg.fd_poll_interval) {
        last_fd_poll_ = now;
        uint64_t before = st_.epoll_events;
        poll_fds(Duration::zero());
        work += size_t(st_.epoll_events - before);
        pump(clock_.now());
        if (!txq_.empty()) flush_tx();
    }
    if (pcap_toggle_.load(std::memory_order_relaxed)) [[unlikely]] apply_pcap_toggle();
    ++st_.loops;
    if (work == 0) {
        ++st_.idle_loops;
        // Objs other threads freed wait in this core's return ring, counted
        // live, until an alloc misses its zone; an idle iteration gives them back.
        if (arena_) arena_->drain_returns();
    } else {
        st_.busy_ns += uint64_t((clock_.now() - now).count());  // one TSC read, after the output left
    }
    phases.end(Phase::Rest);  // before the publisher's tick, which copies the counters
    phases.stop();
    pub_.tick(*this, now);
    return work;
}

void EngineImpl::run() {
    if (kernel_only_) return run_kernel();
    while (!stopping()) {
        size_t w = poll_once();
        if (p_.cfg.idle_spin == 0) continue;
        if (w != 0 || !txq_.empty()) {
            idle_count_ = 0;
            continue;
        }
        if (++idle_count_ < p_.cfg.idle_spin) continue;
        Instant now = clock_.now();
        Instant next = min(host_.next_deadline(), wheel_.next_deadline());
        if (!pending_.empty()) next = min(next, now + std::chrono::milliseconds(1));
        Duration d = p_.cfg.idle_sleep;
        if (next - now < d) d = next - now;
        if (d <= Duration::zero()) continue;
        ++st_.sleeps;
        nexthop_->offline();
        if (!fds_.empty()) {
            poll_fds(d);  // sleeps in the epoll set: a kernel event ends the nap early
        } else {
            timespec ts{time_t(d.count() / 1'000'000'000), long(d.count() % 1'000'000'000)};
            nanosleep(&ts, nullptr);
        }
        nexthop_->online();
    }
    close_all();
}

void EngineImpl::close_all() {
    Instant now = clock_.now();
    closing_all_ = true;
    unsigned logged = 0;
    for (uint32_t i = 0; i < conns_.size(); ++i) {
        if (!conns_[i].live) continue;
        if (const tcp::Tcb* t = host_.find(tcp::ConnId{i, conns_[i].gen}); t && logged++ < 16) {
            const tcp::Stats x = t->stats();
            log::core(p_.core)->info(
                "engine stop: conn {}:{} <- {}:{} {} snd_una={} snd_nxt={} snd_wnd={} rcv_nxt={} rcv_wnd={} "
                "cwnd={} in_flight={} rto={}us segs_in={} segs_out={} retrans(rto/fast/sack)={}/{}/{} "
                "drops(seq/paws/ack/rst/room/noack/closed)={}/{}/{}/{}/{}/{}/{} zero_wnd_sent={}",
                Ipv4{t->endpoints().local_ip.v}.to_string(), t->endpoints().local_port,
                Ipv4{t->endpoints().remote_ip.v}.to_string(), t->endpoints().remote_port,
                tcp::state_name(x.state), x.snd_una, x.snd_nxt, x.snd_wnd, x.rcv_nxt, x.rcv_wnd, x.cwnd,
                x.bytes_in_flight, x.rto.count() / 1000, x.segs_in, x.segs_out, x.retrans_timeout, x.retrans_fast,
                x.retrans_sack, x.drop_not_acceptable, x.drop_paws, x.drop_bad_ack, x.drop_rst_invalid,
                x.drop_no_room, x.drop_no_ack, x.drop_after_close, x.zero_window_sent);
        }
        host_.abort(tcp::ConnId{i, conns_[i].gen}, now, app_act_);
    }
    pump(now);
    // Handlers of connections the Host did not report closed still hear of it.
    for (uint32_t i = 0; i < conns_.size(); ++i) {
        ConnState& s = conns_[i];
        if (!s.live) continue;
        Handler* h = s.handler;
        Conn c(this, i, s.gen);
        if (h) h->on_closed(c, CloseReason::EngineStopped);
        s.retire();
        ++st_.conns_closed;
    }
    // Then whatever else the application tied to the loop (kernel sockets of
    // rpc streams...). A hook may cancel others; each runs at most once.
    auto hooks = std::move(stop_hooks_);
    stop_hooks_.clear();
    for (auto& [id, fn] : hooks) fn();
    flush_tx();
    closing_all_ = false;
}

// ---- RX ------------------------------------------------------------------------------

// ---- running Actions --------------------------------------------------------------------

void EngineImpl::process(tcp::Actions& a, Instant now) {
    // 1. Segments first: their payload views are valid only until a later
    //    Host call could release send-queue references.
    for (const tcp::OutSegment& s : a.segments) transmit(s, now);
    const bool batch = p_.cfg.mode == DispatchMode::Batch;
    // 2. Opening events, so that data and closes find the connection registered.
    for (const tcp::Event& ev : a.events) {
        if (!opening(ev.kind)) continue;
        if (ev.kind == tcp::EventKind::Acceptable) {
            // Registration happens now in both modes; batch defers the callback.
            while (auto id = host_.accept(ev.port)) {
                auto it = listeners_.find(ev.port);
                if (it == listeners_.end()) {
                    host_.abort(*id, now, app_act_);
                    continue;
                }
                ConnState& s = register_conn(*id, it->second);
                s.snd_buf = p_.cfg.conn.snd_buf;
                tcp::Event c{*id, tcp::EventKind::Connected};
                if (batch) deferred_.push_back(c);
                else handle_event(c, now);
            }
        } else if (batch) {
            deferred_.push_back(ev);
        } else {
            handle_event(ev, now);
        }
    }
    // 3. Data.
    if (!a.readable.empty()) {
        if (batch) {
            for (tcp::Readable& r : a.readable) {
                ConnState* s = state_of(r.conn.index, r.conn.gen);
                if (!s) {  // not (or no longer) the application's: release the window
                    host_.consume(r.conn, uint32_t(r.data.size()));
                    continue;
                }
                s->rxq_bytes += r.data.size();
                s->rxq.push_back(std::move(r.data));
                if (!s->ready) {
                    s->ready = true;
                    ready_.push_back(r.conn);
                }
            }
        } else {
            size_t b = 0;
            while (b < a.readable.size()) {
                size_t e = b + 1;
                while (e < a.readable.size() && a.readable[e].conn == a.readable[b].conn) ++e;
                deliver_inline(a, b, e);
                b = e;
            }
        }
    }
    // 4. Everything else (acked, writable, peer FIN, closed).
    for (const tcp::Event& ev : a.events) {
        if (opening(ev.kind)) continue;
        if (batch) deferred_.push_back(ev);
        else handle_event(ev, now);
    }
}

void EngineImpl::deliver_inline(tcp::Actions& a, size_t begin, size_t end) {
    tcp::ConnId id = a.readable[begin].conn;
    uint32_t bytes = 0;
    iov_.clear();
    for (size_t i = begin; i < end; ++i) {
        bytes += uint32_t(a.readable[i].data.size());
        iov_.push_back(std::move(a.readable[i].data));
    }
    ConnState* s = state_of(id.index, id.gen);
    if (s && s->handler) {
        ++st_.callbacks;
        s->hold_now = false;
        s->handler->on_data(handle(id), std::span<Slice>(iov_));
        s = state_of(id.index, id.gen);  // the handler may have closed it
    }
    iov_.clear();  // slices the handler did not keep go back now
    if (s && s->hold_now) {
        s->hold_now = false;
        s->held += bytes;  // the window reopens by them at release_window()
        return;
    }
    // A window update this makes due marks the Host's slot dirty, and the
    // burst's end flushes it; not application output, so no early flush.
    host_.consume(id, bytes);
}

void EngineImpl::handle_event(const tcp::Event& ev, Instant now) {
    (void)now;
    ConnState* s = state_of(ev.conn.index, ev.conn.gen);
    if (!s) return;
    Handler* h = s->handler;
    Conn c = handle(ev.conn);
    ++st_.callbacks;
    switch (ev.kind) {
    case tcp::EventKind::Connected:
        if (!s->connected_notified) {
            s->connected_notified = true;
            if (h) h->on_connected(c);
        }
        break;
    case tcp::EventKind::PeerFin:
        if (h) h->on_peer_closed(c);
        break;
    case tcp::EventKind::Acked:
        if (h) h->on_acked(c, ev.bytes);
        s = state_of(ev.conn.index, ev.conn.gen);
        if (s && s->want_writable) {
            const tcp::Tcb* t = host_.find(ev.conn);
            if (t && t->send_space() >= std::min<size_t>(s->want_bytes, s->snd_buf)) {
                s->want_writable = false;
                if (h) h->on_writable(c);
            }
        }
        break;
    case tcp::EventKind::Writable:
        if (s->want_writable) {
            s->want_writable = false;
            if (h) h->on_writable(c);
        }
        break;
    case tcp::EventKind::Closed: {
        CloseReason why = map_reason(ev.reason);
        if (closing_all_ && why == CloseReason::AbortedLocally) why = CloseReason::EngineStopped;
        if (h) h->on_closed(c, why);
        s = state_of(ev.conn.index, ev.conn.gen);
        if (s) s->retire();
        ++st_.conns_closed;
        break;
    }
    case tcp::EventKind::Acceptable:
        break;
    }
}

void EngineImpl::run_batch_callbacks(Instant now) {
    if (deferred_.empty() && ready_.empty()) return;
    std::vector<tcp::Event> evs;
    evs.swap(deferred_);
    std::vector<tcp::ConnId> ready;
    ready.swap(ready_);
    for (const tcp::Event& ev : evs)
        if (opening(ev.kind)) handle_event(ev, now);
    for (tcp::ConnId id : ready) {
        ConnState* s = state_of(id.index, id.gen);
        if (!s) continue;
        s->ready = false;
        if (s->rxq_bytes != 0 && s->handler) {
            ++st_.callbacks;
            s->handler->on_readable(handle(id));
        }
    }
    for (const tcp::Event& ev : evs)
        if (!opening(ev.kind)) handle_event(ev, now);
    // Keep the capacity of whichever vectors were swapped out.
    evs.clear();
    ready.clear();
    if (deferred_.empty()) deferred_.swap(evs);
    if (ready_.empty()) ready_.swap(ready);
}

void EngineImpl::pump(Instant now) {
    const bool batch = p_.cfg.mode == DispatchMode::Batch;
    for (int round = 0; round < 16; ++round) {
        bool did = false;
        if (!app_act_.empty()) {
            std::swap(app_act_, act_);
            process(act_, now);
            act_.clear();
            did = true;
        }
        if (batch && (!deferred_.empty() || !ready_.empty())) {
            run_batch_callbacks(now);
            did = true;
        }
        if (need_flush_ || host_.has_dirty()) {  // the app's output, or ACKs held to the flush
            need_flush_ = false;
            host_.flush(now, act_);
            process(act_, now);
            act_.clear();
            did = true;
        }
        if (!did) break;
    }
}

rte_mbuf* EngineImpl::linearize(rte_mbuf* m) {
    // rte_pktmbuf_linearize moves the data into the first segment when it
    // has the tailroom (the usual case: a header-sized head with a full data
    // room) and frees the rest; a shared or indirect head is not ours to write.
    if (!RTE_MBUF_DIRECT(m) || rte_mbuf_refcnt_read(m) != 1 || rte_pktmbuf_linearize(m) != 0) {
        ++st_.rx_multiseg;
        rte_pktmbuf_free(m);
        return nullptr;
    }
    ++st_.rx_linearized;
    return m;
}

void EngineImpl::retry_pending(Instant now) {
    size_t n = pending_.size();
    for (size_t i = 0; i < n; ++i) {
        PendingFrame pf = pending_.front();
        pending_.pop_front();
        wire::MacAddr mac;
        Resolve r = nexthop_->resolve(pf.next_hop_dst, now, &mac);
        if (r == Resolve::Ok) {
            std::memcpy(rte_pktmbuf_mtod(pf.m, uint8_t*), mac.b.data(), 6);
            enqueue_tx(pf.m);
        } else if (r == Resolve::Pending && now < pf.deadline) {
            pending_.push_back(pf);
        } else {
            if (r == Resolve::NoRoute) ++st_.drop_no_route;
            else if (r == Resolve::Pending) {
                ++st_.drop_neigh_pending;
                warn(Warn::NeighPending);
            } else {
                ++st_.drop_neigh_failed;
                warn(Warn::NeighFailed);
            }
            rte_pktmbuf_free(pf.m);
        }
    }
}

// ---- run-time capture toggle ------------------------------------------------------------

bool EngineImpl::pcap_switch(const PcapToggle& t, std::string* err) {
    if (!t.on) {
        if (p_.pcap) p_.pcap->flush();
        p_.pcap = nullptr;
        pcap_own_.reset();  // closes a run-time capture (the start-time one stays the Runtime's)
        return true;
    }
    auto w = PcapWriter::open(t.path, t.snaplen, t.max_bytes, clock_.now(), err);
    if (!w) return false;
    if (p_.pcap) p_.pcap->flush();
    txq_captured_ = txq_.size();  // frames already queued were not seen by the new capture: skip them
    p_.pcap = w.get();
    pcap_own_ = std::move(w);     // closes the previous run-time capture, if any
    return true;
}

void EngineImpl::apply_pcap_toggle() {
    std::unique_ptr<PcapToggle> t(pcap_toggle_.exchange(nullptr, std::memory_order_acq_rel));
    if (!t) return;
    std::string e;
    if (!pcap_switch(*t, &e)) log::core(p_.core)->warn("pcap on: {}; this engine does not capture", e);
}

void EngineImpl::enqueue_tx(rte_mbuf* m) {
    if (txq_.size() >= kTxQueueMax) {
        ++st_.tx_overflow;
        warn(Warn::TxOverflow);
        rte_pktmbuf_free(m);
        return;
    }
    txq_.push_back(m);
}

void EngineImpl::flush_tx() {
    if (p_.pcap) p_.pcap->write_mbufs(txq_.data() + txq_captured_, txq_.size() - txq_captured_, clock_.now());
    size_t sent = 0;
    while (sent < txq_.size()) {
        uint16_t chunk = uint16_t(std::min<size_t>(txq_.size() - sent, 64));
        uint32_t lens[64];
        for (uint16_t i = 0; i < chunk; ++i) lens[i] = txq_[sent + i]->pkt_len;
        uint16_t k = dev_->tx_burst(&txq_[sent], chunk);
        for (uint16_t i = 0; i < k; ++i) st_.tx_bytes += lens[i];
        st_.tx_packets += k;
        sent += k;
        if (k < chunk) {
            ++st_.tx_ring_full;  // the rest waits for the next iteration
            warn(Warn::TxRingFull);
            break;
        }
    }
    if (sent == txq_.size()) txq_.clear();
    else txq_.erase(txq_.begin(), txq_.begin() + ptrdiff_t(sent));
    txq_captured_ = txq_.size();
}


EngineStats EngineImpl::stats() const {
    EngineStats o = st_;
    const tcp::HostStats& h = host_.stats();
    o.tcp_segs_in = h.segs_in;
    o.tcp_drop_wrong_dst = h.drop_wrong_dst;
    o.tcp_drop_no_listener = h.drop_no_listener;
    o.tcp_rst_sent = h.rst_sent;
    o.tcp_drop_backlog_full = h.drop_backlog_full;
    o.tcp_syn_cookies_sent = h.syn_cookies_sent;
    o.tcp_accepted = h.accepted;
    o.tcp_drop_listen_bad = h.drop_listen_bad;
    o.tcp_drop_too_many_conns = h.drop_too_many_conns;
    o.tcp_rst_rate_limited = h.rst_rate_limited;
    o.tcp_syn_cookies_ok = h.syn_cookies_ok;
    o.tcp_syn_cookies_bad = h.syn_cookies_bad;
    if (arena_) o.mem_limit_refused = arena_->core_usage(p_.core).limit_refused;
    if (p_.pcap) o.pcap_frames = p_.pcap->frames(), o.pcap_dropped_cap = p_.pcap->dropped_cap();
    return o;
}

std::unique_ptr<Engine> EngineImpl::create(const EngineParams& p) {
    auto impl = std::make_unique<EngineImpl>(p);
    EngineImpl* raw = impl.get();
    std::unique_ptr<Engine> e(new Engine(std::move(impl)));
    raw->set_owner(e.get());
    return e;
}

std::unique_ptr<Engine> make_engine(const EngineParams& p) { return EngineImpl::create(p); }

} // namespace engine

// ==== public API ==============================================================================

Engine::Engine(std::unique_ptr<engine::EngineImpl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

ListenStatus Engine::listen(uint16_t port, Handler& h) { return impl_->listen(port, h); }
void Engine::unlisten(uint16_t port) { impl_->unlisten(port); }
ConnectStatus Engine::connect(Endpoint remote, Handler& h, Conn* out, const ConnOptions* opts,
                              uint16_t local_port) {
    return impl_->connect(remote, h, out, opts, local_port);
}
TimerId Engine::add_timer(Duration after, std::function<void()> fn) { return impl_->add_timer(after, std::move(fn)); }
bool Engine::cancel_timer(TimerId id) { return impl_->cancel_timer(id); }
bool Engine::add_fd(int fd, uint32_t events, std::function<void(uint32_t)> fn) {
    return impl_->add_fd(fd, events, std::move(fn));
}
bool Engine::remove_fd(int fd) { return impl_->remove_fd(fd); }
uint64_t Engine::at_stop(std::function<void()> fn) { return impl_->at_stop(std::move(fn)); }
void Engine::cancel_at_stop(uint64_t id) { impl_->cancel_at_stop(id); }
void Engine::run() { impl_->run(); }
size_t Engine::poll_once() { return impl_->poll_once(); }
void Engine::stop() { impl_->stop(); }
bool Engine::stopping() const { return impl_->stopping(); }
Instant Engine::now() const { return impl_->now(); }
Instant Engine::loop_time() const { return impl_->loop_time(); }
Instant Engine::event_time() const { return impl_->event_time(); }
unsigned Engine::core() const { return impl_->core(); }
unsigned Engine::index() const { return impl_->index(); }
DispatchMode Engine::dispatch_mode() const { return impl_->dispatch_mode(); }
Ipv4 Engine::local_ip() const { return impl_->local_ip(); }
std::pair<uint16_t, uint16_t> Engine::client_ports() const { return impl_->client_ports(); }
EngineStats Engine::stats() const { return impl_->stats(); }
size_t Engine::connection_count() const { return impl_->connection_count(); }


std::pair<uint16_t, uint16_t> client_port_subrange(unsigned index, unsigned count) {
    const uint32_t total = uint32_t(kClientPortHi) - kClientPortLo + 1;
    if (count == 0) count = 1;
    if (index >= count) index = count - 1;
    uint32_t per = total / count;
    uint32_t lo = kClientPortLo + index * per;
    uint32_t hi = index + 1 == count ? kClientPortHi : lo + per - 1;
    return {uint16_t(lo), uint16_t(hi)};
}

} // namespace crescent
