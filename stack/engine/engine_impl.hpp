// crescent — the engine's internals (the run-to-completion loop, Luna §5).
//
// One EngineImpl per lcore. It owns a tcp::Host (every connection and listener
// of this engine), the per-core timing wheel, the TX batch, the epoll set and
// the bookkeeping that maps TCP ConnIds to application handlers. It borrows a
// Device (the queue pair), a NextHop resolver and the process's zbuf arena.
//
// Collect-then-act: every call into the Host appends to an Actions object, and
// `process()` runs it in a fixed order — segments to TX first (their payload
// views are only valid until the next Host call that can drop send-queue
// references), then opening events (Connected / Acceptable), then readable
// data, then the remaining events. Application calls made from callbacks
// (send, close, connect...) only queue work in the Host; the engine flushes it
// after the callbacks return, still inside the same loop iteration.
//
// Threads: everything here runs on the engine's thread, except stop().
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/zbuf.hpp>

#include "stack/engine/clock.hpp"
#include "stack/engine/conn_table.hpp"
#include "stack/engine/device.hpp"
#include "stack/engine/kernel_loop.hpp"
#include "stack/engine/nexthop.hpp"
#include "stack/engine/phase_timer.hpp"
#include "stack/engine/ratelimit.hpp"
#include "stack/engine/stats_publish.hpp"
#include "stack/engine/timer_wheel.hpp"
#include "stack/tcp/host.hpp"
#include "stack/wire/wire.hpp"
#include "zbuf/dpdk.hpp"

namespace crescent::engine {

class PcapWriter;

// How to build an engine (internal: the Runtime or a test fills it in).
struct EngineParams {
    EngineConfig cfg;
    unsigned index = 0;        // engine index in its runtime
    unsigned count = 1;        // engines in the runtime (client port split)
    unsigned core = 0;         // zbuf core id of the engine's thread
    wire::Ipv4Addr ip;         // the engine's local address
    // Borrowed; outlive the engine. dev == nullptr: an engine without a device
    // (kernel-only runtime: kernel fds and timers, run_kernel()); its next hop
    // may be nullptr too (NullDevice / NullNextHop stand in).
    Device* dev = nullptr;
    NextHop* nexthop = nullptr;
    zbuf::Arena* arena = nullptr;
    std::array<uint64_t, 2> secret{};  // ISN / SYN-cookie key (random per process)
    // Override of the client-port sub-range (0 = Luna split by index/count).
    uint16_t client_port_lo = 0, client_port_hi = 0;
    // Neighbour resolution: how long a frame waits for its next hop, and how
    // many frames may wait at once.
    Duration neigh_wait = std::chrono::seconds(3);
    uint32_t neigh_queue = 256;
    // Borrowed (outlives the engine), nullptr = no capture: every frame
    // received and every frame handed to the device is written (pcap.hpp).
    PcapWriter* pcap = nullptr;
};

std::unique_ptr<Engine> make_engine(const EngineParams& p);

// TCP config for connections on a device with `caps` (MSS from the MTU; TSO
// when the device can take it).
tcp::Config tcp_config(const ConnOptions& o, const DeviceCaps& caps);
// The TCP host of an engine: its address, connection defaults and limits.
tcp::HostConfig host_config(const EngineParams& p);

class EngineImpl {
public:
    explicit EngineImpl(const EngineParams& p);
    static std::unique_ptr<Engine> create(const EngineParams& p);
    ~EngineImpl();
    EngineImpl(const EngineImpl&) = delete;
    EngineImpl& operator=(const EngineImpl&) = delete;

    void set_owner(Engine* e) { owner_ = e; }
    Engine* owner() const { return owner_; }

