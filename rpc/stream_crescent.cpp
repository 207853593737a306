// crescent — Stream over a crescent connection (user-space TCP, zero-copy).
//
// One stateless engine Handler (Glue) serves every crescent stream of the
// process: the connection's user pointer is its CrescentStream. Listening
// ports are looked up in a per-thread table when a passive connection opens,
// so an Acceptor can go away while its streams live on.
//
// Receive: inline mode delivers the engine's slices as they come; batch mode
// moves them out of the connection's queue with Conn::read_slices() (still
// zero-copy). Paused reading holds slices in the stream (inline) or leaves
// them in the connection, whose window then closes (batch).
//
// Send: Conn::send() is all or nothing and bounded by the send buffer; the
// stream hands over whatever fits and keeps the rest, in order, until
// on_writable().
//
// Copy API (StreamOptions::copy_api, batch mode only; stream_copy.cpp): the
// same, except that received bytes are copied out with Conn::read() into
// arena objs and sent ones copied in with Conn::write(), slice by slice (a
// short write leaves the rest in the backlog for on_writable()). An arena
// found empty on either path is retried from a 1 ms timer (copy_no_memory).
#include <algorithm>
#include <deque>
#include <map>

#include <fmt/format.h>

#include <crescent/log.hpp>
#include <crescent/rpc/stream.hpp>

#include "rpc/stream_impl.hpp"

namespace crescent::rpc::detail {
namespace {

class CrescentStream;

struct Listening {
    StreamHandler* handler;
    StreamOptions opts;
};
// (engine, port) -> what to do with a passive open. Engine thread only.
std::map<std::pair<Engine*, uint16_t>, Listening>& listening() {
    thread_local std::map<std::pair<Engine*, uint16_t>, Listening> m;
    return m;
}

class Glue final : public Handler {
public:
    void on_connected(Conn c) override;
    void on_data(Conn c, std::span<Slice> data) override;
    void on_readable(Conn c) override;
    void on_writable(Conn c) override;
    void on_peer_closed(Conn c) override;
    void on_closed(Conn c, CloseReason why) override;
};
Glue g_glue;  // stateless: shared by every engine and thread

class CrescentStream final : public Stream {
public:
    CrescentStream(Engine& e, StreamHandler& h, Conn c, bool connected, const StreamOptions& o)
        : Stream(e, Transport::Crescent, h), c_(c),
          copy_(o.copy_api && e.dispatch_mode() == DispatchMode::Batch), read_chunk_(o.read_chunk) {
        open_ = true;  // usable from the start: sends before the handshake wait in the backlog
        connected_ = connected;
        c_.set_user(this);
    }

    bool send(std::span<Slice> iov) override {
        if (!open_ || closing_) return false;
        if (!copy_ && backlog_.empty() && connected_ && !corked_) {
            size_t n = 0;
            for (const Slice& s : iov) n += s.size();
            if (n == 0) return true;
            if (c_.send(iov) == SendStatus::Ok) {
                ++stats_.writes;
                stats_.bytes_out += n;
                return true;
            }
        }
        const bool blocked = !backlog_.empty() && !corked_;
        backlog_.push(iov);
        stats_.backlog_peak = std::max<uint64_t>(stats_.backlog_peak, backlog_.bytes());
        if (corked_) return true;
        if (connected_ && !blocked) flush();
        return true;
    }
    size_t backlog_bytes() const override { return backlog_.bytes(); }

    void send_now() override {
        if (!corked_) c_.send_now();
    }
    void cork() override {
        if (corked_) return;
        corked_ = true;
        corked_blocked_ = !backlog_.empty();  // bytes were already waiting for on_writable()
    }
    void uncork() override {
        if (!corked_) return;
        corked_ = false;
        if (connected_ && open_ && !corked_blocked_ && !backlog_.empty()) flush();
    }

    void pause_reading(bool paused) override {
        if (paused_ == paused) return;
        paused_ = paused;
        if (!paused && (!held_.empty() || c_.readable() != 0) && !resume_armed_) {
            // Deliver from the loop, not from inside the caller's callback.
            resume_armed_ = true;
            StreamRef ref(*this);
            engine_->add_timer(Duration(0), [ref] {
                if (auto* s = static_cast<CrescentStream*>(ref.get())) s->resume();
            });
        }
    }

