// crescent — internals shared by the two Stream transports (rpc/stream*.cpp):
// the per-thread table of live streams (StreamRef lookups, live_streams())
// and the ordered send backlog both transports keep.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <crescent/engine.hpp>
#include <crescent/rpc/stream.hpp>

namespace crescent::rpc::detail {

// Streams are registered on creation and removed just before deletion. Ids
// are unique per thread; every engine of a thread shares the table (tests run
// two engines on one thread).
uint64_t register_stream(Stream* s);
void unregister_stream(uint64_t id);
Stream* find_stream(uint64_t id);

// Bytes waiting to be handed to the transport, in order: a vector with a
// moving head, so the front run of whole slices is one contiguous span.
class Backlog {
public:
    bool empty() const { return head_ == q_.size(); }
    size_t bytes() const { return bytes_; }
    void push(std::span<Slice> iov) {
        for (Slice& s : iov) {
            if (s.empty()) continue;
            bytes_ += s.size();
            q_.push_back(std::move(s));
        }
    }
    // The slices not yet sent (the first may have had a prefix sent already).
    std::span<Slice> pending() { return {q_.data() + head_, q_.size() - head_}; }
    // `n` bytes of the front were handed over: drop them.
    void consume(size_t n) {
        bytes_ -= n;
        while (n > 0) {
            Slice& f = q_[head_];
            if (f.size() <= n) {
                n -= f.size();
                f.reset();
                ++head_;
            } else {
                f.remove_prefix(n);
                n = 0;
            }
        }
        // Skip slices a zero-copy send moved out (left empty).
        while (head_ < q_.size() && q_[head_].empty()) ++head_;
        if (head_ == q_.size()) {
            q_.clear();
            head_ = 0;
        } else if (head_ > 64 && head_ * 2 > q_.size()) {
            q_.erase(q_.begin(), q_.begin() + ptrdiff_t(head_));
            head_ = 0;
        }
    }
    void clear() {
        q_.clear();
        head_ = 0;
        bytes_ = 0;
    }

private:
    std::vector<Slice> q_;
    size_t head_ = 0;
    size_t bytes_ = 0;
};

// The copy API path of a crescent stream (StreamOptions::copy_api, batch
// mode; stream_copy.cpp).
//
// copy_in: copies every byte queued on `c` out with Conn::read() into fresh
// arena objs of at most `chunk` bytes, appended to `out` as slices (the
// receive window reopens by as much). Returns the bytes read; *no_memory when
// the arena ran dry first (the rest stays queued in the connection).
size_t copy_in(Conn c, size_t chunk, std::vector<Slice>& out, bool* no_memory);
// copy_out: Conn::write()s the backlog's front, slice by slice, until it is
// empty or the send buffer is full (write() has then armed on_writable()).
// Returns the bytes written and adds the write() calls to *writes;
// *no_memory when write() took nothing although there was send space (the
// arena ran dry: no on_writable() will come).
size_t copy_out(Conn c, Backlog& b, uint64_t* writes, bool* no_memory);

// Transport entry points (stream_crescent.cpp, stream_kernel.cpp).
std::unique_ptr<Acceptor> listen_crescent(Engine& e, uint16_t port, StreamHandler& h, const StreamOptions& o,
                                          std::string* err);
Stream* connect_crescent(Engine& e, Endpoint remote, StreamHandler& h, const StreamOptions& o, std::string* err);
std::unique_ptr<Acceptor> listen_kernel(Engine& e, uint16_t port, StreamHandler& h, const StreamOptions& o,
                                        std::string* err, Ipv4 bind_ip);
Stream* connect_kernel(Engine& e, Endpoint remote, StreamHandler& h, const StreamOptions& o, std::string* err);

} // namespace crescent::rpc::detail
