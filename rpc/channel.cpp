// crescent — the RPC client channel (include/crescent/rpc/channel.hpp).
//
// Calls live in a slot table; a call id is (slot generation << 32 | slot), so
// a reply finds its call in O(1) and a reply for a slot since reused (the
// call hit its deadline) is recognised as late. A slot is Queued (waiting for
// a connection with room: its meta copied, its data slices held) or InFlight
// (encoded and handed to a connection's stream). Deadlines are kept in the slots and
// are scanned when the one engine timer, armed at the earliest, fires.
// Calls made while a delivery of replies is decoded (by the continuations)
// are encoded into their connection's `out` and sent when the decoder
// returns, one send() per connection; other calls are sent at once.
//
// Connections: `server_engines` x `conns_per_engine`; connection i targets
// server engine i % server_engines. Over crescent its local port is chosen so
// that the server's steering rule for that engine (the low bits of the source
// port, bifurcation::spread_by_low_bits) matches it; over the kernel the
// kernel picks the port and the server spreads as it does.
#include <crescent/rpc/channel.hpp>

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <random>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "bifurcation/plan.hpp"
#include "rpc/framing.hpp"

namespace crescent::rpc {

bool parse_load_balance(std::string_view s, LoadBalance* out) {
    if (s == "least-outstanding") *out = LoadBalance::LeastOutstanding;
    else if (s == "round-robin") *out = LoadBalance::RoundRobin;
    else return false;
    return true;
}

namespace {

enum class SlotState : uint8_t { Free, Queued, InFlight };

struct Slot {
    uint32_t gen = 1;
    SlotState state = SlotState::Free;
    bool one_way = false;
    bool ever_sent = false;
    uint32_t conn = 0;
    uint32_t method = 0;
    MethodStats* ms = nullptr;    // the method's stats (unordered_map nodes do not move)
    Instant started;
    Instant deadline;
    std::vector<std::byte> meta;  // Queued: a copy
    std::vector<Slice> data;      // Queued: the caller's slices
    Continuation done;
};

uint64_t make_id(uint32_t slot, uint32_t gen) { return uint64_t(gen) << 32 | slot; }

} // namespace

struct Channel::Impl final : StreamHandler {
    enum class ConnState : uint8_t { Down, Connecting, Up };
    struct Link final : MessageSink {
        Impl* ch = nullptr;
        uint32_t index = 0;
        ConnState state = ConnState::Down;
        Stream* stream = nullptr;  // from connect() until its on_closed()
        std::optional<Decoder> dec;
        Encoder enc;
        uint32_t inflight = 0;
        bool proven = false;       // a reply came on this connection (resets the back-off)
        unsigned target = 0;       // server engine
        unsigned failures = 0;     // consecutive failed attempts
        uint32_t port_try = 0;     // next candidate local port (crescent)
        TimerId retry = 0;
        // Encoded calls not yet handed to the stream: those made during one
        // delivery (Impl::batching; one Stream::send at its end), else one.
        std::vector<Slice> out;
        bool now = false;          // send_now() after the batch goes
        Link(Impl* c, uint32_t i, const ChannelOptions& o) : ch(c), index(i), enc(o.header_block, o.inline_data) { dec.emplace(o.limits); }
        void on_message(Message& m) override { ch->on_reply(*this, m); }
    };

    Engine& e;
    ChannelOptions o;
    ChannelStats st;
    std::vector<Slot> slots;
    std::vector<uint32_t> free_slots;
    std::deque<uint64_t> queue;  // call ids of Queued slots, FIFO (stale ids skipped)
    std::vector<std::unique_ptr<Link>> links;
    TimerId deadline_timer = 0;
    Instant timer_at = Instant::never();
    std::unordered_map<uint32_t, MethodStats> methods;
    std::string last_error;
    Endpoint current;
    bool on_alternate = false;
    unsigned failures_in_row = 0;  // channel-wide, for the fail-over
    bool closed = false;
    uint32_t rr = 0;
    std::mt19937 rng{std::random_device{}()};
    std::vector<bifurcation::PortMatch> spread;
    size_t outstanding = 0;
    bool call_now = false;  // in a delivery's last reply: the next call sent goes at once
    bool batching = false;  // in on_data: calls collect in their link's `out`
    std::vector<Link*> batch;  // links whose `out` the delivery's first call filled

