#!/usr/bin/env python3
"""Seed corpus for fuzz_tcb (see tests/fuzz/fuzz_tcb.cpp for the input format).

Each seed is a configuration byte, the peer's ISN, then a short program of
ops: in-order data, out-of-order data with SACK, FIN, timers, application
sends and closes, a SYN flood from other ports, a raw frame.
Run from the repository root: tests/fuzz/gen_corpus_tcb.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "tcb")

ACK, FIN, SYN, RST, PSH, ECE, CWR = 0x10, 0x01, 0x02, 0x04, 0x08, 0x40, 0x80


def u16(v):
    return struct.pack("<H", v & 0xFFFF)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def data_seg(flags=0, dseq=None, dack=None, window=None, opt_mask=0, opts=b"", length=100, ecn=0, raw_flags=False):
    op = 0
    if raw_flags:
        op |= 0x80
    if dseq is not None:
        op |= 0x40
    if dack is not None:
        op |= 0x20
    if window is not None:
        op |= 0x10
    big = length >= 128
    if big:
        op |= 0x08
    b = bytes([op, flags]) + u16(dseq or 0) + u16(dack or 0)
    if window is not None:
        b += u16(window)
    b += bytes([opt_mask]) + opts
    b += u16(length) if big else bytes([length])
    b += bytes(range(min(length, 64)))
    b += bytes([ecn])
    return b


def timer(us=None, ms=None):
    if ms is not None:
        return bytes([5 | 0x80]) + u16(ms)
    return bytes([5]) + u16(us)


def app_send(n):
    return bytes([6]) + u16(n)


def app(sub):  # 0 flush, 1 shutdown_write, 2 close, 3 abort
    return bytes([7, sub])


def other_port(flags, dport=None, seq=0, ack=0, window=1000, src=None, own_tuple=False):
    op = 3 | (0x80 if dport is not None else 0) | (0x40 if src is not None else 0) | (0x08 if own_tuple else 0)
    b = bytes([op, 1])
    if dport is not None:
        b += u16(dport)
    b += u32(seq) + u32(ack) + bytes([flags]) + u16(window) + bytes([0]) + b"" + bytes([0])
    if src is not None:
        b += u32(src)
    return b


def handshake(idx, port443=False, wscale=None, sack=True, ts=True, data=b"", seq=0, window=65535, mss=1460):
    """A full handshake from peer port 5556 + idx % 16 (op 3 with bit 0x20)."""
    flags = (1 | (wscale << 4) if wscale is not None else 0) | (2 if sack else 0) | (4 if ts else 0) | \
        (8 if data else 0)
    b = bytes([3 | 0x20 | (0x10 if port443 else 0), idx, flags]) + u32(seq) + u16(window) + u16(mss - 536)
    if data:
        b += bytes([len(data)]) + data[:16]
    return b


def extra_send(idx, n):
    return bytes([6 | 0x80, idx]) + u16(n)


def extra_app(idx, sub):  # 0 flush, 1 shutdown_write, 2 close, 3 abort, 4 unlisten 443, 5 listen 443
    return bytes([7 | 0x80, idx, sub])


def seeds():
    iss = u32(1000000)
    yield "inorder", bytes([0]) + iss + data_seg(PSH, length=100) + data_seg(PSH, length=1460) + timer(ms=2)
    yield "ooo_sack", bytes([0]) + iss + data_seg(0, dseq=3000, length=500) + data_seg(0, length=1460) + \
        data_seg(0, length=1460) + data_seg(0, length=100) + timer(ms=5)
    yield "fin", bytes([1]) + iss + data_seg(PSH, length=50) + data_seg(FIN, length=0) + app(2) + timer(ms=50) + \
        timer(ms=2000)
    yield "send_rto", bytes([2]) + iss + app_send(20000) + timer(ms=10) + timer(ms=30) + timer(ms=100) + \
        data_seg(0, length=0, opt_mask=0x02, opts=bytes([0]) + u16(0) + u16(1460)) + timer(ms=300)
    yield "send_acked", bytes([0]) + iss + app_send(5000) + data_seg(0, dack=1460, length=0) + \
        data_seg(0, dack=4380, length=0) + app(1) + timer(ms=10)
    yield "zero_window", bytes([0]) + iss + data_seg(0, window=0, length=0) + app_send(3000) + timer(ms=10) + \
        timer(ms=100) + data_seg(0, window=65535, length=0) + timer(ms=1)
    yield "rst_in_window", bytes([0]) + iss + data_seg(RST, dseq=100, length=0, raw_flags=True) + \
        data_seg(RST, length=0, raw_flags=True)
    yield "syn_flood", bytes([0]) + iss + b"".join(other_port(SYN, seq=i * 7777) for i in range(8)) + \
        other_port(ACK, seq=5, ack=9) + other_port(SYN, dport=81)
    yield "ecn", bytes([2 | 0x80]) + iss + data_seg(PSH, length=100, ecn=3) + data_seg(CWR, length=100, ecn=2) + \
        app_send(3000) + data_seg(ECE, dack=1000, length=0)
    yield "abort", bytes([0x3C]) + iss + data_seg(PSH, length=200) + app_send(100) + app(3) + timer(ms=1)
    yield "dup_sack_ts", bytes([0]) + iss + data_seg(0, length=300, opt_mask=0x01, opts=bytes([1])) + \
        data_seg(0, dseq=0xFF00, length=300, opt_mask=0x41, opts=bytes([1]) + u32(0)) + timer(us=500)
    yield "handshakes", bytes([0]) + iss + handshake(1, seq=111) + handshake(2, wscale=7, seq=222, data=b"hello") + \
        extra_send(0, 3000) + extra_send(1, 100) + timer(ms=5) + extra_app(0, 2) + extra_app(1, 3) + timer(ms=300)
    yield "syn_cookies_443", bytes([0]) + iss + handshake(3, True, seq=3) + handshake(4, True, seq=4, ts=False) + \
        handshake(5, True, wscale=2, seq=5, sack=False, data=b"x" * 16) + extra_send(2, 2000) + timer(ms=2) + \
        extra_app(0, 4) + extra_app(0, 5) + handshake(6, True, seq=6)
    yield "time_wait_reuse", bytes([0]) + iss + app(2) + data_seg(0, length=0) + data_seg(FIN, length=0) + \
        timer(ms=1) + other_port(SYN, seq=5000000, own_tuple=True) + timer(ms=10) + \
        other_port(ACK, seq=1000001, own_tuple=True) + timer(ms=65535) + timer(ms=65535) + \
        other_port(SYN, seq=9, own_tuple=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, blob in seeds():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
