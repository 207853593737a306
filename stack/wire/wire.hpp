// crescent — wire formats: Ethernet II (+802.1Q), IPv4, TCP with options.
//
// Two levels, as in smoltcp: `parse_*` checks every length against the buffer
// and returns a validated repr (or a distinct drop reason); `emit_*` writes a
// repr into a buffer of at least `*_header_len(repr)` bytes. Nothing here reads
// past the span it is given, allocates, or includes DPDK headers.
//
// Byte order: reprs hold host-order values; the wire is big-endian.
// The parsers write the repr in place: after a drop, *out may be partly
// written (EthNotIpv4 / IpNotTcp excepted, see below) and must not be used.
// RFCs: 791 (IPv4), 9293 (TCP), 7323 (wscale, timestamps), 2018 (SACK),
// 6691 (MSS), 3168 (ECN bits), 1071/1624 (checksum).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "stack/wire/seq.hpp"

namespace crescent::wire {

using Bytes = std::span<const std::byte>;
using MutBytes = std::span<std::byte>;

// Every reason a frame is dropped by the parsers; the engine counts each.
enum class Drop : uint8_t {
    None = 0,
    EthTruncated,      // shorter than an Ethernet header (or VLAN tag)
    EthNotIpv4,        // ethertype is not IPv4 (the engine passes these on / counts)
    IpTruncated,       // shorter than 20 bytes or than IHL*4
    IpBadVersion,      // version != 4
    IpBadIhl,          // IHL < 5
    IpBadTotalLength,  // total length < IHL*4 or beyond the frame
    IpBadChecksum,
    IpFragment,        // MF set or fragment offset != 0: counted and dropped (no reassembly)
    IpNotTcp,          // protocol != 6
    TcpTruncated,      // shorter than 20 bytes
    TcpBadDataOffset,  // data offset < 5 or beyond the segment
    TcpBadChecksum,
    TcpBadOption,      // option length 0/1, or an option overrunning the header
    TcpBadOptionLength,// a known option with the wrong length (e.g. MSS len != 4)
    IpBadSource,       // martian source (RFC 1122 §3.2.1.3, RFC 1812 §5.3.7): 0/8, 127/8,
                       // multicast, 240/4 and broadcast, or source == destination (land)
    Count_
};
std::string_view drop_name(Drop d);
inline constexpr size_t kDropCount = size_t(Drop::Count_);

// ---- Ethernet ----------------------------------------------------------------

struct MacAddr {
    std::array<uint8_t, 6> b{};
    constexpr bool operator==(const MacAddr&) const = default;
    bool is_broadcast() const { return b == std::array<uint8_t, 6>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}; }
};

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr size_t kEthHeaderLen = 14;

struct EthRepr {
    MacAddr dst, src;
    uint16_t ethertype = kEtherTypeIpv4;   // inner ethertype when tagged
    std::optional<uint16_t> vlan_tci;      // 802.1Q tag, tolerated on input
    bool operator==(const EthRepr&) const = default;
};
size_t eth_header_len(const EthRepr& r);
// On success sets *payload_off to the first byte after the header(s).
// A non-IPv4 ethertype returns EthNotIpv4 with *out and *payload_off filled
// all the same, so the caller can hand ARP & co. to the kernel.
Drop parse_eth(Bytes frame, EthRepr* out, size_t* payload_off);
void emit_eth(const EthRepr& r, MutBytes out);

// ---- IPv4 --------------------------------------------------------------------

struct Ipv4Addr {
    uint32_t v = 0; // host order: 10.0.0.1 == 0x0a000001
    constexpr bool operator==(const Ipv4Addr&) const = default;
    constexpr auto operator<=>(const Ipv4Addr&) const = default;
};

inline constexpr uint8_t kIpProtoTcp = 6;
inline constexpr size_t kIpv4HeaderLen = 20;

struct Ipv4Repr {
    Ipv4Addr src, dst;
    uint8_t protocol = kIpProtoTcp;
    uint8_t ttl = 64;
    uint8_t dscp = 0;
    uint8_t ecn = 0;           // 2 bits: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE
    uint16_t ident = 0;
    bool dont_fragment = true;
    uint16_t payload_len = 0;  // bytes after the IP header (total length - IHL*4)
    bool operator==(const Ipv4Repr&) const = default;
};
// `checksum_verified`: the device already checked the header checksum.
// Options are skipped (bounds-checked). On success *payload_off is IHL*4 and the
// payload is exactly repr.payload_len bytes (Ethernet padding is excluded).
// A protocol other than TCP returns IpNotTcp with *out and *payload_off filled.
// A TCP packet from a source no host may have (see Drop::IpBadSource) is
// dropped: answering it would send to a multicast or broadcast group, to
// loopback, or to ourselves. (The subnet's directed broadcast is not known
// here; the caller that knows the prefix must refuse it.)
Drop parse_ipv4(Bytes packet, bool checksum_verified, Ipv4Repr* out, size_t* payload_off);
// Writes a 20-byte header. `fill_checksum` false leaves it 0 (device offload).
void emit_ipv4(const Ipv4Repr& r, MutBytes out, bool fill_checksum = true);

