// libFuzzer target for stack/tcp: a Host with two listeners (port 80, backlog
// 4; port 443, backlog 1, so a second half-open connection gets a SYN cookie)
// and one established connection, driven by a program decoded from the input:
//
//   byte 0          configuration (congestion control, SACK, timestamps, delayed ACK)
//   then ops        0-2  a segment on the established 4-tuple, fields relative to
//                        the current sequence state (so most land in the window)
//                   3    a segment from another 4-tuple (SYN flood, stray ACK/RST);
//                        bit 0x08: from the established connection's own 4-tuple
//                        (stray segments to it, or to its TIME-WAIT record, and
//                        SYNs that reuse it); bit 0x20: instead a full handshake
//                        from a new peer port (SYN, the SYN-ACK's ISN or cookie
//                        echoed in the ACK) to port 80, or 443 with bit 0x10
//                   4    a raw frame from the input, through wire::parse_frame
//                   5    advance the virtual clock, run timers
//                   6    application send()        bit 0x80: on an extra connection
//                   7    application flush / shutdown / close / abort / unlisten
//                        443 / listen 443 again    bit 0x80: on an extra connection
//
// The connections of the handshakes are accepted and kept (up to 8 extra).
// After every op the invariants are checked on every connection (abort on
// violation): snd.una <= snd.nxt, flight within the send buffer, cwnd > 0,
// emitted segments within the MSS and the peer window bounds, payload views
// readable. After the Host is destroyed every zbuf it held must be back (no
// leak). Every emitted segment is serialised with wire::emit_* and parsed back.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <crescent/zbuf.hpp>

#include "tests/fuzz/fuzz_support.hpp"
#include "stack/tcp/host.hpp"
#include "stack/wire/wire.hpp"

using namespace crescent;
using namespace crescent::tcp;
using wire::SeqNum;
namespace fl = wire::tcp_flags;

