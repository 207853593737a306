// SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0)
/* crescent — XDP flow bifurcation for AF_XDP (DESIGN.md "Traffic model").
 *
 * Redirects IPv4/TCP frames whose destination port lies in one of the ranges
 * in `crescent_ranges` to the AF_XDP socket bound to the receiving queue
 * (xsks_map[ctx->rx_queue_index]); everything else — ARP, ICMP, IPv6, UDP,
 * TCP to other ports, IP fragments, malformed frames — returns XDP_PASS, so
 * the kernel stays authoritative for ARP/ICMP/routes and its own sockets.
 *
 * An XSK only receives from the queue it is bound to (TESTBED.md): choosing
 * the queue is the NIC's job (RSS/ntuple/rte_flow), not this program's.
 *
 * Parsing: Ethernet II with at most one 802.1Q/802.1ad tag, IPv4 (RFC 791,
 * IHL honoured), TCP (RFC 9293) destination port. Every read is bounds-checked
 * against data_end for the verifier. Fragments (MF or offset != 0) are passed:
 * the user-space stack does not reassemble.
 *
 * Missing XSK on a queue: bpf_redirect_map's fallback action (low bits of
 * flags, Linux >= 5.6) is XDP_PASS.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "steer_maps.h"

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CRESCENT_STEER_MAX_RANGES);
	__type(key, __u32);
	__type(value, struct crescent_port_range);
} crescent_ranges SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct crescent_steer_cfg);
} crescent_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CRESCENT_STEER_STAT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} crescent_stats SEC(".maps");

struct vlan_hdr_ {
	__be16 tci;
	__be16 encapsulated_proto;
};

static __always_inline int count(__u32 stat, int action)
{
	__u64 *c = bpf_map_lookup_elem(&crescent_stats, &stat);

	if (c)
		*c += 1; /* per-CPU slot: no atomic needed */
	return action;
}

static __always_inline int port_steered(__u16 port)
{
	__u32 zero = 0;
	struct crescent_steer_cfg *cfg = bpf_map_lookup_elem(&crescent_cfg, &zero);
	__u32 n, i;

	if (!cfg)
		return 0;
	n = cfg->nr_ranges;
	if (n > CRESCENT_STEER_MAX_RANGES)
		n = CRESCENT_STEER_MAX_RANGES;
	for (i = 0; i < CRESCENT_STEER_MAX_RANGES; i++) {
		struct crescent_port_range *r;
		__u32 key = i;

		if (i >= n)
			break;
		r = bpf_map_lookup_elem(&crescent_ranges, &key);
		if (r && port >= r->lo && port <= r->hi)
			return 1;
	}
	return 0;
}

SEC("xdp")
int crescent_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct tcphdr *tcp;
	__u16 proto;
	__u32 ihl;
	void *l3;

	if ((void *)(eth + 1) > data_end)
		return count(CRESCENT_STEER_PASS_MALFORMED, XDP_PASS);
	proto = eth->h_proto;
	l3 = eth + 1;
	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		struct vlan_hdr_ *vh = l3;

		if ((void *)(vh + 1) > data_end)
			return count(CRESCENT_STEER_PASS_MALFORMED, XDP_PASS);
		proto = vh->encapsulated_proto;
		l3 = vh + 1;
	}
	if (proto != bpf_htons(ETH_P_IP))
		return count(CRESCENT_STEER_PASS_NOT_IP, XDP_PASS);

	ip = l3;
	if ((void *)(ip + 1) > data_end)
		return count(CRESCENT_STEER_PASS_MALFORMED, XDP_PASS);
	if (ip->version != 4 || ip->ihl < 5)
		return count(CRESCENT_STEER_PASS_MALFORMED, XDP_PASS);
	if (ip->protocol != IPPROTO_TCP)
		return count(CRESCENT_STEER_PASS_NOT_TCP, XDP_PASS);
	/* MF flag or a non-zero fragment offset. */
	if (ip->frag_off & bpf_htons(0x3fff))
		return count(CRESCENT_STEER_PASS_NOT_TCP, XDP_PASS);

	ihl = ip->ihl * 4u;
	tcp = (void *)ip + ihl;
	if ((void *)(tcp + 1) > data_end)
		return count(CRESCENT_STEER_PASS_MALFORMED, XDP_PASS);

	if (!port_steered(bpf_ntohs(tcp->dest)))
		return count(CRESCENT_STEER_PASS_PORT, XDP_PASS);

	count(CRESCENT_STEER_REDIRECTED, 0);
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "Dual BSD/GPL";
