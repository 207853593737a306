// Micro-benchmark of stack/wire: the Internet checksum (runs on every packet
// without offload), the parse and the emission of a data segment's headers,
// through the established segment's shortcut and the general path. Prints ns
// per operation (best of several rounds, steady_clock).
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

    // Data segments with timestamps: 96 B (a 64-byte RPC and its header) and
    // 1448 B (a full frame of a 1500-MTU peer). Each through the established
    // segment's shortcut (parse_frame, emit_ts_frame) and the general path
    // (parse_frame_general; emit_eth + emit_ipv4 + emit_tcp).
    int rc = 0;
    for (size_t plen : {size_t(96), size_t(1448)}) {
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
        const size_t hl = tcp_header_len(fr.tcp);
        fr.ip.payload_len = uint16_t(hl + plen);
        std::vector<std::byte> frame(kEthHeaderLen + kIpv4HeaderLen + hl + plen);
        std::copy(buf.begin(), buf.begin() + ptrdiff_t(plen), frame.begin() + ptrdiff_t(frame.size() - plen));
        auto emit_general = [&](bool ip_csum, CsumMode mode) {
            const Bytes spans[] = {Bytes(frame).subspan(kEthHeaderLen + kIpv4HeaderLen + hl)};
            emit_eth(fr.eth, frame);
            emit_ipv4(fr.ip, MutBytes(frame).subspan(kEthHeaderLen), ip_csum);
            emit_tcp(fr.tcp, fr.ip, MutBytes(frame).subspan(kEthHeaderLen + kIpv4HeaderLen, hl), spans, mode);
        };
        auto emit_fast = [&](bool ip_csum, CsumMode mode) {
            const Bytes spans[] = {Bytes(frame).subspan(kTsFrameHeaderLen)};
            emit_ts_frame(frame.data(), fr.eth.dst, fr.eth.src, fr.ip, fr.tcp, spans, ip_csum, mode);
        };
        emit_general(true, CsumMode::Full);

        Frame out;
        for (bool offload : {false, true}) {
            const Offload off{offload, offload};
            const int n = offload ? 1000000 : 200000;
            double fast = best_ns_per_op([&](int) { g_sink = uint32_t(parse_frame(frame, off, &out)); }, n);
            double general = best_ns_per_op([&](int) { g_sink = uint32_t(parse_frame_general(frame, off, &out)); }, n);
            std::printf("parse %4zu B payload, checksums %-9s  shortcut %6.1f ns  general %6.1f ns\n", plen,
                        offload ? "offloaded" : "software", fast, general);
        }
        for (bool offload : {false, true}) {
            const CsumMode mode = offload ? CsumMode::PseudoOnly : CsumMode::Full;
            const int n = offload ? 1000000 : 200000;
            double fast = best_ns_per_op([&](int) { emit_fast(!offload, mode); }, n);
            double general = best_ns_per_op([&](int) { emit_general(!offload, mode); }, n);
            std::printf("emit  %4zu B payload, checksums %-9s  shortcut %6.1f ns  general %6.1f ns\n", plen,
                        offload ? "offloaded" : "software", fast, general);
        }
        emit_fast(true, CsumMode::Full);
        if (parse_frame_general(frame, Offload{}, &out) != Drop::None) rc = 1;
    }
    return rc;
}
