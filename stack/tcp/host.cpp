// crescent — sans-IO TCP host: demux, listeners, SYN cookies, RSTs, ISNs, timers.
//
// RFC 9293 §3.10.7.1 (segments to CLOSED/unknown ports), §3.10.7.2 (LISTEN),
// RFC 6528 (ISN = M + F(4-tuple, secret), M a 4 µs clock), RFC 4987 §3.6
// (SYN cookies), RFC 6191 spirit (a new SYN may reuse a TIME-WAIT 4-tuple when
// its sequence number is beyond the old connection's).
#include "stack/tcp/host.hpp"
#include "stack/tcp/timer_heap.hpp"

#include "stack/tcp/time_wait.hpp"

#include <algorithm>
#include <cassert>
#include <unordered_map>

namespace crescent::tcp {

using namespace wire::tcp_flags;

namespace {

// ---- SipHash-2-4 (Aumasson & Bernstein), keyed PRF for ISNs and cookies ------
inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct SipState {
    uint64_t v0, v1, v2, v3;
    void round() {
        v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
        v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
        v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
        v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
    }
};

// SipHash-2-4 of `n` 64-bit words (message length 8n bytes).
uint64_t siphash(const std::array<uint64_t, 2>& k, const uint64_t* m, size_t n) {
    SipState s{k[0] ^ 0x736f6d6570736575ull, k[1] ^ 0x646f72616e646f6dull, k[0] ^ 0x6c7967656e657261ull,
               k[1] ^ 0x7465646279746573ull};
    for (size_t i = 0; i < n; ++i) {
        s.v3 ^= m[i];
        s.round();
        s.round();
        s.v0 ^= m[i];
    }
    uint64_t b = uint64_t(n * 8) << 56;
    s.v3 ^= b;
    s.round();
    s.round();
    s.v0 ^= b;
    s.v2 ^= 0xff;
    for (int i = 0; i < 4; ++i) s.round();
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

uint64_t tuple_key(Ipv4Addr remote, uint16_t rport, uint16_t lport) {
    return (uint64_t(remote.v) << 32) | (uint64_t(rport) << 16) | lport;
}

// SYN cookie MSS table (RFC 4987 §3.6: a few common values in 3 bits).
constexpr std::array<uint16_t, 8> kCookieMss{536, 1200, 1300, 1400, 1440, 1460, 4312, 8960};
constexpr int64_t kCookiePeriodNs = 64'000'000'000; // 64 s per counter step

// ---- flat open-addressing map: 4-tuple key -> slot index ---------------------
class FlatMap {
public:
    explicit FlatMap(uint64_t salt) : salt_(salt) { table_.assign(64, Entry{0, kEmpty}); }
    std::optional<uint32_t> find(uint64_t key) const {
        size_t mask = table_.size() - 1;
        for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
            const Entry& e = table_[i];
            if (e.val == kEmpty) return std::nullopt;
            if (e.key == key) return e.val;
        }
    }
    void insert(uint64_t key, uint32_t val) {
        if ((size_ + 1) * 2 > table_.size()) grow();
        put(key, val);
        ++size_;
    }
    void erase(uint64_t key) {
        size_t mask = table_.size() - 1;
        size_t i = hash(key) & mask;
        for (;; i = (i + 1) & mask) {
            if (table_[i].val == kEmpty) return;
            if (table_[i].key == key) break;
        }
        // Backward-shift deletion keeps probe sequences intact without tombstones.
        size_t j = i;
        for (;;) {
            j = (j + 1) & mask;
            if (table_[j].val == kEmpty) break;
            size_t home = hash(table_[j].key) & mask;
            bool between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
            if (between) continue;
            table_[i] = table_[j];
            i = j;
        }
        table_[i] = Entry{0, kEmpty};
        --size_;
    }
    size_t size() const { return size_; }

private:
    static constexpr uint32_t kEmpty = UINT32_MAX;
    struct Entry {
        uint64_t key;
        uint32_t val;
    };
    size_t hash(uint64_t k) const {
        // Salted splitmix64 finalizer: the salt comes from the Host secret so
        // remote peers cannot aim at one probe chain.
        k ^= salt_;
        k = (k ^ (k >> 30)) * 0xbf58476d1ce4e5b9ull;
        k = (k ^ (k >> 27)) * 0x94d049bb133111ebull;
        return size_t(k ^ (k >> 31));
    }
    void put(uint64_t key, uint32_t val) {
        size_t mask = table_.size() - 1;
        size_t i = hash(key) & mask;
        while (table_[i].val != kEmpty) i = (i + 1) & mask;
        table_[i] = Entry{key, val};
    }
    void grow() {
        std::vector<Entry> old;
        old.swap(table_);
        table_.assign(old.size() * 2, Entry{0, kEmpty});
        for (const Entry& e : old)
            if (e.val != kEmpty) put(e.key, e.val);
    }
    std::vector<Entry> table_;
    size_t size_ = 0;
    uint64_t salt_;
};

} // namespace

struct Host::Impl {
    struct Slot {
        std::unique_ptr<Tcb> tcb;
        std::unique_ptr<TimeWait> tw;      // instead of tcb once in TIME-WAIT
        uint32_t gen = 1;
        uint16_t listener = 0;     // listening port while not yet accept()ed (0 = none)
        bool dirty = false;
        uint64_t key = 0;
    };
    struct Listener {
        uint32_t backlog = 0;
        uint32_t pending = 0;      // SYN-RECEIVED + established-but-not-accepted
        std::deque<ConnId> accept_q;
    };