    // --- Engine API ---
    ListenStatus listen(uint16_t port, Handler& h);
    void unlisten(uint16_t port);
    ConnectStatus connect(Endpoint remote, Handler& h, Conn* out, const ConnOptions* opts, uint16_t local_port);
    TimerId add_timer(Duration after, std::function<void()> fn);
    bool cancel_timer(TimerId id) { return wheel_.cancel(id); }
    bool add_fd(int fd, uint32_t events, std::function<void(uint32_t)> fn);
    uint64_t at_stop(std::function<void()> fn) {
        uint64_t id = next_stop_hook_++;
        stop_hooks_.emplace(id, std::move(fn));
        return id;
    }
    void cancel_at_stop(uint64_t id) { stop_hooks_.erase(id); }
    bool remove_fd(int fd);
    void run();
    size_t poll_once();
    void stop() {
        stop_.store(true, std::memory_order_relaxed);
        wake_.notify();  // kernel-only: out of a blocking epoll_wait (async-signal-safe)
    }
    bool stopping() const { return stop_.load(std::memory_order_relaxed); }
    Instant now() const { return clock_.now(); }
    Instant loop_time() const { return loop_now_; }
    Instant event_time() const { return dispatching_ ? loop_now_ : clock_.now(); }
    unsigned core() const { return p_.core; }
    unsigned index() const { return p_.index; }
    DispatchMode dispatch_mode() const { return p_.cfg.mode; }
    Ipv4 local_ip() const { return Ipv4{p_.ip.v}; }
    std::pair<uint16_t, uint16_t> client_ports() const { return {port_lo_, port_hi_}; }
    EngineStats stats() const;
    size_t connection_count() const { return host_.connection_count(); }
    bool kernel_only() const { return kernel_only_; }
    // Any thread: the counters the engine publishes every 10 ms (stats_publish.hpp).
    const StatsPublisher& publisher() const { return pub_; }
    StatsPublisher& publisher() { return pub_; }
    // Abort every open connection (RST) and tell the handlers (EngineStopped).
    void close_all();

    // Run-time capture toggle (the control socket's "pcap on|off"). A capture
    // switched on here is owned by the engine; switching off detaches any
    // capture (also the RuntimeOptions::pcap one, which the Runtime still
    // owns and closes at exit) after flushing it.
    struct PcapToggle {
        bool on = false;
        std::string path;            // this engine's file
        uint32_t snaplen = 0;        // 0 = PcapWriter::kDefaultSnaplen
        uint64_t max_bytes = 0;      // 0 = no cap
    };
    // This engine's thread: apply now; false + *err (one line) when the file
    // cannot be opened (the previous state is kept).
    bool pcap_switch(const PcapToggle& t, std::string* err);
    // Any thread: hand a toggle to the engine, applied at the end of its next
    // loop iteration (one relaxed load per iteration when none is posted);
    // replaces a toggle not applied yet. An open failure is logged there.
    void post_pcap(std::unique_ptr<PcapToggle> t) {
        delete pcap_toggle_.exchange(t.release(), std::memory_order_acq_rel);
    }

    // --- Conn API ---
    bool conn_valid(uint32_t index, uint32_t gen) const { return state_of(index, gen) != nullptr; }
    SendStatus conn_send(uint32_t index, uint32_t gen, std::span<Slice> iov);
    // Conn::send_now() (send_now.cpp): acts while the burst's last frame is handled.
    bool conn_send_now(uint32_t index, uint32_t gen);
    SendStatus conn_send_copy(uint32_t index, uint32_t gen, std::span<const std::byte> bytes);
    size_t conn_write(uint32_t index, uint32_t gen, const void* buf, size_t len);
    size_t conn_read(uint32_t index, uint32_t gen, void* buf, size_t len);
    size_t conn_read_slices(uint32_t index, uint32_t gen, std::vector<Slice>& out, size_t max);
    size_t conn_readable(uint32_t index, uint32_t gen) const;
    size_t conn_send_space(uint32_t index, uint32_t gen) const;
    void conn_shutdown(uint32_t index, uint32_t gen);
    void conn_close(uint32_t index, uint32_t gen);
    void conn_abort(uint32_t index, uint32_t gen);
    Endpoint conn_local(uint32_t index, uint32_t gen) const;
    Endpoint conn_remote(uint32_t index, uint32_t gen) const;
    ConnStats conn_stats(uint32_t index, uint32_t gen) const;
    void conn_set_user(uint32_t index, uint32_t gen, void* p);
    void conn_hold_window(uint32_t index, uint32_t gen);
    void conn_release_window(uint32_t index, uint32_t gen, size_t bytes);
    size_t conn_held_window(uint32_t index, uint32_t gen) const;
    void* conn_user(uint32_t index, uint32_t gen) const;

private:
    friend class StatsPublisher;  // reads the tables below on the engine's thread
    // Application-side state of one connection, indexed by ConnId::index.
    struct ConnState {
        uint32_t gen = 0;
        bool live = false;
        bool connected_notified = false;
        bool want_writable = false;
        bool want_memory = false;      // told NoMemory: on_writable() once memory may be back
        bool hold_now = false;         // inline: hold_window() during this on_data()
        size_t held = 0;               // inline: delivered bytes kept out of the window (hold_window)
        bool ready = false;            // batch: in ready_ (on_readable pending)
        Handler* handler = nullptr;
        void* user = nullptr;
        std::deque<Slice> rxq;         // batch: received, not yet read()
        size_t rxq_bytes = 0;          // == sum of rxq sizes
        size_t want_bytes = 0;         // size of the refused send (on_writable threshold)
        size_t snd_buf = 0;            // the connection's send buffer
        // Copy API: the obj the last copied bytes went into, [0, copy_used)
        // of it handed out (never written again). The next write continues
        // behind them, and the send queue widens its tail over the new bytes:
        // a burst of small writes is one obj, one queue entry and one TX
        // view, not an obj of the smallest class each.
        Zbuf copy_obj;
        uint32_t copy_used = 0;

