// Unit tests: the established segment's frame (stack/wire/ts_frame.cpp) is the
// general path's, byte for byte and repr for repr. Random segments of the
// shape are written by both emitters and compared; the frames, and every
// single-byte corruption and truncation of them, are parsed both ways, and
// whenever the shape's parser says yes the general parser must give the same
// repr. Frames of other shapes must be refused by it and still parse.
#include <catch2/catch.hpp>

#include <random>

#include "stack/wire/wire.hpp"
#include "tests/unit/wire_test_util.hpp"

using namespace crescent::wire;
using namespace wire_test;

namespace {

struct Seg {
    MacAddr dst, src;
    Ipv4Repr ip;
    TcpRepr tcp;
    ByteVec payload;
};

Seg random_seg(std::mt19937& rng)
{
    auto u = [&](uint32_t n) { return uint32_t(rng() % n); };
    Seg s;
    for (auto& b : s.dst.b) b = uint8_t(rng());
    for (auto& b : s.src.b) b = uint8_t(rng());
    s.ip.src.v = 0x0a000000u | u(1u << 24);
    s.ip.dst.v = 0xc0a80000u | u(1u << 16);
    s.ip.dscp = uint8_t(u(64));
    s.ip.ecn = uint8_t(u(4));
    s.ip.ident = uint16_t(rng());
    s.ip.ttl = uint8_t(1 + u(255));
    s.ip.dont_fragment = u(2) != 0;
    s.tcp.src_port = uint16_t(rng());
    s.tcp.dst_port = uint16_t(rng());
    s.tcp.seq = SeqNum(uint32_t(rng()));
    s.tcp.ack = SeqNum(uint32_t(rng()));
    s.tcp.flags = uint8_t(rng());
    s.tcp.window = uint16_t(rng());
    s.tcp.urgent = u(4) == 0 ? uint16_t(rng()) : 0;
    s.tcp.opts.ts = Timestamps{uint32_t(rng()), uint32_t(rng())};
    const size_t n = u(3) == 0 ? u(1500) : u(200);  // odd lengths too
    for (size_t i = 0; i < n; ++i) s.payload.push_back(std::byte(rng()));
    s.ip.payload_len = uint16_t(kTsTcpHeaderLen + n);
    return s;
}

// The frame as the general emitters write it (the payload behind the header).
ByteVec general(const Seg& s, bool ip_csum, CsumMode mode)
{
    const size_t tcp_len = tcp_header_len(s.tcp);
    ByteVec f(kEthHeaderLen + kIpv4HeaderLen + tcp_len + s.payload.size());
    EthRepr eth;
    eth.dst = s.dst;
    eth.src = s.src;
    emit_eth(eth, f);
    emit_ipv4(s.ip, MutBytes(f).subspan(kEthHeaderLen), ip_csum);
    std::copy(s.payload.begin(), s.payload.end(), f.begin() + ptrdiff_t(kEthHeaderLen + kIpv4HeaderLen + tcp_len));
    const Bytes body[] = {Bytes(f).subspan(kEthHeaderLen + kIpv4HeaderLen + tcp_len)};
    emit_tcp(s.tcp, s.ip, MutBytes(f).subspan(kEthHeaderLen + kIpv4HeaderLen, tcp_len), body, mode);
    return f;
}

// The same by emit_ts_frame; `adjacent`: the checksummed payload is the copy
// behind the header (one span), else the caller's own buffer in two spans.
ByteVec fast(const Seg& s, bool ip_csum, CsumMode mode, bool adjacent)
{
    ByteVec f(kTsFrameHeaderLen + s.payload.size());
    std::copy(s.payload.begin(), s.payload.end(), f.begin() + ptrdiff_t(kTsFrameHeaderLen));
    if (adjacent) {
        const Bytes body[] = {Bytes(f).subspan(kTsFrameHeaderLen)};
        emit_ts_frame(f.data(), s.dst, s.src, s.ip, s.tcp, std::span(body, s.payload.empty() ? 0 : 1), ip_csum,
                      mode);
    } else {
        const size_t cut = s.payload.size() / 3;
        const Bytes body[] = {Bytes(s.payload).first(cut), Bytes(s.payload).subspan(cut)};
        emit_ts_frame(f.data(), s.dst, s.src, s.ip, s.tcp, body, ip_csum, mode);
    }
    return f;
}

// parse_ts_frame, checked against the general parse: a yes must be the
// general parse's answer; parse_frame must always be the general parse's.
// Returns whether the shape's parser took the frame.
bool check_parsers_agree(const ByteVec& f, Offload off)
{
    Frame general_fr, fast_fr, any_fr;
    const Drop want = parse_frame_general(f, off, &general_fr);
    const bool took = parse_ts_frame(f, off, &fast_fr);
    const Drop got = parse_frame(f, off, &any_fr);
    REQUIRE(got == want);
    if (want == Drop::None) REQUIRE(any_fr == general_fr);
    if (took) {
        REQUIRE(want == Drop::None);
        REQUIRE(fast_fr == general_fr);
    }
    return took;
}

} // namespace

