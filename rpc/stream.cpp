// crescent — what both Stream transports share: names, the live-stream table
// behind StreamRef, send_copy(), and the listen()/connect() entry points.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <crescent/rpc/stream.hpp>

#include "rpc/stream_impl.hpp"

namespace crescent::rpc {

std::string_view transport_name(Transport t) {
    switch (t) {
    case Transport::Crescent: return "crescent";
    case Transport::Kernel: return "kernel";
    }
    return "unknown";
}

bool parse_transport(std::string_view s, Transport* out) {
    if (s == "crescent") *out = Transport::Crescent;
    else if (s == "kernel") *out = Transport::Kernel;
    else return false;
    return true;
}

namespace detail {
// A slot per live stream, found by index: an id is a per-thread serial number
// (40 bits) above its slot (24 bits), and a lookup checks that the slot still
// holds that id, so a StreamRef to a stream that is gone misses even when the
// slot has been reused. No hashing: StreamRef::get() runs for every RPC reply.
constexpr unsigned kSlotBits = 24;
constexpr uint64_t kSlotMask = (uint64_t(1) << kSlotBits) - 1;
struct Table {
    struct Entry {
        uint64_t id = 0;  // 0: free
        Stream* s = nullptr;
    };
    uint64_t serial = 1;
    std::vector<Entry> slots;
    std::vector<uint32_t> free;
};
static Table& table() {
    thread_local Table t;
    return t;
}

uint64_t register_stream(Stream* s) {
    Table& t = table();
    uint32_t slot;
    if (!t.free.empty()) {
        slot = t.free.back();
        t.free.pop_back();
    } else {
        if (t.slots.size() > kSlotMask) {
            std::fprintf(stderr, "crescent rpc: more than %llu streams live on one thread\n",
                         static_cast<unsigned long long>(kSlotMask + 1));
            std::abort();
        }
        slot = uint32_t(t.slots.size());
        t.slots.emplace_back();
    }
    const uint64_t id = t.serial++ << kSlotBits | slot;
    t.slots[slot] = {id, s};
    return id;
}
void unregister_stream(uint64_t id) {
    Table& t = table();
    const size_t slot = size_t(id & kSlotMask);
    if (slot >= t.slots.size() || t.slots[slot].id != id) return;
    t.slots[slot] = {};
    t.free.push_back(uint32_t(slot));
}
Stream* find_stream(uint64_t id) {
    const Table& t = table();
    const size_t slot = size_t(id & kSlotMask);
    return slot < t.slots.size() && t.slots[slot].id == id ? t.slots[slot].s : nullptr;
}
} // namespace detail

Stream::Stream(Engine& e, Transport t, StreamHandler& h)
    : engine_(&e), handler_(&h), transport_(t), id_(detail::register_stream(this)) {}

bool Stream::send_copy(std::span<const std::byte> bytes) {
    zbuf::Arena* a = zbuf::Arena::current();
    if (!a) return false;
    // Largest size class per obj: few slices for big copies.
    const auto& classes = a->config().size_classes;
    const size_t chunk = classes.empty() ? 2048 : classes.back();
    std::vector<Slice> iov;
    iov.reserve(bytes.size() / chunk + 1);
    for (size_t off = 0; off < bytes.size(); off += chunk) {
        size_t n = std::min(chunk, bytes.size() - off);
        Slice s = a->alloc_slice(n);
        if (!s) return false;
        std::memcpy(s.data(), bytes.data() + off, n);
        iov.push_back(std::move(s));
    }
    return send(std::span<Slice>(iov));
}

Stream* StreamRef::get() const { return id_ ? detail::find_stream(id_) : nullptr; }

size_t live_streams(Engine& e) {
    size_t n = 0;
    for (const auto& [id, s] : detail::table().slots) n += s && &s->engine() == &e;
    return n;
}

void for_each_stream(Engine& e, const std::function<void(Stream&)>& fn) {
    // By id, not by slot: fn may close streams (their slots are then reused).
    std::vector<uint64_t> ids;
    for (const auto& [id, s] : detail::table().slots)
        if (s && &s->engine() == &e) ids.push_back(id);
    for (uint64_t id : ids)
        if (Stream* s = detail::find_stream(id)) fn(*s);
}

std::unique_ptr<Acceptor> listen(Engine& e, Transport t, uint16_t port, StreamHandler& h, const StreamOptions& o,
                                 std::string* err, Ipv4 bind_ip) {
    if (t == Transport::Crescent) return detail::listen_crescent(e, port, h, o, err);
    return detail::listen_kernel(e, port, h, o, err, bind_ip);
}

Stream* connect(Engine& e, Transport t, Endpoint remote, StreamHandler& h, const StreamOptions& o,
                std::string* err) {
    if (t == Transport::Crescent) return detail::connect_crescent(e, remote, h, o, err);
    return detail::connect_kernel(e, remote, h, o, err);
}

} // namespace crescent::rpc