    void close() override {
        if (!open_ || closing_) return;
        closing_ = true;
        if (backlog_.empty()) c_.close();
    }
    void abort() override {
        if (!open_) return;
        closing_ = true;
        backlog_.clear();
        c_.abort();
    }
    Endpoint local() const override { return c_.local(); }
    Endpoint remote() const override { return c_.remote(); }
    ConnStats conn_stats() const override { return c_.stats(); }

    // --- from the Glue ---
    void connected() {
        connected_ = true;
        handler_->on_open(*this);
        if (!backlog_.empty() && !corked_) flush();
    }
    void data(std::span<Slice> d) {
        if (paused_ || !held_.empty()) {
            for (Slice& s : d)
                if (!s.empty()) held_.push_back(std::move(s));
            return;
        }
        deliver(d);
    }
    void readable() {
        if (paused_) return;  // stays in the connection: its window closes
        rx_.clear();
        if (copy_) {
            bool no_memory = false;
            const size_t n = copy_in(c_, read_chunk_, rx_, &no_memory);
            stats_.bytes_copied_in += n;
            if (no_memory) {
                ++stats_.copy_no_memory;
                arm_retry();
            }
        } else {
            c_.read_slices(rx_);
        }
        if (!rx_.empty()) deliver(std::span<Slice>(rx_));
        rx_.clear();
    }
    void writable() {
        if (!corked_) flush();
        else corked_blocked_ = false;  // space is back: uncork() sends
    }
    void peer_closed() { handler_->on_peer_closed(*this); }
    void closed(CloseReason why) {
        open_ = false;
        backlog_.clear();
        held_.clear();
        c_.set_user(nullptr);
        handler_->on_closed(*this, close_reason_name(why));
        unregister_stream(id_);
        delete this;
    }

private:
    void deliver(std::span<Slice> d) {
        ++stats_.reads;
        for (const Slice& s : d) stats_.bytes_in += s.size();
        handler_->on_data(*this, d);
    }
    void resume() {
        resume_armed_ = false;
        if (paused_ || !open_) return;
        while (!held_.empty() && !paused_ && open_) {
            std::vector<Slice> batch(std::make_move_iterator(held_.begin()), std::make_move_iterator(held_.end()));
            held_.clear();
            deliver(std::span<Slice>(batch));
        }
        if (!paused_ && open_ && c_.readable() != 0) readable();
    }
    // Hand over what the send buffer takes now; on_writable() brings the rest.
    void flush() {
        const bool had = !backlog_.empty();
        if (copy_) {
            bool no_memory = false;
            const size_t n = copy_out(c_, backlog_, &stats_.writes, &no_memory);
            stats_.bytes_out += n;
            stats_.bytes_copied_out += n;
            if (no_memory) {
                ++stats_.copy_no_memory;
                arm_retry();
            }
        }
        while (!copy_ && !backlog_.empty()) {
            std::span<Slice> p = backlog_.pending();
            size_t space = c_.send_space();
            size_t k = 0, n = 0;
            while (k < p.size() && n + p[k].size() <= space) n += p[k++].size();
            if (k > 0) {
                if (c_.send(p.first(k)) != SendStatus::Ok) break;
                ++stats_.writes;
                stats_.bytes_out += n;
                backlog_.consume(n);
                continue;
            }
            if (space > 0) {  // the front slice is larger than the space: send its head
                if (c_.send(p[0].sub(0, space)) != SendStatus::Ok) break;
                ++stats_.writes;
                stats_.bytes_out += space;
                backlog_.consume(space);
                continue;
            }
            c_.send(p.first(1));  // WouldBlock: arms on_writable()
            break;
        }
        if (had && backlog_.empty()) {
            if (closing_) {
                c_.close();
                return;
            }
            handler_->on_drained(*this);
        }
    }