TEST_CASE("emit_ts_frame writes the general emitters' bytes", "[wire][ts_frame]")
{
    std::mt19937 rng(7301);
    for (int i = 0; i < 3000; ++i) {
        const Seg s = random_seg(rng);
        REQUIRE(ts_frame_fits(s.tcp));
        REQUIRE(tcp_header_len(s.tcp) == kTsTcpHeaderLen);
        for (CsumMode mode : {CsumMode::Full, CsumMode::PseudoOnly, CsumMode::PseudoTso, CsumMode::None})
            for (bool ip_csum : {true, false})
                for (bool adjacent : {true, false}) {
                    INFO("segment " << i << " mode " << int(mode) << " ip_csum " << ip_csum << " adjacent "
                                    << adjacent << " payload " << s.payload.size());
                    REQUIRE(fast(s, ip_csum, mode, adjacent) == general(s, ip_csum, mode));
                }
    }
}

TEST_CASE("the shape: options other than the timestamp alone do not fit", "[wire][ts_frame]")
{
    TcpRepr r;
    CHECK_FALSE(ts_frame_fits(r));  // no options at all
    r.opts.ts = Timestamps{1, 2};
    CHECK(ts_frame_fits(r));
    TcpRepr x = r;
    x.opts.mss = 1460;
    CHECK_FALSE(ts_frame_fits(x));
    x = r;
    x.opts.wscale = 7;
    CHECK_FALSE(ts_frame_fits(x));
    x = r;
    x.opts.sack_permitted = true;
    CHECK_FALSE(ts_frame_fits(x));
    x = r;
    x.opts.sack_count = 1;
    x.opts.sack[0] = SackBlock{SeqNum(10), SeqNum(20)};
    CHECK_FALSE(ts_frame_fits(x));
}

TEST_CASE("parse_ts_frame takes the shape and gives the general parse's repr", "[wire][ts_frame]")
{
    std::mt19937 rng(61440);
    size_t took = 0, frames = 0;
    for (int i = 0; i < 2000; ++i) {
        const Seg s = random_seg(rng);
        const ByteVec f = general(s, true, CsumMode::Full);
        for (Offload off : {Offload{false, false}, Offload{true, true}}) {
            ++frames;
            took += check_parsers_agree(f, off);
        }
        // Ethernet padding behind the segment is not part of it.
        ByteVec padded = f;
        padded.resize(f.size() + 1 + rng() % 40, std::byte(0xee));
        REQUIRE(check_parsers_agree(padded, Offload{}));
    }
    // Every well-formed frame of the shape takes the fast path; the random
    // sources are outside 0/8, 127/8 and 224/4.
    CHECK(took == frames);
}

TEST_CASE("parse_ts_frame: every corruption and truncation gets the general answer", "[wire][ts_frame]")
{
    std::mt19937 rng(65535);
    size_t refused = 0;
    for (int i = 0; i < 60; ++i) {
        Seg s = random_seg(rng);
        s.payload.resize(rng() % 24);
        s.ip.payload_len = uint16_t(kTsTcpHeaderLen + s.payload.size());
        const ByteVec f = general(s, true, CsumMode::Full);
        for (size_t at = 0; at < f.size(); ++at) {
            for (uint8_t x : {0x01, 0x80, 0xff}) {
                ByteVec g = f;
                g[at] ^= std::byte(x);
                for (Offload off : {Offload{false, false}, Offload{true, true}}) refused += !check_parsers_agree(g, off);
            }
        }
        for (size_t n = 0; n < f.size(); ++n) {
            const ByteVec g(f.begin(), f.begin() + ptrdiff_t(n));
            REQUIRE_FALSE(check_parsers_agree(g, Offload{true, true}));
        }
    }
    CHECK(refused > 0);
}