    HostConfig cfg;
    HostStats stats;
    std::vector<Slot> slots;
    std::vector<uint32_t> free_slots;
    FlatMap map;
    std::unordered_map<uint16_t, Listener> listeners;  // setup-time structure; looked up on SYNs only
    TimerHeap timers;                                   // each slot's next deadline (timer_heap.hpp)
    std::vector<uint32_t> dirty;
    size_t live = 0;
    Instant rst_window_start = Instant::from_nanos(INT64_MIN / 2);
    uint32_t rst_count = 0;

    explicit Impl(const HostConfig& c) : cfg(c), map(c.secret[0] ^ rotl(c.secret[1], 17)) {}

    ConnId id_of(uint32_t i) const { return ConnId{i, slots[i].gen}; }

    Tcb* get(ConnId c) {
        if (c.index >= slots.size()) return nullptr;
        Slot& s = slots[c.index];
        return (s.gen == c.gen && s.tcb) ? s.tcb.get() : nullptr;
    }

    uint32_t alloc_slot() {
        if (!free_slots.empty()) {
            uint32_t i = free_slots.back();
            free_slots.pop_back();
            return i;
        }
        slots.emplace_back();
        return uint32_t(slots.size() - 1);
    }

    void free_slot(uint32_t i) {
        Slot& s = slots[i];
        if (s.listener != 0) {
            auto it = listeners.find(s.listener);
            if (it != listeners.end() && it->second.pending > 0) --it->second.pending;
        }
        map.erase(s.key);
        if (s.tw) --stats.time_wait;
        s.tcb.reset();
        s.tw.reset();
        ++s.gen;
        s.listener = 0;
        timers.set(i, Instant::never());
        s.dirty = false;
        free_slots.push_back(i);
        --live;
        stats.conns_live = live;
    }

    SeqNum isn(const Endpoints& ep, Instant now) const {
        uint64_t m[2] = {(uint64_t(ep.local_ip.v) << 32) | ep.remote_ip.v,
                         (uint64_t(ep.local_port) << 16) | ep.remote_port};
        uint32_t f = uint32_t(siphash(cfg.secret, m, 2));
        uint32_t clock = uint32_t(now.nanos() / 4000);  // RFC 6528 §3: M, a 4 µs timer
        return SeqNum(clock + f);
    }

