// crescent sim — two hosts on a simulated wire (see sim.hpp).
#include "tests/sim/sim.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "tests/sim/frame.hpp"

namespace crescent::sim {

namespace {
Side other(Side s) { return s == Side::A ? Side::B : Side::A; }
} // namespace

SimNet::SimNet(SimConfig cfg) : cfg_(std::move(cfg)), ab_(cfg_.ab), ba_(cfg_.ba) {
    zbuf::Config zc;
    zc.backing = zbuf::Backing::Anonymous;
    zc.bytes = cfg_.arena_bytes;
    std::string err;
    arena_ = zbuf::Arena::create(zc, &err);
    if (!arena_) throw std::runtime_error("sim: zbuf arena: " + err);
    core_ = std::make_unique<zbuf::CoreScope>(0);
    trace_ = std::getenv("CRESCENT_SIM_TRACE") != nullptr;
    if (trace_) {
        // Lost frames too, at the time they were sent, marked LOST.
        for (Side from : {Side::A, Side::B})
            link_from(from).on_lost([this, from](Instant at, const Bytes& frame) {
                wire::Frame fr;
                if (wire::parse_frame(wire::Bytes(frame), wire::Offload{}, &fr) == wire::Drop::None)
                    trace_frame(from, other(from), fr, at, " LOST");
            });
    }
    cfg_.host_a.local_ip = kIpA;
    cfg_.host_b.local_ip = kIpB;
    hosts_[0] = std::make_unique<tcp::Host>(cfg_.host_a);
    hosts_[1] = std::make_unique<tcp::Host>(cfg_.host_b);
}

SimNet::~SimNet() {
    // Everything holding zbufs goes before the arena.
    for (auto& m : eps_) m.clear();
    for (auto& a : acts_) a.clear();
    hosts_[0].reset();
    hosts_[1].reset();
}

Endpoint* SimNet::make_endpoint(Side s, tcp::ConnId id, uint64_t to_send) {
    auto e = std::make_unique<Endpoint>();
    e->side = s;
    e->id = id;
    e->to_send = to_send;
    if (const tcp::Tcb* t = host(s).find(id)) {
        e->local_port = t->endpoints().local_port;
        e->remote_port = t->endpoints().remote_port;
    }
    // The stream of each direction of each connection is distinct.
    e->gen = Rng(uint64_t(e->local_port) << 20 ^ uint64_t(e->remote_port) << 4 ^ uint64_t(s) ^ 0x5eed);
    Endpoint* p = e.get();
    eps_[size_t(s)][key(id)] = std::move(e);
    return p;
}

void SimNet::listen(uint16_t port, uint32_t backlog, uint64_t to_send) {
    if (host(Side::B).listen(port, backlog) != tcp::ListenResult::Ok) throw std::runtime_error("sim: listen failed");
    listen_to_send_[port] = to_send;
}

Endpoint* SimNet::connect(uint16_t local_port, uint16_t port, uint64_t to_send, const tcp::Config* cfg) {
    tcp::ConnId id;
    tcp::Actions& out = acts_[0];
    auto r = host(Side::A).connect(kIpB, port, local_port, now_, out, &id, cfg);
    if (r != tcp::ConnectResult::Ok) return nullptr;
    Endpoint* e = make_endpoint(Side::A, id, to_send);
    dispatch(Side::A);
    return e;
}

void SimNet::listen_echo(uint16_t port, uint32_t backlog, uint32_t whole) {
    listen(port, backlog, 0);
    listen_echo_[port] = whole;
}

// Echo: send back what arrived, consuming it (window reopens) only once the
// send buffer took it — or, echoing whole messages, as it arrives and back
// once a message is complete; FIN after the peer's, once nothing is left.
void SimNet::pump_echo(Endpoint& e) {
    if (!e.connected || e.closed) return;
    tcp::Host& h = host(e.side);
    if (e.peer_fin) {  // the peer sends no more: a part message goes back as it is
        e.echo_ready += e.echo_held;
        e.echo_held = 0;
    }
    while (!e.echo_q.empty()) {
        Slice& front = e.echo_q.front();
        // A whole-message echo sends what is ready; the rest of a slice
        // that straddles a message's end stays.
        const size_t n = e.whole && e.echo_ready < front.size() ? size_t(e.echo_ready) : front.size();
        if (n == 0) break;
        Slice copy = front.sub(0, n);
        tcp::SendResult r = h.send(e.id, copy);
        if (r == tcp::SendResult::WouldBlock) return;
        if (r != tcp::SendResult::Ok) throw std::runtime_error("sim: echo send refused: invalid state");
        e.sent_hash.add(front.data(), n);
        e.queued += n;
        if (e.whole) {
            e.echo_ready -= n;
        } else {
            h.consume(e.id, uint32_t(n));
        }
        if (n == front.size()) {
            e.echo_q.pop_front();
        } else {
            front.remove_prefix(n);
        }
    }
    if (e.peer_fin && !e.close_called && e.echo_q.empty()) {
        e.fin_queued = e.close_called = true;
        h.close(e.id);
    }
}

// Hand the application as much data as the send buffer takes.
void SimNet::pump(Endpoint& e) {
    if (e.echo) return pump_echo(e);
    if (!e.connected || e.closed || e.fin_queued) return;
    tcp::Host& h = host(e.side);
    while (e.queued < e.to_send || e.pending) {
        if (e.ping && !e.pending && e.received < e.queued) return;  // the echo is not back yet
        if (!e.pending) {
            size_t n = size_t(std::min<uint64_t>(e.ping ? e.ping : cfg_.chunk, e.to_send - e.queued));
            if (e.ping) e.ping_sent = now_;
            Slice s = arena_->alloc_slice(n);
            if (!s) throw std::runtime_error("sim: zbuf arena exhausted");
            std::byte* p = s.data();
            size_t i = 0;
            for (; i + 8 <= n; i += 8) {
                uint64_t w = e.gen.next();
                std::memcpy(p + i, &w, 8);
            }
            if (i < n) {
                uint64_t w = e.gen.next();
                std::memcpy(p + i, &w, n - i);
            }
            e.sent_hash.add(p, n);
            e.pending = std::move(s);
        }
        size_t n = e.pending.size();
        tcp::SendResult r = h.send(e.id, e.pending);
        if (r == tcp::SendResult::WouldBlock) return;
        if (r != tcp::SendResult::Ok) throw std::runtime_error("sim: send refused: invalid state");
        e.pending.reset();
        e.queued += n;
    }
    e.fin_queued = true;
    h.shutdown_write(e.id);
    if (e.peer_fin && !e.close_called) {
        e.close_called = true;
        h.close(e.id);
    }
}

void SimNet::handle_event(Side s, const tcp::Event& ev) {
    st_.events++;
    auto& eps = eps_[size_t(s)];
    if (ev.kind == tcp::EventKind::Acceptable) {
        while (auto id = host(s).accept(ev.port)) {
            Endpoint* e = make_endpoint(s, *id, listen_to_send_[ev.port]);
            if (auto echo = listen_echo_.find(ev.port); echo != listen_echo_.end()) {
                e->echo = true;
                e->whole = echo->second;
            }
            e->connected = true;
            e->connected_at = now_;
            touched_.push_back(e);
        }
        return;
    }
    auto it = eps.find(key(ev.conn));
    if (it == eps.end()) return; // e.g. a connection accepted later through Acceptable
    Endpoint& e = *it->second;
    auto snapshot_stats = [&] {
        if (const tcp::Tcb* t = host(s).find(e.id)) e.stats = t->stats();
    };
    switch (ev.kind) {
    case tcp::EventKind::Connected:
        if (!e.connected) {
            e.connected = true;
            e.connected_at = now_;
        }
        touched_.push_back(&e);
        break;
    case tcp::EventKind::Acked:
        // Also here: an endpoint that closed first reaches TIME-WAIT without
        // a Tcb to read when its peer's FIN comes.
        snapshot_stats();
        touched_.push_back(&e);
        break;
    case tcp::EventKind::Writable:
        touched_.push_back(&e);
        break;
    case tcp::EventKind::PeerFin:
        e.peer_fin = true;
        snapshot_stats();
        if (e.echo) {
            touched_.push_back(&e);
            break;
        }
        if (e.fin_queued && !e.close_called) {
            e.close_called = true;
            host(s).close(e.id);
        }
        break;
    case tcp::EventKind::Closed:
        snapshot_stats();
        e.closed = true;
        e.closed_at = now_;
        e.reason = ev.reason;
        e.pending.reset();
        e.echo_q.clear();
        break;
    case tcp::EventKind::Acceptable:
        break;
    }
}

// Run the actions a Host call produced: emit frames, deliver data, handle
// events; then flush what the application did in response, until quiet.
void SimNet::dispatch(Side s) {
    tcp::Host& h = host(s);
    tcp::Actions& out = acts_[size_t(s)];
    Link& link = link_from(s);
    for (int round = 0; round < 64; round++) {
        for (const tcp::OutSegment& seg : out.segments) {
            check_window(s, seg);
            std::array<wire::Bytes, tcp::kMaxTxViews> views;
            for (uint8_t i = 0; i < seg.view_count; i++) views[i] = wire::Bytes(seg.views[i].data, seg.views[i].len);
            if (seg.tso_segsz == 0) {
                link.send(now_, build_frame(seg.src, seg.dst, seg.ip_ecn, seg.repr, std::span(views.data(), seg.view_count)));
                continue;
            }
            // TSO as a NIC does it: tso_segsz-byte pieces, each with the
            // headers, SEQ advanced, FIN/PSH on the last and CWR on the first.
            ++st_.tso_segments;
            const uint32_t total = seg.payload_len();
            uint8_t vi = 0;
            uint32_t voff = 0;
            for (uint32_t off = 0; off < total; off += seg.tso_segsz) {
                const uint32_t len = std::min<uint32_t>(seg.tso_segsz, total - off);
                std::array<wire::Bytes, tcp::kMaxTxViews> piece;
                uint8_t np = 0;
                for (uint32_t got = 0; got < len;) {
                    uint32_t take = std::min<uint32_t>(uint32_t(views[vi].size()) - voff, len - got);
                    piece[np++] = views[vi].subspan(voff, take);
                    got += take;
                    voff += take;
                    if (voff == views[vi].size()) {
                        ++vi;
                        voff = 0;
                    }
                }
                wire::TcpRepr r = seg.repr;
                r.seq = seg.repr.seq + off;
                if (off + len < total) r.flags &= uint8_t(~(wire::tcp_flags::FIN | wire::tcp_flags::PSH));
                if (off != 0) r.flags &= uint8_t(~wire::tcp_flags::CWR);
                ++st_.tso_pieces;
                link.send(now_, build_frame(seg.src, seg.dst, seg.ip_ecn, r, std::span(piece.data(), np)));
            }
        }
        // Events may call back into the host (accept, send, close): take them
        // out first. Accept before looking at data: an accepted connection's
        // first bytes can come in the same batch as its Acceptable event.
        std::vector<tcp::Event> events = std::move(out.events);
        out.events.clear();
        for (const tcp::Event& ev : events)
            if (ev.kind == tcp::EventKind::Acceptable) handle_event(s, ev);
        for (tcp::Readable& r : out.readable) {
            auto it = eps_[size_t(s)].find(key(r.conn));
            uint32_t n = uint32_t(r.data.size());
            if (it != eps_[size_t(s)].end()) {
                Endpoint& e = *it->second;
                e.recv_hash.add(r.data.data(), n);
                e.received += n;
                if (e.ping && n > 0 && e.received == e.queued && !e.pending) {
                    e.round_trips.push_back(now_ - e.ping_sent);
                    touched_.push_back(&e);
                }
                if (e.echo) {  // consumed once echoed (pump_echo), or now when whole messages go back
                    if (n > 0) e.echo_q.push_back(std::move(r.data));
                    touched_.push_back(&e);
                    if (e.whole == 0) continue;
                    e.echo_held += n;
                    e.echo_ready += e.echo_held / e.whole * e.whole;
                    e.echo_held %= e.whole;
                }
            } else {
                st_.unowned_bytes += n;
            }
            r.data.reset();
            h.consume(r.conn, n);
        }
        out.clear();
        for (const tcp::Event& ev : events)
            if (ev.kind != tcp::EventKind::Acceptable) handle_event(s, ev);
        std::vector<Endpoint*> touched;
        touched.swap(touched_);
        for (Endpoint* e : touched) pump(*e);
        h.flush(now_, out);
        if (out.empty()) return;
    }
    throw std::runtime_error("sim: dispatch did not settle");
}

// A data segment must end inside the window its receiver advertised: at or
// before the receiver's RCV.ADV now (it only moves right, so every edge the
// sender can have heard of lies at or before it).
void SimNet::check_window(Side s, const tcp::OutSegment& seg) {
    const uint32_t len = seg.payload_len();
    if (len == 0) return;
    auto it = eps_[size_t(s)].find(key(seg.conn));
    if (it == eps_[size_t(s)].end()) return;
    const Endpoint* peer = peer_of(*it->second);
    const tcp::Tcb* receiver = peer ? host(other(s)).find(peer->id) : nullptr;
    if (!receiver) return;
    const tcp::Stats r = receiver->stats();
    const uint32_t edge = r.rcv_nxt + r.rcv_wnd;
    const uint32_t end = seg.repr.seq.raw() + len;
    if (int32_t(end - edge) <= 0) return;
    if (st_.beyond_window++ == 0) {
        const tcp::Stats m = host(s).find(seg.conn) ? host(s).find(seg.conn)->stats() : tcp::Stats{};
        st_.first_beyond_window = fmt::format(
            "at {:.6f} s {}: {} bytes at seq {} end {} bytes past the receiver's edge {} (rcv.nxt {}); sender "
            "snd.una {} snd.wnd {}", double(now_.nanos()) / 1e9, s == Side::A ? "A>B" : "B>A", len,
            seg.repr.seq.raw(), int32_t(end - edge), edge, r.rcv_nxt, m.snd_una, m.snd_wnd);
    }
}

// One line per frame: when, which way, the TCP header; `what` marks a frame
// the link lost.
void SimNet::trace_frame(Side from, Side to, const wire::Frame& fr, Instant at, const char* what) {
    const wire::TcpRepr& t = fr.tcp;
    std::fprintf(stderr, "%12.6f %c>%c%s %5u>%-5u seq %10u ack %10u %c%c%c%c%c%c len %5zu win %5u ecn %u",
                 double(at.nanos()) / 1e9, from == Side::A ? 'A' : 'B', to == Side::A ? 'A' : 'B', what, t.src_port,
                 t.dst_port, t.seq.raw(), t.ack.raw(), t.has(wire::tcp_flags::SYN) ? 'S' : '.',
                 t.has(wire::tcp_flags::ACK) ? 'A' : '.', t.has(wire::tcp_flags::FIN) ? 'F' : '.',
                 t.has(wire::tcp_flags::RST) ? 'R' : '.', t.has(wire::tcp_flags::ECE) ? 'E' : '.',
                 t.has(wire::tcp_flags::CWR) ? 'C' : '.', fr.payload_len, t.window, fr.ip.ecn);
    if (t.opts.ts) std::fprintf(stderr, " ts %u/%u", t.opts.ts->tsval, t.opts.ts->tsecr);
    for (uint8_t i = 0; i < t.opts.sack_count; i++)
        std::fprintf(stderr, " sack[%u,%u)", t.opts.sack[i].left.raw(), t.opts.sack[i].right.raw());
    std::fprintf(stderr, "\n");
}

void SimNet::deliver(Side to, Bytes frame) {
    st_.frames_in++;
    wire::Frame fr;
    wire::Drop d = wire::parse_frame(wire::Bytes(frame), wire::Offload{}, &fr);
    if (d != wire::Drop::None) {
        st_.rx_drops[size_t(d)]++;
        return;
    }
    if (trace_) trace_frame(other(to), to, fr, now_, "");
    Slice payload;
    if (fr.payload_len) {
        payload = arena_->alloc_slice(fr.payload_len);
        if (!payload) throw std::runtime_error("sim: zbuf arena exhausted (rx)");
        std::memcpy(payload.data(), frame.data() + fr.payload_off, fr.payload_len);
    }
    host(to).on_segment(fr.ip.src, fr.ip.dst, fr.ip.ecn, fr.tcp, std::move(payload), now_, acts_[size_t(to)]);
    dispatch(to);
}

bool SimNet::step() {
    Instant t = std::min({host(Side::A).next_deadline(), host(Side::B).next_deadline(), ab_.next_arrival(),
                          ba_.next_arrival()});
    if (t.is_never()) return false;
    if (t > now_) now_ = t;
    while (auto f = ab_.pop(now_)) deliver(Side::B, std::move(*f));
    while (auto f = ba_.pop(now_)) deliver(Side::A, std::move(*f));
    for (Side s : {Side::A, Side::B}) {
        if (host(s).next_deadline() <= now_) {
            host(s).on_timer(now_, acts_[size_t(s)]);
            dispatch(s);
        }
    }
    return true;
}

bool SimNet::run_until(const std::function<bool()>& done, Duration limit) {
    Instant end = now_ + limit;
    uint64_t same_time = 0;
    Instant last = now_;
    while (!done()) {
        if (now_ > end) return false;
        if (!step()) return done();
        if (now_ == last) {
            if (++same_time > 10'000'000) throw std::runtime_error("sim: no progress of the virtual clock");
        } else {
            same_time = 0;
            last = now_;
        }
    }
    return true;
}

void SimNet::run_for(Duration d) {
    Instant end = now_ + d;
    while (true) {
        Instant t = std::min({host(Side::A).next_deadline(), host(Side::B).next_deadline(), ab_.next_arrival(),
                              ba_.next_arrival()});
        if (t > end) break;
        step();
    }
    now_ = std::max(now_, end);
}

bool SimNet::all_closed() const {
    for (auto& m : eps_)
        for (auto& [k, e] : m)
            if (!e->closed) return false;
    return true;
}

const Endpoint* SimNet::peer_of(const Endpoint& a) const {
    for (auto& [k, e] : eps_[size_t(other(a.side))])
        if (e->local_port == a.remote_port && e->remote_port == a.local_port) return e.get();
    return nullptr;
}

} // namespace crescent::sim
