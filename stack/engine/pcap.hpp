// crescent — packet capture: every frame an engine receives and sends,
// written to a file in the classic pcap format (libpcap's savefile,
// https://www.tcpdump.org/manpages/pcap-savefile.5.html), read by tcpdump -r,
// Wireshark, tshark.
//
// The format is written here rather than through libpcap's pcap_dump (a
// static libpcap.a clashes with DPDK's librte_bpf.a: both define
// bpf_validate) or DPDK's rte_pcapng (made for the pdump secondary-process
// path): a 24-byte file header, then per frame a 16-byte record header and
// the frame's first `snaplen` bytes, through a buffered FILE*.
//
//   file header:   magic 0xa1b23c4d (nanosecond timestamps), version 2.4,
//                  thiszone 0, sigfigs 0, snaplen, linktype 1 (Ethernet);
//   record header: ts_sec, ts_nsec, incl_len (<= snaplen), orig_len;
//   all fields in the writer's byte order (the magic tells the reader).
//
// Timestamps: engine Instants (TscClock) mapped to CLOCK_REALTIME once, at
// open(). The size cap counts the whole file (header included): the first
// frame that would cross it stops the capture, and it and every later frame
// are counted in dropped_cap(); so is every frame after a write error.
//
// Threads: one writer per engine, used only on that engine's thread
// (share-nothing: a runtime with N engines writes N files).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include <crescent/time.hpp>

struct rte_mbuf;

namespace crescent::engine {

class PcapWriter {
public:
    // Frames are written whole up to this many bytes (tcpdump's default
    // snap length): a TSO frame of 64 KiB fits.
    static constexpr uint32_t kDefaultSnaplen = 262144;
    static constexpr uint32_t kMagicNanos = 0xa1b23c4d;
    static constexpr uint32_t kLinktypeEthernet = 1;
    static constexpr size_t kFileHeaderLen = 24;
    static constexpr size_t kRecordHeaderLen = 16;

    // Creates (truncates) `path` and writes the file header. snaplen 0 =
    // kDefaultSnaplen; max_bytes 0 = no cap. `now` is the engine clock's
    // present Instant (mapped to wall time). nullptr + *err (one line naming
    // the path and errno) when the file cannot be opened or written.
    static std::unique_ptr<PcapWriter> open(const std::string& path, uint32_t snaplen, uint64_t max_bytes,
                                            Instant now, std::string* err);
    ~PcapWriter();
    PcapWriter(const PcapWriter&) = delete;
    PcapWriter& operator=(const PcapWriter&) = delete;

    // One frame from its pieces in order (orig_len = their sum).
    void write(Instant t, std::span<const std::span<const std::byte>> pieces);
    // n frames, each an mbuf chain written whole (pkt_len; cut at snaplen).
    void write_mbufs(rte_mbuf* const* pkts, size_t n, Instant t);
    bool flush();

    uint64_t frames() const { return frames_; }          // records written
    uint64_t dropped_cap() const { return dropped_; }    // frames not written (cap or write error)
    uint64_t bytes() const { return bytes_; }            // file size so far (header included)
    uint32_t snaplen() const { return snaplen_; }
    const std::string& path() const { return path_; }

private:
    PcapWriter() = default;
    bool put(const void* p, size_t n);

    std::FILE* f_ = nullptr;
    std::string path_;
    uint32_t snaplen_ = kDefaultSnaplen;
    uint64_t max_bytes_ = 0;        // 0 = no cap
    int64_t wall0_ns_ = 0;          // CLOCK_REALTIME at open, in ns
    int64_t mono0_ns_ = 0;          // the engine Instant at open
    bool stopped_ = false;          // cap reached or write error: nothing more is written
    uint64_t frames_ = 0, dropped_ = 0, bytes_ = 0;
};

// The file engine `index` of `count` writes: `path` itself for one engine,
// "path.INDEX" for several.
std::string pcap_path(const std::string& path, unsigned index, unsigned count);

} // namespace crescent::engine