    Impl(Engine& eng, ChannelOptions opts) : e(eng), o(std::move(opts)), current(o.server) {
        if (o.server_engines == 0) o.server_engines = 1;
        if (o.conns_per_engine == 0) o.conns_per_engine = 1;
        if (o.depth == 0) o.depth = 1;
        spread = bifurcation::spread_by_low_bits(o.server_engines);
        uint32_t n = o.server_engines * o.conns_per_engine;
        for (uint32_t i = 0; i < n; ++i) {
            links.push_back(std::make_unique<Link>(this, i, o));
            links.back()->target = i % o.server_engines;
            links.back()->port_try = i / o.server_engines;
        }
        for (auto& l : links) connect(*l);
    }

    ~Impl() override { shut("channel destroyed"); }

    // ---- connections ----------------------------------------------------------------------

    void connect(Link& l) {
        if (closed) return;
        l.retry = 0;
        StreamOptions so = o.stream;
        std::string err;
        Stream* s = nullptr;
        if (o.transport == Transport::Crescent && o.server_engines > 1) {
            // A local port that the server's steering gives to engine `target`.
            auto [lo, hi] = e.client_ports();
            uint32_t span = uint32_t(hi - lo) + 1;
            for (uint32_t tries = 0; tries < span && !s; ++tries) {
                uint16_t p = uint16_t(lo + (l.port_try++ % span));
                if (!spread[l.target].matches(p)) continue;
                so.local_port = p;
                s = rpc::connect(e, o.transport, current, *this, so, &err);
                if (!s && err.find("no free client port") == std::string::npos) break;
            }
        } else {
            s = rpc::connect(e, o.transport, current, *this, so, &err);
        }
        if (!s) {
            fail_attempt(l, err);
            return;
        }
        s->set_user(&l);
        l.stream = s;
        l.state = ConnState::Connecting;
    }

    void fail_attempt(Link& l, const std::string& why) {
        ++st.connect_failures;
        last_error = why;
        l.state = ConnState::Down;
        ++l.failures;
        if (++failures_in_row >= o.failover_after && o.alternate) {
            failures_in_row = 0;
            on_alternate = !on_alternate;
            current = on_alternate ? *o.alternate : o.server;
            ++st.failovers;
        }
        schedule_reconnect(l);
    }

    void schedule_reconnect(Link& l) {
        if (closed || l.retry) return;
        // Exponential back-off with jitter: min * 2^(failures-1), capped, x [0.5, 1.0].
        unsigned shift = std::min(l.failures ? l.failures - 1 : 0u, 20u);
        int64_t d = std::min<int64_t>(o.reconnect_min.count() << shift, o.reconnect_max.count());
        d = d / 2 + int64_t(rng() % uint64_t(d / 2 + 1));
        Impl* self = this;
        uint32_t idx = l.index;
        l.retry = e.add_timer(Duration(d), [self, idx] { self->connect(*self->links[idx]); });
    }

    Link* link_of(Stream& s) { return static_cast<Link*>(s.user()); }

    void on_open(Stream& s) override {
        Link* l = link_of(s);
        if (!l) return;
        l->state = ConnState::Up;
        l->proven = false;  // the back-off resets with the first reply, not here: a server that
                            // accepts and resets at once (an ACL refusal) must not be hammered
        ++st.connects;
        dispatch();
    }

    void on_data(Stream& s, std::span<Slice> data) override {
        Link* l = link_of(s);
        if (!l) return;
        for (const Slice& d : data) st.bytes_in += d.size();
        // Calls the continuations make while this delivery is decoded are
        // encoded into their connection's vector (a burst of small ones into
        // one slice) and leave together, one Stream::send per connection (one
        // writev on the kernel, one Conn::send on crescent).
        const bool outer = std::exchange(batching, true);
        Decoder::DecodeError err = l->dec->feed(data, *l);
        if (!outer) {
            batching = false;
            for (Link* b : batch) flush(*b, std::exchange(b->now, false));
            batch.clear();
        }
        if (err != Decoder::DecodeError::None) {
            ++st.protocol_errors;
            last_error = fmt::format("malformed reply from {}:{}: {}", current.ip.to_string(), current.port,
                                     decode_error_name(err));
            s.abort();
        }
    }

    void on_peer_closed(Stream& s) override { s.close(); }

