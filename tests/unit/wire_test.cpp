// Unit tests: Ethernet/802.1Q, IPv4 and TCP parse/emit (RFC 791, RFC 9293
// §3.1-3.2, RFC 7323, RFC 2018, RFC 6691), one test per drop reason, and
// exact bytes of a Linux SYN. Frames are built by hand here and their
// checksums computed with the independent reference in wire_test_util.hpp.
#include <catch2/catch.hpp>

#include <random>

#include "stack/wire/wire.hpp"
#include "tests/unit/wire_test_util.hpp"

using namespace crescent::wire;
using namespace wire_test;

namespace {

constexpr size_t kIpOff = 14;
constexpr size_t kTcpOff = kIpOff + 20;

// eth(02:..:02 <- 02:..:01) / IPv4 10.0.0.1 -> 10.0.0.2 / TCP 42210 -> 5201
// ACK|PSH with raw `opts` (length multiple of 4) and `payload`; checksums right.
ByteVec raw_frame(const ByteVec& opts, const ByteVec& payload)
{
    REQUIRE(opts.size() % 4 == 0);
    const size_t tcp_len = 20 + opts.size() + payload.size();
    const size_t total = 20 + tcp_len;
    ByteVec f = bytes({0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00,
                       0x45, 0x00, int(total >> 8), int(total & 0xff), 0x12, 0x34, 0x40, 0x00, 0x40, 0x06, 0, 0,
                       10, 0, 0, 1, 10, 0, 0, 2,
                       0xa4, 0xe2, 0x14, 0x51, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x20, 0x00,
                       int((20 + opts.size()) / 4) << 4, 0x18, 0x01, 0xf5, 0, 0, 0, 0});
    append(f, opts);
    append(f, payload);
    fix_ip_csum(f, kIpOff);
    fix_tcp_csum(f, kIpOff);
    return f;
}

ByteVec hello() { return bytes({'h', 'e', 'l', 'l', 'o'}); }

Drop parse(const ByteVec& f, Frame* out = nullptr, Offload off = {})
{
    Frame tmp;
    return parse_frame(f, off, out ? out : &tmp);
}

// Emits a whole frame with the library's emitters.
ByteVec emit_frame(const Frame& fr, const ByteVec& payload, CsumMode mode = CsumMode::Full)
{
    const size_t eth_len = eth_header_len(fr.eth);
    const size_t tcp_len = tcp_header_len(fr.tcp);
    ByteVec f(eth_len + kIpv4HeaderLen + tcp_len + payload.size());
    emit_eth(fr.eth, f);
    Ipv4Repr ip = fr.ip;
    ip.payload_len = uint16_t(tcp_len + payload.size());
    emit_ipv4(ip, MutBytes(f).subspan(eth_len), true);
    std::copy(payload.begin(), payload.end(), f.begin() + ptrdiff_t(eth_len + kIpv4HeaderLen + tcp_len));
    const Bytes spans[] = {Bytes(payload)};
    emit_tcp(fr.tcp, ip, MutBytes(f).subspan(eth_len + kIpv4HeaderLen, tcp_len), spans, mode);
    return f;
}

Frame base_frame()
{
    Frame fr;
    fr.eth.dst.b = {0x02, 0, 0, 0, 0, 0x02};
    fr.eth.src.b = {0x02, 0, 0, 0, 0, 0x01};
    fr.ip.src = Ipv4Addr{0x0a000001};
    fr.ip.dst = Ipv4Addr{0x0a000002};
    fr.ip.ident = 0x1234;
    fr.tcp.src_port = 42210;
    fr.tcp.dst_port = 5201;
    fr.tcp.seq = SeqNum(0x1000);
    fr.tcp.ack = SeqNum(0x2000);
    fr.tcp.flags = tcp_flags::ACK | tcp_flags::PSH;
    fr.tcp.window = 501;
    return fr;
}

} // namespace

// ---- exact bytes ---------------------------------------------------------------

