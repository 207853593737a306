// libFuzzer target for stack/wire: parse_frame on arbitrary bytes with every
// offload setting; a frame that parses is re-emitted and re-parsed, and the
// reprs and payload bytes must come back identical, and the established
// segment's shortcut must give the general parse's answer (aborts otherwise).
// Built with -fsanitize=fuzzer,address,undefined (tests/fuzz/meson.build);
// run by tools/run-fuzz on the seeds in tests/fuzz/corpus/wire/.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "stack/wire/wire.hpp"

using namespace crescent::wire;

namespace {

[[noreturn]] void fail(const char* what, Offload off)
{
    std::fprintf(stderr, "fuzz_wire: %s (ip_csum_ok=%d l4_csum_ok=%d)\n", what, off.rx_ip_csum_ok,
                 off.rx_l4_csum_ok);
    std::abort();
}

void check_roundtrip(Bytes in, const Frame& fr, Offload off)
{
    if (fr.payload_off + fr.payload_len > in.size())
        fail("payload beyond the input", off);
    const Bytes payload = in.subspan(fr.payload_off, fr.payload_len);

    const size_t eth_len = eth_header_len(fr.eth);
    const size_t tcp_len = tcp_header_len(fr.tcp);
    if (tcp_len < 20 || tcp_len > 60 || tcp_len % 4 != 0)
        fail("tcp_header_len out of range", off);
    if (tcp_sack_blocks_emitted(fr.tcp) != fr.tcp.opts.sack_count)
        fail("a parsed SACK block does not fit on re-emit", off);
    std::vector<std::byte> out(eth_len + kIpv4HeaderLen + tcp_len + payload.size());
    emit_eth(fr.eth, out);
    Ipv4Repr ip = fr.ip;
    if (tcp_len + payload.size() > 0xffff - kIpv4HeaderLen)
        return; // IP options were replaced by a longer TCP header: cannot re-emit
    ip.payload_len = uint16_t(tcp_len + payload.size());
    emit_ipv4(ip, std::span(out).subspan(eth_len));
    std::copy(payload.begin(), payload.end(), out.begin() + ptrdiff_t(eth_len + kIpv4HeaderLen + tcp_len));
    const Bytes spans[] = {payload};
    emit_tcp(fr.tcp, ip, std::span(out).subspan(eth_len + kIpv4HeaderLen, tcp_len), spans, CsumMode::Full);

    // The re-emitted frame has correct checksums: it must parse without offload.
    Frame again;
    if (Drop d = parse_frame(out, Offload{}, &again); d != Drop::None)
        fail("re-emitted frame does not parse", off);
    if (!(again.eth == fr.eth))
        fail("eth repr mismatch", off);
    Ipv4Repr want_ip = fr.ip;
    want_ip.payload_len = ip.payload_len; // input IP options are not re-emitted
    if (!(again.ip == want_ip))
        fail("ipv4 repr mismatch", off);
    if (!(again.tcp.opts == fr.tcp.opts))
        fail("tcp options mismatch", off);
    if (!(again.tcp == fr.tcp))
        fail("tcp repr mismatch", off);
    if (again.payload_len != fr.payload_len ||
        !std::equal(payload.begin(), payload.end(), out.begin() + ptrdiff_t(again.payload_off)))
        fail("payload mismatch", off);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const Bytes in(reinterpret_cast<const std::byte*>(data), size);
    for (Offload off : {Offload{false, false}, Offload{true, false}, Offload{false, true}, Offload{true, true}}) {
        Frame fr;
        Drop d = parse_frame(in, off, &fr);
        if (size_t(d) >= kDropCount || drop_name(d) == "unknown")
            fail("drop reason out of range", off);
        if (d == Drop::None)
            check_roundtrip(in, fr, off);
        // The established segment's shortcut (parse_ts_frame) changes nothing.
        Frame general;
        if (parse_frame_general(in, off, &general) != d)
            fail("parse_frame and parse_frame_general disagree", off);
        if (d == Drop::None && !(general == fr))
            fail("parse_ts_frame's repr is not the general parse's", off);
    }
    // The checksum primitive agrees with itself across odd span splits.
    if (size > 1) {
        CsumChain chain;
        const size_t cut = data[0] % size;
        chain.add(in.first(cut));
        chain.add(in.subspan(cut));
        if (chain.fold() != csum_fold(csum_partial(in)))
            fail("CsumChain disagrees with csum_partial", Offload{});
    }
    return 0;
}
