// bench_tcp — micro-benchmark of the sans-IO TCP fast path.
//
//   bench_tcp                         all modes, wall-clock ns per operation
//   bench_tcp MODE ITERATIONS         one mode, N iterations (for callgrind:
//                                     tools/bench-tcp-instructions runs two N and
//                                     divides the difference, so setup cancels)
//
// Modes:
//   rx64, rx4k   one established Tcb receives in-order data segments (64 B or
//                4 KiB payload, ACK + timestamps, MSS 8960) and generates an ACK
//                for each (delayed ACK off): Tcb::on_segment through the fast
//                path, payload handed to the application, consume().
//   rr           request/response (64 B each way) between two Hosts over the
//                simulated wire: every segment is emitted into a zbuf frame with
//                wire::emit_* (checksums computed) and parsed back with
//                wire::parse_frame (checksums verified), the payload delivered as
//                a slice of the frame's zbuf (zero copy), delayed ACKs on.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>
#include <algorithm>
#include <array>

#include <crescent/zbuf.hpp>

#include "stack/tcp/host.hpp"
#include "stack/tcp/tcb.hpp"
#include "stack/wire/wire.hpp"

using namespace crescent;
using namespace crescent::tcp;
using wire::SeqNum;
namespace fl = wire::tcp_flags;

namespace {

constexpr wire::Ipv4Addr kIpA{0x0a000001}, kIpB{0x0a000002};

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "bench_tcp: %s\n", what);
    std::exit(1);
}

// ---- rx64 / rx4k: one Tcb, in-order segments, one ACK each ---------------------

struct RxBench {
    Config cfg;
    std::unique_ptr<Tcb> tcb;
    Actions out;
    Instant now = Instant::from_nanos(1'000'000'000);
    SeqNum peer_seq{5000}, our_iss{100};
    uint32_t peer_ts = 1;
    Slice backing;  // one big zbuf; each segment's payload is a new reference into it
    uint32_t len;
    uint64_t acks = 0;

    explicit RxBench(uint32_t payload) : len(payload) {
        cfg.mss = 8960;
        cfg.delayed_ack_segments = 1;  // an ACK for every segment
        cfg.rcv_buf = 4u << 20;
        Endpoints ep{kIpB, kIpA, 80, 40000};
        tcb = std::make_unique<Tcb>(cfg, ConnId{1, 1}, ep);
        TcpRepr syn = seg(fl::SYN);
        syn.seq = peer_seq - 1;
        syn.opts.mss = 8960;
        syn.opts.wscale = 7;
        syn.opts.sack_permitted = true;
        tcb->accept_syn(syn, 0, our_iss, now, out);
        out.clear();
        tcb->on_segment(seg(fl::ACK), 0, Slice(), now, out);
        if (tcb->state() != State::Established) die("rx: handshake failed");
        out.clear();
        backing = zbuf::Arena::current()->alloc_slice(len);
        if (!backing) die("rx: zbuf alloc");
        std::memset(backing.data(), 'x', len);
    }

    TcpRepr seg(uint8_t flags) {
        TcpRepr t;
        t.src_port = 40000;
        t.dst_port = 80;
        t.seq = peer_seq;
        t.ack = our_iss + 1;
        t.flags = flags;
        t.window = 65535; // scaled by 2^7 after the handshake: 8 MiB
        t.opts.ts = wire::Timestamps{peer_ts, 0};
        return t;
    }

    void once() {
        now += std::chrono::microseconds(1);
        TcpRepr t = seg(fl::ACK | fl::PSH);
        t.opts.ts = wire::Timestamps{++peer_ts, 1};
        tcb->on_segment(t, 0, backing.sub(0, len), now, out);
        peer_seq += len;
        acks += out.segments.size();
        for (Readable& r : out.readable) r.data.reset();
        tcb->consume(len);
        out.clear();
    }
};

// ---- rr: two Hosts over the simulated wire ---------------------------------------

// The simulated wire of the rr mode: a frame is emitted into a zbuf when the
// Host hands the segment out (as a NIC TX would take it: the payload views are
// only valid until the next call on that Host), and parsed on delivery.
struct Wire {
    zbuf::Arena* arena;
    uint64_t frames = 0;