TEST_CASE("RFC 9293 §3.1: a Linux SYN, byte for byte", "[wire][tcp]")
{
    // What Linux 6.x sends for connect(): MSS, SACKOK+TS packed, NOP WS.
    ByteVec f = bytes({
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00,
        0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00,
        10, 0, 0, 1, 10, 0, 0, 2,
        0xa4, 0xe2, 0x14, 0x51, 0x5f, 0x3a, 0x1b, 0x2c, 0x00, 0x00, 0x00, 0x00,
        0xa0, 0x02, 0xfa, 0xf0, 0x00, 0x00, 0x00, 0x00,
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x9d, 0x3e, 0x51,
        0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07});
    fix_ip_csum(f, kIpOff);
    fix_tcp_csum(f, kIpOff);
    // Also computed by a third implementation (tests/fuzz/gen_corpus_wire.py,
    // whose syn_linux seed is this frame).
    CHECK(get16(f, kIpOff + 10) == 0x0a74);
    CHECK(get16(f, kTcpOff + 16) == 0xc684);

    Frame want;
    want.eth.dst.b = {0x02, 0, 0, 0, 0, 0x02};
    want.eth.src.b = {0x02, 0, 0, 0, 0, 0x01};
    want.ip.src = Ipv4Addr{0x0a000001};
    want.ip.dst = Ipv4Addr{0x0a000002};
    want.ip.ident = 0x1c46;
    want.ip.payload_len = 40;
    want.tcp.src_port = 42210;
    want.tcp.dst_port = 5201;
    want.tcp.seq = SeqNum(0x5f3a1b2c);
    want.tcp.flags = tcp_flags::SYN;
    want.tcp.window = 64240;
    want.tcp.opts.mss = 1460;
    want.tcp.opts.sack_permitted = true;
    want.tcp.opts.ts = Timestamps{0x009d3e51, 0};
    want.tcp.opts.wscale = 7;
    want.payload_off = 74;
    want.payload_len = 0;

    Frame got;
    REQUIRE(parse(f, &got) == Drop::None);
    CHECK(got.eth == want.eth);
    CHECK(got.ip == want.ip);
    CHECK(got.tcp.opts == want.tcp.opts);
    CHECK(got.tcp == want.tcp);
    CHECK(got == want);

    CHECK(tcp_header_len(want.tcp) == 40);
    ByteVec emitted = emit_frame(want, {});
    CHECK(emitted == f);
}

TEST_CASE("RFC 7323 / RFC 2018: Linux option layouts", "[wire][tcp]")
{
    struct Case {
        const char* name;
        TcpOptions opts;
        ByteVec bytes;
    };
    TcpOptions syn_no_ts;
    syn_no_ts.mss = 1460;
    syn_no_ts.sack_permitted = true;
    syn_no_ts.wscale = 7;
    TcpOptions ts_only;
    ts_only.ts = Timestamps{0x01020304, 0x05060708};
    TcpOptions ts_sack = ts_only;
    ts_sack.sack_count = 1;
    ts_sack.sack[0] = {SeqNum(0x11111111), SeqNum(0x22222222)};
    TcpOptions mss_ts_ws;
    mss_ts_ws.mss = 8960;
    mss_ts_ws.ts = Timestamps{1, 0};
    mss_ts_ws.wscale = 9;
    const Case cases[] = {
        {"SYN without timestamps", syn_no_ts,
         bytes({0x02, 0x04, 0x05, 0xb4, 0x01, 0x01, 0x04, 0x02, 0x01, 0x03, 0x03, 0x07})},
        {"data segment with timestamps", ts_only,
         bytes({0x01, 0x01, 0x08, 0x0a, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08})},
        {"timestamps + one SACK block", ts_sack,
         bytes({0x01, 0x01, 0x08, 0x0a, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                0x01, 0x01, 0x05, 0x0a, 0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22})},
        {"SYN with timestamps, no SACK", mss_ts_ws,
         bytes({0x02, 0x04, 0x23, 0x00, 0x01, 0x01, 0x08, 0x0a, 0, 0, 0, 1, 0, 0, 0, 0,
                0x01, 0x03, 0x03, 0x09})},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        TcpRepr r = base_frame().tcp;
        r.opts = c.opts;
        REQUIRE(tcp_header_len(r) == 20 + c.bytes.size());
        ByteVec hdr(tcp_header_len(r));
        emit_tcp(r, Ipv4Repr{}, hdr, {}, CsumMode::None);
        CHECK(ByteVec(hdr.begin() + 20, hdr.end()) == c.bytes);
        CHECK(uint8_t(hdr[12]) >> 4 == hdr.size() / 4);
    }
}

// ---- round trips -----------------------------------------------------------------

