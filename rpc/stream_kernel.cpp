// crescent — Stream over a kernel TCP socket, served from the engine's epoll
// set (Engine::add_fd, edge-triggered), so one loop runs crescent and kernel
// connections side by side (Luna §7.2).
//
// Receive: readv() into arena objs — the tail of the current read obj plus a
// fresh one — and the bytes read are handed on as slices of those objs, the
// same shape crescent's RX gives, so everything above is transport-blind.
// Bytes of an obj past what was handed on are still ours to fill on the next
// read (they were never shared). At most kReadsPerEvent readv() calls per
// wake-up; a socket with more waiting is revisited from a zero timer (edge
// triggering reports nothing new for bytes already there).
//
// Send: writev() straight from the slices (at most IOV_MAX per call); the
// kernel copies, so the references are dropped as soon as it returns. What
// does not fit waits in the backlog until EPOLLOUT.
//
// Close: the backlog drains, shutdown(SHUT_WR) sends FIN, and the socket is
// closed when the peer's FIN arrives or close_linger passes (then with RST).
// on_closed() always runs from a timer callback, never from inside a call the
// application made, and the object is deleted right after it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // struct tcp_info with the RFC 4898 counters (glibc's is older)
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fmt/format.h>

#include <crescent/rpc/stream.hpp>

#include "rpc/stream_impl.hpp"

namespace crescent::rpc::detail {
namespace {

constexpr int kReadsPerEvent = 8;
constexpr size_t kMinTail = 512;  // a read obj's tail shorter than this is not worth a readv entry

sockaddr_in to_sockaddr(Endpoint ep) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(ep.port);
    a.sin_addr.s_addr = htonl(ep.ip.v);
    return a;
}

Endpoint from_sockaddr(const sockaddr_in& a) {
    return Endpoint{Ipv4{ntohl(a.sin_addr.s_addr)}, ntohs(a.sin_port)};
}

void tune(int fd, const StreamOptions& o) {
    int one = 1;
    if (o.kernel_nodelay) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (o.kernel_rcvbuf) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &o.kernel_rcvbuf, sizeof o.kernel_rcvbuf);
    if (o.kernel_sndbuf) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &o.kernel_sndbuf, sizeof o.kernel_sndbuf);
}

