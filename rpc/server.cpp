// crescent — the RPC server (include/crescent/rpc/server.hpp).
//
// Per connection a Session: the stream, its Decoder (requests, zero-copy data)
// and Encoder (header blocks), the peer address the policies look at, and
// the count of calls handed out and not yet answered. Requests are
// dispatched from the decoder's sink, i.e. on the engine thread inside the
// stream's on_data (inline) or after the burst (batch). The replies (and
// errors) made while one delivery is decoded are encoded into the session's
// `out` and handed to the stream in one send() when the decoder returns.
//
// Backpressure: a session stops reading (Stream::pause_reading) while its
// replies wait above max_backlog bytes or its unanswered calls exceed
// max_pending, and resumes when both are below again, so a client that
// pipelines without reading its replies cannot grow the server's memory.
#include <crescent/rpc/server.hpp>
#include <crescent/rpc/metrics.hpp>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "rpc/framing.hpp"

namespace crescent::rpc {

static constexpr uint32_t kDirectIds = 4096;  // method ids below this index by_id_ directly

struct Server::Session final : MessageSink {
    Server& srv;
    Stream& stream;
    Decoder dec;
    Encoder enc;
    // Encoded replies not yet handed to the stream: those of one delivery
    // while `batching` (one Stream::send at its end), else one message.
    std::vector<Slice> out;
    std::vector<std::byte> meta_spare;  // a request's meta copy, kept for the next (on_message)
    Endpoint remote;          // the client (read once: Conn::remote() is a table lookup)
    uint32_t pending = 0;     // calls handed to handlers, not answered yet
    bool refused = false;     // closed at set-up by the ACL
    bool answer_now = false;  // in the handler of a delivery's last request: its reply goes at once
    bool batching = false;    // in Handler::on_data: replies collect in `out`
    bool now_after = false;   // the batch holds the reply to the delivery's last request: send_now()

    Session(Server& s, Stream& st)
        : srv(s), stream(st), dec(s.o_.limits), enc(s.o_.header_block, s.o_.inline_data), remote(st.remote()) {}