TEST_CASE("parse(emit(x)) == x for every option combination", "[wire][tcp]")
{
    std::mt19937 rng(1234);
    for (unsigned mask = 0; mask < 16; ++mask) {
        for (uint8_t sacks = 0; sacks <= kMaxSackBlocks; ++sacks) {
            Frame fr = base_frame();
            fr.tcp.seq = SeqNum(rng());
            fr.tcp.ack = SeqNum(rng());
            fr.tcp.flags = uint8_t(rng());
            fr.tcp.window = uint16_t(rng());
            fr.tcp.urgent = uint16_t(rng());
            fr.ip.ttl = uint8_t(rng());
            fr.ip.dscp = uint8_t(rng() % 64);
            fr.ip.ecn = uint8_t(rng() % 4);
            fr.ip.ident = uint16_t(rng());
            fr.ip.dont_fragment = rng() % 2;
            TcpOptions& o = fr.tcp.opts;
            if (mask & 1)
                o.mss = uint16_t(rng());
            if (mask & 2)
                o.wscale = uint8_t(rng() % 15);
            if (mask & 4)
                o.sack_permitted = true;
            if (mask & 8)
                o.ts = Timestamps{uint32_t(rng()), uint32_t(rng())};
            o.sack_count = sacks;
            for (size_t i = 0; i < sacks; ++i)
                o.sack[i] = {SeqNum(rng()), SeqNum(rng())};
            INFO("mask " << mask << " sacks " << int(sacks));

            ByteVec payload(rng() % 64);
            for (auto& b : payload)
                b = std::byte(rng());
            ByteVec f = emit_frame(fr, payload);
            const size_t hl = tcp_header_len(fr.tcp);
            REQUIRE(hl % 4 == 0);
            REQUIRE(hl <= 60);
            REQUIRE(f.size() == 14 + 20 + hl + payload.size());

            // The emitter's checksums agree with the reference.
            CHECK(ref_csum(Bytes(f).subspan(kIpOff, 20)) == 0);
            ByteVec check = f;
            fix_tcp_csum(check, kIpOff);
            CHECK(check == f);

            Frame got;
            REQUIRE(parse(f, &got) == Drop::None);
            Frame want = fr;
            want.ip.payload_len = uint16_t(hl + payload.size());
            want.payload_off = 14 + 20 + hl;
            want.payload_len = payload.size();
            // The spec of wire.hpp: all blocks if the Linux layout or else the
            // unpadded one fits in 40 bytes; otherwise as many as the Linux
            // layout holds (a data segment with timestamps carries 3, as Linux's).
            const auto linux_len = [&](size_t n) {
                return (o.mss ? 4 : 0) + (o.ts ? 12 : o.sack_permitted ? 4 : 0) + (o.wscale ? 4 : 0) +
                       (n ? 4 + 8 * n : 0);
            };
            const size_t unpadded_len = (o.mss ? 4 : 0) + (o.wscale ? 3 : 0) + (o.sack_permitted ? 2 : 0) +
                                        (o.ts ? 10 : 0) + (sacks ? 2 + 8 * sacks : 0);
            size_t want_blocks = sacks;
            if (linux_len(sacks) > 40 && unpadded_len > 40)
                while (linux_len(want_blocks) > 40)
                    --want_blocks;
            const size_t emitted = tcp_sack_blocks_emitted(fr.tcp);
            CHECK(emitted == want_blocks);
            if (mask == 8 && sacks == 4)
                CHECK(emitted == 3);
            want.tcp.opts.sack_count = uint8_t(emitted);
            CHECK(got.tcp.opts == want.tcp.opts);
            CHECK(got == want);
            CHECK(ByteVec(f.begin() + ptrdiff_t(got.payload_off), f.end()) == payload);
        }
    }
}

TEST_CASE("Ethernet and IPv4 reprs round-trip", "[wire][eth][ipv4]")
{
    EthRepr e;
    e.dst.b = {1, 2, 3, 4, 5, 6};
    e.src.b = {7, 8, 9, 10, 11, 12};
    e.ethertype = kEtherTypeArp;
    for (bool tagged : {false, true}) {
        if (tagged)
            e.vlan_tci = 0x2064; // PCP 1, VID 100
        ByteVec b(eth_header_len(e));
        CHECK(b.size() == (tagged ? 18u : 14u));
        emit_eth(e, b);
        EthRepr got;
        size_t off = 0;
        CHECK(parse_eth(b, &got, &off) == Drop::EthNotIpv4); // repr filled anyway
        CHECK(off == b.size());
        CHECK(got == e);
    }

    Ipv4Repr ip;
    ip.src = Ipv4Addr{0xc0a80001};
    ip.dst = Ipv4Addr{0xc0a800c7};
    ip.ttl = 1;
    ip.dscp = 46;
    ip.ecn = 3;
    ip.ident = 0xbeef;
    ip.dont_fragment = false;
    ip.payload_len = 0;
    ByteVec b(20);
    emit_ipv4(ip, b);
    Ipv4Repr got;
    size_t off = 0;
    REQUIRE(parse_ipv4(b, false, &got, &off) == Drop::None);
    CHECK(off == 20);
    CHECK(got == ip);
    emit_ipv4(ip, b, false);
    CHECK(get16(b, 10) == 0);
    CHECK(parse_ipv4(b, false, &got, &off) == Drop::IpBadChecksum);
    CHECK(parse_ipv4(b, true, &got, &off) == Drop::None);
}

