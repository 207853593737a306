// crescent-blockd — MemoryVolume (received slices kept as block contents) and
// FileVolume (O_DIRECT through io_uring into zbuf objs). See volume.hpp.
#include "examples/blockd/volume.hpp"

#include <crescent/log.hpp>

#include <liburing.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace crescent::blockd {

VolStatus Volume::check(uint64_t offset, uint64_t len) const {
    if (len == 0) return VolStatus::Empty;
    if (offset % kBlockSize != 0 || len % kBlockSize != 0) return VolStatus::Misaligned;
    if (offset >= size_ || len > size_ - offset) return VolStatus::OutOfRange;
    return VolStatus::Ok;
}

namespace {

uint64_t total_bytes(std::span<Slice> data) {
    uint64_t n = 0;
    for (const Slice& s : data) n += s.size();
    return n;
}

bool same_obj_contiguous(const Slice& a, const Slice& b) {
    return a.buf().data() == b.buf().data() && a.offset() + a.size() == b.offset();
}

} // namespace

// --- MemoryVolume ---------------------------------------------------------------

std::unique_ptr<MemoryVolume> MemoryVolume::create(uint64_t size, std::string* err) {
    if (size == 0 || size % kBlockSize != 0) {
        *err = "volume size " + std::to_string(size) + " is not a positive multiple of 4096";
        return nullptr;
    }
    zbuf::Arena* arena = zbuf::Arena::current();
    if (!arena || zbuf::current_core() == zbuf::kNoCore) {
        *err = "MemoryVolume needs a zbuf arena and a CoreScope on the calling thread";
        return nullptr;
    }
    // The zero obj: the largest size class that is a whole number of blocks
    // (runs of unwritten blocks then share one slice of it per class size).
    size_t zlen = kBlockSize;
    for (uint32_t c : arena->config().size_classes)
        if (c % kBlockSize == 0) zlen = std::max<size_t>(zlen, c);
    Slice zeros = arena->alloc_slice(zlen);
    if (!zeros) {
        *err = "no zbuf obj of " + std::to_string(zlen) + " bytes for the zero block";
        return nullptr;
    }
    std::memset(zeros.data(), 0, zeros.size());
    return std::unique_ptr<MemoryVolume>(new MemoryVolume(size, std::move(zeros)));
}

MemoryVolume::MemoryVolume(uint64_t size, Slice zeros)
    : Volume(size), blocks_(size / kBlockSize), zeros_(std::move(zeros)) {}

void MemoryVolume::read(uint64_t offset, uint64_t len, Completion done) {
    if (VolStatus st = check(offset, len); st != VolStatus::Ok) return fail(done, st);
    // A completion may call read() again: work on a local vector (keeping
    // out_'s capacity for the next call).
    std::vector<Slice> out = std::move(out_);
    out.clear();
    uint64_t first = offset / kBlockSize, n = len / kBlockSize;
    for (uint64_t b = first; b < first + n; ++b) {
        const Block& blk = blocks_[b];
        if (blk.n == 0) {
            stats_.zero_blocks_read++;
            if (!out.empty() && out.back().buf().data() == zeros_.buf().data() &&
                out.back().size() + kBlockSize <= zeros_.size()) {
                out.back().set_size(out.back().size() + kBlockSize); // zeros are zeros anywhere
            } else {
                out.push_back(zeros_.sub(0, kBlockSize));
            }
            continue;
        }
        for (unsigned i = 0; i < blk.n; ++i) {
            const Slice& p = blk.piece[i];
            // A segment that straddled a block boundary went into two blocks as
            // two adjacent windows of one obj: one reply slice again.
            if (!out.empty() && same_obj_contiguous(out.back(), p))
                out.back().set_size(out.back().size() + p.size());
            else
                out.push_back(p.share());
        }
    }
    stats_.reads++;
    stats_.bytes_read += len;
    done(VolStatus::Ok, out);
    out.clear();
    if (out_.capacity() < out.capacity()) out_ = std::move(out);
}