        // The connection closed (its handler heard on_closed()): what it held
        // goes back; the slot waits for register_conn().
        void retire() {
            live = false;
            rxq.clear();
            rxq_bytes = 0;
            copy_obj.reset();
            handler = nullptr;
        }
    };
    struct PendingFrame {
        rte_mbuf* m;
        wire::Ipv4Addr next_hop_dst;   // the segment's destination (re-resolved)
        Instant deadline;
    };

    // The live connection (index, gen), or nullptr: several times per segment.
    ConnState* state_of(uint32_t index, uint32_t gen) {
        if (index >= conns_.size()) return nullptr;
        ConnState& s = conns_[index];
        return s.live && s.gen == gen ? &s : nullptr;
    }
    const ConnState* state_of(uint32_t index, uint32_t gen) const {
        return const_cast<EngineImpl*>(this)->state_of(index, gen);
    }
    Conn handle(tcp::ConnId id) { return Conn(this, id.index, id.gen); }
    ConnState& register_conn(tcp::ConnId id, Handler* h);

    void rx(Instant now, uint16_t n);  // rx.cpp
    void rx_one(rte_mbuf* m, Instant now, bool zero_copy);
    void deliver_segment(const wire::Frame& f, Slice payload, Instant now);
    void check_rx_pool();              // rx.cpp
    // The application made output (sends, closes) that the loop would send at
    // the end of this iteration. Not ACKs alone: sent early, one that a reply
    // later in the burst would have carried becomes a frame of its own.
    bool app_output_waiting() const { return need_flush_ || !app_act_.empty(); }
    // A chained RX mbuf made linear in place, or nullptr (dropped, counted).
    rte_mbuf* linearize(rte_mbuf* m);
    void process(tcp::Actions& a, Instant now);
    void transmit(const tcp::OutSegment& s, Instant now);
    // Ethernet + IPv4 + TCP headers at p (checksums over `body` unless offloaded).
    void emit_headers(std::byte* p, const tcp::OutSegment& s, const wire::MacAddr& dst_mac, size_t tcp_len,
                      uint32_t payload_len, std::span<const wire::Bytes> body);
    // Zero-copy TX (Luna §6.2 steps 6-8): a header mbuf chained to one extbuf
    // mbuf per TxView of >= kTxAttachMin bytes, each holding a reference on
    // the view's zbuf obj until the device frees it; shorter views copied into
    // the direct tail. nullptr when a view is not in the arena or a pool is
    // empty (the caller then copies). tx_frame.cpp, with the other TX builders.
    rte_mbuf* build_chain(const tcp::OutSegment& s, const wire::MacAddr& dst_mac, size_t tcp_len,
                          uint32_t payload_len);
    // One linear frame (devices without MULTI_SEGS, e.g. af_xdp).
    rte_mbuf* build_copy(const tcp::OutSegment& s, const wire::MacAddr& dst_mac, size_t tcp_len,
                         uint32_t payload_len);
    void set_tx_offload(rte_mbuf* m, size_t tcp_len, uint16_t tso_segsz);
    // A frame's first mbuf (reset, as rte_pktmbuf_alloc gives it), taken from
    // the device's pool one frame ahead of its use (tx_spare_); nullptr when
    // the pool is dry. tx_frame.cpp.
    rte_mbuf* alloc_frame();
    // Asks for tx_spare_'s header and first data lines (alloc_frame; again at
    // each RX burst, since a TX burst since then may have evicted them).
    void prefetch_spare() const {
        if (tx_spare_ == nullptr) return;
        const auto* h = reinterpret_cast<const char*>(tx_spare_);
        rte_prefetch0(h);
        rte_prefetch0(h + RTE_CACHE_LINE_SIZE);
        rte_prefetch0_write(h + tx_data_at_);
        rte_prefetch0_write(h + tx_data_at_ + RTE_CACHE_LINE_SIZE);
    }
    // Segments the device takes per frame of this kind (0: no limit).
    uint16_t max_segs(const tcp::OutSegment& s) const;
    // The payload views as spans for checksumming; returns how many.
    static size_t payload_spans(const tcp::OutSegment& s, std::array<wire::Bytes, tcp::kMaxTxViews>& out);
    void enqueue_tx(rte_mbuf* m);
    void flush_tx();
    void retry_pending(Instant now);
    void pump(Instant now);
    void handle_event(const tcp::Event& ev, Instant now);
    void deliver_inline(tcp::Actions& a, size_t begin, size_t end);
    void run_batch_callbacks(Instant now);
    void mark_flush() { need_flush_ = true; }
    // Copies `bytes` into arena objs appended to copy_iov_: first into the
    // room left behind the connection's last copy (ConnState::copy_obj),
    // then new objs, the largest size class first, smaller ones when a class
    // is refused (any free obj of the engine's core serves). Returns the
    // bytes copied: all of them, or what memory allowed (the caller decides
    // whether a short copy will do).
    size_t copy_to_slices(ConnState& s, std::span<const std::byte> bytes);
    // The connection was refused memory: on_writable() follows, from a 1 ms
    // wheel timer, as long as it keeps being refused (memory comes back as
    // peers acknowledge and the application consumes).
    void wait_for_memory(ConnState& s, tcp::ConnId id);
    void retry_memory_waiters();
    // A received payload of `n` bytes may be copied into the arena: always
    // without max_memory; with it, while the core's live bytes leave
    // rx_headroom_ of the cap to the senders (else received data, which the
    // application may hold unread until its sends go through, could take
    // all of it) — except the next in-order bytes of a connection
    // (rx_in_order()), which may use the headroom: they are what lets the
    // application consume, and what frees the out-of-order data queued
    // behind them (else a connection whose hole-filling retransmission is
    // refused while its reassembly queue holds the memory never recovers).
    bool rx_copy_allowed(size_t n, const wire::Frame& f) {
        if (p_.cfg.max_memory == 0) return true;
        if (arena_->core_live_bytes(p_.core) + n + rx_headroom_ <= p_.cfg.max_memory) return true;
        arena_->drain_returns();  // objs other threads freed count as live until drained
        if (arena_->core_live_bytes(p_.core) + n + rx_headroom_ <= p_.cfg.max_memory) return true;
        return rx_in_order(f);
    }
    bool rx_in_order(const wire::Frame& f) const;
    // The payload of `f` could not be stored: its ACK, window and flags
    // other than FIN (which would sit at the wrong sequence number without
    // the data) still reach TCP; the data is retransmitted by the peer.
    void rx_header_only(const wire::Frame& f, Instant now);
    void poll_fds(Duration timeout);
    // The loop of an engine without a device (kernel_loop.cpp): timers and
    // epoll only, busy or blocking (EngineConfig::kernel_wait); ends with
    // close_all() like run().
    void run_kernel();