TEST_CASE("a parsed header that fits 40 option bytes only unpadded still round-trips", "[wire][tcp]")
{
    // MSS + SACK-permitted + 4 SACK blocks: 4 + 2 + 34 = 40 bytes raw, 44 in
    // Linux's padded layout.
    ByteVec opts = bytes({0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x05, 0x22});
    for (int i = 0; i < 32; ++i)
        opts.push_back(std::byte(i + 1));
    ByteVec f = raw_frame(opts, hello());
    Frame got;
    REQUIRE(parse(f, &got) == Drop::None);
    CHECK(got.tcp.opts.sack_count == 4);
    CHECK(got.tcp.opts.sack[3].right == SeqNum(0x1d1e1f20));
    CHECK(tcp_header_len(got.tcp) == 60);
    CHECK(tcp_sack_blocks_emitted(got.tcp) == 4);
    Frame again;
    REQUIRE(parse(emit_frame(got, hello()), &again) == Drop::None);
    CHECK(again.tcp == got.tcp);
}

TEST_CASE("RFC 2018: several SACK options accumulate blocks", "[wire][tcp]")
{
    ByteVec opts = bytes({0x05, 0x0a, 0, 0, 0, 1, 0, 0, 0, 2, 0x01, 0x01,
                          0x05, 0x12, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 6});
    opts.resize(32, std::byte(0)); // EOL padding
    Frame got;
    REQUIRE(parse(raw_frame(opts, hello()), &got) == Drop::None);
    REQUIRE(got.tcp.opts.sack_count == 3);
    CHECK(got.tcp.opts.sack[0] == SackBlock{SeqNum(1), SeqNum(2)});
    CHECK(got.tcp.opts.sack[2] == SackBlock{SeqNum(5), SeqNum(6)});
}

TEST_CASE("RFC 9293 §3.2: unknown options are skipped by length, EOL ends the list", "[wire][tcp]")
{
    // Unknown kind 30 (MPTCP) length 6, NOP, MSS; then EOL followed by junk.
    ByteVec opts = bytes({30, 6, 1, 2, 3, 4, 0x01, 0x02, 0x04, 0x23, 0x28, 0x00, 0x02, 0x01, 0xff, 0xff});
    Frame got;
    REQUIRE(parse(raw_frame(opts, hello()), &got) == Drop::None);
    CHECK(got.tcp.opts.mss == uint16_t(9000));
    CHECK_FALSE(got.tcp.opts.wscale);
    CHECK(got.payload_len == 5);
    CHECK(got.payload_off == kTcpOff + 20 + opts.size());
}

TEST_CASE("IEEE 802.1Q: a VLAN-tagged frame parses", "[wire][eth]")
{
    ByteVec f = raw_frame(bytes({0x01, 0x01, 0x08, 0x0a, 0, 0, 0, 9, 0, 0, 0, 8}), hello());
    ByteVec tag = bytes({0x81, 0x00, 0xa0, 0x64});
    f.insert(f.begin() + 12, tag.begin(), tag.end()); // TPID, PCP 5 VID 100, then 0x0800
    Frame got;
    REQUIRE(parse(f, &got) == Drop::None);
    CHECK(got.eth.vlan_tci == uint16_t(0xa064));
    CHECK(got.eth.ethertype == kEtherTypeIpv4);
    CHECK(got.payload_off == 18 + 20 + 32);
    CHECK(got.payload_len == 5);
    CHECK(got.tcp.opts.ts == Timestamps{9, 8});
    // And re-emitting keeps the tag.
    Frame again;
    REQUIRE(parse(emit_frame(got, hello()), &again) == Drop::None);
    CHECK(again == got);
}