void MemoryVolume::write(uint64_t offset, std::span<Slice> data, Completion done) {
    uint64_t len = total_bytes(data);
    if (VolStatus st = check(offset, len); st != VolStatus::Ok) return fail(done, st);
    uint64_t first = offset / kBlockSize, n = len / kBlockSize;
    // Stage every new block first and commit only when all are ready, so a
    // failed write (no obj for a coalesced block) changes nothing.
    if (staged_.size() < n) staged_.resize(n);
    size_t si = 0; // data[si] is the first slice with bytes left
    auto skip_empty = [&] { while (si < data.size() && data[si].empty()) ++si; };
    uint64_t coalesced = 0;
    for (uint64_t b = 0; b < n; ++b) {
        Block& nb = staged_[b];
        nb.clear();
        skip_empty();
        // How many slices does this block span? (look ahead without consuming)
        unsigned pieces = 0;
        size_t need = kBlockSize;
        for (size_t j = si; need > 0 && j < data.size(); ++j) {
            if (data[j].empty()) continue;
            need -= std::min<size_t>(need, data[j].size());
            ++pieces;
        }
        if (pieces <= kMaxPieces) {
            need = kBlockSize;
            while (need > 0) {
                skip_empty();
                Slice& s = data[si];
                if (s.size() <= need) {
                    need -= s.size();
                    nb.piece[nb.n++] = std::move(s); // the slice's last bytes: take its reference
                    ++si;
                } else {
                    nb.piece[nb.n++] = s.sub(0, need);
                    s.remove_prefix(need);
                    need = 0;
                }
            }
        } else {
            // Too many small pieces (tiny segments, retransmissions cut at odd
            // places): one copy into a fresh obj keeps blocks bounded.
            Slice c = zbuf::Arena::current()->alloc_slice(kBlockSize);
            if (!c) {
                for (uint64_t k = 0; k <= b; ++k) staged_[k].clear();
                return fail(done, VolStatus::NoMemory);
            }
            size_t at = 0;
            while (at < kBlockSize) {
                skip_empty();
                Slice& s = data[si];
                size_t take = std::min<size_t>(kBlockSize - at, s.size());
                std::memcpy(c.data() + at, s.data(), take);
                at += take;
                s.remove_prefix(take);
                if (s.empty()) { s.reset(); ++si; }
            }
            nb.piece[nb.n++] = std::move(c);
            ++coalesced;
        }
    }
    // Commit: the old contents' references drop here; READ replies that still
    // hold the old objs keep their own references.
    for (uint64_t b = 0; b < n; ++b) {
        Block& cur = blocks_[first + b];
        if (cur.n == 0) ++blocks_written_;
        std::swap(cur, staged_[b]);
        staged_[b].clear();
    }
    stats_.blocks_coalesced += coalesced;
    stats_.writes++;
    stats_.bytes_written += len;
    done(VolStatus::Ok, {});
}

void MemoryVolume::flush(Completion done) {
    stats_.flushes++;
    done(VolStatus::Ok, {});
}

// --- FileVolume -------------------------------------------------------------------

struct FileVolume::Op {
    enum class Kind : uint8_t { Read, Write, Flush };
    Kind kind = Kind::Read;
    uint64_t offset = 0;       // volume offset of the request
    uint64_t len = 0;          // bytes of the request (0 for Flush)
    uint64_t done_bytes = 0;   // transferred so far (short transfers resubmit the rest)
    Completion done;
    std::vector<Slice> bufs;   // read targets / write sources, in order, sizes sum to len
    std::vector<iovec> iov;    // the not yet transferred part of bufs
    Op* next = nullptr;        // waiting FIFO link
};

std::string fs_name(int64_t t) {
    switch (uint64_t(t) & 0xffffffffu) {
    case 0xEF53: return "ext2/3/4";
    case 0x01021994: return "tmpfs";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x794c7630: return "overlayfs";
    case 0x6969: return "nfs";
    case 0x65735546: return "fuse";
    case 0x2fc12fc1: return "zfs";
    case 0xf2f52010: return "f2fs";
    case 0x858458f6: return "ramfs";
    case 0x9fa0: return "proc";
    case 0x62656572: return "sysfs";
    case 0x01021997: return "9p";
    case 0x4d44: return "vfat";
    }
    char b[32];
    std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)t);
    return b;
}

