#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_resp (tests/fuzz/corpus/resp/): RESP2 request
streams as redis-benchmark, redis-cli and redis-py send them, inline commands
with quoting, every crescent-kv command with good and bad arguments, and
protocol errors, each behind fuzz_resp's input prefix (a config byte and split
points, see tests/fuzz/fuzz_resp.cpp). The requests are encoded here,
independently of examples/kv.
Usage: tests/fuzz/gen_corpus_resp.py   (rewrites the files in place)"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "resp")


def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def seed(stream, splits=(), small_limits=False, one_call=False, clock=False):
    assert len(splits) < 16
    cfg = len(splits) | (16 if small_limits else 0) | (32 if one_call else 0) | (64 if clock else 0)
    return bytes([cfg]) + b"".join(struct.pack("<H", s) for s in splits) + stream


# redis-benchmark -t ping,set,get,mset,incr -P 16 (one pipeline of each test).
bench = (b"PING\r\n" * 16 + cmd("PING") * 16 +
         b"".join(cmd("SET", "key:%012d" % i, "x" * 3) for i in range(16)) +
         b"".join(cmd("GET", "key:%012d" % i) for i in range(16)) +
         b"".join(cmd("INCR", "counter:%012d" % (i % 3)) for i in range(16)) +
         cmd("MSET", *sum((["key:%012d" % i, "xxx"] for i in range(10)), [])))
bench_start = cmd("CONFIG", "GET", "save") + cmd("CONFIG", "GET", "appendonly")

# redis-py: binary values, expiry, pipelines.
binary = bytes(range(256)) + b"\r\n\r\n\x00"
pyclient = (cmd("SET", "bin", binary) + cmd("GET", "bin") + cmd("SET", "t", "v", "EX", "10") + cmd("TTL", "t") +
            cmd("PTTL", "t") + cmd("EXPIRE", "bin", "5") + cmd("PERSIST", "bin") + cmd("DEL", "bin", "t", "zz") +
            cmd("EXISTS", "bin") + cmd("DBSIZE") + cmd("CLIENT", "SETNAME", "py") + cmd("CLIENT", "GETNAME") +
            cmd("CLIENT", "SETINFO", "LIB-NAME", "redis-py") + cmd("SELECT", "0") + cmd("INFO", "keyspace"))

strings = (cmd("SET", "k", "v", "NX") + cmd("SET", "k", "w", "XX", "GET") + cmd("SET", "k", "v", "PX", "20", "KEEPTTL") +
           cmd("SET", "k", "v", "EXAT", "1") + cmd("SET", "k", "v", "PXAT", "99999999999999") + cmd("SETNX", "n", "1") +
           cmd("SETEX", "s", "1", "v") + cmd("PSETEX", "s", "5", "v") + cmd("GETSET", "s", "w") + cmd("GETDEL", "s") +
           cmd("APPEND", "a", "x") * 20 + cmd("STRLEN", "a") + cmd("MGET", "a", "k", "n", "zz") +
           cmd("INCRBY", "n", "9223372036854775806") + cmd("INCR", "n") + cmd("DECRBY", "n", "-9223372036854775808") +
           cmd("DECR", "m") + cmd("INCR", "a") + cmd("TYPE", "a") + cmd("TOUCH", "a", "b"))

keyspace = (cmd("SET", "e", "1") + cmd("EXPIRE", "e", "100", "NX") + cmd("EXPIRE", "e", "50", "GT") +
            cmd("PEXPIRE", "e", "10", "LT") + cmd("EXPIRE", "e", "1", "XX", "GT") + cmd("EXPIRE", "e", "1", "NX", "XX") +
            cmd("EXPIRE", "e", "1", "FOO") + cmd("EXPIREAT", "e", "9999999999") + cmd("PEXPIREAT", "e", "1") +
            cmd("EXPIRETIME", "e") + cmd("PEXPIRETIME", "e") + cmd("TTL", "e") + cmd("UNLINK", "e") +
            cmd("FLUSHALL", "ASYNC") + cmd("FLUSHDB") + cmd("DBSIZE"))