TEST_CASE("RFC 791: IP options are skipped, Ethernet padding is excluded", "[wire][ipv4]")
{
    ByteVec f = raw_frame({}, {});
    // Minimum-size Ethernet frame: 54 bytes of headers padded to 60 with junk.
    f.resize(60, std::byte(0xa5));
    Frame got;
    REQUIRE(parse(f, &got) == Drop::None);
    CHECK(got.payload_len == 0);
    CHECK(got.ip.payload_len == 20);

    // IHL 6: one word of options (NOP NOP NOP EOL).
    ByteVec g = raw_frame({}, hello());
    ByteVec ipopt = bytes({1, 1, 1, 0});
    g.insert(g.begin() + kTcpOff, ipopt.begin(), ipopt.end());
    g[kIpOff] = std::byte(0x46);
    put16(g, kIpOff + 2, uint16_t(get16(g, kIpOff + 2) + 4));
    fix_ip_csum(g, kIpOff);
    fix_tcp_csum(g, kIpOff);
    REQUIRE(parse(g, &got) == Drop::None);
    CHECK(got.payload_off == kTcpOff + 4 + 20);
    CHECK(got.payload_len == 5);
}

// ---- emit checksum modes -------------------------------------------------------

TEST_CASE("emit_tcp: Full over odd-length payload spans, PseudoOnly as a device completes it", "[wire][tcp][csum]")
{
    Frame fr = base_frame();
    fr.tcp.opts.ts = Timestamps{77, 66};
    ByteVec payload(1001);
    std::mt19937 rng(5);
    for (auto& b : payload)
        b = std::byte(rng());
    const size_t hl = tcp_header_len(fr.tcp);
    fr.ip.payload_len = uint16_t(hl + payload.size());

    // Full, the payload in three spans of odd lengths.
    ByteVec seg(hl + payload.size());
    std::copy(payload.begin(), payload.end(), seg.begin() + ptrdiff_t(hl));
    const Bytes spans[] = {Bytes(payload).subspan(0, 333), Bytes(payload).subspan(333, 1),
                           Bytes(payload).subspan(334)};
    emit_tcp(fr.tcp, fr.ip, MutBytes(seg).first(hl), spans, CsumMode::Full);
    ByteVec pseudo = bytes({10, 0, 0, 1, 10, 0, 0, 2, 0, 6, int(seg.size() >> 8), int(seg.size() & 0xff)});
    CHECK(ref_csum(seg, ref_sum(pseudo)) == 0);
    TcpRepr got;
    size_t off = 0;
    REQUIRE(parse_tcp(seg, fr.ip, false, &got, &off) == Drop::None);
    CHECK(got == fr.tcp);
    CHECK(off == hl);

    // PseudoOnly: the folded pseudo-header sum, not inverted; a device that
    // sums the segment from there and inverts produces the full checksum.
    emit_tcp(fr.tcp, fr.ip, MutBytes(seg).first(hl), spans, CsumMode::PseudoOnly);
    CHECK(get16(seg, 16) == ref_sum(pseudo));
    put16(seg, 16, ref_csum(seg));
    REQUIRE(parse_tcp(seg, fr.ip, false, &got, &off) == Drop::None);

    // Full, the payload's first span lying right behind the header (a frame
    // built by copy: summed with the header as one span), the rest elsewhere.
    for (size_t first : {size_t(0), size_t(1), size_t(333), size_t(1001)}) {
        put16(seg, 16, 0xdead);
        const Bytes in_frame = Bytes(seg).subspan(hl, first);
        const Bytes split[] = {in_frame, Bytes(payload).subspan(first)};
        emit_tcp(fr.tcp, fr.ip, MutBytes(seg).first(hl), split, CsumMode::Full);
        INFO("first span " << first);
        CHECK(ref_csum(seg, ref_sum(pseudo)) == 0);
    }

    emit_tcp(fr.tcp, fr.ip, MutBytes(seg).first(hl), spans, CsumMode::None);
    CHECK(get16(seg, 16) == 0);
    CHECK(parse_tcp(seg, fr.ip, false, &got, &off) == Drop::TcpBadChecksum);
    CHECK(parse_tcp(seg, fr.ip, true, &got, &off) == Drop::None);
}