std::string direct_io_problem(const std::string& path, const std::string& fs, int open_errno,
                              bool dio_known, uint32_t mem_align, uint32_t off_align) {
    std::string where = path + " (" + fs + ")";
    if (open_errno == EINVAL)
        return "the filesystem of " + where + " refuses O_DIRECT (open: EINVAL); put the file on "
               "a filesystem with direct I/O (ext4, xfs) or allow buffered I/O";
    if (open_errno != 0) return "cannot open " + path + ": " + std::strerror(open_errno);
    if (dio_known && mem_align == 0 && off_align == 0)
        return "the filesystem of " + where + " reports no direct I/O support (statx "
               "STATX_DIOALIGN 0/0); put the file on ext4/xfs or allow buffered I/O";
    if (dio_known && off_align > kBlockSize)
        return "the filesystem of " + where + " needs " + std::to_string(off_align) +
               "-byte aligned direct I/O, more than the 4096-byte block";
    if (dio_known && mem_align > kBlockSize)
        return "the filesystem of " + where + " needs " + std::to_string(mem_align) +
               "-byte aligned buffers, more than zbuf objs offer (4096)";
    return "";
}

namespace {

std::string dir_of(const std::string& path) {
    auto p = path.rfind('/');
    if (p == std::string::npos) return ".";
    return p == 0 ? "/" : path.substr(0, p);
}

std::string fs_of(const std::string& path, int fd) {
    struct statfs sf {};
    int rc = fd >= 0 ? fstatfs(fd, &sf) : statfs(dir_of(path).c_str(), &sf);
    return rc == 0 ? fs_name(int64_t(sf.f_type)) : "unknown filesystem";
}

constexpr size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

} // namespace