class KernelStream final : public Stream {
public:
    KernelStream(Engine& e, StreamHandler& h, int fd, const StreamOptions& o, bool connected)
        : Stream(e, Transport::Kernel, h), fd_(fd), o_(o), connected_(connected) {
        open_ = true;
        sockaddr_in a{};
        socklen_t len = sizeof a;
        if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) local_ = from_sockaddr(a);
        len = sizeof a;
        if (getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) remote_ = from_sockaddr(a);
        stop_hook_ = e.at_stop([this] { stop_now(); });
    }
    ~KernelStream() override {
        engine_->cancel_at_stop(stop_hook_);
        if (fd_ >= 0) {
            engine_->remove_fd(fd_);
            ::close(fd_);
        }
    }

    bool watch() {
        StreamRef ref(*this);
        return engine_->add_fd(fd_, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, [ref](uint32_t ev) {
            if (auto* s = static_cast<KernelStream*>(ref.get())) s->on_events(ev);
        });
    }
    void set_remote(Endpoint r) { remote_ = r; }
    void arm_connect_timeout() {
        StreamRef ref(*this);
        connect_timer_ = engine_->add_timer(o_.connect_timeout, [ref] {
            auto* s = static_cast<KernelStream*>(ref.get());
            if (s && !s->connected_ && s->open_) s->finish("connect timeout");
        });
    }

    bool send(std::span<Slice> iov) override {
        if (!open_ || closing_) return false;
        if (backlog_.empty() && connected_ && !corked_) {
            size_t total = 0;
            for (const Slice& s : iov) total += s.size();
            if (total == 0) return true;
            ssize_t n = write_iov(iov);
            if (n < 0) return open_;  // error: finish() is on its way
            if (size_t(n) == total) {
                for (Slice& s : iov) s.reset();
                return true;
            }
            // Keep the unsent rest, in order.
            size_t skip = size_t(n);
            for (Slice& s : iov) {
                if (skip >= s.size()) {
                    skip -= s.size();
                    s.reset();
                } else {
                    s.remove_prefix(skip);
                    skip = 0;
                }
            }
        }
        backlog_.push(iov);
        stats_.backlog_peak = std::max<uint64_t>(stats_.backlog_peak, backlog_.bytes());
        return true;
    }
    size_t backlog_bytes() const override { return backlog_.bytes(); }

    void cork() override {
        if (corked_) return;
        corked_ = true;
        corked_blocked_ = !backlog_.empty();  // already waiting for EPOLLOUT
    }
    void uncork() override {
        if (!corked_) return;
        corked_ = false;
        if (connected_ && open_ && !corked_blocked_) flush();
    }

    void pause_reading(bool paused) override {
        if (paused_ == paused) return;
        paused_ = paused;
        if (!paused) schedule_read();  // bytes may have waited in the socket meanwhile
    }
    void close() override {
        if (!open_ || closing_) return;
        closing_ = true;
        if (backlog_.empty()) half_close();
    }
    void abort() override {
        if (!open_) return;
        linger lg{1, 0};
        setsockopt(fd_, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        finish("aborted locally");
    }
    Endpoint local() const override { return local_; }
    Endpoint remote() const override { return remote_; }
    ConnStats conn_stats() const override {
        ConnStats c;
        c.state = open_ ? "ESTABLISHED" : "CLOSED";
        tcp_info ti{};
        socklen_t len = sizeof ti;
        if (fd_ < 0 || getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return c;
        static constexpr std::string_view kStates[] = {"?", "ESTABLISHED", "SYN-SENT", "SYN-RECEIVED",
                                                       "FIN-WAIT-1", "FIN-WAIT-2", "TIME-WAIT", "CLOSED",
                                                       "CLOSE-WAIT", "LAST-ACK", "LISTEN", "CLOSING"};
        if (ti.tcpi_state < std::size(kStates)) c.state = kStates[ti.tcpi_state];
        c.snd_mss = ti.tcpi_snd_mss;
        c.snd_wscale = ti.tcpi_snd_wscale;
        c.rcv_wscale = ti.tcpi_rcv_wscale;
        c.sack_ok = ti.tcpi_options & TCPI_OPT_SACK;
        c.ts_ok = ti.tcpi_options & TCPI_OPT_TIMESTAMPS;
        c.ecn_ok = ti.tcpi_options & TCPI_OPT_ECN;
        c.cwnd = ti.tcpi_snd_cwnd * ti.tcpi_snd_mss;
        c.ssthresh = ti.tcpi_snd_ssthresh >= 0x7fffffff / std::max(1u, ti.tcpi_snd_mss)
                         ? 0x7fffffff
                         : ti.tcpi_snd_ssthresh * ti.tcpi_snd_mss;
        c.bytes_in_flight = ti.tcpi_unacked * ti.tcpi_snd_mss;
        c.srtt = std::chrono::microseconds(ti.tcpi_rtt);
        c.rttvar = std::chrono::microseconds(ti.tcpi_rttvar);
        c.rto = std::chrono::microseconds(ti.tcpi_rto);
        c.backoff = ti.tcpi_backoff;
        c.bytes_in = ti.tcpi_bytes_received;
        c.bytes_out = ti.tcpi_bytes_acked;
        c.segs_in = ti.tcpi_segs_in;
        c.segs_out = ti.tcpi_segs_out;
        c.bytes_retransmitted = ti.tcpi_bytes_retrans;
        c.retrans_timeout = ti.tcpi_total_retrans;
        return c;
    }

    void opened() {
        connected_ = true;
        handler_->on_open(*this);
    }

private:
    void on_events(uint32_t ev) {
        if (!open_) return;
        if (!connected_) {
            if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
            int soerr = 0;
            socklen_t len = sizeof soerr;
            getsockopt(fd_, SOL_SOCKET, SO_ERROR, &soerr, &len);
            if (soerr != 0) {
                finish(std::strerror(soerr));
                return;
            }
            engine_->cancel_timer(connect_timer_);
            sockaddr_in a{};
            socklen_t al = sizeof a;
            if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &al) == 0) local_ = from_sockaddr(a);
            opened();
            if (!open_) return;
        }
        if (ev & EPOLLOUT) {
            if (corked_) corked_blocked_ = false;  // room again: uncork() writes
            else flush();
        }
        if (open_ && (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) read_some();
    }

    void schedule_read() {
        if (read_armed_ || !open_) return;
        read_armed_ = true;
        StreamRef ref(*this);
        engine_->add_timer(Duration(0), [ref] {
            if (auto* s = static_cast<KernelStream*>(ref.get())) {
                s->read_armed_ = false;
                s->read_some();
            }
        });
    }

    void read_some() {
        if (!open_ || paused_ || eof_) return;
        zbuf::Arena* arena = zbuf::Arena::current();
        for (int round = 0; round < kReadsPerEvent; ++round) {
            if (!open_ || paused_) return;
            // iov[0]: the unused tail of the current read obj; iov[1]: a fresh obj.
            iovec iov[2];
            int n_iov = 0;
            size_t tail = cur_ ? cur_.size() - cur_off_ : 0;
            if (tail >= kMinTail) iov[n_iov++] = {cur_.data() + cur_off_, tail};
            else tail = 0;
            Slice fresh = arena ? arena->alloc_slice(o_.read_chunk) : Slice();
            if (fresh) iov[n_iov++] = {fresh.data(), fresh.size()};
            if (n_iov == 0) {
                finish("out of zbuf memory for reading");
                return;
            }
            ssize_t n = ::readv(fd_, iov, n_iov);
            if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) return;
                finish(std::strerror(errno));
                return;
            }
            if (n == 0) {
                eof_ = true;
                if (closing_ && backlog_.empty()) {
                    finish("closed");
                    return;
                }
                handler_->on_peer_closed(*this);
                return;
            }
            rx_.clear();
            size_t got = size_t(n);
            if (tail > 0) {
                size_t k = std::min(got, tail);
                rx_.push_back(cur_.sub(cur_off_, k));
                cur_off_ += k;
                got -= k;
            }
            if (got > 0) {
                cur_ = std::move(fresh);
                cur_off_ = got;
                rx_.push_back(cur_.sub(0, got));
            }
            ++stats_.reads;
            stats_.bytes_in += size_t(n);
            if (!closing_) handler_->on_data(*this, std::span<Slice>(rx_));
            rx_.clear();
            size_t cap = 0;
            for (int i = 0; i < n_iov; ++i) cap += iov[i].iov_len;
            if (size_t(n) < cap) return;  // the socket is drained
        }
        schedule_read();  // more may be waiting; let the rest of the loop run first
    }

    // writev() as much as the socket takes; -1 after an error (finish() called).
    ssize_t write_iov(std::span<Slice> s) {
        size_t done = 0;
        thread_local std::array<iovec, IOV_MAX> iov;  // the most one writev() takes
        while (!s.empty()) {
            size_t k = 0;
            for (; k < s.size() && k < iov.size(); ++k) iov[k] = {s[k].data(), s[k].size()};
            ssize_t n = ::writev(fd_, iov.data(), int(k));
            if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                finish(std::strerror(errno));
                return -1;
            }
            ++stats_.writes;
            stats_.bytes_out += size_t(n);
            done += size_t(n);
            size_t left = size_t(n);
            size_t i = 0;
            while (i < k && left >= s[i].size()) left -= s[i++].size();
            if (i < k) {
                // Short write: the kernel's buffer is full. Report what went.
                return ssize_t(done);
            }
            s = s.subspan(k);
        }
        return ssize_t(done);
    }

    void flush() {
        if (backlog_.empty() || !open_) return;
        std::span<Slice> p = backlog_.pending();
        size_t total = backlog_.bytes();
        ssize_t n = write_iov(p);
        if (n < 0) return;
        backlog_.consume(size_t(n));
        if (size_t(n) == total) {
            if (closing_) half_close();
            else handler_->on_drained(*this);
        }
    }

    void half_close() {
        ::shutdown(fd_, SHUT_WR);
        if (eof_) {
            finish("closed");
            return;
        }
        StreamRef ref(*this);
        engine_->add_timer(o_.close_linger, [ref] {
            if (auto* s = static_cast<KernelStream*>(ref.get()); s && s->open_) {
                linger lg{1, 0};
                setsockopt(s->fd_, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
                s->finish("closed (peer did not close within the linger time)");
            }
        });
    }

    // The end: the socket goes now, on_closed() and the deletion from a timer.
    void finish(std::string why) {
        if (!open_) return;
        release();
        why_ = std::move(why);
        uint64_t id = id_;
        engine_->add_timer(Duration(0), [id] {
            if (auto* s = static_cast<KernelStream*>(find_stream(id))) s->end();
        });
    }
    void release() {
        open_ = false;
        engine_->remove_fd(fd_);
        ::close(fd_);
        fd_ = -1;
        backlog_.clear();
        cur_.reset();
    }
    void end() {
        handler_->on_closed(*this, why_);
        unregister_stream(id_);
        delete this;
    }
    // The engine stops: no timer will run any more, so everything happens now.
    void stop_now() {
        if (open_) {
            release();
            why_ = "engine stopped";
        }
        end();
    }

    int fd_;
    StreamOptions o_;
    bool connected_;
    bool closing_ = false;
    bool corked_ = false;
    bool corked_blocked_ = false;  // corked while bytes waited for EPOLLOUT
    bool eof_ = false;
    bool read_armed_ = false;
    TimerId connect_timer_ = 0;
    uint64_t stop_hook_ = 0;
    std::string why_;     // finish()'s reason, for on_closed()
    Endpoint local_, remote_;
    Backlog backlog_;
    Slice cur_;           // the obj being filled by reads
    size_t cur_off_ = 0;  // bytes of cur_ already handed on
    std::vector<Slice> rx_;
};

