// Micro-benchmark of stack/wire: the Internet checksum (runs on every packet
// without offload), parse_frame of a data segment, emit_tcp with a full
// checksum. Prints ns per operation (best of several rounds, steady_clock).
//   build/tests/bench/bench_wire [iteration divisor]
// For repeatable instruction counts run e.g.
//   valgrind --tool=callgrind build/tests/bench/bench_wire 1000
// and divide each function's inclusive Ir by its call count.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "stack/wire/wire.hpp"

using namespace crescent::wire;

namespace {

int g_divisor = 1;

template <class F>
double best_ns_per_op(F&& f, int iters)
{
    iters = std::max(1, iters / g_divisor);
    double best = 1e30;
    for (int round = 0; round < 7; ++round) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i)
            f(i);
        auto t1 = std::chrono::steady_clock::now();
        best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / iters);
    }
    return best;
}

volatile uint32_t g_sink;

} // namespace

int main(int argc, char** argv)
{
    if (argc > 1)
        g_divisor = std::max(1, std::atoi(argv[1]));
    std::vector<std::byte> buf(4096);
    std::mt19937 rng(1);
    for (auto& b : buf)
        b = std::byte(rng());

    for (size_t len : {64u, 1500u, 4096u - 8}) {
        for (size_t off : {0u, 1u}) {
            Bytes d = Bytes(buf).subspan(off, len);
            double ns = best_ns_per_op([&](int) { g_sink = csum_partial(d); }, 200000);
            std::printf("csum_partial %4zu B (offset %zu): %7.1f ns  %5.2f GB/s\n", len, off, ns, double(len) / ns);
        }
    }

    // A 1448-byte data segment with timestamps, as a 1500-MTU peer sends.
    Frame fr;
    fr.ip.src = Ipv4Addr{0x0a000001};
    fr.ip.dst = Ipv4Addr{0x0a000002};
    fr.tcp.src_port = 5201;
    fr.tcp.dst_port = 42210;
    fr.tcp.seq = SeqNum(1);
    fr.tcp.ack = SeqNum(2);
    fr.tcp.flags = tcp_flags::ACK | tcp_flags::PSH;
    fr.tcp.window = 1000;
    fr.tcp.opts.ts = Timestamps{3, 4};
    const size_t hl = tcp_header_len(fr.tcp), plen = 1448;
    fr.ip.payload_len = uint16_t(hl + plen);
    std::vector<std::byte> frame(kEthHeaderLen + kIpv4HeaderLen + hl + plen);
    emit_eth(fr.eth, frame);
    emit_ipv4(fr.ip, MutBytes(frame).subspan(kEthHeaderLen));
    const Bytes payload = Bytes(frame).subspan(kEthHeaderLen + kIpv4HeaderLen + hl);
    const Bytes spans[] = {payload};
    MutBytes tcp_hdr = MutBytes(frame).subspan(kEthHeaderLen + kIpv4HeaderLen, hl);
    emit_tcp(fr.tcp, fr.ip, tcp_hdr, spans);

    Frame out;
    double ns = best_ns_per_op([&](int) { g_sink = uint32_t(parse_frame(frame, Offload{}, &out)); }, 200000);
    std::printf("parse_frame, 1448 B payload, checksums in software: %7.1f ns\n", ns);
    ns = best_ns_per_op([&](int) { g_sink = uint32_t(parse_frame(frame, Offload{true, true}, &out)); }, 1000000);
    std::printf("parse_frame, checksums offloaded:                   %7.1f ns\n", ns);
    ns = best_ns_per_op([&](int) { emit_tcp(fr.tcp, fr.ip, tcp_hdr, spans, CsumMode::Full); }, 200000);
    std::printf("emit_tcp, 1448 B payload, full checksum:            %7.1f ns\n", ns);
    ns = best_ns_per_op([&](int) { emit_tcp(fr.tcp, fr.ip, tcp_hdr, spans, CsumMode::PseudoOnly); }, 1000000);
    std::printf("emit_tcp, pseudo-header only (offload):             %7.1f ns\n", ns);
    return parse_frame(frame, Offload{}, &out) == Drop::None ? 0 : 1;
}