std::unique_ptr<FileVolume> FileVolume::open(const FileOptions& o, std::string* err) {
    auto lg = log::get("blockd");
    zbuf::Arena* arena = zbuf::Arena::current();
    if (!arena) {
        *err = "FileVolume needs a zbuf arena (its buffers are zbuf objs)";
        return nullptr;
    }
    if (o.size % kBlockSize != 0) {
        *err = "volume size " + std::to_string(o.size) + " is not a multiple of 4096";
        return nullptr;
    }
    if (o.queue_depth == 0 || o.queue_depth > 4096) {
        *err = "queue depth " + std::to_string(o.queue_depth) + " is not in 1..4096";
        return nullptr;
    }
    if (o.max_io < kBlockSize || o.max_io % kBlockSize != 0 || o.max_io > (64u << 20)) {
        *err = "max_io " + std::to_string(o.max_io) + " is not a multiple of 4096 in 4096..64 MiB";
        return nullptr;
    }
    int flags = O_RDWR | O_CLOEXEC | (o.create ? O_CREAT : 0);
    bool direct = o.direct;
    int fd = ::open(o.path.c_str(), flags | (direct ? O_DIRECT : 0), 0644);
    int open_errno = fd < 0 ? errno : 0;
    std::string fs = fs_of(o.path, fd);
    if (fd < 0 && open_errno != EINVAL) {
        *err = "cannot open " + o.path + ": " + std::strerror(open_errno);
        return nullptr;
    }
    struct FdGuard {
        int& fd;
        ~FdGuard() { if (fd >= 0) ::close(fd); }
    } guard{fd};

    uint32_t mem_align = 4096, off_align = 512;
    if (direct) {
        bool dio_known = false;
        uint32_t dm = 0, doff = 0;
        if (fd >= 0) {
            struct statx sx {};
            if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
                dio_known = true;
                dm = sx.stx_dio_mem_align;
                doff = sx.stx_dio_offset_align;
            }
        }
        std::string problem = direct_io_problem(o.path, fs, open_errno, dio_known, dm, doff);
        if (problem.empty() && fd >= 0) {
            // Some filesystems accept the flag and refuse the I/O: try one
            // aligned block read (a hole or EOF reads fine).
            // (Set-up only: a heap buffer, not an arena obj.)
            std::unique_ptr<void, decltype(&std::free)> probe(std::aligned_alloc(4096, kBlockSize), &std::free);
            if (!probe || ::pread(fd, probe.get(), kBlockSize, 0) < 0) {
                int e = probe ? errno : ENOMEM;
                problem = e == EINVAL ? direct_io_problem(o.path, fs, EINVAL, false, 0, 0)
                                      : "O_DIRECT probe read of " + o.path + ": " + std::strerror(e);
                if (e != EINVAL) {
                    *err = problem;
                    return nullptr;
                }
            }
        }
        if (!problem.empty()) {
            if (!o.allow_buffered) {
                *err = problem;
                return nullptr;
            }
            lg->warn("{}: O_DIRECT refused ({}); using buffered I/O through the page cache "
                     "because buffered I/O is allowed", o.path, fs);
            direct = false;
            if (fd >= 0) ::close(fd);
            fd = ::open(o.path.c_str(), flags, 0644);
            if (fd < 0) {
                *err = "cannot open " + o.path + ": " + std::strerror(errno);
                return nullptr;
            }
        } else if (dio_known) {
            mem_align = std::max<uint32_t>(dm, 64);
            off_align = std::max<uint32_t>(doff, 1);
        }
        // Not reported (e.g. tmpfs, which takes O_DIRECT since Linux 6.6 but
        // says nothing): page-aligned buffers satisfy every device.
    }
    if (!direct) mem_align = 64, off_align = 1;

    struct stat st {};
    if (fstat(fd, &st) != 0) {
        *err = "fstat " + o.path + ": " + std::strerror(errno);
        return nullptr;
    }
    if (!S_ISREG(st.st_mode)) {
        *err = o.path + " is not a regular file";
        return nullptr;
    }
    uint64_t size = o.size;
    if (size == 0) {
        size = uint64_t(st.st_size) / kBlockSize * kBlockSize;
        if (size == 0) {
            *err = o.path + " is empty (or shorter than one block): give a volume size";
            return nullptr;
        }
    } else if (uint64_t(st.st_size) < size && ftruncate(fd, off_t(size)) != 0) {
        *err = "cannot grow " + o.path + " to " + std::to_string(size) + " bytes: " + std::strerror(errno);
        return nullptr;
    }

    std::unique_ptr<FileVolume> v(new FileVolume(size, o));
    v->direct_ = direct;
    v->mem_align_ = mem_align;
    v->off_align_ = off_align;
    for (uint32_t c : arena->config().size_classes)
        if (c % kBlockSize == 0 && c <= o.max_io) v->chunk_ = std::max(v->chunk_, c);

    v->ring_ = std::make_unique<io_uring>();
    if (int rc = io_uring_queue_init(o.queue_depth, v->ring_.get(), 0); rc < 0) {
        v->ring_.reset();
        *err = std::string("io_uring_queue_init: ") + std::strerror(-rc) +
               (rc == -EPERM ? " (io_uring disabled: sysctl kernel.io_uring_disabled or a seccomp filter)" : "");
        return nullptr;
    }
    v->efd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (v->efd_ < 0) {
        *err = std::string("eventfd: ") + std::strerror(errno);
        return nullptr;
    }
    if (int rc = io_uring_register_eventfd(v->ring_.get(), v->efd_); rc < 0) {
        *err = std::string("io_uring_register_eventfd: ") + std::strerror(-rc);
        return nullptr;
    }
    v->fd_ = fd;
    fd = -1; // the volume owns it now
    v->describe_ = o.path + " (" + fs + "): " + std::to_string(size) + " bytes, " +
                   (direct ? "O_DIRECT" : "buffered") + ", buffers " + std::to_string(v->chunk_) +
                   " B aligned to " + std::to_string(v->mem_align_) + ", queue depth " +
                   std::to_string(o.queue_depth);
    return v;
}

FileVolume::FileVolume(uint64_t size, const FileOptions& o) : Volume(size), opts_(o) {}