    void on_message(Message& m) override;
    void send_error(uint64_t call_id, uint32_t method, Status st, std::string_view why);
    // Hands `out` to the stream (and send_now() when asked for).
    void flush_out(bool now);
    void update_reading();
};

class Server::Handler final : public StreamHandler {
public:
    explicit Handler(Server& s) : srv_(s) {}
    void on_open(Stream& s) override {
        Server& v = srv_;
        if (!v.policies_.admit_client(s.remote().ip)) {
            ++v.st_.connections_refused;
            s.abort();
            return;
        }
        ++v.st_.connections_accepted;
        ++v.st_.connections_open;
        auto* ss = new Session(v, s);
        v.sessions_.insert(ss);
        s.set_user(ss);
    }
    void on_data(Stream& s, std::span<Slice> data) override {
        auto* ss = static_cast<Session*>(s.user());
        if (!ss) return;  // refused: the abort is on its way
        for (const Slice& d : data) srv_.st_.bytes_in += d.size();
        // Replies to the requests of this delivery are encoded into one
        // vector (a burst of small ones into one slice) and leave together
        // in one Stream::send (one writev on the kernel; one Conn::send on
        // crescent); deferred replies go out when they are made.
        ss->batching = true;
        Decoder::DecodeError e = ss->dec.feed(data, *ss);
        ss->batching = false;
        ss->flush_out(std::exchange(ss->now_after, false));
        if (e != Decoder::DecodeError::None) {
            switch (e) {
            case Decoder::DecodeError::BadMagic: ++srv_.st_.bad_magic; break;
            case Decoder::DecodeError::BadVersion: ++srv_.st_.bad_version; break;
            case Decoder::DecodeError::MetaTooLarge: ++srv_.st_.meta_too_large; break;
            case Decoder::DecodeError::DataTooLarge: ++srv_.st_.data_too_large; break;
            case Decoder::DecodeError::None: break;
            }
            s.abort();  // the stream cannot be resynchronised
            return;
        }
        ss->update_reading();
    }
    void on_drained(Stream& s) override {
        if (auto* ss = static_cast<Session*>(s.user())) ss->update_reading();
    }
    void on_peer_closed(Stream& s) override { s.close(); }
    void on_closed(Stream& s, std::string_view) override {
        auto* ss = static_cast<Session*>(s.user());
        if (!ss) return;
        if (ss->dec.mid_message()) ++srv_.st_.truncated_at_close;
        --srv_.st_.connections_open;
        srv_.sessions_.erase(ss);
        s.set_user(nullptr);
        delete ss;
    }

private:
    Server& srv_;
};

// ---- Session -----------------------------------------------------------------------------------

void Server::Session::on_message(Message& m) {
    Server& v = srv;
    const Header& h = m.h;
    if (h.kind != Kind::Request && h.kind != Kind::OneWay) {
        ++v.st_.bad_kind;
        send_error(h.call_id, h.method, Status::ProtocolError,
                   fmt::format("a server takes requests, not {}", kind_name(h.kind)));
        return;
    }
    const bool one_way = h.kind == Kind::OneWay;
    uint32_t slot = v.method_slot(h.method);
    Method& md = v.methods_[slot];
    ++md.stats.calls;
    md.stats.bytes_in += h.meta_len + h.data_len;
    if (slot == 0) {
        ++v.st_.unknown_method;
        md.stats.record_status(uint32_t(Status::UnknownMethod));
        if (!one_way) send_error(h.call_id, h.method, Status::UnknownMethod, fmt::format("no method {}", h.method));
        return;
    }
    // The request arrived when the engine last polled (no clock read per call):
    // the method's latency includes its wait behind the burst's earlier calls.
    Instant now = v.e_.loop_time();
    // Policies: one predictable branch each when absent.
    if (v.policies_.acl || v.policies_.rate) [[unlikely]] {
        switch (v.policies_.admit_call(remote.ip, h.method, now)) {
        case Policies::Decision::Allow: break;
        case Policies::Decision::Denied:
            ++v.st_.refused_acl;
            md.stats.record_status(uint32_t(Status::PermissionDenied));
            if (!one_way)
                send_error(h.call_id, h.method, Status::PermissionDenied,
                           fmt::format("{} may not call {}", remote.ip.to_string(), md.stats.name));
            return;
        case Policies::Decision::RateLimited:
            ++v.st_.refused_rate;
            md.stats.record_status(uint32_t(Status::RateLimited));
            if (!one_way) send_error(h.call_id, h.method, Status::RateLimited, "rate limit exceeded");
            return;
        }
    }
    if (one_way) ++v.st_.one_way;
    else ++v.st_.requests;
    Call c(&v, stream, h.method, slot, h.call_id, one_way, remote, now, h.data_len);
    if (!m.meta.empty()) {
        c.meta_.swap(meta_spare);  // room from an earlier call
        c.meta_.assign(m.meta.begin(), m.meta.end());
    }
    c.data_.swap(m.data);
    ++pending;
    answer_now = m.last;
    md.handler(c);
    answer_now = false;
    if (!c.pending()) {
        // Answered in the handler (the usual case; or moved out, leaving the
        // vectors empty): they go back with their room, the data vector to
        // the decoder, so that a steady stream of calls allocates nothing.
        c.data_.clear();  // what the reply did not take, released as ~Call would
        m.data.swap(c.data_);
        c.meta_.clear();
        meta_spare.swap(c.meta_);
    }
    // A Call the handler did not move out is answered (or failed) here by its destructor.
}

void Server::Session::send_error(uint64_t call_id, uint32_t method, Status st, std::string_view why) {
    if (!enc.encode_error(call_id, method, st, why, out)) {
        ++srv.st_.no_memory;
        return;
    }
    ++srv.st_.errors_sent;
    srv.st_.bytes_out += enc.last_bytes();
    if (!batching) flush_out(false);
}

void Server::Session::flush_out(bool now) {
    if (out.empty()) return;
    stream.send(std::span<Slice>(out));
    out.clear();
    if (now) stream.send_now();
}

void Server::Session::update_reading() {
    const bool over = stream.backlog_bytes() > srv.o_.max_backlog || pending > srv.o_.max_pending;
    if (over != stream.reading_paused()) {
        if (over) ++srv.st_.reads_paused;
        stream.pause_reading(over);
    }
}

// ---- Server ------------------------------------------------------------------------------------

Server::Server(Engine& e, ServerOptions o) : e_(e), o_(std::move(o)), handler_(std::make_unique<Handler>(*this)) {
    Method unknown;
    unknown.id = ~0u;
    unknown.stats.method = ~0u;
    unknown.stats.name = "(unknown)";
    methods_.push_back(std::move(unknown));
    metrics_slot_ = MetricsRegistry::get().add(e.index());
    metrics_timer_ = e_.add_timer(std::chrono::milliseconds(100), [this] { publish_metrics(); });
}

void Server::publish_metrics() {
    MetricsRegistry::get().publish(metrics_slot_, method_stats());
    metrics_timer_ = e_.add_timer(std::chrono::milliseconds(100), [this] { publish_metrics(); });
}

Server::~Server() {
    e_.cancel_timer(metrics_timer_);
    MetricsRegistry::get().remove(metrics_slot_);
    acceptors_.clear();
    // Abort the open connections.
    // Their streams outlive us until on_closed: hand them a handler that does nothing.
    struct Orphan final : StreamHandler {
        void on_data(Stream&, std::span<Slice>) override {}
    };
    static Orphan orphan;
    for (Session* ss : sessions_) {
        Stream& s = ss->stream;
        s.set_user(nullptr);
        s.set_handler(orphan);
        s.abort();
        delete ss;
    }
    sessions_.clear();
}

bool Server::register_method(uint32_t id, std::string name, MethodHandler h) {
    if (id == ~0u || !h || method_slot(id) != 0) return false;
    Method m;
    m.id = id;
    m.live = true;
    m.handler = std::move(h);
    m.stats.method = id;
    m.stats.name = std::move(name);
    uint32_t slot = uint32_t(methods_.size());
    for (uint32_t i = 1; i < methods_.size(); ++i)
        if (!methods_[i].live && methods_[i].id == id) slot = i;  // re-registration keeps its stats
    if (slot == methods_.size()) methods_.push_back(std::move(m));
    else {  // the counters carry on under the new name
        std::string fresh = std::move(m.stats.name);
        m.stats = std::move(methods_[slot].stats);
        m.stats.name = std::move(fresh);
        methods_[slot] = std::move(m);
    }
    if (id < kDirectIds) {
        if (by_id_.size() <= id) by_id_.resize(id + 1, 0);
        by_id_[id] = slot;
    }
    return true;
}

bool Server::unregister_method(uint32_t id) {
    uint32_t slot = method_slot(id);
    if (slot == 0) return false;
    methods_[slot].live = false;
    methods_[slot].handler = nullptr;
    if (id < kDirectIds) by_id_[id] = 0;
    return true;
}

uint32_t Server::method_slot(uint32_t id) const {
    if (id < kDirectIds) return id < by_id_.size() ? by_id_[id] : 0;
    for (uint32_t i = 1; i < methods_.size(); ++i)
        if (methods_[i].live && methods_[i].id == id) return i;
    return 0;
}

bool Server::listen(Transport t, uint16_t port, std::string* err, Ipv4 bind_ip) {
    auto a = rpc::listen(e_, t, port, *handler_, o_.stream, err, bind_ip);
    if (!a) return false;
    acceptors_.push_back(std::move(a));
    return true;
}

std::vector<ConnStats> Server::connection_stats() const {
    std::vector<ConnStats> v;
    for (const Session* ss : sessions_) v.push_back(ss->stream.conn_stats());
    return v;
}

std::vector<MethodStats> Server::method_stats() const {
    std::vector<MethodStats> v;
    for (const Method& m : methods_)
        if (m.live || m.stats.calls) v.push_back(m.stats);
    return v;
}

bool Server::finish(Call& c, Status st, std::span<const std::byte> meta, std::span<Slice> data, bool error) {
    Method& md = methods_[c.method_slot_];
    md.stats.record_status(uint32_t(st));
    Instant now = e_.now();  // a read per reply: the handler's own time counts (event_time() would make it 0)
    md.stats.latency.record(uint64_t(std::max<int64_t>(0, (now - c.received_).count())));
    Stream* s = c.stream_.get();
    auto* ss = s ? static_cast<Session*>(s->user()) : nullptr;
    if (!ss) {
        ++st_.replies_dropped;
        return false;
    }
    --ss->pending;
    if (c.one_way_) {
        ss->update_reading();
        return true;
    }
    bool ok;
    if (error) {
        std::string_view why(reinterpret_cast<const char*>(meta.data()), meta.size());
        ok = ss->enc.encode_error(c.id_, c.method_, st, why, ss->out);
        if (ok) ++st_.errors_sent;
    } else {
        Header h;
        h.kind = Kind::Response;
        h.method = c.method_;
        h.status = uint32_t(st);
        h.call_id = c.id_;
        ok = ss->enc.encode(h, meta, data, ss->out);
        if (ok) ++st_.replies;
    }
    if (!ok) {
        ++st_.no_memory;
        ss->update_reading();
        return false;
    }
    const size_t n = ss->enc.last_bytes();
    st_.bytes_out += n;
    md.stats.bytes_out += n;
    if (ss->batching) {  // Handler::on_data sends the delivery's replies when the decoder returns
        // The reply to the delivery's last request: send_now() after the batch.
        ss->now_after |= std::exchange(ss->answer_now, false);
        return true;
    }
    ss->flush_out(false);  // a deferred reply (answer_now is only set inside a delivery)
    ss->update_reading();
    return true;
}

// ---- Call --------------------------------------------------------------------------------------

Call::Call(Call&& o) noexcept { *this = std::move(o); }

Call& Call::operator=(Call&& o) noexcept {
    if (this == &o) return *this;
    if (server_) fail(Status::Internal, "handler dropped the call");
    server_ = std::exchange(o.server_, nullptr);
    stream_ = o.stream_;
    method_ = o.method_;
    method_slot_ = o.method_slot_;
    id_ = o.id_;
    one_way_ = o.one_way_;
    transport_ = o.transport_;
    peer_ = o.peer_;
    received_ = o.received_;
    data_len_ = o.data_len_;
    meta_ = std::move(o.meta_);
    data_ = std::move(o.data_);
    return *this;
}

Call::~Call() {
    if (server_) {
        ++server_->st_.handler_dropped;
        fail(Status::Internal, "handler dropped the call");
    }
}

bool Call::reply(std::span<const std::byte> meta, std::span<Slice> data, Status st) {
    if (!server_) return false;
    Server* s = std::exchange(server_, nullptr);
    return s->finish(*this, st, meta, data, false);
}

bool Call::fail(Status st, std::string_view reason) {
    if (!server_) return false;
    Server* s = std::exchange(server_, nullptr);
    if (reason.empty()) reason = status_name(st);
    return s->finish(*this, st, std::as_bytes(std::span(reason.data(), reason.size())), {}, true);
}

} // namespace crescent::rpc