// ---- TCP ---------------------------------------------------------------------

namespace tcp_flags {
inline constexpr uint8_t FIN = 0x01, SYN = 0x02, RST = 0x04, PSH = 0x08,
                         ACK = 0x10, URG = 0x20, ECE = 0x40, CWR = 0x80;
}

struct SackBlock {
    SeqNum left, right; // [left, right)
    constexpr bool operator==(const SackBlock&) const = default;
};
inline constexpr size_t kMaxSackBlocks = 4;

struct Timestamps {
    uint32_t tsval = 0, tsecr = 0;
    constexpr bool operator==(const Timestamps&) const = default;
};

struct TcpOptions {
    std::optional<uint16_t> mss;
    std::optional<uint8_t> wscale;      // shift count (clamped to 14 by the TCB, RFC 7323 §2.3)
    bool sack_permitted = false;
    uint8_t sack_count = 0;             // blocks in `sack`
    std::array<SackBlock, kMaxSackBlocks> sack{};
    std::optional<Timestamps> ts;

    // Equal iff the same options are present; only the first `sack_count`
    // entries of `sack` take part.
    bool operator==(const TcpOptions& o) const;
};

struct TcpRepr {
    uint16_t src_port = 0, dst_port = 0;
    SeqNum seq;
    SeqNum ack;             // meaningful iff flags & ACK
    uint8_t flags = 0;
    uint16_t window = 0;    // as on the wire (unscaled)
    uint16_t urgent = 0;
    TcpOptions opts;

    bool operator==(const TcpRepr&) const = default;
    bool has(uint8_t f) const { return (flags & f) != 0; }
    // Sequence space taken: payload + SYN + FIN.
    uint32_t seg_len(size_t payload) const { return uint32_t(payload) + has(tcp_flags::SYN) + has(tcp_flags::FIN); }
};
// Header length with options, padded to 4 bytes (at most 60).
//
// Option layout written by emit_tcp (the one Linux uses, so captures and peers
// see the familiar shape; every 4-byte group is aligned):
//   MSS                      02 04 mm mm
//   SACK-permitted + TS      04 02 08 0a <tsval> <tsecr>
//   TS without SACK-perm     01 01 08 0a <tsval> <tsecr>
//   SACK-perm without TS     01 01 04 02
//   window scale             01 03 03 ss
//   SACK blocks              01 01 05 <2+8n> <left right>*n
// If that does not fit in 40 bytes, the options are written unpadded in the
// order MSS, WS, SACK-perm, TS, SACK (then EOL to the 4-byte boundary), and if
// even that does not fit, trailing SACK blocks are left out (tcp_sack_blocks_emitted).
// Every repr parse_tcp produces fits unchanged, so parse(emit(parse(x))) == parse(x).
size_t tcp_header_len(const TcpRepr& r);
// How many of r.opts.sack[0..sack_count) emit_tcp writes (all unless they do not fit).
size_t tcp_sack_blocks_emitted(const TcpRepr& r);
// `segment` is the whole TCP segment (header + payload) as bounded by the IP
// total length. The pseudo-header uses `ip`. On success *payload_off is the
// data offset.
Drop parse_tcp(Bytes segment, const Ipv4Repr& ip, bool checksum_verified, TcpRepr* out, size_t* payload_off);
// Writes the header (options included); `header` must hold tcp_header_len(r).
//   Full:       checksum over pseudo-header + header + every `payload` span
//               (spans may have any length: odd ones are handled); the
//               pseudo-header length is header + payload bytes.
//   PseudoOnly: the device computes it (offload): the folded, NOT inverted
//               pseudo-header sum is written, as DPDK's rte_ipv4_phdr_cksum()
//               does (pass the payload spans anyway: their sizes give the length).
//   PseudoTso:  TCP segmentation offload: as PseudoOnly but without the
//               length (each segment's differs; the device adds it), as
//               rte_ipv4_phdr_cksum() does for RTE_MBUF_F_TX_TCP_SEG.
//   None:       the field is left 0.
// Only ip.src and ip.dst are read from `ip` (ip.payload_len is not).
enum class CsumMode : uint8_t { Full, PseudoOnly, PseudoTso, None };
void emit_tcp(const TcpRepr& r, const Ipv4Repr& ip, MutBytes header, std::span<const Bytes> payload,
              CsumMode mode = CsumMode::Full);
// The checksum step of emit_tcp alone, for a header already written (its
// checksum field 0): `header` is exactly the TCP header, options included.
void tcp_fill_checksum(MutBytes header, const Ipv4Repr& ip, std::span<const Bytes> payload, CsumMode mode);