FileVolume::~FileVolume() {
    if (ring_) {
        // The kernel may still DMA into/out of our objs: wait for it, without
        // running completions (their owners may be gone).
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        if (unsubmitted_) io_uring_submit(ring_.get());
        while (inflight_ > 0 && std::chrono::steady_clock::now() < deadline) {
            io_uring_cqe* cqe = nullptr;
            __kernel_timespec ts{0, 100 * 1000 * 1000};
            if (io_uring_wait_cqe_timeout(ring_.get(), &cqe, &ts) == 0 && cqe) {
                io_uring_cqe_seen(ring_.get(), cqe);
                --inflight_;
            }
        }
        if (inflight_ > 0) {
            // Leak the buffers rather than hand memory the kernel still writes
            // back to the arena.
            log::get("blockd")->error("{}: {} I/Os still in flight after 10 s; leaking their buffers",
                                      opts_.path, inflight_);
            for (auto& op : ops_)
                for (Slice& s : op->bufs) (void)s.take_buf().release();
        }
        io_uring_queue_exit(ring_.get());
    }
    if (efd_ >= 0) ::close(efd_);
    if (fd_ >= 0) ::close(fd_);
}

FileVolume::Op* FileVolume::get_op() {
    if (free_ops_.empty()) {
        ops_.push_back(std::make_unique<Op>());
        return ops_.back().get();
    }
    Op* op = free_ops_.back();
    free_ops_.pop_back();
    return op;
}

void FileVolume::put_op(Op* op) {
    op->bufs.clear();
    op->iov.clear();
    op->done = {};
    op->next = nullptr;
    free_ops_.push_back(op);
}

Slice FileVolume::alloc_aligned(size_t n) {
    zbuf::Arena* a = zbuf::Arena::current();
    Zbuf z = a->alloc(n);
    if (!z) return {};
    if (reinterpret_cast<uintptr_t>(z.data()) % mem_align_ == 0) return Slice(std::move(z), 0, n);
    // Objs start on min(lowest set bit of their size, 4096) (at least 64):
    // power-of-two classes >= 4 KiB are page-aligned and never get here; other
    // classes (e.g. 9216) are only 64-byte aligned — align inside a larger obj.
    z.reset();
    z = a->alloc(n + mem_align_ - 64);
    if (!z) return {};
    auto p = reinterpret_cast<uintptr_t>(z.data());
    size_t off = align_up(p, mem_align_) - p;
    stats_.padded_allocs++;
    return Slice(std::move(z), off, n);
}

bool FileVolume::copy_in(Op* op, std::span<Slice> data, uint64_t total) {
    // Zero-copy when the caller's slices already satisfy O_DIRECT (aligned
    // addresses, lengths in whole alignment units, few enough iovecs). Slices
    // received from the network never do — 1448-byte segments at 64-byte
    // offsets inside RX objs — so a network WRITE is always copied, once, into
    // page-aligned objs; local callers with aligned buffers skip the copy.
    bool aligned = data.size() <= IOV_MAX;
    for (const Slice& s : data) {
        if (s.empty()) continue;
        if (reinterpret_cast<uintptr_t>(s.data()) % mem_align_ != 0 || s.size() % off_align_ != 0) {
            aligned = false;
            break;
        }
    }
    if (aligned) {
        for (Slice& s : data)
            if (!s.empty()) op->bufs.push_back(std::move(s));
        stats_.write_zero_copy++;
        return true;
    }
    size_t si = 0, s_off = 0;
    for (uint64_t at = 0; at < total;) {
        size_t n = size_t(std::min<uint64_t>(chunk_, total - at));
        Slice c = alloc_aligned(n);
        if (!c) return false;
        for (size_t filled = 0; filled < n;) {
            while (data[si].size() == s_off) ++si, s_off = 0;
            size_t take = std::min(n - filled, data[si].size() - s_off);
            std::memcpy(c.data() + filled, data[si].data() + s_off, take);
            filled += take;
            s_off += take;
        }
        op->bufs.push_back(std::move(c));
        at += n;
    }
    stats_.write_copies++;
    stats_.bytes_copied += total;
    return true;
}

