/* crescent — the ABI shared by the XDP steering program and user space.
 *
 * Included by crescent_steer.bpf.c (clang -target bpf) and by the C++ code that
 * fills the maps (stack/dev/steer.cpp), so both agree on the map names, key
 * and value layouts. Plain C, fixed-width kernel types, no padding.
 *
 * Maps (names are <= 15 characters: the kernel keeps BPF_OBJ_NAME_LEN - 1):
 *   xsks_map        XSKMAP, key = RX queue index, value = XSK fd. The af_xdp
 *                   PMD requires this exact name and fills it itself.
 *   crescent_ranges ARRAY[CRESCENT_STEER_MAX_RANGES] of crescent_port_range:
 *                   inclusive TCP destination-port ranges steered to the XSK.
 *                   Only the first `nr_ranges` entries (see crescent_cfg) are
 *                   looked at; user space writes the entries first, then the
 *                   count, so a reader never sees a half-written new range.
 *   crescent_cfg    ARRAY[1] of crescent_steer_cfg.
 *   crescent_stats  PERCPU_ARRAY[CRESCENT_STEER_STAT_COUNT] of __u64 counters.
 *
 * All maps are updated from user space with bpf_map_update_elem() while the
 * program runs: changing the port plan never reloads the program.
 */
#ifndef CRESCENT_STEER_MAPS_H
#define CRESCENT_STEER_MAPS_H

#include <linux/types.h>

#define CRESCENT_STEER_MAX_RANGES 64

#define CRESCENT_STEER_MAP_XSKS   "xsks_map"
#define CRESCENT_STEER_MAP_RANGES "crescent_ranges"
#define CRESCENT_STEER_MAP_CFG    "crescent_cfg"
#define CRESCENT_STEER_MAP_STATS  "crescent_stats"

/* One inclusive range [lo, hi] of TCP destination ports, host byte order.
 * Invariant for a live entry: 1 <= lo <= hi. */
struct crescent_port_range {
	__u16 lo;
	__u16 hi;
	__u32 flags; /* reserved for the port plan (issue 5); 0 today */
};

struct crescent_steer_cfg {
	__u32 nr_ranges; /* live entries in crescent_ranges; <= CRESCENT_STEER_MAX_RANGES */
	__u32 flags;     /* reserved; 0 */
};

/* Counter indices in crescent_stats (per CPU; user space sums them). */
enum crescent_steer_stat {
	CRESCENT_STEER_REDIRECTED = 0, /* handed to bpf_redirect_map(xsks_map) */
	CRESCENT_STEER_PASS_NOT_IP,    /* not IPv4 (ARP, IPv6, ...): kernel */
	CRESCENT_STEER_PASS_NOT_TCP,   /* IPv4 but not TCP (ICMP, UDP, ...) or a fragment */
	CRESCENT_STEER_PASS_PORT,      /* TCP to a port outside every range */
	CRESCENT_STEER_PASS_MALFORMED, /* truncated headers: the kernel judges them */
	CRESCENT_STEER_STAT_COUNT
};

#endif /* CRESCENT_STEER_MAPS_H */