    // Data-path events that get a rate-limited warning (ratelimit.hpp): at
    // most one line per kind per second on this engine's logger, on top of
    // the counter each event bumps. `warn()` costs one clock read and one
    // compare unless a line is due.
    enum class Warn : uint8_t { NeighPending, NeighFailed, TxRingFull, TxOverflow, TxNoMbuf, RxNoMemory, Count };
    void warn(Warn k) {
        if (warn_[size_t(k)].hit(clock_.now())) [[unlikely]] warn_line(k);
    }
    void warn_line(Warn k);  // formats and logs the line that is due (engine.cpp)
    std::array<RateLimit, size_t(Warn::Count)> warn_{};

    EngineParams p_;
    Engine* owner_ = nullptr;
    TscClock clock_;
    tcp::Host host_;
    Device* dev_;
    NextHop* nexthop_;
    zbuf::Arena* arena_;
    wire::MacAddr mac_;
    DeviceCaps caps_;
    uint16_t port_lo_, port_hi_;
    uint32_t port_cursor_ = 0;
    uint16_t ip_ident_ = 0;
    uint16_t frame_room_ = 0;          // bytes one TX mbuf can hold
    rte_mbuf* tx_spare_ = nullptr;     // the next frame's mbuf, raw, its lines prefetched (alloc_frame)
    uint32_t tx_data_at_ = 0;          // a reset TX mbuf's data, in bytes from its start
    // Payloads up to this many bytes are copied behind the headers even on
    // devices that take chains (a cache line or two is cheaper to copy than
    // an extra mbuf, an obj reference and a TX descriptor).
    static constexpr uint32_t kTxCopyBreak = 128;
    // In a zero-copy chain, views shorter than this are copied into the
    // chain's direct tail instead of being attached (tx_frame.cpp).
    static constexpr uint32_t kTxAttachMin = 512;
    // Data-less mbufs for attaching send-queue zbufs as external buffers;
    // non-null iff caps_.multi_segs (and its creation succeeded). Owned.
    zbuf::dpdk::AttachPool attach_pool_;