void FileVolume::read(uint64_t offset, uint64_t len, Completion done) {
    if (VolStatus st = check(offset, len); st != VolStatus::Ok) return fail(done, st);
    if (len > opts_.max_io) return fail(done, VolStatus::TooLarge);
    if (waiting_ >= opts_.max_waiting && inflight_ >= opts_.queue_depth)
        return fail(done, VolStatus::QueueFull);
    Op* op = get_op();
    op->kind = Op::Kind::Read;
    op->offset = offset;
    op->len = len;
    op->done_bytes = 0;
    op->done = done;
    enqueue(op); // read buffers are allocated when the I/O starts
}

void FileVolume::write(uint64_t offset, std::span<Slice> data, Completion done) {
    uint64_t len = total_bytes(data);
    if (VolStatus st = check(offset, len); st != VolStatus::Ok) return fail(done, st);
    if (len > opts_.max_io) return fail(done, VolStatus::TooLarge);
    if (waiting_ >= opts_.max_waiting && inflight_ >= opts_.queue_depth)
        return fail(done, VolStatus::QueueFull);
    Op* op = get_op();
    op->kind = Op::Kind::Write;
    op->offset = offset;
    op->len = len;
    op->done_bytes = 0;
    op->done = done;
    // Copy now: the caller's slices are only ours during this call (and a
    // waiting write must not pin RX buffers).
    if (!copy_in(op, data, len)) {
        put_op(op);
        return fail(done, VolStatus::NoMemory);
    }
    enqueue(op);
}

void FileVolume::flush(Completion done) {
    if (waiting_ >= opts_.max_waiting && inflight_ >= opts_.queue_depth)
        return fail(done, VolStatus::QueueFull);
    Op* op = get_op();
    op->kind = Op::Kind::Flush;
    op->offset = 0;
    op->len = 0;
    op->done_bytes = 0;
    op->done = done;
    enqueue(op);
}

void FileVolume::enqueue(Op* op) {
    // FIFO order: nobody overtakes a waiting request.
    if (inflight_ < opts_.queue_depth && !wait_head_) return start(op);
    op->next = nullptr;
    if (wait_tail_) wait_tail_->next = op;
    else wait_head_ = op;
    wait_tail_ = op;
    ++waiting_;
    stats_.waited++;
    stats_.waiting_high = std::max<uint64_t>(stats_.waiting_high, waiting_);
}

void FileVolume::start(Op* op) {
    if (op->kind == Op::Kind::Read) {
        for (uint64_t at = 0; at < op->len;) {
            size_t n = size_t(std::min<uint64_t>(chunk_, op->len - at));
            Slice b = alloc_aligned(n);
            if (!b) {
                Completion done = op->done;
                put_op(op);
                return fail(done, VolStatus::NoMemory);
            }
            op->bufs.push_back(std::move(b));
            at += n;
        }
    }
    if (op->kind != Op::Kind::Flush) {
        op->iov.clear();
        for (const Slice& b : op->bufs) op->iov.push_back({b.data(), b.size()});
    }
    ++inflight_;
    stats_.inflight_high = std::max<uint64_t>(stats_.inflight_high, inflight_);
    prep(op);
    if (!opts_.defer_submit) submit();
}

bool FileVolume::prep(Op* op) {
    // inflight_ <= queue_depth = SQ entries, and every SQE in the ring belongs
    // to an in-flight op: there is always a free one.
    io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
    if (!sqe) return false; // cannot happen (see above); the op stays counted in flight
    switch (op->kind) {
    case Op::Kind::Read:
        io_uring_prep_readv(sqe, fd_, op->iov.data(), unsigned(op->iov.size()), op->offset + op->done_bytes);
        break;
    case Op::Kind::Write:
        io_uring_prep_writev(sqe, fd_, op->iov.data(), unsigned(op->iov.size()), op->offset + op->done_bytes);
        break;
    case Op::Kind::Flush:
        io_uring_prep_fsync(sqe, fd_, IORING_FSYNC_DATASYNC);
        break;
    }
    io_uring_sqe_set_data(sqe, op);
    ++unsubmitted_;
    stats_.submitted++;
    return true;
}