    void on_closed(Stream& s, std::string_view why) override {
        Link* l = link_of(s);
        if (!l) return;
        s.set_user(nullptr);
        const bool was_up = l->state == ConnState::Up;
        l->state = ConnState::Down;
        l->stream = nullptr;
        l->out.clear();  // their calls fail below with the rest in flight on it
        l->now = false;
        l->dec.emplace(o.limits);
        l->enc.release_block();
        std::string reason = fmt::format("connection to {}:{} {}: {}", current.ip.to_string(), current.port,
                                         was_up ? "lost" : "failed", why);
        // Fail what was in flight on it.
        if (l->inflight) {
            for (uint32_t i = 0; i < slots.size(); ++i) {
                Slot& sl = slots[i];
                if (sl.state == SlotState::InFlight && sl.conn == l->index)
                    complete(i, Status::ConnectionLost, {}, {}, reason);
            }
            l->inflight = 0;
        }
        if (was_up && l->proven) {
            ++st.disconnects;
            last_error = reason;
            schedule_reconnect(*l);
        } else if (was_up) {  // closed before it ever answered: back off as after a failed connect
            ++st.disconnects;
            fail_attempt(*l, reason);
        } else {
            fail_attempt(*l, reason);
        }
        dispatch();  // queued calls may fit on another connection
    }

    // ---- calls --------------------------------------------------------------------------------

    Status call(uint32_t method, std::span<const std::byte> meta, std::span<Slice> data, Continuation done,
                Duration deadline, bool one_way) {
        if (closed) return Status::Shutdown;
        Link* l = queue.empty() ? pick() : nullptr;  // FIFO: queued calls go first
        if (!l && queue.size() >= o.queue_max) {
            ++st.refused_queue_full;
            methods_of(method).record_status(uint32_t(Status::QueueFull));
            return Status::QueueFull;
        }
        uint32_t idx;
        if (!free_slots.empty()) {
            idx = free_slots.back();
            free_slots.pop_back();
        } else {
            idx = uint32_t(slots.size());
            slots.emplace_back();
        }
        Slot& sl = slots[idx];
        sl.one_way = one_way;
        sl.method = method;
        sl.ms = &methods_of(method);
        sl.ever_sent = false;
        sl.started = e.event_time();
        sl.deadline = sl.started + (deadline.count() > 0 ? deadline : o.deadline);
        sl.done = std::move(done);
        ++outstanding;
        ++st.calls;
        ++sl.ms->calls;
        uint64_t id = make_id(idx, sl.gen);
        if (l) {
            send(*l, idx, meta, data);
        } else {
            sl.state = SlotState::Queued;
            sl.meta.assign(meta.begin(), meta.end());
            sl.data.clear();
            for (Slice& s : data)
                if (!s.empty()) sl.data.push_back(std::move(s));
            queue.push_back(id);
            st.queued_now = queue.size();
            st.queued_peak = std::max<uint64_t>(st.queued_peak, queue.size());
        }
        if (!one_way) arm_deadline(sl.deadline);
        return Status::Ok;
    }

    MethodStats& methods_of(uint32_t method) {
        auto [it, fresh] = methods.try_emplace(method);
        if (fresh) {
            it->second.method = method;
            it->second.name = fmt::format("method {}", method);
        }
        return it->second;
    }

    // A connection with room, by the load-balancing policy; nullptr if none.
    Link* pick() {
        Link* best = nullptr;
        const uint32_t n = uint32_t(links.size());
        if (o.lb == LoadBalance::RoundRobin) {
            for (uint32_t k = 0; k < n; ++k) {
                Link* l = links[(rr + k) % n].get();
                if (l->state == ConnState::Up && l->inflight < o.depth) {
                    rr = (rr + k + 1) % n;
                    return l;
                }
            }
            return nullptr;
        }
        for (auto& up : links) {
            Link* l = up.get();
            if (l->state != ConnState::Up || l->inflight >= o.depth) continue;
            if (!best || l->inflight < best->inflight) best = l;
        }
        return best;
    }

    void send(Link& l, uint32_t idx, std::span<const std::byte> meta, std::span<Slice> data) {
        Slot& sl = slots[idx];
        Header h;
        h.kind = sl.one_way ? Kind::OneWay : Kind::Request;
        h.method = sl.method;
        h.call_id = make_id(idx, sl.gen);
        const bool first = l.out.empty();  // outside a delivery always: each call goes at once
        if (!l.enc.encode(h, meta, data, l.out)) {
            complete(idx, Status::Internal, {}, {}, "no zbuf memory to encode the request");
            return;
        }
        const size_t n = l.enc.last_bytes();
        st.bytes_out += n;
        sl.ms->bytes_out += n;
        sl.ever_sent = true;
        if (!sl.one_way) {
            sl.state = SlotState::InFlight;
            sl.conn = l.index;
            ++l.inflight;
        }
        if (batching) {  // on_data sends the delivery's calls when the decoder returns
            if (first) batch.push_back(&l);
            // Made by the continuation of a delivery's last reply: send_now() after the batch.
            l.now |= std::exchange(call_now, false);
        } else {
            flush(l, false);
        }
        if (sl.one_way) complete(idx, Status::Ok, {}, {}, {});
    }

