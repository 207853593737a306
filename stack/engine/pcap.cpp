// crescent — packet capture in the classic pcap format (see pcap.hpp).
#include "stack/engine/pcap.hpp"

#include <time.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <rte_mbuf.h>

namespace crescent::engine {

namespace {
struct FileHeader {
    uint32_t magic;
    uint16_t version_major, version_minor;
    int32_t thiszone;
    uint32_t sigfigs;
    uint32_t snaplen;
    uint32_t linktype;
};
struct RecordHeader {
    uint32_t ts_sec, ts_nsec, incl_len, orig_len;
};
static_assert(sizeof(FileHeader) == PcapWriter::kFileHeaderLen);
static_assert(sizeof(RecordHeader) == PcapWriter::kRecordHeaderLen);
} // namespace

std::string pcap_path(const std::string& path, unsigned index, unsigned count) {
    return count <= 1 ? path : path + "." + std::to_string(index);
}

std::unique_ptr<PcapWriter> PcapWriter::open(const std::string& path, uint32_t snaplen, uint64_t max_bytes,
                                             Instant now, std::string* err) {
    std::unique_ptr<PcapWriter> w(new PcapWriter());
    w->path_ = path;
    w->snaplen_ = snaplen ? snaplen : kDefaultSnaplen;
    w->max_bytes_ = max_bytes;
    w->f_ = std::fopen(path.c_str(), "wb");
    if (!w->f_) {
        if (err) *err = "cannot open the capture file " + path + ": " + std::strerror(errno);
        return nullptr;
    }
    std::setvbuf(w->f_, nullptr, _IOFBF, 1 << 16);
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    w->wall0_ns_ = int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    w->mono0_ns_ = now.nanos();
    const FileHeader h{kMagicNanos, 2, 4, 0, 0, w->snaplen_, kLinktypeEthernet};
    if (!w->put(&h, sizeof h) || std::fflush(w->f_) != 0) {
        if (err) *err = "cannot write the capture file " + path + ": " + std::strerror(errno);
        return nullptr;
    }
    return w;
}

PcapWriter::~PcapWriter() {
    if (f_) std::fclose(f_);
}

bool PcapWriter::put(const void* p, size_t n) {
    if (n == 0) return true;
    if (std::fwrite(p, 1, n, f_) != n) return false;
    bytes_ += n;
    return true;
}

bool PcapWriter::flush() { return f_ && std::fflush(f_) == 0; }

void PcapWriter::write(Instant t, std::span<const std::span<const std::byte>> pieces) {
    size_t orig = 0;
    for (auto p : pieces) orig += p.size();
    const uint32_t incl = uint32_t(std::min<size_t>(orig, snaplen_));
    if (stopped_ || (max_bytes_ && bytes_ + kRecordHeaderLen + incl > max_bytes_)) {
        stopped_ = true;
        ++dropped_;
        return;
    }
    const int64_t wall = wall0_ns_ + (t.nanos() - mono0_ns_);
    const RecordHeader r{uint32_t(wall / 1'000'000'000), uint32_t(wall % 1'000'000'000), incl,
                         uint32_t(std::min<size_t>(orig, UINT32_MAX))};
    bool ok = put(&r, sizeof r);
    size_t left = incl;
    for (auto p : pieces) {
        if (!ok || left == 0) break;
        size_t k = std::min(left, p.size());
        ok = put(p.data(), k);
        left -= k;
    }
    if (!ok) {  // a short write leaves a torn record: stop (the file stays readable up to it)
        stopped_ = true;
        ++dropped_;
        return;
    }
    ++frames_;
}

void PcapWriter::write_mbufs(rte_mbuf* const* pkts, size_t n, Instant t) {
    constexpr size_t kMaxPieces = 64;
    std::array<std::span<const std::byte>, kMaxPieces> pieces;
    for (size_t i = 0; i < n; ++i) {
        size_t k = 0;
        for (const rte_mbuf* s = pkts[i]; s && k < kMaxPieces; s = s->next)
            pieces[k++] = {rte_pktmbuf_mtod(s, const std::byte*), s->data_len};
        write(t, std::span(pieces.data(), k));
    }
}

} // namespace crescent::engine
