// crescent — TCP header and options parse/emit.
//
// RFC 9293 §3.1 (header, options: EOL, NOP, MSS), RFC 6691 (MSS), RFC 7323
// §2 (window scale) and §3 (timestamps), RFC 2018 (SACK-permitted, SACK).
// Option parsing follows RFC 9293 §3.2 / RFC 1122 §4.2.2.5: unknown options
// are skipped by their length; a length that cannot be right (0, 1, or past
// the header) makes the segment undecodable and it is dropped, as Linux does.
#include <algorithm>
#include <cassert>

#include "stack/wire/bytes.hpp"
#include "stack/wire/wire.hpp"

namespace crescent::wire {
using namespace detail;

namespace {

inline constexpr size_t kTcpHeaderLen = 20;
inline constexpr size_t kMaxOptionsLen = 40; // data offset is 4 bits of 32-bit words

namespace opt {
inline constexpr uint8_t EOL = 0, NOP = 1, MSS = 2, WSCALE = 3, SACK_PERM = 4, SACK = 5, TS = 8;
inline constexpr uint8_t MSS_LEN = 4, WSCALE_LEN = 3, SACK_PERM_LEN = 2, TS_LEN = 10;
inline constexpr uint8_t SACK_BASE_LEN = 2, SACK_BLOCK_LEN = 8;
} // namespace opt

// What emit_tcp writes for a given set of options (see wire.hpp).
struct OptPlan {
    bool compact = false;  // unpadded fallback layout
    uint8_t sack_n = 0;    // SACK blocks written
    uint8_t len = 0;       // option bytes including padding, multiple of 4, <= 40
};

constexpr size_t round_up4(size_t n) { return (n + 3) & ~size_t(3); }

size_t conventional_len(const TcpOptions& o, size_t sack_n)
{
    size_t n = 0;
    if (o.mss)
        n += 4;                                    // MSS
    if (o.ts)
        n += 12;                                   // SACKOK TS | NOP NOP TS
    else if (o.sack_permitted)
        n += 4;                                    // NOP NOP SACKOK
    if (o.wscale)
        n += 4;                                    // NOP WS
    if (sack_n)
        n += 4 + opt::SACK_BLOCK_LEN * sack_n;     // NOP NOP SACK
    return n;
}

size_t compact_len(const TcpOptions& o, size_t sack_n)
{
    size_t n = (o.mss ? opt::MSS_LEN : 0) + (o.wscale ? opt::WSCALE_LEN : 0) +
               (o.sack_permitted ? opt::SACK_PERM_LEN : 0) + (o.ts ? opt::TS_LEN : 0);
    if (sack_n)
        n += opt::SACK_BASE_LEN + opt::SACK_BLOCK_LEN * sack_n;
    return n;
}

OptPlan plan_options(const TcpOptions& o)
{
    size_t n = std::min<size_t>(o.sack_count, kMaxSackBlocks);
    if (size_t len = conventional_len(o, n); len <= kMaxOptionsLen)
        return {false, uint8_t(n), uint8_t(len)};
    // Everything a parsed header held fits unpadded (it fitted in 40 bytes).
    if (size_t len = compact_len(o, n); len <= kMaxOptionsLen)
        return {true, uint8_t(n), uint8_t(round_up4(len))};
    // Too many SACK blocks for the other options: drop the oldest ones (the
    // first block reports the most recent data, RFC 2018 §4), as Linux does.
    while (n && conventional_len(o, n) > kMaxOptionsLen)
        --n;
    return {false, uint8_t(n), uint8_t(conventional_len(o, n))};
}

// Writes the options at `p` (inside `out`), returns the offset past them.
size_t write_sack(MutBytes out, size_t p, const TcpOptions& o, size_t sack_n)
{
    st8(out, p++, opt::SACK);
    st8(out, p++, uint8_t(opt::SACK_BASE_LEN + opt::SACK_BLOCK_LEN * sack_n));
    for (size_t i = 0; i < sack_n; ++i) {
        st32(out, p, o.sack[i].left.raw());
        st32(out, p + 4, o.sack[i].right.raw());
        p += opt::SACK_BLOCK_LEN;
    }
    return p;
}

void write_ts(MutBytes out, size_t p, const Timestamps& ts)
{
    st8(out, p, opt::TS);
    st8(out, p + 1, opt::TS_LEN);
    st32(out, p + 2, ts.tsval);
    st32(out, p + 6, ts.tsecr);
}

void write_options(MutBytes out, const TcpOptions& o, const OptPlan& plan)
{
    size_t p = kTcpHeaderLen;
    const auto put4 = [&](uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
        st8(out, p, a), st8(out, p + 1, b), st8(out, p + 2, c), st8(out, p + 3, d);
        p += 4;
    };
    if (o.mss) {
        put4(opt::MSS, opt::MSS_LEN, uint8_t(*o.mss >> 8), uint8_t(*o.mss));
    }
    if (!plan.compact) {
        if (o.ts) {
            if (o.sack_permitted)
                put4(opt::SACK_PERM, opt::SACK_PERM_LEN, opt::TS, opt::TS_LEN);
            else
                put4(opt::NOP, opt::NOP, opt::TS, opt::TS_LEN);
            p -= 2; // TS kind/length are already in place
            write_ts(out, p, *o.ts);
            p += opt::TS_LEN;
        } else if (o.sack_permitted) {
            put4(opt::NOP, opt::NOP, opt::SACK_PERM, opt::SACK_PERM_LEN);
        }
        if (o.wscale)
            put4(opt::NOP, opt::WSCALE, opt::WSCALE_LEN, *o.wscale);
        if (plan.sack_n) {
            st8(out, p++, opt::NOP);
            st8(out, p++, opt::NOP);
            p = write_sack(out, p, o, plan.sack_n);
        }
        assert(p == kTcpHeaderLen + plan.len);
        return;
    }
    if (o.wscale) {
        st8(out, p, opt::WSCALE), st8(out, p + 1, opt::WSCALE_LEN), st8(out, p + 2, *o.wscale);
        p += opt::WSCALE_LEN;
    }
    if (o.sack_permitted) {
        st8(out, p, opt::SACK_PERM), st8(out, p + 1, opt::SACK_PERM_LEN);
        p += opt::SACK_PERM_LEN;
    }
    if (o.ts) {
        write_ts(out, p, *o.ts);
        p += opt::TS_LEN;
    }
    if (plan.sack_n)
        p = write_sack(out, p, o, plan.sack_n);
    while (p < kTcpHeaderLen + plan.len)
        st8(out, p++, opt::EOL);
}

Drop parse_options(Bytes opts, TcpOptions* o)
{
    size_t i = 0;
    while (i < opts.size()) {
        const uint8_t kind = ld8(opts, i);
        if (kind == opt::EOL)
            break;
        if (kind == opt::NOP) {
            ++i;
            continue;
        }
        if (i + 1 >= opts.size())
            return Drop::TcpBadOption;      // no room for the length byte
        const uint8_t len = ld8(opts, i + 1);
        if (len < 2 || len > opts.size() - i)
            return Drop::TcpBadOption;      // would loop forever / overrun the header
        switch (kind) {
        case opt::MSS:
            if (len != opt::MSS_LEN)
                return Drop::TcpBadOptionLength;
            o->mss = ld16(opts, i + 2);
            break;
        case opt::WSCALE:
            if (len != opt::WSCALE_LEN)
                return Drop::TcpBadOptionLength;
            o->wscale = ld8(opts, i + 2);
            break;
        case opt::SACK_PERM:
            if (len != opt::SACK_PERM_LEN)
                return Drop::TcpBadOptionLength;
            o->sack_permitted = true;
            break;
        case opt::SACK: {
            if (len < opt::SACK_BASE_LEN + opt::SACK_BLOCK_LEN ||
                (len - opt::SACK_BASE_LEN) % opt::SACK_BLOCK_LEN != 0)
                return Drop::TcpBadOptionLength;
            // Blocks beyond kMaxSackBlocks (possible only across several SACK
            // options) are ignored; the segment stays valid.
            for (size_t b = i + opt::SACK_BASE_LEN; b < i + len && o->sack_count < kMaxSackBlocks;
                 b += opt::SACK_BLOCK_LEN)
                o->sack[o->sack_count++] = SackBlock{SeqNum(ld32(opts, b)), SeqNum(ld32(opts, b + 4))};
            break;
        }
        case opt::TS:
            if (len != opt::TS_LEN)
                return Drop::TcpBadOptionLength;
            o->ts = Timestamps{ld32(opts, i + 2), ld32(opts, i + 6)};
            break;
        default:
            break; // unknown: skipped by its length (RFC 9293 §3.2)
        }
        i += len;
    }
    return Drop::None;
}

} // namespace

bool TcpOptions::operator==(const TcpOptions& o) const
{
    if (mss != o.mss || wscale != o.wscale || sack_permitted != o.sack_permitted ||
        sack_count != o.sack_count || ts != o.ts)
        return false;
    const size_t n = std::min<size_t>(sack_count, kMaxSackBlocks);
    return std::equal(sack.begin(), sack.begin() + n, o.sack.begin());
}

size_t tcp_header_len(const TcpRepr& r)
{
    if (ts_frame_fits(r))  // an established connection's segment: no planning
        return kTsTcpHeaderLen;
    return kTcpHeaderLen + plan_options(r.opts).len;
}

size_t tcp_sack_blocks_emitted(const TcpRepr& r)
{
    return plan_options(r.opts).sack_n;
}

Drop parse_tcp(Bytes segment, const Ipv4Repr& ip, bool checksum_verified, TcpRepr* out, size_t* payload_off)
{
    // A segment longer than 0xffff cannot have come out of an IPv4 packet.
    if (segment.size() < kTcpHeaderLen || segment.size() > 0xffff)
        return Drop::TcpTruncated;
    const size_t header_len = size_t(ld8(segment, 12) >> 4) * 4;
    if (header_len < kTcpHeaderLen || header_len > segment.size())
        return Drop::TcpBadDataOffset;
    if (!checksum_verified) {
        uint32_t sum = pseudo_header_sum(ip.src, ip.dst, kIpProtoTcp, uint16_t(segment.size()));
        if (csum_fold(csum_partial(segment, sum)) != 0)
            return Drop::TcpBadChecksum;
    }
    // Written in place (this runs for every received segment); on a drop
    // *out is left unspecified.
    out->src_port = ld16(segment, 0);
    out->dst_port = ld16(segment, 2);
    out->seq = SeqNum(ld32(segment, 4));
    out->ack = SeqNum(ld32(segment, 8));
    out->flags = ld8(segment, 13);
    out->window = ld16(segment, 14);
    out->urgent = ld16(segment, 18);
    TcpOptions& o = out->opts;
    o.mss.reset();
    o.wscale.reset();
    o.sack_permitted = false;
    o.sack_count = 0; // sack[] beyond sack_count is meaningless
    o.ts.reset();
    const Bytes opts = segment.subspan(kTcpHeaderLen, header_len - kTcpHeaderLen);
    // The usual data segment: NOP NOP TS and nothing else (the layout RFC 7323
    // Appendix A recommends; Linux's tcp_fast_parse_options() checks the same).
    if (opts.size() == 12 && ld32(opts, 0) == 0x0101080au) {
        o.ts = Timestamps{ld32(opts, 4), ld32(opts, 8)};
    } else if (Drop d = parse_options(opts, &o); d != Drop::None) {
        return d;
    }
    *payload_off = header_len;
    return Drop::None;
}

void emit_tcp(const TcpRepr& r, const Ipv4Repr& ip, MutBytes header, std::span<const Bytes> payload,
              CsumMode mode)
{
    const OptPlan plan = plan_options(r.opts);
    const size_t header_len = kTcpHeaderLen + plan.len;
    assert(header.size() >= header_len);
    st16(header, 0, r.src_port);
    st16(header, 2, r.dst_port);
    st32(header, 4, r.seq.raw());
    st32(header, 8, r.ack.raw());
    st8(header, 12, uint8_t(header_len / 4 << 4));
    st8(header, 13, r.flags);
    st16(header, 14, r.window);
    st16(header, 16, 0);
    st16(header, 18, r.urgent);
    write_options(header, r.opts, plan);
    tcp_fill_checksum(header.first(header_len), ip, payload, mode);
}

void tcp_fill_checksum(MutBytes header, const Ipv4Repr& ip, std::span<const Bytes> payload, CsumMode mode)
{
    if (mode == CsumMode::None)
        return;
    const size_t header_len = header.size();
    size_t l4_len = header_len;
    for (Bytes p : payload)
        l4_len += p.size();
    assert(l4_len <= 0xffff);
    if (mode == CsumMode::PseudoTso) {
        st16(header, 16, uint16_t(~csum_fold(pseudo_header_sum(ip.src, ip.dst, kIpProtoTcp, 0))));
        return;
    }
    const uint32_t pseudo = pseudo_header_sum(ip.src, ip.dst, kIpProtoTcp, uint16_t(l4_len));
    if (mode == CsumMode::PseudoOnly) {
        st16(header, 16, uint16_t(~csum_fold(pseudo)));
        return;
    }
    CsumChain chain(pseudo);
    size_t i = 0;
    if (!payload.empty() && payload[0].data() == header.data() + header_len) {
        // The payload copied right behind the header (one frame): one span.
        chain.add(Bytes(header.data(), header_len + payload[0].size()));
        i = 1;
    } else {
        chain.add(header);
    }
    for (; i < payload.size(); ++i)
        chain.add(payload[i]);
    st16(header, 16, chain.fold());
}

} // namespace crescent::wire