TEST_CASE("emit_tcp: Full checksum of every option layout, random fields and payload spans", "[wire][tcp][csum]")
{
    std::mt19937 rng(17);
    Frame fr = base_frame();
    ByteVec payload(301);
    for (int i = 0; i < 4000; ++i) {
        TcpRepr r = fr.tcp;
        r.src_port = uint16_t(rng());
        r.dst_port = uint16_t(rng());
        r.seq = SeqNum(uint32_t(rng()));
        r.ack = SeqNum(uint32_t(rng()));
        r.flags = uint8_t(rng());
        r.window = uint16_t(rng());
        r.urgent = uint16_t(rng());
        r.opts = TcpOptions{};
        const unsigned layout = i % 6;
        if (layout >= 1) r.opts.ts = Timestamps{uint32_t(rng()), uint32_t(rng())};
        if (layout == 2) r.opts.sack_permitted = true;
        if (layout == 3) r.opts.mss = uint16_t(rng()), r.opts.wscale = uint8_t(rng() % 15);
        if (layout >= 4) {  // SACK blocks, with or without timestamps
            if (layout == 5) r.opts.ts.reset();
            r.opts.sack_count = uint8_t(1 + rng() % 4);
            for (size_t b = 0; b < r.opts.sack_count; ++b)
                r.opts.sack[b] = SackBlock{SeqNum(uint32_t(rng())), SeqNum(uint32_t(rng()))};
        }
        for (auto& b : payload)
            b = std::byte(rng());
        const size_t n = rng() % payload.size(), cut = n ? rng() % n : 0;
        const size_t hl = tcp_header_len(r);
        Ipv4Repr ip = fr.ip;
        ip.payload_len = uint16_t(hl + n);
        ByteVec seg(hl + n);
        std::copy(payload.begin(), payload.begin() + ptrdiff_t(n), seg.begin() + ptrdiff_t(hl));
        const Bytes spans[] = {Bytes(payload).first(cut), Bytes(payload).subspan(cut, n - cut)};
        emit_tcp(r, ip, MutBytes(seg).first(hl), spans, CsumMode::Full);
        ByteVec pseudo = bytes({10, 0, 0, 1, 10, 0, 0, 2, 0, 6, int(seg.size() >> 8), int(seg.size() & 0xff)});
        INFO("layout " << layout << " payload " << n << " cut " << cut);
        REQUIRE(ref_csum(seg, ref_sum(pseudo)) == 0);
    }
}

// ---- every drop reason ----------------------------------------------------------

TEST_CASE("drop reasons: Ethernet", "[wire][drop]")
{
    ByteVec f = raw_frame({}, hello());
    CHECK(parse(ByteVec(f.begin(), f.begin() + 13)) == Drop::EthTruncated);
    CHECK(parse(ByteVec{}) == Drop::EthTruncated);
    ByteVec vlan = bytes({2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x00, 0x64, 0x08});
    CHECK(parse(vlan) == Drop::EthTruncated); // tag present, inner ethertype cut
    ByteVec arp = f;
    put16(arp, 12, kEtherTypeArp);
    Frame got;
    CHECK(parse(arp, &got) == Drop::EthNotIpv4);
    CHECK(got.eth.ethertype == kEtherTypeArp);
    put16(arp, 12, 0x86dd);
    CHECK(parse(arp) == Drop::EthNotIpv4);
}