server = (cmd("COMMAND", "COUNT") + cmd("COMMAND", "INFO", "get", "set", "nosuch") + cmd("COMMAND", "DOCS", "get") +
          cmd("COMMAND", "LIST") + cmd("COMMAND", "HELP") + cmd("CONFIG", "GET", "*") + cmd("CONFIG", "HELP") +
          cmd("CONFIG", "RESETSTAT") + cmd("INFO") + cmd("INFO", "server", "stats") + cmd("TIME") +
          cmd("HELLO", "2", "SETNAME", "x") + cmd("HELLO", "3") + cmd("AUTH", "default", "pw") + cmd("AUTH", "pw") +
          cmd("CLIENT", "ID") + cmd("CLIENT", "HELP") + cmd("ECHO", "hi") + cmd("PING", "x"))

errors_cmd = (cmd("GET") + cmd("nosuch", "a", "b") + cmd("CONFIG", "nosuch") + cmd("CLIENT") + cmd("MSET", "a") +
              cmd("SET", "k", "v", "EX", "0") + cmd("SET", "k", "v", "EX", "x") + cmd("SELECT", "1") +
              cmd("x" * 300, "y" * 200, "z"))

inline = (b"PING\r\nECHO \"a\\x41\\n\" 'it\\'s' plain\r\n\r\nSET k \"v v\"\nGET k\r\n  mget  k  x \r\n" +
          b"\tEXISTS k\r\nquit\r\n")

SEEDS = {
    "bench_pipeline": seed(bench),
    "bench_pipeline_split": seed(bench, splits=(3, 50, 51, 400, 401, 402, 900)),
    "bench_start": seed(bench_start, splits=(7,)),
    "pyclient": seed(pyclient, splits=(100, 300)),
    "pyclient_one_call": seed(pyclient, splits=(1, 2, 3, 299, 300), one_call=True),
    "strings": seed(strings),
    "strings_clock": seed(strings, splits=(40, 80, 120, 160, 200, 240, 280, 320), clock=True),
    "keyspace": seed(keyspace),
    "keyspace_clock": seed(keyspace, splits=(30, 60, 90), clock=True),
    "server": seed(server),
    "errors_cmd": seed(errors_cmd, splits=(10,)),
    "inline": seed(inline, splits=(5, 6, 30)),
    "proto_mbulk_len": seed(cmd("PING") + b"*abc\r\n"),
    "proto_bulk_len": seed(b"*1\r\n$-1\r\n"),
    "proto_dollar": seed(cmd("PING") + b"*2\r\n$1\r\na\r\n:1\r\n"),
    "proto_quotes": seed(b"PING\r\nECHO \"abc\r\n"),
    "proto_big_inline_small": seed(b"a" * 1100, small_limits=True),
    "proto_big_count_small": seed(b"*" + b"1" * 1100, small_limits=True),
    "proto_big_bulk_small": seed(cmd("SET", "k", "v" * 5000), small_limits=True),
    "proto_many_args_small": seed(cmd(*(["DEL"] + ["k%d" % i for i in range(70)])), small_limits=True),
    # An inline line takes more arguments than max_multibulk (Redis bounds it only by its length).
    "inline_many_args_small": seed(b"MGET " + b" ".join(b"k%d" % i for i in range(100)) + b"\r\n", small_limits=True),
    "quirks": seed(b"*1\r\n$4\r\nPINGXY*1\rX$4\r\nPING\r\n*0\r\n*-1\r\n" + cmd("PING")),
    "security": seed(cmd("PING") + b"POST / HTTP/1.1\r\nHost: x\r\n\r\n"),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for old in os.listdir(OUT):
        os.remove(os.path.join(OUT, old))
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(SEEDS), OUT))


if __name__ == "__main__":
    main()