class KernelAcceptor final : public Acceptor {
public:
    KernelAcceptor(Engine& e, int fd, uint16_t port, StreamHandler& h, const StreamOptions& o)
        : e_(e), fd_(fd), port_(port), h_(h), o_(o) {}
    ~KernelAcceptor() override {
        e_.remove_fd(fd_);
        ::close(fd_);
    }
    bool watch() {
        return e_.add_fd(fd_, EPOLLIN, [this](uint32_t) { accept_all(); });
    }
    Transport transport() const override { return Transport::Kernel; }
    uint16_t port() const override { return port_; }
    uint64_t accepted() const override { return accepted_; }

private:
    void accept_all() {
        for (int i = 0; i < 64; ++i) {
            int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) return;  // EAGAIN, or a connection that died in the queue
            tune(fd, o_);
            auto* s = new KernelStream(e_, h_, fd, o_, true);
            if (!s->watch()) {
                unregister_stream(s->id());
                delete s;
                continue;
            }
            ++accepted_;
            s->opened();
        }
    }
    Engine& e_;
    int fd_;
    uint16_t port_;
    StreamHandler& h_;
    StreamOptions o_;
    uint64_t accepted_ = 0;
};

} // namespace

std::unique_ptr<Acceptor> listen_kernel(Engine& e, uint16_t port, StreamHandler& h, const StreamOptions& o,
                                        std::string* err, Ipv4 bind_ip) {
    const bool reuse_port = o.kernel_reuse_port;
    auto fail = [&](const char* what) {
        if (err) *err = fmt::format("kernel listen on {}:{}: {}: {}", bind_ip.to_string(), port, what,
                                    std::strerror(errno));
        return nullptr;
    };
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // Every engine of a process listens on the same kernel port; the kernel
    // spreads the connections over their sockets.
    if (reuse_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    sockaddr_in a = to_sockaddr(Endpoint{bind_ip, port});
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 1024) != 0) {
        int saved = errno;
        ::close(fd);
        errno = saved;
        return fail("bind/listen");
    }
    auto acc = std::make_unique<KernelAcceptor>(e, fd, port, h, o);
    if (!acc->watch()) {
        if (err) *err = fmt::format("kernel listen on port {}: the engine's epoll set refused the socket", port);
        return nullptr;
    }
    return acc;
}