TEST_CASE("drop reasons: IPv4", "[wire][drop]")
{
    const ByteVec good = raw_frame({}, hello());
    REQUIRE(parse(good) == Drop::None);

    SECTION("short packet") {
        CHECK(parse(ByteVec(good.begin(), good.begin() + kIpOff + 19)) == Drop::IpTruncated);
    }
    SECTION("IHL beyond the packet") {
        ByteVec f(good.begin(), good.begin() + kIpOff + 20);
        f[kIpOff] = std::byte(0x46); // 24-byte header in a 20-byte packet
        CHECK(parse(f) == Drop::IpTruncated);
    }
    SECTION("version != 4") {
        ByteVec f = good;
        f[kIpOff] = std::byte(0x65);
        fix_ip_csum(f, kIpOff);
        CHECK(parse(f) == Drop::IpBadVersion);
    }
    SECTION("IHL < 5") {
        for (int ihl : {0, 4}) {
            ByteVec f = good;
            f[kIpOff] = std::byte(0x40 | ihl);
            CHECK(parse(f) == Drop::IpBadIhl);
        }
    }
    SECTION("bad header checksum, unless the device verified it") {
        ByteVec f = good;
        f[kIpOff + 8] = std::byte(0x3f); // TTL changed, checksum not
        CHECK(parse(f) == Drop::IpBadChecksum);
        CHECK(parse(f, nullptr, Offload{.rx_ip_csum_ok = true}) == Drop::None);
    }
    SECTION("total length beyond the frame") {
        ByteVec f = good;
        put16(f, kIpOff + 2, uint16_t(get16(f, kIpOff + 2) + 1));
        fix_ip_csum(f, kIpOff);
        CHECK(parse(f) == Drop::IpBadTotalLength);
    }
    SECTION("total length below the header length") {
        ByteVec f = good;
        put16(f, kIpOff + 2, 19);
        fix_ip_csum(f, kIpOff);
        CHECK(parse(f) == Drop::IpBadTotalLength);
    }
    SECTION("fragments: MF, and a non-zero offset") {
        for (uint16_t frag : {uint16_t(0x2000), uint16_t(0x0001), uint16_t(0x4000 | 0x0100)}) {
            ByteVec f = good;
            put16(f, kIpOff + 6, frag);
            fix_ip_csum(f, kIpOff);
            CHECK(parse(f) == Drop::IpFragment);
        }
    }
    SECTION("not TCP") {
        ByteVec f = good;
        f[kIpOff + 9] = std::byte(17);
        fix_ip_csum(f, kIpOff);
        Frame got;
        CHECK(parse(f, &got) == Drop::IpNotTcp);
        CHECK(got.ip.protocol == 17);
    }
    SECTION("martian sources: 0/8, 127/8, multicast, 240/4 and broadcast, land (src == dst)") {
        const uint32_t dst = get16(good, kIpOff + 16) << 16 | get16(good, kIpOff + 18);
        for (uint32_t src : {0x00000000u, 0x00010203u, 0x7f000001u, 0xe0000001u, 0xefffffffu, 0xf0000001u,
                             0xffffffffu, dst}) {
            ByteVec f = good;
            put16(f, kIpOff + 12, uint16_t(src >> 16));
            put16(f, kIpOff + 14, uint16_t(src));
            fix_ip_csum(f, kIpOff);
            INFO("source " << std::hex << src);
            CHECK(parse(f) == Drop::IpBadSource);
        }
        // Next to them, ordinary sources get as far as the TCP checksum (not fixed here).
        for (uint32_t src : {0x01000001u, 0x7e000001u, 0x80000001u, 0xdfffffffu, dst + 1}) {
            ByteVec f = good;
            put16(f, kIpOff + 12, uint16_t(src >> 16));
            put16(f, kIpOff + 14, uint16_t(src));
            fix_ip_csum(f, kIpOff);
            INFO("source " << std::hex << src);
            CHECK(parse(f) == Drop::TcpBadChecksum);
        }
        // A non-TCP packet from a martian source is still the caller's (IpNotTcp, repr filled).
        ByteVec f = good;
        put16(f, kIpOff + 12, 0xe000);
        f[kIpOff + 9] = std::byte(1);
        fix_ip_csum(f, kIpOff);
        CHECK(parse(f) == Drop::IpNotTcp);
        CHECK(drop_name(Drop::IpBadSource) == "ip_bad_source");
    }
}

TEST_CASE("drop reasons: TCP header", "[wire][drop]")
{
    const ByteVec good = raw_frame({}, hello());

    SECTION("segment shorter than 20 bytes") {
        ByteVec f(good.begin(), good.begin() + kTcpOff + 19);
        put16(f, kIpOff + 2, 20 + 19);
        fix_ip_csum(f, kIpOff);
        CHECK(parse(f) == Drop::TcpTruncated);
    }
    SECTION("data offset < 5") {
        ByteVec f = good;
        f[kTcpOff + 12] = std::byte(0x40);
        fix_tcp_csum(f, kIpOff);
        CHECK(parse(f) == Drop::TcpBadDataOffset);
    }
    SECTION("data offset beyond the segment") {
        ByteVec f = good; // 25-byte segment, data offset 7 words = 28 bytes
        f[kTcpOff + 12] = std::byte(0x70);
        fix_tcp_csum(f, kIpOff);
        CHECK(parse(f) == Drop::TcpBadDataOffset);
    }
    SECTION("bad checksum, unless the device verified it") {
        ByteVec f = good;
        f.back() ^= std::byte(0x01);
        CHECK(parse(f) == Drop::TcpBadChecksum);
        CHECK(parse(f, nullptr, Offload{.rx_l4_csum_ok = true}) == Drop::None);
    }
    SECTION("the checksum covers the pseudo-header") {
        ByteVec f = good;
        f[kIpOff + 15] = std::byte(9); // source address 10.0.0.9
        fix_ip_csum(f, kIpOff);
        CHECK(parse(f) == Drop::TcpBadChecksum);
    }
}