    Slice emit(const OutSegment& seg) {
        const wire::TcpRepr& t = seg.repr;
        uint32_t plen = seg.payload_len();
        wire::EthRepr eth;
        wire::Ipv4Repr ip;
        ip.src = seg.src;
        ip.dst = seg.dst;
        ip.ecn = seg.ip_ecn;
        size_t tl = wire::tcp_header_len(t);
        ip.payload_len = uint16_t(tl + plen);
        size_t total = wire::kEthHeaderLen + wire::kIpv4HeaderLen + tl + plen;
        Slice f = arena->alloc_slice(total);
        if (!f) die("rr: zbuf alloc");
        wire::MutBytes b(f.data(), total);
        std::array<wire::Bytes, kMaxTxViews> views;
        size_t off = wire::kEthHeaderLen + wire::kIpv4HeaderLen + tl;
        for (uint8_t i = 0; i < seg.view_count; i++) {
            views[i] = wire::Bytes(seg.views[i].data, seg.views[i].len);
            std::memcpy(f.data() + off, seg.views[i].data, seg.views[i].len); // the NIC's DMA read
            off += seg.views[i].len;
        }
        wire::emit_eth(eth, b.first(wire::kEthHeaderLen));
        wire::emit_ipv4(ip, b.subspan(wire::kEthHeaderLen, wire::kIpv4HeaderLen));
        wire::emit_tcp(t, ip, b.subspan(wire::kEthHeaderLen + wire::kIpv4HeaderLen, tl),
                       std::span(views.data(), seg.view_count));
        frames++;
        return f;
    }

