#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_rpc (tests/fuzz/corpus/rpc/): valid RPC
streams in the wire format of include/crescent/rpc/protocol.hpp, encoded here
independently of rpc/, each behind fuzz_rpc's input prefix (a config byte and
split points, see tests/fuzz/fuzz_rpc.cpp).
Usage: tests/fuzz/gen_corpus_rpc.py   (rewrites the files in place)"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "rpc")

REQUEST, RESPONSE, ERROR, ONEWAY = 0, 1, 2, 3


def msg(kind=REQUEST, method=1, call_id=1, status=0, meta=b"", data=b"", flags=0, version=1, magic=b"CRPC"):
    # magic, version, kind, flags, method, status, call_id, meta_len, data_len
    hdr = magic + struct.pack("<BBHIIQII", version, kind, flags, method, status, call_id, len(meta), len(data))
    assert len(hdr) == 32
    return hdr + meta + data


def seed(stream, splits=(), one_call=False, small_limits=False):
    assert len(splits) < 16
    cfg = len(splits) | (16 if one_call else 0) | (32 if small_limits else 0)
    return bytes([cfg]) + b"".join(struct.pack("<H", s) for s in splits) + stream


# A block server's calls: READ(offset, len), WRITE(offset, crc) + data, FLUSH.
read_req = msg(REQUEST, 1, 10, meta=struct.pack("<QI", 4096 * 7, 4096))
read_resp = msg(RESPONSE, 1, 10, meta=struct.pack("<I", 0xDEADBEEF), data=bytes(range(256)) * 16)
write_req = msg(REQUEST, 2, 11, meta=struct.pack("<QI", 4096 * 3, 0x12345678), data=b"\xab" * 4096)
flush = msg(ONEWAY, 3, 12)
unknown = msg(7, 99, 13, flags=0xFFFF, meta=b"??")
app_status = msg(RESPONSE, 2, 11, status=1003, meta=b"short write")
error = msg(ERROR, 42, 14, status=1, meta=b"no handler for method 42")
pipelined = b"".join(msg(REQUEST, 5, i, meta=struct.pack("<I", i), data=bytes([i]) * (i % 9)) for i in range(60))

SEEDS = {
    "read_request": seed(read_req),
    "read_response_split": seed(read_resp, splits=(5, 31, 32, 40, 1000)),
    "write_request_split_one_call": seed(write_req, splits=(16, 44, 2048), one_call=True),
    "mixed_kinds": seed(read_req + flush + unknown + app_status + error, splits=(50, 90)),
    "pipelined_60": seed(pipelined),
    "pipelined_60_split": seed(pipelined, splits=(1, 33, 34, 35, 300, 301, 777), one_call=True),
    "small_limits_at_max": seed(msg(meta=b"m" * 64, data=b"d" * 4096) + flush, small_limits=True),
    "small_limits_meta_over": seed(msg(meta=b"m" * 65) + flush, small_limits=True),
    "truncated_tail": seed(read_req + write_req[:100], splits=(60,)),
    "bad_magic_after_one": seed(read_req + msg(magic=b"CRPX"), splits=(40,)),
    "bad_version": seed(flush + msg(version=2)),
    "empty_slices": seed(read_req + flush, splits=(10, 10, 10, 52, 52)),
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print("wrote %d seeds to %s" % (len(SEEDS), OUT))