TEST_CASE("drop reasons: TCP options", "[wire][drop]")
{
    struct Case {
        const char* name;
        ByteVec opts;
        Drop want;
    };
    const Case cases[] = {
        {"option length 0", bytes({30, 0, 0, 0}), Drop::TcpBadOption},
        {"option length 1", bytes({30, 1, 0, 0}), Drop::TcpBadOption},
        {"MSS length 0", bytes({2, 0, 0, 0}), Drop::TcpBadOption},
        {"option overrunning the header", bytes({1, 1, 30, 3}), Drop::TcpBadOption},
        {"SACK overrunning the header", bytes({5, 10, 0, 0, 0, 1, 0, 0}), Drop::TcpBadOption},
        {"kind without a length byte", bytes({1, 1, 1, 8}), Drop::TcpBadOption},
        {"MSS length 3", bytes({2, 3, 5, 1}), Drop::TcpBadOptionLength},
        {"MSS length 5", bytes({2, 5, 5, 0xb4, 0, 0, 0, 0}), Drop::TcpBadOptionLength},
        {"window scale length 2", bytes({3, 2, 1, 1}), Drop::TcpBadOptionLength},
        {"window scale length 4", bytes({3, 4, 7, 0}), Drop::TcpBadOptionLength},
        {"SACK-permitted length 3", bytes({4, 3, 0, 0}), Drop::TcpBadOptionLength},
        {"SACK length 2 (no block)", bytes({5, 2, 0, 0}), Drop::TcpBadOptionLength},
        {"SACK length 9", bytes({5, 9, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0}), Drop::TcpBadOptionLength},
        {"SACK length 11", bytes({5, 11, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0}), Drop::TcpBadOptionLength},
        {"timestamps length 8", bytes({1, 1, 8, 8, 0, 0, 0, 1, 0, 0, 0, 2}), Drop::TcpBadOptionLength},
        {"timestamps length 12", bytes({8, 12, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0}), Drop::TcpBadOptionLength},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        ByteVec f = raw_frame(c.opts, hello());
        CHECK(parse(f) == c.want);
        // The option error is found with checksum offload too.
        CHECK(parse(f, nullptr, Offload{true, true}) == c.want);
    }
}

TEST_CASE("every drop reason has a distinct name", "[wire][drop]")
{
    std::vector<std::string_view> names;
    for (size_t i = 0; i < kDropCount; ++i) {
        auto n = drop_name(Drop(i));
        CHECK(n != "unknown");
        CHECK(std::find(names.begin(), names.end(), n) == names.end());
        names.push_back(n);
    }
}

TEST_CASE("the parsers never read past the buffer (every truncation of valid frames)", "[wire][drop]")
{
    // Under ASan any out-of-bounds read aborts; each prefix is its own allocation.
    Frame fr = base_frame();
    fr.tcp.opts.mss = 1460;
    fr.tcp.opts.wscale = 7;
    fr.tcp.opts.sack_permitted = true;
    fr.tcp.opts.ts = Timestamps{1, 2};
    ByteVec f = emit_frame(fr, hello());
    fr.eth.vlan_tci = 5;
    ByteVec g = emit_frame(fr, hello());
    for (const ByteVec* full : {&f, &g}) {
        for (size_t n = 0; n < full->size(); ++n) {
            std::vector<std::byte> prefix(full->begin(), full->begin() + ptrdiff_t(n));
            Frame got;
            CHECK(parse_frame(prefix, Offload{}, &got) != Drop::None);
            CHECK(parse_frame(prefix, Offload{true, true}, &got) != Drop::None);
        }
        REQUIRE(parse(*full) == Drop::None);
    }
}

TEST_CASE("RFC 7323 Appendix A: the NOP NOP TS fast path agrees with the general parser", "[wire][tcp]")
{
    const ByteVec fast = bytes({0x01, 0x01, 0x08, 0x0a, 0, 0, 0, 7, 0, 0, 0, 9});
    const ByteVec slow = bytes({0x08, 0x0a, 0, 0, 0, 7, 0, 0, 0, 9, 0x01, 0x00});
    Frame a, b;
    REQUIRE(parse(raw_frame(fast, hello()), &a) == Drop::None);
    REQUIRE(parse(raw_frame(slow, hello()), &b) == Drop::None);
    CHECK(a.tcp.opts.ts == Timestamps{7, 9});
    CHECK(a.tcp == b.tcp);
    // Parsing into a repr that held other options clears them.
    Frame c = a;
    c.tcp.opts.mss = 1;
    c.tcp.opts.sack_count = 2;
    c.eth.vlan_tci = 3;
    REQUIRE(parse(raw_frame(fast, hello()), &c) == Drop::None);
    CHECK(c == a);
    CHECK(parse(raw_frame(bytes({0x01, 0x01, 0x08, 0x0b, 0, 0, 0, 7, 0, 0, 0, 9}), hello())) ==
          Drop::TcpBadOption);
}
