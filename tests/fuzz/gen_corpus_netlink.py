#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_netlink (tests/fuzz/corpus/netlink/):
rtnetlink datagrams as the kernel sends them (rtnetlink(7),
include/uapi/linux/{netlink,rtnetlink,if_link,if_addr,neighbour}.h), encoded
here independently of libnl, each datagram behind fuzz_netlink's record prefix
(a flags byte, bit 0 = apply as a dump, and a little-endian u16 length; see
tests/fuzz/fuzz_netlink.cpp). The fuzzed interface has ifindex 2.
Usage: tests/fuzz/gen_corpus_netlink.py   (rewrites the files in place)"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "netlink")

AF_INET, AF_INET6 = 2, 10
RTM_NEWLINK, RTM_DELLINK, RTM_NEWADDR, RTM_DELADDR = 16, 17, 20, 21
RTM_NEWROUTE, RTM_DELROUTE, RTM_NEWNEIGH, RTM_DELNEIGH = 24, 25, 28, 29
NLMSG_DONE = 3
NLM_F_MULTI = 2
IFLA_ADDRESS, IFLA_IFNAME, IFLA_MTU, IFLA_OPERSTATE = 1, 3, 4, 16
IFA_ADDRESS, IFA_LOCAL, IFA_LABEL = 1, 2, 3
NDA_DST, NDA_LLADDR = 1, 2
RTA_DST, RTA_OIF, RTA_GATEWAY, RTA_PRIORITY, RTA_PREFSRC, RTA_MULTIPATH, RTA_TABLE, RTA_VIA = 1, 4, 5, 6, 7, 9, 15, 18
NUD_INCOMPLETE, NUD_REACHABLE, NUD_STALE, NUD_FAILED, NUD_PERMANENT = 0x1, 0x2, 0x4, 0x20, 0x80
IFF_UP, IFF_RUNNING = 0x1, 0x40
IF_OPER_DOWN, IF_OPER_UP = 2, 6
RTN_UNICAST, RTN_LOCAL, RTN_BLACKHOLE, RTN_UNREACHABLE = 1, 2, 6, 7
RT_TABLE_MAIN, RT_TABLE_LOCAL = 254, 255
IFINDEX = 2


def pad4(b):
    return b + b"\0" * (-len(b) % 4)


def attr(kind, payload):
    return pad4(struct.pack("<HH", 4 + len(payload), kind) + payload)


def ip(s):
    return bytes(int(x) for x in s.split("."))


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def nlmsg(kind, body, flags=0, seq=0):
    return pad4(struct.pack("<IHHII", 16 + len(body), kind, flags, seq, 0) + body)


def link(kind=RTM_NEWLINK, index=IFINDEX, flags=IFF_UP | IFF_RUNNING, hw="02:00:00:00:00:02", mtu=1500,
         oper=IF_OPER_UP, name=b"veth0\0"):
    body = struct.pack("<BBHiII", 0, 0, 1, index, flags, 0xFFFFFFFF)
    body += attr(IFLA_IFNAME, name) + attr(IFLA_ADDRESS, mac(hw)) + attr(IFLA_MTU, struct.pack("<I", mtu))
    body += attr(IFLA_OPERSTATE, bytes([oper]))
    return nlmsg(kind, body)


def addr(kind=RTM_NEWADDR, local="10.0.0.1", plen=24, index=IFINDEX, family=AF_INET):
    body = struct.pack("<BBBBI", family, plen, 0, 0, index)
    a = ip(local) if family == AF_INET else bytes(16)
    body += attr(IFA_ADDRESS, a) + attr(IFA_LOCAL, a) + attr(IFA_LABEL, b"veth0\0")
    return nlmsg(kind, body)


def neigh(kind=RTM_NEWNEIGH, dst="10.0.0.2", hw="02:00:00:00:00:03", state=NUD_REACHABLE, index=IFINDEX,
          family=AF_INET):
    body = struct.pack("<BBHiHBB", family, 0, 0, index, state, 0, 1)
    body += attr(NDA_DST, ip(dst))
    if hw is not None:
        body += attr(NDA_LLADDR, mac(hw))
    return nlmsg(kind, body)


def route(kind=RTM_NEWROUTE, dst=None, dlen=0, gw=None, oif=IFINDEX, prio=None, rtype=RTN_UNICAST,
          table=RT_TABLE_MAIN, prefsrc=None, tos=0, multipath=None, extra=b"", hop_extra=b""):
    body = struct.pack("<BBBBBBBBI", AF_INET, dlen, 0, tos, table if table < 256 else 252, 4, 0, rtype, 0)
    body += attr(RTA_TABLE, struct.pack("<I", table))
    if dst is not None:
        body += attr(RTA_DST, ip(dst))
    if prio is not None:
        body += attr(RTA_PRIORITY, struct.pack("<I", prio))
    if prefsrc is not None:
        body += attr(RTA_PREFSRC, ip(prefsrc))
    if multipath is not None:
        hops = b""
        for (hop_if, hop_gw) in multipath:
            a = (attr(RTA_GATEWAY, ip(hop_gw)) if hop_gw else b"") + hop_extra
            hops += struct.pack("<HBBi", 8 + len(a), 0, 0, hop_if) + a
        body += attr(RTA_MULTIPATH, hops)
    else:
        if gw is not None:
            body += attr(RTA_GATEWAY, ip(gw))
        if oif is not None:
            body += attr(RTA_OIF, struct.pack("<i", oif))
    return nlmsg(kind, body + extra)


def rec(*msgs, dump=False):
    d = b"".join(msgs)
    return bytes([1 if dump else 0]) + struct.pack("<H", len(d)) + d


