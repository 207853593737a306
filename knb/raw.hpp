// knb raw — the packet round-trip limit of a test bed, without TCP (issue 10,
// "Test beds and the limits").
//
//   knb raw reflect (--iface IF | --eal "ARGS") [--queues N] [--duration S] [--idle-sleep-us N] [--touch]
//   knb raw ping    (--iface IF | --eal "ARGS") [--size N] [--iodepth D] [--queues N]
//                   [--duration S] [--warmup S] [--fit-mtu] [--idle-sleep-us N] [--json FILE]
//
// Two DPDK processes on the two ends of a bed (veth + AF_XDP with the PMD's
// default XDP program, which hands every frame of the queue to the XSK; or
// net_memif). `reflect` sends every frame of knb's ethertype back where it came
// from (MACs swapped), rx_burst -> tx_burst on each queue. `ping` keeps D
// frames in flight per queue, each carrying its queue, slot, sequence number,
// length and TSC send time, verifies every frame that returns (known sequence,
// right length, payload intact) and measures round trips/s and their latency:
// what the bed itself can carry, against which crescent's RPC rate is a
// fraction. Frames use the IEEE local experimental ethertype 0x88B5, so no
// kernel stack answers them. A frame not back within --timeout-ms is counted
// lost and replaced by a new one. --fit-mtu lowers a --size above the
// device's MTU + 14 to that (knb sweep --raw asks for the frame an RPC
// request would need and reports the cap).
#pragma once

namespace knb {

// argv[0] is "raw". Returns the process exit status: 0 done, 1 the run failed
// (device, lost link, a wrong frame, nothing came back), 2 bad options.
int raw_main(int argc, char** argv);

} // namespace knb