    uint32_t cookie_hash(Ipv4Addr rip, uint16_t rport, uint16_t lport, uint32_t t, uint32_t mss_idx,
                         SeqNum irs) const {
        uint64_t m[3] = {(uint64_t(cfg.local_ip.v) << 32) | rip.v,
                         (uint64_t(lport) << 16) | rport | (uint64_t(t) << 32),
                         (uint64_t(mss_idx) << 32) | irs.raw()};
        std::array<uint64_t, 2> k{cfg.secret[1], cfg.secret[0] ^ 0x636f6f6b6965ull};
        return uint32_t(siphash(k, m, 3)) & 0xffffff;
    }

    // Cookie = t mod 32 (5 bits) | MSS index (3 bits) | 24-bit MAC.
    SeqNum make_cookie(Ipv4Addr rip, uint16_t rport, uint16_t lport, SeqNum irs, uint16_t peer_mss, Instant now) const {
        uint32_t t = uint32_t(now.nanos() / kCookiePeriodNs);
        uint32_t idx = 0;
        for (uint32_t i = 0; i < kCookieMss.size(); ++i)
            if (kCookieMss[i] <= peer_mss) idx = i;
        return SeqNum(((t & 31) << 27) | (idx << 24) | cookie_hash(rip, rport, lport, t, idx, irs));
    }

    // Valid for the current and the previous counter period.
    std::optional<uint16_t> check_cookie(Ipv4Addr rip, uint16_t rport, uint16_t lport, SeqNum irs, SeqNum cookie,
                                         Instant now) const {
        uint32_t c = cookie.raw();
        uint32_t now_t = uint32_t(now.nanos() / kCookiePeriodNs);
        for (uint32_t t : {now_t, now_t - 1}) {
            if ((t & 31) != (c >> 27)) continue;
            uint32_t idx = (c >> 24) & 7;
            if (cookie_hash(rip, rport, lport, t, idx, irs) == (c & 0xffffff)) return kCookieMss[idx];
        }
        return std::nullopt;
    }

    // Slot i has output for the next flush().
    void mark_dirty(uint32_t i) {
        if (slots[i].dirty) return;
        slots[i].dirty = true;
        dirty.push_back(i);
    }

    // Slot i's timer follows its connection's next deadline.
    void arm(uint32_t i) {
        Slot& s = slots[i];
        timers.set(i, s.tw ? s.tw->expires() : s.tcb->next_deadline());
    }

    // After any call into slot i's Tcb: promote passive connections that
    // became ESTABLISHED to the accept queue, free closed TCBs, re-arm timers.
    // The usual call (an established connection that stays so) is the few
    // tests here; what changes the slot is out of line (after_call_rare), so
    // its code stays out of the hot path's lines and registers.
    void after_call(uint32_t i, size_t first_event, Actions& out) {
        Slot& s = slots[i];
        const State st = s.tcb->state();
        if (s.listener != 0 || st == State::Closed || st == State::TimeWait) [[unlikely]] {
            after_call_rare(i, first_event, out);
            return;
        }
        if (s.tcb->ack_owed_at_flush()) mark_dirty(i);  // its held ACK goes at the next flush() (Tcb::hold_ack)
        timers.set(i, s.tcb->next_deadline());
    }

    [[gnu::noinline, gnu::cold]] void after_call_rare(uint32_t i, size_t first_event, Actions& out) {
        Slot& s = slots[i];
        if (s.listener != 0) {  // a passive open not accept()ed yet: did it just become ESTABLISHED?
            const ConnId id = id_of(i);
            for (size_t e = first_event; e < out.events.size(); ++e) {
                if (out.events[e].conn == id && out.events[e].kind == EventKind::Connected) {
                    auto it = listeners.find(s.listener);
                    if (it != listeners.end()) {
                        it->second.accept_q.push_back(id);
                        out.events.push_back(Event{id, EventKind::Acceptable, CloseReason::None, 0, s.listener});
                    }
                    break;
                }
            }
        }
        if (s.tcb->state() == State::Closed) {
            free_slot(i);
            return;
        }
        if (s.tcb->state() == State::TimeWait) {
            // The application heard Closed already; keep only what TIME-WAIT needs.
            s.tw = std::make_unique<TimeWait>(*s.tcb);
            s.tcb.reset();
            s.dirty = false;
            ++stats.time_wait;
        } else if (s.tcb->ack_owed_at_flush()) {
            mark_dirty(i);
        }
        arm(i);
    }