    // Hands the link's encoded calls to its stream (and send_now() when asked for).
    void flush(Link& l, bool now) {
        if (l.out.empty()) return;
        if (Stream* s = l.stream) {
            s->send(std::span<Slice>(l.out));
            if (now) s->send_now();
        }
        l.out.clear();
    }

    // Queued calls onto connections with room, in order.
    void dispatch() {
        while (!queue.empty()) {
            uint64_t id = queue.front();
            uint32_t idx = uint32_t(id);
            Slot& sl = slots[idx];
            if (sl.gen != uint32_t(id >> 32) || sl.state != SlotState::Queued) {
                queue.pop_front();  // completed meanwhile (deadline)
                continue;
            }
            Link* l = pick();
            if (!l) break;
            queue.pop_front();
            std::vector<std::byte> meta = std::move(sl.meta);
            std::vector<Slice> data = std::move(sl.data);
            sl.meta.clear();
            sl.data.clear();
            send(*l, idx, meta, data);
        }
        st.queued_now = queue.size();
    }

    void on_reply(Link& l, Message& m) {
        const Header& h = m.h;
        if (h.kind != Kind::Response && h.kind != Kind::Error) {
            ++st.protocol_errors;
            return;
        }
        uint32_t idx = uint32_t(h.call_id);
        if (idx >= slots.size()) {
            ++st.unknown_replies;
            return;
        }
        Slot& sl = slots[idx];
        if (sl.gen != uint32_t(h.call_id >> 32) || sl.state != SlotState::InFlight || sl.conn != l.index) {
            if (sl.gen > uint32_t(h.call_id >> 32) || sl.state != SlotState::InFlight) ++st.late_replies;
            else ++st.unknown_replies;
            return;
        }
        --l.inflight;
        if (!l.proven) {
            l.proven = true;
            l.failures = 0;
            failures_in_row = 0;
        }
        sl.ms->bytes_in += h.meta_len + h.data_len;
        call_now = m.last;
        if (h.kind == Kind::Error) {
            ++st.server_errors;
            std::string_view why(reinterpret_cast<const char*>(m.meta.data()), m.meta.size());
            complete(idx, Status(h.status), {}, {}, why);
        } else {
            complete(idx, Status(h.status), m.meta, std::span<Slice>(m.data), {});
        }
        m.data.clear();
        dispatch();
        call_now = false;
    }

    // The call's end: stats, the continuation, the slot back to the free list.
    void complete(uint32_t idx, Status status, std::span<const std::byte> meta, std::span<Slice> data,
                  std::string_view why) {
        Slot& sl = slots[idx];
        Continuation done = std::move(sl.done);
        sl.done = nullptr;
        sl.state = SlotState::Free;
        sl.meta.clear();
        sl.data.clear();
        ++sl.gen;
        free_slots.push_back(idx);
        --outstanding;
        Instant now = e.event_time();
        Duration lat = now - sl.started;
        MethodStats& ms = *sl.ms;
        ms.record_status(uint32_t(status));
        ms.latency.record(uint64_t(std::max<int64_t>(0, lat.count())));
        switch (status) {
        case Status::Ok: ++st.ok; break;
        case Status::DeadlineExceeded: ++st.deadline_exceeded, ++st.failed; break;
        case Status::Unavailable: ++st.unavailable, ++st.failed; break;
        case Status::ConnectionLost: ++st.connection_lost, ++st.failed; break;
        case Status::Cancelled: ++st.cancelled, ++st.failed; break;
        default: ++st.failed; break;
        }
        if (done) {
            Reply r;
            r.status = status;
            r.meta = meta;
            r.data = data;
            r.error = why;
            r.latency = lat;
            r.at = now;
            done(r);
        }
    }