    // Copy API: an arena found empty; read and write again in 1 ms (nothing
    // else would: no new data, no on_writable() may come).
    void arm_retry() {
        if (retry_armed_) return;
        retry_armed_ = true;
        StreamRef ref(*this);
        engine_->add_timer(std::chrono::milliseconds(1), [ref] {
            auto* s = static_cast<CrescentStream*>(ref.get());
            if (!s || !s->open_) return;
            s->retry_armed_ = false;
            if (!s->paused_ && s->c_.readable() != 0) s->readable();
            if (s->open_ && s->connected_ && !s->corked_ && !s->backlog_.empty()) s->flush();
        });
    }

    Conn c_;
    const bool copy_;              // StreamOptions::copy_api in a batch-mode engine
    const size_t read_chunk_;      // copy_api: bytes per read obj
    bool retry_armed_ = false;     // copy_api: arm_retry() pending
    bool corked_ = false;
    bool corked_blocked_ = false;  // corked while bytes waited for on_writable()
    bool connected_ = false;
    bool closing_ = false;
    bool resume_armed_ = false;
    Backlog backlog_;
    std::deque<Slice> held_;  // inline mode, paused: received, not yet delivered
    std::vector<Slice> rx_;   // batch mode scratch
};

CrescentStream* stream_of(Conn c) { return static_cast<CrescentStream*>(c.user()); }

void Glue::on_connected(Conn c) {
    if (auto* s = stream_of(c)) {  // active open
        s->connected();
        return;
    }
    Engine* e = c.engine();
    auto it = listening().find({e, c.local().port});
    if (it == listening().end()) {  // the acceptor is gone
        c.abort();
        return;
    }
    auto* s = new CrescentStream(*e, *it->second.handler, c, true, it->second.opts);
    s->connected();
}
void Glue::on_data(Conn c, std::span<Slice> data) {
    if (auto* s = stream_of(c)) s->data(data);
}
void Glue::on_readable(Conn c) {
    if (auto* s = stream_of(c)) s->readable();
}
void Glue::on_writable(Conn c) {
    if (auto* s = stream_of(c)) s->writable();
}
void Glue::on_peer_closed(Conn c) {
    if (auto* s = stream_of(c)) s->peer_closed();
}
void Glue::on_closed(Conn c, CloseReason why) {
    if (auto* s = stream_of(c)) s->closed(why);
}

class CrescentAcceptor final : public Acceptor {
public:
    CrescentAcceptor(Engine& e, uint16_t port) : e_(e), port_(port) {}
    ~CrescentAcceptor() override {
        e_.unlisten(port_);
        listening().erase({&e_, port_});
    }
    Transport transport() const override { return Transport::Crescent; }
    uint16_t port() const override { return port_; }
    uint64_t accepted() const override { return e_.stats().tcp_accepted; }

private:
    Engine& e_;
    uint16_t port_;
};

} // namespace

std::unique_ptr<Acceptor> listen_crescent(Engine& e, uint16_t port, StreamHandler& h, const StreamOptions& o,
                                          std::string* err) {
    switch (e.listen(port, g_glue)) {
    case ListenStatus::Ok: break;
    case ListenStatus::AddressInUse:
        if (err) *err = "crescent port " + std::to_string(port) + " is already listening on engine " +
                        std::to_string(e.index());
        return nullptr;
    case ListenStatus::InvalidArgument:
        if (err) *err = "crescent port " + std::to_string(port) + " is not a valid listening port";
        return nullptr;
    }
    listening()[{&e, port}] = Listening{&h, o};
    return std::make_unique<CrescentAcceptor>(e, port);
}

Stream* connect_crescent(Engine& e, Endpoint remote, StreamHandler& h, const StreamOptions& o, std::string* err) {
    Conn c;
    ConnectStatus st = e.connect(remote, g_glue, &c, &o.conn, o.local_port);
    const char* why = nullptr;
    switch (st) {
    case ConnectStatus::Ok: return new CrescentStream(e, h, c, false, o);
    case ConnectStatus::NoPort: why = "no free client port on this engine"; break;
    case ConnectStatus::NoRoute: why = "no route to the server"; break;
    case ConnectStatus::TooManyConnections: why = "too many connections"; break;
    case ConnectStatus::InvalidArgument: why = "invalid address, port or local port"; break;
    }
    if (err) *err = fmt::format("crescent connect to {}:{}: {}", remote.ip.to_string(), remote.port, why);
    return nullptr;
}

} // namespace crescent::rpc::detail