    // A segment for slot i in TIME-WAIT.
    void time_wait_arrives(uint32_t i, const TcpRepr& seg, uint32_t len, Instant now, Actions& out) {
        Slot& s = slots[i];
        s.tw->on_segment(seg, len, now, out);
        arm(i);  // a retransmitted FIN restarts 2*MSL
    }

    // `mss` capped by what the path to `peer` carries (HostConfig::path_mss).
    uint16_t mss_for(Ipv4Addr peer, uint16_t mss) const {
        const uint16_t m = cfg.path_mss ? cfg.path_mss(peer) : 0;
        return m != 0 && m < mss ? m : mss;
    }

    uint32_t new_conn(const Endpoints& ep, const Config& c) {
        uint32_t i = alloc_slot();
        Slot& s = slots[i];
        if (const uint16_t mss = mss_for(ep.remote_ip, c.mss); mss != c.mss) {
            Config capped = c;
            capped.mss = mss;
            s.tcb = std::make_unique<Tcb>(capped, id_of(i), ep);
        } else {
            s.tcb = std::make_unique<Tcb>(c, id_of(i), ep);
        }
        s.key = tuple_key(ep.remote_ip, ep.remote_port, ep.local_port);
        map.insert(s.key, i);
        ++live;
        stats.conns_live = live;
        return i;
    }

    void send_rst_for(Ipv4Addr src, const TcpRepr& seg, size_t len, Instant now, Actions& out) {
        OutSegment o;
        if (!reset_for(seg, len, &o.repr)) return;
        if (cfg.rst_rate_limit != 0) {
            if (now - rst_window_start >= std::chrono::seconds(1)) {
                rst_window_start = now;
                rst_count = 0;
            }
            if (rst_count >= cfg.rst_rate_limit) {
                ++stats.rst_rate_limited;
                return;
            }
            ++rst_count;
        }
        o.src = cfg.local_ip;
        o.dst = src;
        out.segments.push_back(o);
        ++stats.rst_sent;
    }

    // RFC 9293 §3.10.7.2 "If the state is LISTEN".
    void listen_arrives(Listener& l, Ipv4Addr src, uint8_t ip_ecn, const TcpRepr& seg, Slice& payload, Instant now,
                        Actions& out) {
        // first: an incoming RST is ignored.
        if (seg.has(RST)) {
            ++stats.drop_listen_bad;
            return;
        }
        // second: an ACK is bad — unless it completes a SYN-cookie handshake.
        if (seg.has(ACK)) {
            if (cfg.syn_cookies && !seg.has(SYN)) {
                SeqNum irs = seg.seq - 1;
                SeqNum iss = seg.ack - 1;
                if (auto mss = check_cookie(src, seg.src_port, seg.dst_port, irs, iss, now)) {
                    if (live >= cfg.max_connections) {
                        ++stats.drop_too_many_conns;
                        return;
                    }
                    ++stats.syn_cookies_ok;
                    ++stats.accepted;
                    Tcb::CookieParams p;
                    p.iss = iss;
                    p.irs = irs;
                    p.peer_mss = *mss;
                    if (seg.opts.ts && cfg.tcp.timestamps) {
                        // Options we encoded in the low bits of our SYN-ACK TSval.
                        uint32_t enc = seg.opts.ts->tsecr & 0x3f;
                        if ((enc & 0xf) != 0xf) p.peer_wscale = uint8_t(enc & 0xf);
                        p.sack_ok = (enc >> 4) & 1;
                        p.ecn_ok = (enc >> 5) & 1;
                        p.ts_ok = true;
                    }
                    Endpoints ep{cfg.local_ip, src, seg.dst_port, seg.src_port};
                    uint32_t i = new_conn(ep, cfg.tcp);
                    slots[i].listener = seg.dst_port;
                    ++l.pending;
                    size_t ev = out.events.size();
                    slots[i].tcb->accept_cookie(p, seg, now, out);
                    if (!payload.empty()) {
                        // Data on the third ACK: feed it as an ordinary segment.
                        TcpRepr again = seg;
                        slots[i].tcb->on_segment(again, ip_ecn, std::move(payload), now, out);
                    }
                    after_call(i, ev, out);
                    return;
                }
                ++stats.syn_cookies_bad;
            }
            ++stats.drop_listen_bad;
            send_rst_for(src, seg, payload.size(), now, out);
            return;
        }
        // third: a SYN.
        if (!seg.has(SYN)) {
            ++stats.drop_listen_bad;  // fourth: other text or control: drop
            return;
        }
        // A SYN with FIN is no opening a real peer sends (a scan, e.g. nmap's);
        // Linux drops it in LISTEN (tcp_rcv_state_process) and so do we, rather
        // than spend a connection slot and a SYN-ACK on it.
        if (seg.has(FIN)) {
            ++stats.drop_listen_bad;
            return;
        }
        if (l.pending >= l.backlog) {
            if (!cfg.syn_cookies) {
                ++stats.drop_backlog_full;
                return;
            }
            send_cookie_synack(src, ip_ecn, seg, now, out);
            return;
        }
        if (live >= cfg.max_connections) {
            ++stats.drop_too_many_conns;
            return;
        }
        Endpoints ep{cfg.local_ip, src, seg.dst_port, seg.src_port};
        uint32_t i = new_conn(ep, cfg.tcp);
        slots[i].listener = seg.dst_port;
        ++l.pending;
        ++stats.accepted;
        size_t ev = out.events.size();
        slots[i].tcb->accept_syn(seg, ip_ecn, isn(ep, now), now, out);
        after_call(i, ev, out);
    }