def multi(*msgs):
    """A dump reply: every message NLM_F_MULTI, then NLMSG_DONE."""
    out = []
    for m in msgs:
        out.append(m[:6] + struct.pack("<H", NLM_F_MULTI) + m[8:])
    out.append(nlmsg(NLMSG_DONE, struct.pack("<i", 0), NLM_F_MULTI))
    return b"".join(out)


dump_all = rec(link(), dump=True) + rec(multi(addr(), addr(local="10.0.1.1", plen=16)), dump=True) + \
    rec(multi(neigh(), neigh(dst="10.0.0.254", hw="02:00:00:00:00:fe", state=NUD_STALE)), dump=True) + \
    rec(multi(route(dst="10.0.0.0", dlen=24, prefsrc="10.0.0.1"), route(gw="10.0.0.254", prio=100),
              route(dst="192.0.2.0", dlen=24, rtype=RTN_BLACKHOLE)), dump=True)

SEEDS = {
    "link_up": rec(link()),
    "link_down_mac_change": rec(link()) + rec(link(flags=0, oper=IF_OPER_DOWN, hw="02:00:00:00:00:99")),
    "link_other_ifindex": rec(link(index=7)),
    "link_deleted": rec(link()) + rec(link(kind=RTM_DELLINK)),
    "addr_add_del": rec(addr()) + rec(addr(local="10.0.2.1", plen=32)) + rec(addr(kind=RTM_DELADDR)),
    "addr_ipv6_ignored": rec(addr(family=AF_INET6)),
    "neigh_lifecycle": rec(neigh(hw=None, state=NUD_INCOMPLETE)) + rec(neigh()) + rec(neigh(state=NUD_STALE)) +
    rec(neigh(state=NUD_FAILED, hw=None)) + rec(neigh(kind=RTM_DELNEIGH)),
    "neigh_many": rec(*[neigh(dst=f"10.0.{i // 250}.{i % 250 + 1}", hw=f"02:00:00:00:{i // 256:02x}:{i % 256:02x}",
                              state=NUD_PERMANENT if i % 3 == 0 else NUD_REACHABLE) for i in range(40)]),
    "route_default_and_connected": rec(addr()) + rec(neigh(dst="10.0.0.254")) +
    rec(route(dst="10.0.0.0", dlen=24, prefsrc="10.0.0.1"), route(gw="10.0.0.254", prio=100)),
    "route_reject_and_local": rec(route(dst="198.51.100.0", dlen=24, rtype=RTN_UNREACHABLE),
                                  route(dst="10.0.0.1", dlen=32, rtype=RTN_LOCAL, table=RT_TABLE_LOCAL)),
    "route_multipath": rec(route(dst="203.0.113.0", dlen=24, oif=None,
                                 multipath=[(5, "10.9.0.1"), (IFINDEX, "10.0.0.254")])) +
    rec(route(kind=RTM_DELROUTE, dst="203.0.113.0", dlen=24, oif=None, multipath=[(5, "10.9.0.1")])),
    "route_other_interface": rec(route(dst="172.16.0.0", dlen=12, gw="10.9.0.1", oif=5)),
    "route_replace_metric_tos": rec(route(gw="10.0.0.254", prio=100)) + rec(route(gw="10.0.0.253", prio=100)) +
    rec(route(gw="10.0.0.252", prio=50, tos=0x10)) + rec(route(kind=RTM_DELROUTE, gw="10.0.0.254", prio=100)),
    "dump_all": dump_all,
    "dump_then_updates": dump_all + rec(neigh(dst="10.0.0.254", hw="02:00:00:00:00:fd")) +
    rec(link(flags=IFF_UP, oper=IF_OPER_DOWN)) + rec(route(kind=RTM_DELROUTE, gw="10.0.0.254", prio=100)),
    "truncated_attr": rec(neigh()[:30]) + rec(link()[:-3]),
    "empty": b"",
    # Regressions (each crashed fuzz_netlink before the fix in stack/ctrl/netlink.cpp):
    # a prefix length over 32 shifted by a negative count in Ipv4Prefix::mask_of,
    "regress-addr-prefix-over-32": rec(link()) + rec(addr(plen=33)) + rec(addr(plen=255, local="10.0.0.9")) +
    rec(route(dst="10.0.0.0", dlen=24)),  # next_hop() -> source_for() -> InterfaceAddr::subnet()
    "regress-route-dst-len-over-32": rec(route(dst="10.0.0.0", dlen=40)),
    # and a next hop with rtnh_len 0 sent libnl's parse_multipath into an endless,
    # allocating loop; one whose aligned length passes the attribute's end wrapped it.
    "regress-multipath-rtnh-len-0": rec(route(dst="203.0.113.0", dlen=24, oif=None, multipath=[(IFINDEX, None)])
                                        .replace(struct.pack("<HBBi", 8, 0, 0, IFINDEX),
                                                 struct.pack("<HBBi", 0, 0, 0, IFINDEX))),
    # and an RTA_VIA shorter than its family was a memcpy of negative size in libnl.
    "regress-route-via-short": rec(route(dst="10.1.0.0", dlen=16, extra=attr(RTA_VIA, b""))) +
    rec(route(dst="10.2.0.0", dlen=16, oif=None, multipath=[(IFINDEX, "10.0.0.254")], hop_extra=attr(RTA_VIA, b"\x0a"))),
    "regress-route-via-short-dump": rec(route(dst="10.1.0.0", dlen=16, extra=attr(RTA_VIA, b"")), dump=True),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):  # fuzzer-found regress-* inputs stay
        if not f.startswith("regress-") or f in SEEDS:
            os.remove(os.path.join(OUT, f))
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"{len(SEEDS)} seeds in {OUT}")


if __name__ == "__main__":
    main()