Stream* connect_kernel(Engine& e, Endpoint remote, StreamHandler& h, const StreamOptions& o, std::string* err) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        if (err) *err = fmt::format("kernel connect: socket: {}", std::strerror(errno));
        return nullptr;
    }
    tune(fd, o);
    if (o.kernel_bind_ip.v != 0) {
        sockaddr_in b = to_sockaddr(Endpoint{o.kernel_bind_ip, 0});
        if (::bind(fd, reinterpret_cast<sockaddr*>(&b), sizeof b) != 0) {
            if (err) *err = fmt::format("kernel connect: bind to {}: {}", o.kernel_bind_ip.to_string(), std::strerror(errno));
            ::close(fd);
            return nullptr;
        }
    }
    sockaddr_in a = to_sockaddr(remote);
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (rc != 0 && errno != EINPROGRESS) {
        if (err) *err = fmt::format("kernel connect to {}:{}: {}", remote.ip.to_string(), remote.port,
                                    std::strerror(errno));
        ::close(fd);
        return nullptr;
    }
    auto* s = new KernelStream(e, h, fd, o, false);
    s->set_remote(remote);
    if (!s->watch()) {
        if (err) *err = "kernel connect: the engine's epoll set refused the socket";
        unregister_stream(s->id());
        delete s;
        return nullptr;
    }
    s->arm_connect_timeout();
    // rc == 0 (loopback may connect at once): EPOLLOUT still arrives and opens it.
    return s;
}

} // namespace crescent::rpc::detail