    // RFC 4987 §3.6: a stateless SYN-ACK whose ISN is the cookie. With
    // timestamps, the low 6 bits of TSval carry wscale (4 bits, 0xf = none),
    // SACK-permitted and ECN so that the final ACK's TSecr returns them.
    void send_cookie_synack(Ipv4Addr src, uint8_t /*ip_ecn*/, const TcpRepr& syn, Instant now, Actions& out) {
        ++stats.syn_cookies_sent;
        const Config& c = cfg.tcp;
        OutSegment o;
        o.src = cfg.local_ip;
        o.dst = src;
        TcpRepr& r = o.repr;
        r.src_port = syn.dst_port;
        r.dst_port = syn.src_port;
        r.seq = make_cookie(src, syn.src_port, syn.dst_port, syn.seq, syn.opts.mss.value_or(536), now);
        r.ack = syn.seq + 1;
        r.flags = SYN | ACK;
        r.window = uint16_t(std::min<uint32_t>(c.rcv_buf, 0xffff));
        r.opts.mss = mss_for(src, c.mss);
        if (syn.opts.ts && c.timestamps) {
            uint8_t ws = 0xf;
            if (c.window_scale && syn.opts.wscale) {
                uint8_t s = 0;
                while (s < 14 && (c.rcv_buf >> s) > 0xffff) ++s;
                r.opts.wscale = s;
                ws = std::min<uint8_t>(*syn.opts.wscale, 14);
            }
            bool sack = c.sack && syn.opts.sack_permitted;
            bool ecn = syn.has(ECE) && syn.has(CWR) && c.ecn != EcnMode::Off &&
                       (c.ecn == EcnMode::On || c.cc == CcAlgo::Dctcp);
            r.opts.sack_permitted = sack;
            if (ecn) r.flags |= ECE;
            uint32_t ts_offset = r.seq.raw() * 2654435761u;  // as the Tcb will use (Tcb::accept_cookie)
            uint32_t tsval = ((uint32_t(now.nanos() / 1000) + ts_offset) & ~0x3fu) | ws | (uint32_t(sack) << 4) | (uint32_t(ecn) << 5);
            r.opts.ts = wire::Timestamps{tsval, syn.opts.ts->tsval};
        }
        out.segments.push_back(o);
    }
};

Host::Host(const HostConfig& cfg) : impl_(std::make_unique<Impl>(cfg)) {}
Host::~Host() = default;

const HostStats& Host::stats() const { return impl_->stats; }
size_t Host::connection_count() const { return impl_->live; }
SeqNum Host::isn(const Endpoints& ep, Instant now) const { return impl_->isn(ep, now); }

ListenResult Host::listen(uint16_t port, uint32_t backlog) {
    if (port == 0 || backlog == 0) return ListenResult::InvalidArgument;
    auto [it, inserted] = impl_->listeners.try_emplace(port);
    if (!inserted) return ListenResult::AddressInUse;
    it->second.backlog = backlog;
    return ListenResult::Ok;
}

void Host::unlisten(uint16_t port, Instant now, Actions& out) {
    auto it = impl_->listeners.find(port);
    if (it == impl_->listeners.end()) return;
    for (uint32_t i = 0; i < impl_->slots.size(); ++i) {
        auto& s = impl_->slots[i];
        if (s.tcb && s.listener == port) {
            s.tcb->abort(now, out);
            impl_->free_slot(i);
        }
    }
    impl_->listeners.erase(it);
}

std::optional<ConnId> Host::accept(uint16_t port) {
    auto it = impl_->listeners.find(port);
    if (it == impl_->listeners.end()) return std::nullopt;
    auto& q = it->second.accept_q;
    while (!q.empty()) {
        ConnId c = q.front();
        q.pop_front();
        if (impl_->get(c) == nullptr) continue;  // closed before it was accepted
        auto& s = impl_->slots[c.index];
        s.listener = 0;
        if (it->second.pending > 0) --it->second.pending;
        return c;
    }
    return std::nullopt;
}

ConnectResult Host::connect(Ipv4Addr remote_ip, uint16_t remote_port, uint16_t local_port, Instant now,
                            Actions& out, ConnId* id, const Config* cfg) {
    if (remote_port == 0 || local_port == 0) return ConnectResult::InvalidArgument;
    if (impl_->map.find(tuple_key(remote_ip, remote_port, local_port))) return ConnectResult::AddressInUse;
    if (impl_->live >= impl_->cfg.max_connections) return ConnectResult::TooManyConnections;
    Endpoints ep{impl_->cfg.local_ip, remote_ip, local_port, remote_port};
    uint32_t i = impl_->new_conn(ep, cfg ? *cfg : impl_->cfg.tcp);
    ++impl_->stats.connects;
    size_t ev = out.events.size();
    impl_->slots[i].tcb->connect(impl_->isn(ep, now), now, out);
    if (id) *id = impl_->id_of(i);
    impl_->after_call(i, ev, out);
    return ConnectResult::Ok;
}

void Host::on_segment(Ipv4Addr src, Ipv4Addr dst, uint8_t ip_ecn, const TcpRepr& seg, Slice payload, Instant now,
                      Actions& out) {
    Impl& m = *impl_;
    ++m.stats.segs_in;
    if (dst != m.cfg.local_ip) {
        ++m.stats.drop_wrong_dst;
        return;
    }
    if (src == dst) {
        // From our own address (RFC 1122 §3.2.1.3: a source that cannot be
        // right): the engine's parse drops these (IpBadSource); a direct
        // caller's must not make us answer ourselves, in a loop.
        ++m.stats.drop_land;
        return;
    }
    if (auto slot = m.map.find(tuple_key(src, seg.src_port, seg.dst_port))) {
        uint32_t i = *slot;
        if (const TimeWait* tw = m.slots[i].tw.get()) {
            // A new SYN for a TIME-WAIT 4-tuple beyond the old sequence space
            // starts a new incarnation (RFC 9293 §3.10.7.4 note, RFC 6191).
            if (seg.has(SYN) && !seg.has(ACK) && !seg.has(RST) && seg.seq - tw->rcv_nxt() > 0 &&
                m.listeners.count(seg.dst_port)) {
                ++m.stats.time_wait_reused;
                m.free_slot(i);
            } else {
                m.time_wait_arrives(i, seg, uint32_t(payload.size()), now, out);
                return;
            }
        } else {
            size_t ev = out.events.size();
            m.slots[i].tcb->on_segment(seg, ip_ecn, std::move(payload), now, out);
            m.after_call(i, ev, out);
            return;
        }
    }
    auto l = m.listeners.find(seg.dst_port);
    if (l == m.listeners.end()) {
        // RFC 9293 §3.10.7.1: no connection — answer with a RST (never to a RST).
        ++m.stats.drop_no_listener;
        m.send_rst_for(src, seg, payload.size(), now, out);
        return;
    }
    m.listen_arrives(l->second, src, ip_ecn, seg, payload, now, out);
}

void Host::on_timer(Instant now, Actions& out) {
    Impl& m = *impl_;
    // Every call below re-keys or removes the slot it fired (arm/free_slot),
    // so each due slot runs once per deadline.
    while (m.timers.top_at() <= now) {
        const uint32_t i = m.timers.top_slot();
        auto& s = m.slots[i];
        if (s.tw) {
            if (s.tw->expires() <= now) m.free_slot(i);  // 2*MSL over
            else m.arm(i);                               // restarted by a FIN
            continue;
        }
        assert(s.tcb);  // free_slot() removes a slot's timer
        size_t ev = out.events.size();
        // The key may be earlier than the deadline (a call that moved it later
        // without re-arming): then this only re-keys.
        if (s.tcb->next_deadline() <= now) s.tcb->on_timer(now, out);
        m.after_call(i, ev, out);
    }
}

Instant Host::next_deadline() const {
    return impl_->timers.top_at();
}

SendResult Host::send(ConnId c, Slice& data) {
    Tcb* t = impl_->get(c);
    if (!t) return SendResult::InvalidState;
    SendResult r = t->send(data);
    if (r == SendResult::Ok) impl_->mark_dirty(c.index);
    return r;
}

void Host::consume(ConnId c, uint32_t bytes) {
    Tcb* t = impl_->get(c);
    if (!t) return;
    t->consume(bytes);
    if (t->has_pending_output()) impl_->mark_dirty(c.index);
}

void Host::shutdown_write(ConnId c) {
    Tcb* t = impl_->get(c);
    if (!t) return;
    t->shutdown_write();
    impl_->mark_dirty(c.index);
}

void Host::close(ConnId c) {
    Tcb* t = impl_->get(c);
    if (!t) return;
    t->close();
    impl_->mark_dirty(c.index);
}

void Host::abort(ConnId c, Instant now, Actions& out) {
    Tcb* t = impl_->get(c);
    if (!t) return;
    size_t ev = out.events.size();
    t->abort(now, out);
    impl_->after_call(c.index, ev, out);
}

void Host::flush(Instant now, Actions& out) {
    Impl& m = *impl_;
    for (size_t k = 0; k < m.dirty.size(); ++k) {
        uint32_t i = m.dirty[k];
        auto& s = m.slots[i];
        if (!s.dirty || !s.tcb) continue;
        s.dirty = false;
        size_t ev = out.events.size();
        s.tcb->flush(now, out);
        m.after_call(i, ev, out);
    }
    m.dirty.clear();
}

bool Host::has_dirty() const { return !impl_->dirty.empty(); }

bool Host::in_time_wait(ConnId c) const {
    if (c.index >= impl_->slots.size()) return false;
    const Impl::Slot& s = impl_->slots[c.index];
    return s.gen == c.gen && s.tw != nullptr;
}

Tcb* Host::find(ConnId c) { return impl_->get(c); }
const Tcb* Host::find(ConnId c) const { return impl_->get(c); }

std::optional<ConnId> Host::lookup(Ipv4Addr remote_ip, uint16_t remote_port, uint16_t local_port) const {
    auto i = impl_->map.find(tuple_key(remote_ip, remote_port, local_port));
    if (!i) return std::nullopt;
    return impl_->id_of(*i);
}

} // namespace crescent::tcp
