// crescent tests — echo server and verifying streaming client handlers for
// the engine API, shared by the net_ring unit test and the examples' tests.
//
// The client streams `total` bytes of a position-dependent pattern on each
// connection and checks every echoed byte against it; the server echoes
// (zero-copy in inline mode, read()/write() in batch mode) and respects
// backpressure (WouldBlock -> keep the bytes, retry from on_writable).
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <crescent/engine.hpp>

namespace crescent::test {

inline uint8_t pattern_byte(uint64_t off, uint32_t seed) {
    return uint8_t((off * 2654435761u >> 13) ^ (off >> 11) ^ seed);
}

// RFC 862 echo. Inline: the received slices go straight back (zero-copy).
// Batch: copy API. Bytes that do not fit wait in `backlog` (bounded by the
// peer's window, since the receive window only reopens as we consume).
class EchoServer : public Handler {
public:
    struct PerConn {
        std::deque<Slice> backlog;
        std::vector<std::byte> buf;  // batch: bytes read but not yet written
        size_t buf_off = 0;
    };
    uint64_t echoed = 0, accepted = 0, closed = 0, closed_abnormal = 0;

    void on_connected(Conn c) override {
        ++accepted;
        c.set_user(new PerConn);
    }
    void on_data(Conn c, std::span<Slice> data) override {
        auto* pc = static_cast<PerConn*>(c.user());
        if (!pc) return;
        for (Slice& s : data) pc->backlog.push_back(std::move(s));
        drain(c, *pc);
    }
    void on_readable(Conn c) override {
        auto* pc = static_cast<PerConn*>(c.user());
        if (!pc) return;
        drain_batch(c, *pc);
    }
    void on_writable(Conn c) override {
        auto* pc = static_cast<PerConn*>(c.user());
        if (!pc) return;
        drain(c, *pc);
        drain_batch(c, *pc);
    }
    void on_acked(Conn c, size_t) override {
        auto* pc = static_cast<PerConn*>(c.user());
        if (pc && (!pc->backlog.empty() || pc->buf_off < pc->buf.size())) on_writable(c);
    }
    void on_peer_closed(Conn c) override { c.close(); }
    void on_closed(Conn c, CloseReason why) override {
        ++closed;
        if (why != CloseReason::Normal) ++closed_abnormal;
        delete static_cast<PerConn*>(c.user());
        c.set_user(nullptr);
    }

private:
    void drain(Conn c, PerConn& pc) {
        while (!pc.backlog.empty()) {
            size_t n = pc.backlog.front().size();
            if (c.send(std::span<Slice>(&pc.backlog.front(), 1)) != SendStatus::Ok) {
                // Too big for the space there is: send the part that fits.
                size_t space = c.send_space();
                if (space == 0 || space >= n) return;
                Slice head = pc.backlog.front().sub(0, space);
                if (c.send(std::move(head)) != SendStatus::Ok) return;
                pc.backlog.front().remove_prefix(space);
                echoed += space;
                continue;
            }
            echoed += n;
            pc.backlog.pop_front();
        }
    }
    void drain_batch(Conn c, PerConn& pc) {
        for (;;) {
            if (pc.buf_off < pc.buf.size()) {
                size_t w = c.write(pc.buf.data() + pc.buf_off, pc.buf.size() - pc.buf_off);
                pc.buf_off += w;
                echoed += w;
                if (pc.buf_off < pc.buf.size()) return;  // wait for on_writable
            }
            pc.buf.resize(64 * 1024);
            size_t r = c.read(pc.buf.data(), pc.buf.size());
            pc.buf.resize(r);
            pc.buf_off = 0;
            if (r == 0) return;
        }
    }
};

// Streams `total` pattern bytes per connection and verifies the echo.
class StreamClient : public Handler {
public:
    struct PerConn {
        uint32_t seed = 0;
        uint64_t sent = 0, received = 0;
        bool done = false;
    };
    uint64_t total = 0;
    size_t chunk = 16 * 1024;
    // Each chunk in an arena obj of its own, sent by reference (Conn::send),
    // rather than by send_copy() (which packs small writes into one obj).
    bool own_objs = false;
    uint64_t mismatches = 0, completed = 0, closed = 0, closed_abnormal = 0, connected = 0;
    std::string first_error;
    std::vector<std::unique_ptr<PerConn>> conns;

    PerConn* add(uint32_t seed) {
        conns.push_back(std::make_unique<PerConn>());
        conns.back()->seed = seed;
        return conns.back().get();
    }
    void on_connected(Conn c) override {
        ++connected;
        pump(c);
    }
    void on_writable(Conn c) override { pump(c); }
    void on_acked(Conn c, size_t) override { pump(c); }
    void on_data(Conn c, std::span<Slice> data) override {
        for (Slice& s : data) verify(c, s.data(), s.size());
    }
    void on_readable(Conn c) override {
        std::byte buf[16384];
        while (size_t n = c.read(buf, sizeof buf)) verify(c, buf, n);
    }
    void on_closed(Conn c, CloseReason why) override {
        ++closed;
        auto* pc = static_cast<PerConn*>(c.user());
        if (why != CloseReason::Normal) {
            ++closed_abnormal;
            if (first_error.empty()) first_error = std::string("closed: ") + std::string(close_reason_name(why));
        }
        if (pc && !pc->done && first_error.empty()) first_error = "closed before the echo completed";
    }

private:
    void pump(Conn c) {
        auto* pc = static_cast<PerConn*>(c.user());
        if (!pc) return;
        std::vector<std::byte> buf;
        while (pc->sent < total) {
            size_t n = size_t(std::min<uint64_t>({chunk, total - pc->sent, c.send_space()}));
            if (n == 0) return;
            Slice own;
            if (own_objs && !(own = zbuf::Arena::current()->alloc_slice(n))) return;
            if (!own_objs) buf.resize(n);
            std::byte* dst = own_objs ? own.data() : buf.data();
            for (size_t i = 0; i < n; ++i) dst[i] = std::byte(pattern_byte(pc->sent + i, pc->seed));
            SendStatus st = own_objs ? c.send(std::move(own)) : c.send_copy(std::span<const std::byte>(buf));
            if (st != SendStatus::Ok) return;
            pc->sent += n;
        }
    }
    void verify(Conn c, const std::byte* p, size_t n) {
        auto* pc = static_cast<PerConn*>(c.user());
        if (!pc) return;
        for (size_t i = 0; i < n; ++i) {
            if (std::to_integer<uint8_t>(p[i]) != pattern_byte(pc->received + i, pc->seed)) {
                if (mismatches++ == 0 && first_error.empty())
                    first_error = "mismatch at offset " + std::to_string(pc->received + i);
            }
        }
        pc->received += n;
        if (pc->received >= total && !pc->done) {
            pc->done = true;
            ++completed;
            c.close();
        }
    }
};

} // namespace crescent::test