// ---- whole frames --------------------------------------------------------------

struct Offload {
    bool rx_ip_csum_ok = false;   // device verified the IPv4 header checksum
    bool rx_l4_csum_ok = false;   // device verified the TCP checksum
};

struct Frame {
    EthRepr eth;
    Ipv4Repr ip;
    TcpRepr tcp;
    size_t payload_off = 0;  // from the start of the frame
    size_t payload_len = 0;
    bool operator==(const Frame&) const = default;
};
// Ethernet -> IPv4 -> TCP in one call. On EthNotIpv4, out->eth is valid; on
// IpNotTcp, out->eth and out->ip are valid. Tries parse_ts_frame first.
Drop parse_frame(Bytes frame, Offload off, Frame* out);
// The same without the shape test: every layout, step by step.
Drop parse_frame_general(Bytes frame, Offload off, Frame* out);

// ---- the established segment's frame -------------------------------------------
//
// Nearly every frame of an established connection has one shape: untagged
// Ethernet, IPv4 without options, and TCP whose only option is the timestamp
// in RFC 7323 Appendix A's layout (01 01 08 0a <tsval> <tsecr>), which crescent
// and Linux both send. These handle that shape in straight-line code, without
// the general path's option planning and layered reprs, and say no to
// anything else, which then takes the general path. Their results are the
// general path's, byte for byte and repr for repr (tests/unit/wire_test.cpp,
// tests/fuzz/fuzz_wire.cpp).
inline constexpr size_t kTsTcpHeaderLen = 32;
inline constexpr size_t kTsFrameHeaderLen = kEthHeaderLen + kIpv4HeaderLen + kTsTcpHeaderLen;
// emit_tcp would write r in the shape (tcp_header_len(r) == kTsTcpHeaderLen).
inline bool ts_frame_fits(const TcpRepr& r)
{
    const TcpOptions& o = r.opts;
    return o.ts.has_value() && !o.mss && !o.wscale && !o.sack_permitted && o.sack_count == 0;
}
// What emit_eth + emit_ipv4(ip, ip_csum) + emit_tcp(r, ip, payload, mode)
// write at p (kTsFrameHeaderLen bytes) for an untagged `eth` and a repr that
// ts_frame_fits(); ip.payload_len must be kTsTcpHeaderLen + the payload's bytes.
void emit_ts_frame(std::byte* p, const MacAddr& dst, const MacAddr& src, const Ipv4Repr& ip, const TcpRepr& r,
                   std::span<const Bytes> payload, bool ip_csum, CsumMode mode);
// parse_frame's answer for a frame of the shape that passes every check
// (true, *out filled); false for anything else, *out then unspecified: the
// general parse decides (and names the drop).
bool parse_ts_frame(Bytes frame, Offload off, Frame* out);

// ---- checksums (RFC 1071) ----------------------------------------------------

// Sums are host-order numbers (the 16-bit big-endian words of the data, added
// one's-complement), so csum_fold()'s result is stored with a big-endian store.
//
// One's-complement sum of `data` added to `sum` (not folded, not inverted).
// Word-at-a-time (8 bytes per step, carries folded at the end); no alignment
// requirement on data.data().
// Chaining rule: csum_partial(b, csum_partial(a)) equals the sum over a‖b only
// when a.size() is even (a is read as whole 16-bit words). Chain spans of any
// length with CsumChain, which byte-swaps the sum of a span that starts at an
// odd offset (RFC 1071 §2(B)).
uint32_t csum_partial(Bytes data, uint32_t sum = 0);
uint16_t csum_fold(uint32_t sum);  // fold to 16 bits and invert
// csum_fold(csum_partial()) of an option-less IPv4 header (20 bytes at p):
// five loads and a fold, for the two headers every segment has one of.
uint16_t ipv4_header_csum(const std::byte* p);
// Pseudo-header sum for TCP over IPv4 (RFC 9293 §3.1).
uint32_t pseudo_header_sum(Ipv4Addr src, Ipv4Addr dst, uint8_t proto, uint16_t l4_len);
// RFC 1624 eqn. 3 incremental update: the checksum after one 16-bit word of
// the covered data changes from `old_word` to `new_word`: HC' = ~(~HC + ~m + m').
uint16_t csum_update16(uint16_t csum, uint16_t old_word, uint16_t new_word);

// Sum over a sequence of spans of arbitrary lengths (a zbuf chain).
class CsumChain {
public:
    explicit CsumChain(uint32_t initial = 0) : sum_(initial) {}
    void add(Bytes data);
    uint32_t sum() const { return sum_; }
    uint16_t fold() const { return csum_fold(sum_); }
    size_t length() const { return len_; }

private:
    uint32_t sum_;
    size_t len_ = 0; // bytes added so far; its parity is the next span's offset parity
};

} // namespace crescent::wire