void FileVolume::submit() {
    if (unsubmitted_ == 0) return;
    stats_.submit_calls++;
    int rc = io_uring_submit(ring_.get());
    if (rc < 0) {
        stats_.submit_errors++; // EAGAIN/EBUSY: the SQEs stay in the ring, poll() retries
        return;
    }
    unsubmitted_ -= std::min<unsigned>(unsubmitted_, unsigned(rc));
}

void FileVolume::on_cqe(Op* op, int res) {
    if (res == -EAGAIN || res == -EINTR) {
        stats_.resubmits++;
        prep(op);
        return;
    }
    if (res < 0) {
        stats_.last_errno = uint64_t(-res);
        return finish(op, VolStatus::IoError);
    }
    if (op->kind == Op::Kind::Flush) return finish(op, VolStatus::Ok);
    if (res == 0) { // nothing transferred and no error: EOF (the file shrank under us)
        stats_.last_errno = EIO;
        return finish(op, VolStatus::IoError);
    }
    op->done_bytes += uint64_t(res);
    if (op->done_bytes >= op->len) return finish(op, VolStatus::Ok);
    // Short transfer: drop the bytes done from the front of the iovecs and
    // resubmit the rest.
    stats_.resubmits++;
    size_t n = size_t(res), i = 0;
    while (i < op->iov.size() && n >= op->iov[i].iov_len) n -= op->iov[i++].iov_len;
    op->iov.erase(op->iov.begin(), op->iov.begin() + long(i));
    if (n) {
        op->iov[0].iov_base = static_cast<char*>(op->iov[0].iov_base) + n;
        op->iov[0].iov_len -= n;
    }
    prep(op);
}

void FileVolume::finish(Op* op, VolStatus st) {
    --inflight_;
    Completion done = op->done;
    if (st != VolStatus::Ok) {
        put_op(op);
        return fail(done, st);
    }
    switch (op->kind) {
    case Op::Kind::Read:
        stats_.reads++;
        stats_.bytes_read += op->len;
        done(VolStatus::Ok, op->bufs);
        break;
    case Op::Kind::Write:
        stats_.writes++;
        stats_.bytes_written += op->len;
        op->bufs.clear(); // the written copies are free before the completion runs
        done(VolStatus::Ok, {});
        break;
    case Op::Kind::Flush:
        stats_.flushes++;
        done(VolStatus::Ok, {});
        break;
    }
    put_op(op);
}

void FileVolume::start_waiting() {
    while (wait_head_ && inflight_ < opts_.queue_depth) {
        Op* op = wait_head_;
        wait_head_ = op->next;
        if (!wait_head_) wait_tail_ = nullptr;
        op->next = nullptr;
        --waiting_;
        start(op);
    }
}

size_t FileVolume::poll() {
    if (in_poll_) return 0; // a completion called poll(): the outer call goes on
    in_poll_ = true;
    submit(); // deferred SQEs, or ones a failed submit left behind
    size_t ran = 0;
    for (;;) {
        io_uring_cqe* cqes[32];
        unsigned n = io_uring_peek_batch_cqe(ring_.get(), cqes, 32);
        if (n == 0) break;
        // Copy out and release the CQ slots before running completions.
        struct Done { Op* op; int res; } got[32];
        for (unsigned i = 0; i < n; ++i)
            got[i] = {static_cast<Op*>(io_uring_cqe_get_data(cqes[i])), cqes[i]->res};
        io_uring_cq_advance(ring_.get(), n);
        for (unsigned i = 0; i < n; ++i) on_cqe(got[i].op, got[i].res);
        ran += n;
        start_waiting();
        submit();
        if (n < 32) break;
    }
    start_waiting();
    submit();
    in_poll_ = false;
    return ran;
}

size_t FileVolume::on_event() {
    uint64_t v;
    while (::read(efd_, &v, sizeof v) == sizeof v) {}
    return poll();
}

bool FileVolume::drain(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        on_event();
        if (pending() == 0) return true;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{efd_, POLLIN, 0};
        ::poll(&p, 1, int(std::min<int64_t>(left.count(), 100)));
    }
}

} // namespace crescent::blockd