TEST_CASE("parse_ts_frame refuses the other layouts, which still parse", "[wire][ts_frame]")
{
    std::mt19937 rng(4242);
    const Seg s = random_seg(rng);
    const ByteVec f = general(s, true, CsumMode::Full);
    Frame fr;
    REQUIRE(parse_ts_frame(f, Offload{}, &fr));

    // The timestamp after SACK-permitted (a SYN's layout), and unpadded.
    Seg o = s;
    o.tcp.opts.sack_permitted = true;
    ByteVec g = general(o, true, CsumMode::Full);
    CHECK_FALSE(parse_ts_frame(g, Offload{}, &fr));
    CHECK(parse_frame(g, Offload{}, &fr) == Drop::None);
    CHECK(fr.tcp.opts.sack_permitted);

    // A SACK block: a 44-byte header.
    o = s;
    o.tcp.opts.sack_count = 1;
    o.tcp.opts.sack[0] = SackBlock{SeqNum(1), SeqNum(9)};
    o.ip.payload_len = uint16_t(tcp_header_len(o.tcp) + o.payload.size());
    g = general(o, true, CsumMode::Full);
    CHECK_FALSE(parse_ts_frame(g, Offload{}, &fr));
    CHECK(parse_frame(g, Offload{}, &fr) == Drop::None);
    CHECK(fr.tcp.opts.sack_count == 1);

    // No options.
    o = s;
    o.tcp.opts.ts.reset();
    o.ip.payload_len = uint16_t(tcp_header_len(o.tcp) + o.payload.size());
    g = general(o, true, CsumMode::Full);
    CHECK_FALSE(parse_ts_frame(g, Offload{}, &fr));
    CHECK(parse_frame(g, Offload{}, &fr) == Drop::None);

    // An 802.1Q tag in front.
    g = f;
    g.insert(g.begin() + 12, {std::byte(0x81), std::byte(0x00), std::byte(0x00), std::byte(0x05)});
    CHECK_FALSE(parse_ts_frame(g, Offload{}, &fr));
    CHECK(parse_frame(g, Offload{}, &fr) == Drop::None);
    CHECK(fr.eth.vlan_tci == 5);

    // Checks the general path names: a fragment, a martian source, bad sums.
    g = f;
    g[kEthHeaderLen + 6] |= std::byte(0x20);  // MF
    fix_ip_csum(g, kEthHeaderLen);
    CHECK_FALSE(parse_ts_frame(g, Offload{}, &fr));
    CHECK(parse_frame(g, Offload{}, &fr) == Drop::IpFragment);
    g = f;
    g[kEthHeaderLen + 12] = std::byte(127);
    fix_ip_csum(g, kEthHeaderLen);
    fix_tcp_csum(g, kEthHeaderLen);
    CHECK_FALSE(parse_ts_frame(g, Offload{}, &fr));
    CHECK(parse_frame(g, Offload{}, &fr) == Drop::IpBadSource);
    g = f;
    g[kEthHeaderLen + 8] ^= std::byte(1);  // TTL, the IP sum not fixed
    CHECK_FALSE(parse_ts_frame(g, Offload{}, &fr));
    CHECK(parse_frame(g, Offload{}, &fr) == Drop::IpBadChecksum);
    CHECK(parse_ts_frame(g, Offload{true, false}, &fr));  // the device checked it
    g = f;
    g.back() ^= std::byte(1);
    if (s.payload.empty()) g[kTsFrameHeaderLen - 1] ^= std::byte(1);
    CHECK_FALSE(parse_ts_frame(g, Offload{}, &fr));
    CHECK(parse_frame(g, Offload{}, &fr) == Drop::TcpBadChecksum);
}
