// crescent — what both Stream transports share: names, the live-stream table
// behind StreamRef, send_copy(), and the listen()/connect() entry points.
#include <algorithm>
#include <cstring>
#include <unordered_map>

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
struct Table {
    uint64_t next = 1;
    std::unordered_map<uint64_t, Stream*> live;
};
static Table& table() {
    thread_local Table t;
    return t;
}

uint64_t register_stream(Stream* s) {
    Table& t = table();
    uint64_t id = t.next++;
    t.live.emplace(id, s);
    return id;
}
void unregister_stream(uint64_t id) { table().live.erase(id); }
Stream* find_stream(uint64_t id) {
    Table& t = table();
    auto it = t.live.find(id);
    return it == t.live.end() ? nullptr : it->second;
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

StreamRef::StreamRef(Stream& s) : engine_(&s.engine()), id_(s.id()) {}

Stream* StreamRef::get() const { return id_ ? detail::find_stream(id_) : nullptr; }

size_t live_streams(Engine& e) {
    size_t n = 0;
    for (const auto& [id, s] : detail::table().live) n += &s->engine() == &e;
    return n;
}

void for_each_stream(Engine& e, const std::function<void(Stream&)>& fn) {
    for (const auto& [id, s] : detail::table().live)
        if (&s->engine() == &e) fn(*s);
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