    // ---- deadlines ----------------------------------------------------------------------------
    //
    // One engine timer, armed at the earliest deadline of the outstanding
    // calls. When it fires, a scan of the slot table fails the expired calls
    // and finds the next earliest. With the channel's default deadline every
    // new call's deadline is later than the armed one, so a call costs one
    // comparison and the scan runs about once per deadline period — no
    // per-call timer, heap or allocation.

    void arm_deadline(Instant at) {
        if (at >= timer_at) return;
        if (deadline_timer) e.cancel_timer(deadline_timer);
        timer_at = at;
        Impl* self = this;
        deadline_timer = e.add_timer(std::max(Duration(0), at - e.now()), [self] { self->expire(); });
    }

    void expire() {
        deadline_timer = 0;
        timer_at = Instant::never();
        Instant now = e.now();
        Instant next = Instant::never();
        for (uint32_t idx = 0; idx < slots.size(); ++idx) {
            Slot& sl = slots[idx];
            if (sl.state == SlotState::Free || sl.one_way) continue;
            if (sl.deadline > now) {
                next = min(next, sl.deadline);
                continue;
            }
            if (sl.state == SlotState::InFlight) --links[sl.conn]->inflight;  // a late reply is counted
            const bool queued = sl.state == SlotState::Queued;
            const bool unavailable = queued && connected() == 0;
            std::string why = unavailable ? fmt::format("no connection to {}:{}{}{}", current.ip.to_string(),
                                                        current.port, last_error.empty() ? "" : ": ", last_error)
                                          : std::string("deadline exceeded");
            complete(idx, unavailable ? Status::Unavailable : Status::DeadlineExceeded, {}, {}, why);
        }
        if (!next.is_never()) arm_deadline(next);
        dispatch();
    }

    size_t connected() const {
        size_t n = 0;
        for (auto& l : links) n += l->state == ConnState::Up;
        return n;
    }

    void shut(std::string_view why) {
        if (closed) return;
        closed = true;
        if (deadline_timer) e.cancel_timer(deadline_timer);
        deadline_timer = 0;
        for (auto& l : links) {
            if (l->retry) e.cancel_timer(l->retry);
            l->retry = 0;
            if (Stream* s = std::exchange(l->stream, nullptr)) {
                // The stream outlives us until on_closed: detach it.
                struct Orphan final : StreamHandler {
                    void on_data(Stream&, std::span<Slice>) override {}
                };
                static Orphan orphan;
                s->set_user(nullptr);
                s->set_handler(orphan);
                s->close();
            }
            l->state = ConnState::Down;
            l->inflight = 0;
            l->out.clear();
            l->now = false;
        }
        for (uint32_t i = 0; i < slots.size(); ++i)
            if (slots[i].state != SlotState::Free) complete(i, Status::Cancelled, {}, {}, why);
        queue.clear();
        st.queued_now = 0;
    }
};

Channel::Channel(Engine& e, ChannelOptions o) : impl_(std::make_unique<Impl>(e, std::move(o))) {}
Channel::~Channel() = default;

Status Channel::call(uint32_t method, std::span<const std::byte> meta, std::span<Slice> data, Continuation done,
                     Duration deadline) {
    return impl_->call(method, meta, data, std::move(done), deadline, false);
}

Status Channel::send_one_way(uint32_t method, std::span<const std::byte> meta, std::span<Slice> data) {
    return impl_->call(method, meta, data, nullptr, Duration(0), true);
}

void Channel::close() { impl_->shut("channel closed"); }
size_t Channel::connected() const { return impl_->connected(); }
size_t Channel::connections() const { return impl_->links.size(); }
size_t Channel::outstanding() const { return impl_->outstanding; }
size_t Channel::queued() const { return impl_->queue.size(); }
Endpoint Channel::current_server() const { return impl_->current; }
const std::string& Channel::last_error() const { return impl_->last_error; }
const ChannelStats& Channel::stats() const { return impl_->st; }

std::vector<ConnStats> Channel::connection_stats() const {
    std::vector<ConnStats> v;
    for (auto& l : impl_->links)
        if (l->stream && l->state == Impl::ConnState::Up) v.push_back(l->stream->conn_stats());
    return v;
}
Engine& Channel::engine() const { return impl_->e; }

std::vector<MethodStats> Channel::method_stats() const {
    std::vector<MethodStats> v;
    for (auto& [id, m] : impl_->methods) v.push_back(m);
    std::sort(v.begin(), v.end(), [](const MethodStats& a, const MethodStats& b) { return a.method < b.method; });
    return v;
}

} // namespace crescent::rpc