    // Parse a frame (checksums verified) and hand it to `to`; the payload is a
    // slice of the frame's zbuf.
    void deliver(Slice f, Host& to, Instant now, Actions& out) {
        wire::Frame fr;
        if (wire::parse_frame(wire::Bytes(f.data(), f.size()), wire::Offload{}, &fr) != wire::Drop::None)
            die("rr: a frame did not parse");
        Slice payload = fr.payload_len ? f.sub(fr.payload_off, fr.payload_len) : Slice();
        f.reset();
        to.on_segment(fr.ip.src, fr.ip.dst, fr.ip.ecn, fr.tcp, std::move(payload), now, out);
    }
};

struct RrBench {
    HostConfig ca, cb;
    std::unique_ptr<Host> a, b;
    Actions oa, ob;
    Wire wire{zbuf::Arena::current()};
    std::vector<Slice> to_a, to_b; // frames in flight
    Instant now = Instant::from_nanos(1'000'000'000);
    ConnId ca_id{}, cb_id{};
    Slice request, response;
    uint32_t msg;
    uint64_t got_a = 0, got_b = 0;

    explicit RrBench(uint32_t size) : msg(size) {
        ca.local_ip = kIpA;
        cb.local_ip = kIpB;
        cb.secret = {7, 8};
        a = std::make_unique<Host>(ca);
        b = std::make_unique<Host>(cb);
        if (b->listen(80, 16) != ListenResult::Ok) die("rr: listen");
        if (a->connect(kIpB, 80, 40000, now, oa, &ca_id) != ConnectResult::Ok) die("rr: connect");
        drain(oa, *a, to_b, got_a);
        settle();
        auto id = b->accept(80);
        if (!id) die("rr: handshake failed");
        cb_id = *id;
        request = zbuf::Arena::current()->alloc_slice(msg);
        response = zbuf::Arena::current()->alloc_slice(msg);
        std::memset(request.data(), 'q', msg);
        std::memset(response.data(), 'r', msg);
    }

    // Take a Host's output right after the call that produced it: frames out,
    // data to the application (consumed at once).
    void drain(Actions& out, Host& h, std::vector<Slice>& wire_out, uint64_t& got) {
        for (const OutSegment& s : out.segments) wire_out.push_back(wire.emit(s));
        for (Readable& r : out.readable) {
            uint32_t n = uint32_t(r.data.size());
            got += n;
            r.data.reset();
            h.consume(r.conn, n);
        }
        out.clear();
    }

    void settle() {
        while (!to_a.empty() || !to_b.empty()) {
            std::vector<Slice> q;
            q.swap(to_b);
            for (Slice& f : q) {
                wire.deliver(std::move(f), *b, now, ob);
                drain(ob, *b, to_a, got_b);
            }
            q.clear();
            q.swap(to_a);
            for (Slice& f : q) {
                wire.deliver(std::move(f), *a, now, oa);
                drain(oa, *a, to_b, got_a);
            }
        }
    }

    void wait_for(uint64_t& got, uint64_t want) {
        settle();
        while (got < want) {
            // Nothing in flight and still waiting: run the earliest timer.
            now = std::max(now, min(a->next_deadline(), b->next_deadline()));
            a->on_timer(now, oa);
            drain(oa, *a, to_b, got_a);
            b->on_timer(now, ob);
            drain(ob, *b, to_a, got_b);
            settle();
        }
    }

    void once() {
        now += std::chrono::microseconds(10);
        if (a->send(ca_id, request.share()) != SendResult::Ok) die("rr: send request");
        a->flush(now, oa);
        drain(oa, *a, to_b, got_a);
        wait_for(got_b, got_b + msg);
        if (b->send(cb_id, response.share()) != SendResult::Ok) die("rr: send response");
        b->flush(now, ob);
        drain(ob, *b, to_a, got_b);
        wait_for(got_a, got_a + msg);
    }
};

using Clock = std::chrono::steady_clock;

template <class F>
double ns_per(uint64_t n, F&& f) {
    auto t0 = Clock::now();
    for (uint64_t i = 0; i < n; i++) f();
    return double(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()) / double(n);
}

int run_mode(std::string_view mode, uint64_t n, bool report) {
    if (mode == "rx64" || mode == "rx4k") {
        RxBench rx(mode == "rx64" ? 64 : 4096);
        for (int i = 0; i < 1000; i++) rx.once(); // warm up
        uint64_t fast0 = rx.tcb->stats().fast_path, acks0 = rx.acks;
        double ns = ns_per(n, [&] { rx.once(); });
        Stats s = rx.tcb->stats();
        if (rx.acks - acks0 != n) die("rx: not one ACK per segment");
        if (report)
            std::printf("%-5s %8.1f ns/segment  (%llu segments, %llu on the fast path, %llu ACKs)\n",
                        std::string(mode).c_str(), ns, (unsigned long long)n,
                        (unsigned long long)(s.fast_path - fast0), (unsigned long long)(rx.acks - acks0));
        return 0;
    }
    if (mode == "rr") {
        RrBench rr(64);
        for (int i = 0; i < 1000; i++) rr.once();
        uint64_t f0 = rr.wire.frames;
        double ns = ns_per(n, [&] { rr.once(); });
        if (report)
            std::printf("rr    %8.1f ns/exchange (%llu exchanges of 64 B each way, %.2f frames/exchange)\n", ns,
                        (unsigned long long)n, double(rr.wire.frames - f0) / double(n));
        return 0;
    }
    std::fprintf(stderr, "bench_tcp: unknown mode '%s' (rx64, rx4k, rr)\n", std::string(mode).c_str());
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    zbuf::Config zc;
    zc.backing = zbuf::Backing::Anonymous;
    zc.bytes = 64u << 20;
    std::string err;
    auto arena = zbuf::Arena::create(zc, &err);
    if (!arena) die(err.c_str());
    int rc = 0;
    {
        zbuf::CoreScope core(0);
        if (argc >= 3) {
            rc = run_mode(argv[1], std::strtoull(argv[2], nullptr, 0), argc >= 4 && std::string_view(argv[3]) == "-v");
        } else {
            for (const char* m : {"rx64", "rx4k", "rr"}) rc |= run_mode(m, std::string_view(m) == "rr" ? 200000 : 2000000, true);
        }
        arena->drain_returns();
    }
    return rc;
}
