#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_wire (tests/fuzz/corpus/wire/): valid
Ethernet/IPv4/TCP frames in the shapes Linux sends, plus a few edge shapes.
Checksums are computed here, independently of stack/wire.
Usage: tests/fuzz/gen_corpus_wire.py   (rewrites the files in place)"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "wire")


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def eth(vlan=None, ethertype=0x0800):
    h = bytes.fromhex("020000000002") + bytes.fromhex("020000000001")
    if vlan is not None:
        h += struct.pack("!HH", 0x8100, vlan)
    return h + struct.pack("!H", ethertype)


def frame(opts=b"", payload=b"", flags=0x18, seq=0x1000, ack=0x2000, win=502,
          vlan=None, ip_opts=b"", tos=0, pad_to=0):
    assert len(opts) % 4 == 0 and len(ip_opts) % 4 == 0
    src, dst = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    doff = (20 + len(opts)) // 4
    tcp = struct.pack("!HHIIBBHHH", 42210, 5201, seq, ack, doff << 4, flags, win, 0, 0) + opts
    seg = tcp + payload
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(seg))
    c = csum(pseudo + seg)
    seg = seg[:16] + struct.pack("!H", c) + seg[18:]
    ihl = 5 + len(ip_opts) // 4
    ip = struct.pack("!BBHHHBBH", 0x40 | ihl, tos, ihl * 4 + len(seg), 0x1C46, 0x4000, 64, 6, 0) + src + dst + ip_opts
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    f = eth(vlan) + ip + seg
    return f + b"\xa5" * max(0, pad_to - len(f))


MSS = bytes.fromhex("020405b4")
SACKOK_TS = bytes.fromhex("0402080a") + struct.pack("!II", 0x009D3E51, 0)
NOP_TS = bytes.fromhex("0101080a") + struct.pack("!II", 0x009D3E60, 0x1234)
NOP_WS = bytes.fromhex("01030307")


def sack(*blocks):
    return b"\x01\x01\x05" + bytes([2 + 8 * len(blocks)]) + b"".join(struct.pack("!II", l, r) for l, r in blocks)


SEEDS = {
    "syn_linux": frame(MSS + SACKOK_TS + NOP_WS, flags=0x02, seq=0x5F3A1B2C, ack=0, win=64240),
    "syn_ecn_no_ts": frame(MSS + bytes.fromhex("01010402") + NOP_WS, flags=0xC2, ack=0, win=64240),
    "synack_linux": frame(MSS + SACKOK_TS + NOP_WS, flags=0x12, win=65160),
    "data_ts": frame(NOP_TS, payload=b"GET /block/42 HTTP/1.1\r\n\r\n"),
    "data_ts_sack3": frame(NOP_TS + sack((0x3000, 0x3400), (0x4000, 0x4100), (0x5000, 0x5001)), flags=0x10),
    "data_sack4": frame(sack((1, 2), (3, 4), (5, 6), (7, 8)), payload=b"x"),
    "vlan_data": frame(NOP_TS, payload=bytes(range(64)), vlan=0xA064),
    "ack_padded": frame(flags=0x10, pad_to=60),
    "fin_ack": frame(NOP_TS, flags=0x11),
    "rst": frame(flags=0x04, ack=0),
    "ip_options": frame(NOP_TS, payload=b"hello", ip_opts=b"\x01\x01\x01\x00", tos=0x02),
    "unknown_opt": frame(bytes([30, 6, 1, 2, 3, 4]) + b"\x01\x00", payload=b"z"),
    "compact_opts": frame(MSS + b"\x04\x02\x05\x22" + b"".join(struct.pack("!II", i, i + 1) for i in range(4))),
    "arp": eth(ethertype=0x0806) + bytes(28),
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print("wrote %d seeds to %s" % (len(SEEDS), OUT))
