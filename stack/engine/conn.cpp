// crescent — the Conn operations of the engine (send, read, close, stats):
// the application's calls on one connection, queued into the Host and
// flushed by the loop (see engine_impl.hpp, "collect-then-act").
#include "stack/engine/engine_impl.hpp"

#include <algorithm>
#include <cstring>

namespace crescent {
namespace engine {
// ---- Conn operations ------------------------------------------------------------------------

SendStatus EngineImpl::conn_send(uint32_t index, uint32_t gen, std::span<Slice> iov) {
    ConnState* s = state_of(index, gen);
    tcp::ConnId id{index, gen};
    const tcp::Tcb* t = s ? host_.find(id) : nullptr;
    if (!t) return SendStatus::Closed;
    size_t total = 0;
    for (const Slice& sl : iov) total += sl.size();
    if (total == 0) return SendStatus::Ok;
    if (t->send_space() < total) {
        s->want_writable = true;
        s->want_bytes = total;
        return SendStatus::WouldBlock;
    }
    for (Slice& sl : iov) {
        if (sl.empty()) continue;
        tcp::SendResult r = host_.send(id, sl);
        if (r == tcp::SendResult::InvalidState) return SendStatus::Closed;
        if (r == tcp::SendResult::WouldBlock) {
            // Space was checked above; the TCB refused anyway (e.g. its slice
            // ring is full). What it took stays queued; the rest is the caller's.
            s->want_writable = true;
            s->want_bytes = sl.size();
            mark_flush();
            return SendStatus::WouldBlock;
        }
    }
    mark_flush();
    return SendStatus::Ok;
}

SendStatus EngineImpl::conn_send_copy(uint32_t index, uint32_t gen, std::span<const std::byte> bytes) {
    ConnState* s = state_of(index, gen);
    tcp::ConnId id{index, gen};
    const tcp::Tcb* t = s ? host_.find(id) : nullptr;
    if (!t) return SendStatus::Closed;
    if (bytes.empty()) return SendStatus::Ok;
    if (t->send_space() < bytes.size()) {
        s->want_writable = true;
        s->want_bytes = bytes.size();
        return SendStatus::WouldBlock;
    }
    copy_iov_.clear();
    if (copy_to_slices(*s, bytes) != bytes.size()) {
        copy_iov_.clear();
        wait_for_memory(*s, id);
        return SendStatus::NoMemory;
    }
    SendStatus r = conn_send(index, gen, std::span<Slice>(copy_iov_));
    copy_iov_.clear();
    return r;
}

size_t EngineImpl::copy_to_slices(ConnState& s, std::span<const std::byte> bytes) {
    const std::vector<uint32_t>& classes = arena_->config().size_classes;
    size_t off = 0;
    if (s.copy_obj) {
        const size_t n = std::min<size_t>(s.copy_obj.capacity() - s.copy_used, bytes.size());
        std::memcpy(s.copy_obj.data() + s.copy_used, bytes.data(), n);
        copy_iov_.push_back(Slice(s.copy_obj.share(), s.copy_used, n));
        s.copy_used += uint32_t(n);
        off = n;
        if (s.copy_used == s.copy_obj.capacity()) s.copy_obj.reset();
    }
    // The class to try first, then down as refused: the largest (fewest
    // slices); under max_memory the one received payloads take, so that the
    // engine's few zones serve both and none has to change class while
    // partly used (a zone held by one class is lost to the others).
    size_t cls = p_.cfg.max_memory != 0 ? copy_class_ + 1 : classes.size();
    while (off < bytes.size() && cls > 0) {
        const size_t n = std::min<size_t>(classes[cls - 1], bytes.size() - off);
        Slice sl = arena_->alloc_slice(n);
        if (!sl) {
            --cls;  // smaller objs may still be free (another class's zones)
            continue;
        }
        std::memcpy(sl.data(), bytes.data() + off, n);
        if (n < sl.buf().capacity()) {  // room behind: the next write goes there
            s.copy_obj = sl.buf().share();
            s.copy_used = uint32_t(n);
        }
        copy_iov_.push_back(std::move(sl));
        off += n;
    }
    return off;
}

void EngineImpl::wait_for_memory(ConnState& s, tcp::ConnId id) {
    if (!s.want_memory) {
        s.want_memory = true;
        mem_waiters_.push_back(id);
    }
    if (!mem_retry_armed_) {
        mem_retry_armed_ = true;
        wheel_.add(clock_.now() + std::chrono::milliseconds(1), [this] { retry_memory_waiters(); });
    }
}

void EngineImpl::retry_memory_waiters() {
    mem_retry_armed_ = false;
    std::vector<tcp::ConnId> waiters;
    waiters.swap(mem_waiters_);
    for (tcp::ConnId id : waiters) {
        ConnState* s = state_of(id.index, id.gen);
        if (!s || !s->want_memory) continue;
        s->want_memory = false;
        ++st_.callbacks;
        if (s->handler) s->handler->on_writable(handle(id));  // may call wait_for_memory() again
    }
}

size_t EngineImpl::conn_write(uint32_t index, uint32_t gen, const void* buf, size_t len) {
    ConnState* s = state_of(index, gen);
    const tcp::Tcb* t = s ? host_.find(tcp::ConnId{index, gen}) : nullptr;
    if (!t || len == 0) return 0;
    size_t n = std::min<size_t>(len, t->send_space());
    if (n == 0) {
        s->want_writable = true;
        s->want_bytes = 1;
        return 0;
    }
    // As much as memory allows: a short write, not none.
    copy_iov_.clear();
    n = copy_to_slices(*s, std::span<const std::byte>(static_cast<const std::byte*>(buf), n));
    if (n == 0) {
        wait_for_memory(*s, tcp::ConnId{index, gen});
        return 0;
    }
    SendStatus r = conn_send(index, gen, std::span<Slice>(copy_iov_));
    copy_iov_.clear();
    if (r != SendStatus::Ok) return 0;
    if (n < len && (s = state_of(index, gen))) {
        if (t->send_space() == 0) {
            s->want_writable = true;
            s->want_bytes = 1;
        } else {
            wait_for_memory(*s, tcp::ConnId{index, gen});  // short for memory, not space
        }
    }
    return n;
}

size_t EngineImpl::conn_read(uint32_t index, uint32_t gen, void* buf, size_t len) {
    ConnState* s = state_of(index, gen);
    if (!s) return 0;
    auto* out = static_cast<std::byte*>(buf);
    size_t done = 0;
    while (done < len && !s->rxq.empty()) {
        Slice& f = s->rxq.front();
        size_t n = std::min(len - done, f.size());
        std::memcpy(out + done, f.data(), n);
        done += n;
        if (n == f.size()) s->rxq.pop_front();
        else f.remove_prefix(n);
    }
    if (done) {
        s->rxq_bytes -= done;
        host_.consume(tcp::ConnId{index, gen}, uint32_t(done));
    }
    return done;
}

size_t EngineImpl::conn_read_slices(uint32_t index, uint32_t gen, std::vector<Slice>& out, size_t max) {
    ConnState* s = state_of(index, gen);
    if (!s) return 0;
    size_t done = 0;
    while (done < max && !s->rxq.empty()) {
        Slice& f = s->rxq.front();
        if (f.size() <= max - done) {
            done += f.size();
            out.push_back(std::move(f));
            s->rxq.pop_front();
        } else {  // the part that fits, as a second reference; the rest stays queued
            size_t n = max - done;
            out.push_back(f.sub(0, n));
            f.remove_prefix(n);
            done += n;
        }
    }
    if (done) {
        s->rxq_bytes -= done;
        host_.consume(tcp::ConnId{index, gen}, uint32_t(done));
    }
    return done;
}

size_t EngineImpl::conn_readable(uint32_t index, uint32_t gen) const {
    const ConnState* s = state_of(index, gen);
    return s ? s->rxq_bytes : 0;
}

size_t EngineImpl::conn_send_space(uint32_t index, uint32_t gen) const {
    const tcp::Tcb* t = state_of(index, gen) ? host_.find(tcp::ConnId{index, gen}) : nullptr;
    return t ? t->send_space() : 0;
}

void EngineImpl::conn_shutdown(uint32_t index, uint32_t gen) {
    if (!state_of(index, gen)) return;
    host_.shutdown_write(tcp::ConnId{index, gen});
    mark_flush();
}

void EngineImpl::conn_close(uint32_t index, uint32_t gen) {
    if (!state_of(index, gen)) return;
    host_.close(tcp::ConnId{index, gen});
    mark_flush();
}

void EngineImpl::conn_abort(uint32_t index, uint32_t gen) {
    if (!state_of(index, gen)) return;
    host_.abort(tcp::ConnId{index, gen}, clock_.now(), app_act_);
}

Endpoint EngineImpl::conn_local(uint32_t index, uint32_t gen) const {
    const tcp::Tcb* t = state_of(index, gen) ? host_.find(tcp::ConnId{index, gen}) : nullptr;
    if (!t) return {};
    return Endpoint{Ipv4{t->endpoints().local_ip.v}, t->endpoints().local_port};
}

Endpoint EngineImpl::conn_remote(uint32_t index, uint32_t gen) const {
    const tcp::Tcb* t = state_of(index, gen) ? host_.find(tcp::ConnId{index, gen}) : nullptr;
    if (!t) return {};
    return Endpoint{Ipv4{t->endpoints().remote_ip.v}, t->endpoints().remote_port};
}

ConnStats EngineImpl::conn_stats(uint32_t index, uint32_t gen) const {
    ConnStats o;
    const ConnState* s = state_of(index, gen);
    const tcp::Tcb* t = s ? host_.find(tcp::ConnId{index, gen}) : nullptr;
    if (!t) {
        o.state = "CLOSED";
        return o;
    }
    tcp::Stats x = t->stats();
    o.state = tcp::state_name(x.state);
    o.snd_una = x.snd_una;
    o.snd_nxt = x.snd_nxt;
    o.snd_wnd = x.snd_wnd;
    o.rcv_nxt = x.rcv_nxt;
    o.rcv_wnd = x.rcv_wnd;
    o.snd_mss = x.snd_mss;
    o.snd_wscale = x.snd_wscale;
    o.rcv_wscale = x.rcv_wscale;
    o.sack_ok = x.sack_ok;
    o.ts_ok = x.ts_ok;
    o.ecn_ok = x.ecn_ok;
    o.cwnd = x.cwnd;
    o.ssthresh = x.ssthresh;
    o.bytes_in_flight = x.bytes_in_flight;
    o.srtt = x.srtt;
    o.rttvar = x.rttvar;
    o.rto = x.rto;
    o.ack_delay = x.ack_delay;
    o.backoff = x.backoff;
    o.bytes_in = x.bytes_in;
    o.bytes_out = x.bytes_out;
    o.segs_in = x.segs_in;
    o.segs_out = x.segs_out;
    o.bytes_retransmitted = x.bytes_retransmitted;
    o.retrans_timeout = x.retrans_timeout;
    o.retrans_fast = x.retrans_fast;
    o.retrans_sack = x.retrans_sack;
    o.fast_recoveries = x.fast_recoveries;
    o.dupacks = x.dupacks;
    o.ooo_segments = x.ooo_segments;
    o.zero_window_events = x.zero_window_events;
    o.keepalive_probes = x.keepalive_probes;
    o.fast_path = x.fast_path;
    o.drops = x.drop_not_acceptable + x.drop_paws + x.drop_bad_ack + x.drop_rst_invalid + x.drop_no_room +
              x.drop_no_ack + x.drop_after_close;
    o.drop_out_of_window = x.drop_not_acceptable;
    o.drop_paws = x.drop_paws;
    o.drop_no_room = x.drop_no_room;
    o.dsacks_sent = x.dsacks_sent;
    o.retrans_rescue = x.retrans_rescue;
    o.undo_recoveries = x.undo_recoveries;
    o.undo_rtos = x.undo_rtos;
    o.reordering = x.reordering;
    o.tlp_probes = x.tlp_probes;
    o.ecn_ce_received = x.ecn_ce_received;
    o.ecn_ece_received = x.ecn_ece_received;
    o.mss_blackhole = x.mss_blackhole;
    o.retrans_probe = x.retrans_probe;
    o.tlp_recoveries = x.tlp_recoveries;
    o.rack_losses = x.rack_losses;
    o.rx_queued = uint32_t(s->rxq_bytes);
    return o;
}

void EngineImpl::conn_set_user(uint32_t index, uint32_t gen, void* p) {
    if (ConnState* s = state_of(index, gen)) s->user = p;
}

void EngineImpl::conn_hold_window(uint32_t index, uint32_t gen) {
    if (ConnState* s = state_of(index, gen)) s->hold_now = true;
}

void EngineImpl::conn_release_window(uint32_t index, uint32_t gen, size_t bytes) {
    ConnState* s = state_of(index, gen);
    if (!s || s->held == 0 || bytes == 0) return;
    const size_t n = std::min(bytes, s->held);
    s->held -= n;
    host_.consume(tcp::ConnId{index, gen}, uint32_t(n));
}

size_t EngineImpl::conn_held_window(uint32_t index, uint32_t gen) const {
    const ConnState* s = state_of(index, gen);
    return s ? s->held : 0;
}

void* EngineImpl::conn_user(uint32_t index, uint32_t gen) const {
    const ConnState* s = state_of(index, gen);
    return s ? s->user : nullptr;
}

} // namespace engine

bool Conn::valid() const { return e_ && e_->conn_valid(index_, gen_); }
bool Conn::send_now() { return e_ ? e_->conn_send_now(index_, gen_) : false; }
SendStatus Conn::send(std::span<Slice> iov) { return e_ ? e_->conn_send(index_, gen_, iov) : SendStatus::Closed; }
SendStatus Conn::send_copy(std::span<const std::byte> b) {
    return e_ ? e_->conn_send_copy(index_, gen_, b) : SendStatus::Closed;
}
size_t Conn::write(const void* buf, size_t len) { return e_ ? e_->conn_write(index_, gen_, buf, len) : 0; }
size_t Conn::read(void* buf, size_t len) { return e_ ? e_->conn_read(index_, gen_, buf, len) : 0; }
size_t Conn::read_slices(std::vector<Slice>& out, size_t max) {
    return e_ ? e_->conn_read_slices(index_, gen_, out, max) : 0;
}
size_t Conn::readable() const { return e_ ? e_->conn_readable(index_, gen_) : 0; }
size_t Conn::send_space() const { return e_ ? e_->conn_send_space(index_, gen_) : 0; }
void Conn::shutdown() { if (e_) e_->conn_shutdown(index_, gen_); }
void Conn::close() { if (e_) e_->conn_close(index_, gen_); }
void Conn::abort() { if (e_) e_->conn_abort(index_, gen_); }
Endpoint Conn::local() const { return e_ ? e_->conn_local(index_, gen_) : Endpoint{}; }
Endpoint Conn::remote() const { return e_ ? e_->conn_remote(index_, gen_) : Endpoint{}; }
ConnStats Conn::stats() const { return e_ ? e_->conn_stats(index_, gen_) : ConnStats{"CLOSED"}; }
void Conn::set_user(void* p) { if (e_) e_->conn_set_user(index_, gen_, p); }
void* Conn::user() const { return e_ ? e_->conn_user(index_, gen_) : nullptr; }
void Conn::hold_window() { if (e_) e_->conn_hold_window(index_, gen_); }
void Conn::release_window(size_t bytes) { if (e_) e_->conn_release_window(index_, gen_, bytes); }
size_t Conn::held_window() const { return e_ ? e_->conn_held_window(index_, gen_) : 0; }
Engine* Conn::engine() const { return e_ ? e_->owner() : nullptr; }

} // namespace crescent