    std::atomic<bool> stop_{false};
    bool kernel_only_ = false;         // no device (p.dev was nullptr): run_kernel()
    WakeFd wake_;                      // kernel-only: stop() wakes a blocked epoll_wait
    TimerWheel wheel_;

    tcp::Actions act_;                 // output of engine-initiated Host calls
    tcp::Actions app_act_;             // output of application-initiated Host calls
    tcp::Actions now_act_;             // output of send_now(): the Host's, flushed from inside rx
    // The application queued work (send, shutdown, close). A consume() that
    // makes a window update due marks the Host's slot dirty instead, so it
    // is flushed at the burst's end without counting as application output.
    bool need_flush_ = false;
    bool closing_all_ = false;         // close_all(): report AbortedLocally as EngineStopped

    StableTable<ConnState> conns_;     // never relocates: ConnState holds a deque of Slices
    std::unordered_map<uint16_t, Handler*> listeners_;
    std::vector<Slice> iov_;           // scratch: one on_data() call
    std::vector<Slice> copy_iov_;      // scratch: send_copy()
    std::vector<tcp::Event> deferred_; // batch mode: events of this burst
    std::vector<tcp::ConnId> ready_;   // batch mode: connections with new data

    std::vector<rte_mbuf*> rx_pkts_;
    std::vector<rte_mbuf*> txq_;       // frames waiting for the NIC (kept across a full ring)
    size_t txq_captured_ = 0;          // p_.pcap: txq_'s first frames already captured
    std::atomic<PcapToggle*> pcap_toggle_{nullptr};  // posted by post_pcap(), owned; taken by the loop
    std::unique_ptr<PcapWriter> pcap_own_;           // a capture switched on at run time
    void apply_pcap_toggle();
    std::deque<PendingFrame> pending_; // frames waiting for their neighbour
    std::vector<tcp::ConnId> mem_waiters_;  // told NoMemory (wait_for_memory)
    bool mem_retry_armed_ = false;          // a wheel timer will call retry_memory_waiters()
    size_t rx_headroom_ = 0;                // max(max_memory / 8, 128 KiB) with a cap
    size_t copy_class_ = 0;                 // with a cap: the size class of an MTU's payload (copy_to_slices)
    static constexpr size_t kTxQueueMax = 16384;

    std::unordered_map<uint64_t, std::function<void()>> stop_hooks_;  // run once by close_all()
    uint64_t next_stop_hook_ = 1;

    int epfd_ = -1;
    std::unordered_map<int, std::function<void(uint32_t)>> fds_;
    uint32_t idle_count_ = 0;
    // RX zero-copy while the RX pool is more than half free (rx()); checked
    // every kPoolCheckBursts bursts, every burst once it is not, by
    // check_rx_pool() once the burst's output is sent. It starts full.
    static constexpr uint32_t kPoolCheckBursts = 16;
    uint32_t pool_check_countdown_ = 0;
    bool pool_roomy_ = true;
    const rte_mempool* pool_to_check_ = nullptr;  // rx() asks check_rx_pool() to look at it
    // EngineConfig::burst_flush_after, or its default for the device (rx.cpp).
    Duration burst_flush_after_ = Duration::max();
    bool reply_at_once_ = false;  // EngineConfig::reply_at_once, in inline mode (send_now.cpp)
    bool at_last_frame_ = false;  // rx(): the burst's last frame is being handled (and reply_at_once_)
    Instant loop_now_{};          // Engine::loop_time(): set where the loop polls for input
    bool dispatching_ = false;    // loop_now_ is the time of what is being handled (event_time())
    // Sets dispatching_ for a scope: the loop's handling of what it polled.
    class Dispatching {
    public:
        explicit Dispatching(bool& flag) : flag_(flag), was_(flag) { flag_ = true; }
        ~Dispatching() { flag_ = was_; }
        Dispatching(const Dispatching&) = delete;
        Dispatching& operator=(const Dispatching&) = delete;

    private:
        bool& flag_;
        bool was_;
    };
    uint32_t phase_countdown_ = 1;  // RX iterations until the next one timed (EngineStats::phase_ns)
    Instant last_fd_poll_{};      // when poll_once() last polled the epoll set (fd_poll_interval)

    EngineStats st_;
    PhaseTimer phases_{clock_, st_};  // the sampled iteration's phase times (poll_once, send_now)
    StatsPublisher pub_;               // snapshots for other threads (tick() per iteration)
};

} // namespace crescent::engine