namespace {

constexpr wire::Ipv4Addr kUs{0x0a000002}, kPeer{0x0a000001};
constexpr uint16_t kPort = 80, kPort2 = 443, kPeerPort = 5555;
constexpr size_t kMaxExtra = 8;

[[noreturn]] void fail(const char* what) { fuzz::fail("fuzz_tcb", what); }

class Reader {
public:
    Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
    bool more() const { return i_ < n_; }
    uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
    uint16_t u16() {
        uint16_t lo = u8();
        return uint16_t(lo | u8() << 8);
    }
    uint32_t u32() {
        uint32_t lo = u16();
        return lo | uint32_t(u16()) << 16;
    }
    std::span<const uint8_t> take(size_t n) {
        n = std::min(n, n_ - i_);
        auto s = std::span(d_ + i_, n);
        i_ += n;
        return s;
    }

private:
    const uint8_t* d_;
    size_t n_, i_ = 0;
};

zbuf::Arena* arena() { return fuzz::arena("fuzz_tcb"); }

Slice make_payload(std::span<const uint8_t> bytes, size_t len) {
    if (len == 0) return Slice();
    Slice s = arena()->alloc_slice(len);
    if (!s) return Slice();
    for (size_t i = 0; i < len; i++) s.data()[i] = std::byte(bytes.empty() ? uint8_t(i) : bytes[i % bytes.size()]);
    return s;
}

// The peer's view of the conversation, so crafted segments land near the window.
struct Peer {
    SeqNum snd_nxt;      // next sequence number the peer would send
    SeqNum ack;          // highest sequence of ours the peer has seen (+1)
    uint32_t tsval = 1000;
    uint32_t ts_recent = 0;
};

struct Harness {
    Host host;
    Actions out;
    Instant now = Instant::from_nanos(1'000'000'000);
    std::optional<ConnId> conn;
    std::vector<ConnId> extra;   // accepted connections other than `conn`
    Peer peer;
    uint32_t mss = 1460;
    uint16_t path_mss = 0;  // HostConfig::path_mss's answer for kPeer (0: none)

    explicit Harness(const HostConfig& hc, uint16_t pm = 0) : host(hc), path_mss(pm) {}

    void check_segment(const OutSegment& s) {
        if (s.view_count > kMaxTxViews) fail("view_count > kMaxTxViews");
        uint32_t len = 0;
        std::array<wire::Bytes, kMaxTxViews> views;
        for (uint8_t i = 0; i < s.view_count; i++) {
            if (s.views[i].len && !s.views[i].data) fail("null payload view");
            views[i] = wire::Bytes(s.views[i].data, s.views[i].len);
            len += s.views[i].len;
        }
        if (len > 65535 - 20 - 60) fail("segment payload larger than an IP packet");
        // TSO: a request is several segments of tso_segsz (the MSS less
        // options); anything else is at most one MSS.
        if (s.tso_segsz != 0) {
            if (len <= s.tso_segsz) fail("TSO request of a single segment");
            if (s.tso_segsz > 1460) fail("TSO segment size above the MSS");
            if (s.repr.has(wire::tcp_flags::SYN)) fail("TSO request with SYN");
        } else if (len > 1460) {
            fail("segment larger than the MSS without TSO");
        }
        // A passive open from kPeer takes its MSS from the path (our listeners' only peer).
        if (path_mss != 0 && s.dst == kPeer && s.repr.dst_port == kPeerPort &&
            (s.tso_segsz != 0 ? s.tso_segsz : len) > path_mss)
            fail("segment above the path's MSS");
        if (path_mss != 0 && s.dst == kPeer && s.repr.has(wire::tcp_flags::SYN) && s.repr.opts.mss &&
            *s.repr.opts.mss > path_mss)
            fail("SYN-ACK offers more than the path's MSS");
        if (s.src != kUs) fail("segment from a foreign source address");
        // Serialise with the wire layer and parse it back.
        wire::Ipv4Repr ip;
        ip.src = s.src;
        ip.dst = s.dst;
        ip.ecn = s.ip_ecn;
        const size_t tl = wire::tcp_header_len(s.repr);
        ip.payload_len = uint16_t(tl + len);
        std::vector<std::byte> buf(wire::kIpv4HeaderLen + tl + len);
        wire::emit_ipv4(ip, std::span(buf).first(wire::kIpv4HeaderLen));
        wire::emit_tcp(s.repr, ip, std::span(buf).subspan(wire::kIpv4HeaderLen, tl),
                       std::span(views.data(), s.view_count));
        size_t off = wire::kIpv4HeaderLen + tl;
        for (uint8_t i = 0; i < s.view_count; i++) {
            std::memcpy(buf.data() + off, views[i].data(), views[i].size()); // ASan: the view is readable
            off += views[i].size();
        }
        wire::Ipv4Repr ip2;
        size_t tcp_off = 0, data_off = 0;
        if (wire::parse_ipv4(buf, false, &ip2, &tcp_off) != wire::Drop::None) fail("emitted IPv4 does not parse");
        wire::TcpRepr t2;
        if (wire::parse_tcp(std::span(buf).subspan(tcp_off), ip2, false, &t2, &data_off) != wire::Drop::None)
            fail("emitted TCP does not parse");
        if (t2.seq != s.repr.seq || t2.flags != s.repr.flags) fail("emitted TCP round trip");
    }

    // Run the actions: check segments, let the peer learn from them, consume data.
    void settle() {
        for (const OutSegment& s : out.segments) {
            check_segment(s);
            if (s.dst == kPeer && s.repr.dst_port == kPeerPort) {
                SeqNum end = s.repr.seq + s.repr.seg_len(s.payload_len());
                if (peer.ack < end) peer.ack = end;
                if (s.repr.opts.ts) peer.ts_recent = s.repr.opts.ts->tsval;
            }
        }
        for (Readable& r : out.readable) {
            uint32_t n = uint32_t(r.data.size());
            r.data.reset();
            host.consume(r.conn, n);
        }
        for (const Event& e : out.events) {
            if (e.kind == EventKind::Acceptable)
                while (auto id = host.accept(e.port)) {
                    if (!conn)
                        conn = id;
                    else if (extra.size() < kMaxExtra)
                        extra.push_back(*id);
                    else
                        host.close(*id); // not tracked: let it finish on its own
                }
            if (e.kind == EventKind::Closed) {
                if (conn && e.conn == *conn) conn.reset();
                std::erase(extra, e.conn);
            }
        }
        out.clear();
    }

    void check_invariants() {
        if (conn) check_conn(*conn);
        for (ConnId c : extra) check_conn(c);
    }

    void check_conn(ConnId c) {
        const Tcb* t = host.find(c);
        if (!t) return;
        Stats s = t->stats();
        if (SeqNum(s.snd_nxt) < SeqNum(s.snd_una)) fail("snd.nxt < snd.una");
        if (s.bytes_in_flight > (2u << 20) + 2) fail("flight larger than the send buffer");
        if (s.state != State::Closed && s.state != State::SynSent && s.cwnd == 0) fail("cwnd == 0");
        if (s.snd_mss == 0 && s.state == State::Established) fail("snd.mss == 0");
        if (t->send_space() > (2u << 20)) fail("send space beyond the buffer");
    }

    void segment(const wire::TcpRepr& seg, Slice payload, uint8_t ecn = 0, wire::Ipv4Addr src = kPeer) {
        host.on_segment(src, kUs, ecn, seg, std::move(payload), now, out);
        settle();
        check_invariants();
    }
};

void fill_options(Reader& r, wire::TcpRepr& t, Peer& p, uint8_t mask) {
    if (mask & 1) t.opts.ts = wire::Timestamps{p.tsval += r.u8(), (mask & 0x40) ? r.u32() : p.ts_recent};
    if (mask & 2) {
        uint8_t n = uint8_t(1 + r.u8() % wire::kMaxSackBlocks);
        t.opts.sack_count = n;
        for (uint8_t i = 0; i < n; i++) {
            SeqNum l = p.ack - uint32_t(r.u16());
            t.opts.sack[i] = wire::SackBlock{l, l + uint32_t(r.u16() % 8192)};
        }
    }
    if (mask & 4) t.opts.mss = r.u16();
    if (mask & 8) t.opts.wscale = uint8_t(r.u8() % 20);
    if (mask & 16) t.opts.sack_permitted = true;
}

// The connection an application op acts on: with bit 0x80 one of the extra
// connections (chosen by the next byte), else the first one.
std::optional<ConnId> pick(Harness& h, Reader& r, uint8_t op) {
    if (!(op & 0x80)) return h.conn;
    const uint8_t i = r.u8();
    if (h.extra.empty()) return std::nullopt;
    return h.extra[i % h.extra.size()];
}

// A new peer on `src_port` opens a connection to `port`: SYN, then the ACK of
// whatever SYN-ACK came back (a SYN cookie once the backlog is full), with
// optional data. The Host accepts it in settle().
void handshake(Harness& h, Reader& r, uint16_t src_port, uint16_t port) {
    const uint8_t flags = r.u8();
    wire::TcpRepr syn;
    syn.src_port = src_port;
    syn.dst_port = port;
    syn.seq = SeqNum(r.u32());
    syn.flags = fl::SYN;
    syn.window = r.u16();
    syn.opts.mss = uint16_t(536 + r.u16() % 1000);
    if (flags & 1) syn.opts.wscale = uint8_t(flags >> 4);
    if (flags & 2) syn.opts.sack_permitted = true;
    if (flags & 4) syn.opts.ts = wire::Timestamps{h.peer.tsval, 0};
    h.host.on_segment(kPeer, kUs, 0, syn, Slice(), h.now, h.out);
    std::optional<SeqNum> iss;
    std::optional<uint32_t> tsval;
    for (const OutSegment& s : h.out.segments)
        if (s.repr.dst_port == src_port && s.repr.has(fl::SYN) && s.repr.has(fl::ACK)) {
            iss = s.repr.seq;
            if (s.repr.opts.ts) tsval = s.repr.opts.ts->tsval;
        }
    h.settle();
    h.check_invariants();
    if (!iss) return; // no listener, or the SYN was refused
    wire::TcpRepr ack;
    ack.src_port = src_port;
    ack.dst_port = port;
    ack.seq = syn.seq + 1;
    ack.ack = *iss + 1;
    ack.flags = fl::ACK | ((flags & 8) ? fl::PSH : 0);
    ack.window = syn.window;
    if (syn.opts.ts) ack.opts.ts = wire::Timestamps{h.peer.tsval + 1, tsval.value_or(0)};
    const size_t len = (flags & 8) ? r.u8() : 0;
    h.segment(ack, make_payload(r.take(std::min<size_t>(len, 16)), len));
}

void run(const uint8_t* data, size_t size) {
    Reader r(data, size);
    uint8_t cfgb = r.u8();
    HostConfig hc;
    hc.local_ip = kUs;
    hc.tcp.cc = CcAlgo(cfgb % 3);
    hc.tcp.tso_max = (cfgb & 0x03) == 0x03 ? 60000 : 0;  // NewReno with TSO (3 % 3 == 0)
    hc.tcp.sack = !(cfgb & 0x04);
    hc.tcp.timestamps = !(cfgb & 0x08);
    hc.tcp.window_scale = !(cfgb & 0x10);
    hc.tcp.delayed_ack_segments = (cfgb & 0x20) ? 1 : 2;
    hc.tcp.nagle = cfgb & 0x40;
    hc.tcp.snd_buf = 2u << 20;
    hc.tcp.rcv_buf = 256u << 10;
    hc.tcp.reassembly.max_segments = 32;
    hc.tcp.reassembly.max_bytes = 64u << 10;
    hc.secret = {0x1234, 0x5678};
    // One input in 16 has a route MTU to the peer (HostConfig::path_mss), the
    // choice taken from the peer's ISN so that the input layout is unchanged.
    const SeqNum peer_iss(r.u32());
    uint16_t path_mss = 0;
    if ((peer_iss.raw() & 0xf) == 0xf) {
        path_mss = uint16_t(48 + (peer_iss.raw() >> 4) % 1400);
        hc.path_mss = [path_mss](wire::Ipv4Addr peer) -> uint16_t { return peer == kPeer ? path_mss : 0; };
    }
    Harness h(hc, path_mss);
    if (h.host.listen(kPort, 4) != ListenResult::Ok) fail("listen");
    if (h.host.listen(kPort2, 1) != ListenResult::Ok) fail("listen on the second port");

    // Handshake: SYN -> SYN-ACK -> ACK, options as configured.
    wire::TcpRepr syn;
    syn.src_port = kPeerPort;
    syn.dst_port = kPort;
    syn.seq = peer_iss;
    syn.flags = fl::SYN | ((cfgb & 0x80) ? fl::ECE | fl::CWR : 0);
    syn.window = 65535;
    syn.opts.mss = 1460;
    syn.opts.wscale = 7;
    syn.opts.sack_permitted = true;
    syn.opts.ts = wire::Timestamps{h.peer.tsval, 0};
    h.host.on_segment(kPeer, kUs, 0, syn, Slice(), h.now, h.out);
    std::optional<SeqNum> our_iss;
    for (const OutSegment& s : h.out.segments)
        if (s.repr.has(fl::SYN) && s.repr.has(fl::ACK)) our_iss = s.repr.seq;
    h.settle();
    if (!our_iss) fail("no SYN-ACK to a SYN on a listening port");
    h.peer.snd_nxt = peer_iss + 1;
    h.peer.ack = *our_iss + 1;
    wire::TcpRepr ack;
    ack.src_port = kPeerPort;
    ack.dst_port = kPort;
    ack.seq = h.peer.snd_nxt;
    ack.ack = h.peer.ack;
    ack.flags = fl::ACK;
    ack.window = 65535;
    ack.opts.ts = wire::Timestamps{++h.peer.tsval, h.peer.ts_recent};
    h.segment(ack, Slice());
    if (!h.conn) fail("handshake did not produce an accepted connection");

    while (r.more()) {
        uint8_t op = r.u8();
        switch (op % 8) {
        case 0:
        case 1:
        case 2: {
            wire::TcpRepr t;
            t.src_port = kPeerPort;
            t.dst_port = kPort;
            uint8_t flags = r.u8();
            t.flags = (op & 0x80) ? flags : uint8_t(fl::ACK | (flags & (fl::PSH | fl::FIN | fl::ECE | fl::CWR)));
            int16_t dseq = int16_t(r.u16());
            int16_t dack = int16_t(r.u16());
            t.seq = h.peer.snd_nxt + uint32_t(int32_t((op & 0x40) ? dseq : 0));
            t.ack = h.peer.ack + uint32_t(int32_t((op & 0x20) ? dack : 0));
            t.window = (op & 0x10) ? r.u16() : 65535;
            fill_options(r, t, h.peer, r.u8());
            size_t len = (op & 0x08) ? r.u16() % 9000 : r.u8() % 128;
            auto bytes = r.take(std::min<size_t>(len, 64));
            Slice p = make_payload(bytes, len);
            if (!(op & 0x40) && !t.has(fl::SYN) && !t.has(fl::RST)) h.peer.snd_nxt = t.seq + t.seg_len(p.size());
            uint8_t ecn = r.u8() & 3;
            h.segment(t, std::move(p), ecn);
            break;
        }
        case 3: {
            if (op & 0x20) {
                handshake(h, r, uint16_t(kPeerPort + 1 + r.u8() % 16), (op & 0x10) ? kPort2 : kPort);
                break;
            }
            wire::TcpRepr t;
            t.src_port = uint16_t(kPeerPort + 1 + r.u8());
            if (op & 0x08) t.src_port = kPeerPort;
            t.dst_port = (op & 0x80) ? uint16_t(r.u16()) : kPort;
            t.seq = SeqNum(r.u32());
            t.ack = SeqNum(r.u32());
            t.flags = r.u8();
            t.window = r.u16();
            fill_options(r, t, h.peer, r.u8());
            // Decode in a fixed order (function arguments have none).
            size_t plen = r.u8() % 64;
            auto bytes = r.take(std::min<size_t>(plen, 8));
            wire::Ipv4Addr src = (op & 0x40) ? wire::Ipv4Addr{r.u32()} : kPeer;
            h.segment(t, make_payload(bytes, plen), 0, src);
            break;
        }
        case 4: {
            auto raw = r.take(r.u16() % 2048);
            wire::Frame fr;
            if (raw.empty()) break;
            std::vector<std::byte> f(raw.size());
            std::memcpy(f.data(), raw.data(), raw.size());
            if (wire::parse_frame(f, wire::Offload{true, true}, &fr) != wire::Drop::None) break;
            if (fr.ip.dst != kUs) break;
            Slice p = make_payload(std::span(raw).subspan(fr.payload_off, fr.payload_len), fr.payload_len);
            if (fr.payload_len && !p) break;
            h.segment(fr.tcp, std::move(p), fr.ip.ecn, fr.ip.src);
            break;
        }
        case 5: {
            Duration d = (op & 0x80) ? std::chrono::milliseconds(r.u16()) : std::chrono::microseconds(r.u16());
            h.now += d;
            if (h.host.next_deadline() <= h.now) {
                h.host.on_timer(h.now, h.out);
                h.settle();
                h.check_invariants();
            }
            break;
        }
        case 6: {
            std::optional<ConnId> c = pick(h, r, op);
            if (!c) break;
            size_t len = 1 + r.u16() % 20000;
            Slice s = arena()->alloc_slice(std::min<size_t>(len, 16384));
            if (!s) break;
            std::memset(s.data(), 0x5a, s.size());
            h.host.send(*c, s); // WouldBlock leaves the slice with us: freed here
            h.host.flush(h.now, h.out);
            h.settle();
            h.check_invariants();
            break;
        }
        case 7: {
            std::optional<ConnId> c = pick(h, r, op);
            const uint8_t sub = r.u8() % 6;
            if (sub == 4) {
                h.host.unlisten(kPort2, h.now, h.out); // resets its unaccepted connections
            } else if (sub == 5) {
                (void)h.host.listen(kPort2, 1); // AddressInUse while it still listens
            } else if (c) {
                switch (sub) {
                case 0: break; // just flush
                case 1: h.host.shutdown_write(*c); break;
                case 2: h.host.close(*c); break;
                case 3: h.host.abort(*c, h.now, h.out); break;
                }
            }
            h.host.flush(h.now, h.out);
            h.settle();
            h.check_invariants();
            break;
        }
        }
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    zbuf::Arena* a = arena();
    run(data, size);
    a->drain_returns();
    if (a->live() != 0) fail("zbuf leak: objs still live after the Host was destroyed");
    return 0;
}
