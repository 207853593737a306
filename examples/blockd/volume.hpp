// crescent-blockd — the block volume: 4 KiB blocks behind one asynchronous
// interface, with two backends.
//
//   MemoryVolume  an array of blocks; each block's content is a short list of
//                 zbuf slices — the very slices a WRITE request arrived in (a
//                 4 KiB block spans 2-4 TCP segments of ~1448 B). WRITE moves or
//                 shares those slices into the blocks, READ replies with shares
//                 of them: no byte is copied either way. Received bytes are never
//                 written again, so replacing a block while an older READ reply
//                 still references its previous content is safe: the reply keeps
//                 its own references to the old objs (issue 9, "no overwrite
//                 hazard"). Never-written blocks read as one long-lived zeroed obj.
//   FileVolume    a regular file opened with O_DIRECT, driven through io_uring
//                 (liburing) into zbuf objs. Requests complete later, from
//                 poll(), which the engine loop calls when event_fd() is readable
//                 or once per iteration; nothing ever blocks the loop.
//
// Completion rule (both backends): every read/write/flush calls its Completion
// exactly once. Argument errors (misaligned, out of range, empty, too large)
// and refusals (QueueFull, NoMemory for a write's copy) complete synchronously,
// before the call returns. MemoryVolume completes everything synchronously;
// FileVolume completes I/O from poll() only (a read that finds no buffer obj
// when it starts fails with NoMemory there too).
//
// Buffers: write() may move the slices out of `data` (they are left empty) or
// take shares of them; either way the caller may drop `data` once write()
// returns. A read's data slices are handed to the Completion as a span that is
// valid during the call only: move the slices out to keep them (e.g. into an
// RPC reply); what is left is released when the Completion returns.
//
// Threads: a volume belongs to one thread (its engine): no locks, no atomics
// besides the zbuf refcounts. Share-nothing, like everything in crescent.
#pragma once

#include <crescent/zbuf.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct io_uring;

namespace crescent::blockd {

inline constexpr uint32_t kBlockSize = 4096;

enum class VolStatus : uint8_t {
    Ok = 0,
    Misaligned,  // offset or length not a multiple of kBlockSize
    Empty,       // zero-length read or write
    OutOfRange,  // [offset, offset + length) does not lie inside the volume
    TooLarge,    // longer than the volume's max_io (FileVolume)
    NoMemory,    // no zbuf obj for a copy or a read buffer (arena exhausted)
    QueueFull,   // FileVolume: queue_depth in flight and max_waiting waiting
    IoError,     // FileVolume: the kernel failed the I/O (errno: stats().last_errno)
};
inline constexpr unsigned kStatusCount = 8;
inline std::string_view status_name(VolStatus s) {
    switch (s) {
    case VolStatus::Ok: return "ok";
    case VolStatus::Misaligned: return "misaligned";
    case VolStatus::Empty: return "empty";
    case VolStatus::OutOfRange: return "out_of_range";
    case VolStatus::TooLarge: return "too_large";
    case VolStatus::NoMemory: return "no_memory";
    case VolStatus::QueueFull: return "queue_full";
    case VolStatus::IoError: return "io_error";
    }
    return "unknown";
}

// What a request calls when it is done: a function pointer and a cookie (no
// allocation per I/O). `data` holds the bytes read (empty for writes, flushes
// and errors); see the buffer rule above.
struct Completion {
    using Fn = void (*)(void* cookie, VolStatus status, std::span<Slice> data);
    Fn fn = nullptr;
    void* cookie = nullptr;

    void operator()(VolStatus st, std::span<Slice> data) const { fn(cookie, st, data); }
    // Calls (*f)(status, data); *f must live until the completion ran.
    template <class F>
    static Completion to(F* f) {
        return {[](void* c, VolStatus st, std::span<Slice> d) { (*static_cast<F*>(c))(st, d); }, f};
    }
};

// Counters. Requests count once when they complete; errors[s] by status.
struct VolumeStats {
    uint64_t reads = 0, writes = 0, flushes = 0;   // completed with Ok
    uint64_t bytes_read = 0, bytes_written = 0;
    uint64_t errors[kStatusCount] = {};            // errors[Ok] stays 0
    // MemoryVolume
    uint64_t zero_blocks_read = 0;   // never-written blocks served from the zero obj
    uint64_t blocks_coalesced = 0;   // written blocks that arrived in more than kMaxPieces
                                     // slices and were copied into one obj instead
    // FileVolume
    uint64_t submitted = 0;          // SQEs handed to the kernel (first tries and resubmits)
    uint64_t submit_calls = 0;       // io_uring_submit() system calls
    uint64_t submit_errors = 0;      // io_uring_submit() failures (retried from poll())
    uint64_t waited = 0;             // requests that waited in the FIFO for a free slot
    uint64_t waiting_high = 0;       // most requests waiting at once
    uint64_t inflight_high = 0;      // most I/Os in flight at once
    uint64_t resubmits = 0;          // short transfers, EAGAIN, EINTR: the rest resubmitted
    uint64_t last_errno = 0;         // errno of the last IoError
    uint64_t write_copies = 0;       // writes whose slices were copied into aligned objs
    uint64_t write_zero_copy = 0;    // writes submitted straight from the caller's slices
    uint64_t bytes_copied = 0;
    uint64_t padded_allocs = 0;      // buffers aligned inside a larger obj (obj not aligned)

    uint64_t errors_total() const {
        uint64_t n = 0;
        for (uint64_t e : errors) n += e;
        return n;
    }
    template <class F>
    void for_each(F&& f) const {
        f("reads", reads); f("writes", writes); f("flushes", flushes);
        f("bytes_read", bytes_read); f("bytes_written", bytes_written);
        for (unsigned s = 1; s < kStatusCount; ++s)
            f(status_name(VolStatus(s)), errors[s]);
        f("zero_blocks_read", zero_blocks_read); f("blocks_coalesced", blocks_coalesced);
        f("submitted", submitted); f("submit_calls", submit_calls); f("submit_errors", submit_errors);
        f("waited", waited); f("waiting_high", waiting_high); f("inflight_high", inflight_high);
        f("resubmits", resubmits); f("last_errno", last_errno);
        f("write_copies", write_copies); f("write_zero_copy", write_zero_copy);
        f("bytes_copied", bytes_copied); f("padded_allocs", padded_allocs);
    }
};

class Volume {
public:
    virtual ~Volume() = default;
    Volume(const Volume&) = delete;
    Volume& operator=(const Volume&) = delete;

    uint64_t size() const { return size_; }
    uint64_t blocks() const { return size_ / kBlockSize; }
    const VolumeStats& stats() const { return stats_; }

    // Read `len` bytes at `offset`; the data arrives in the Completion.
    virtual void read(uint64_t offset, uint64_t len, Completion done) = 0;
    // Write the bytes of `data` (in order) at `offset`.
    virtual void write(uint64_t offset, std::span<Slice> data, Completion done) = 0;
    // Make completed writes durable. Like a disk's cache flush, it covers the
    // writes that completed before flush() was called, not ones still in flight.
    virtual void flush(Completion done) = 0;

    // Run the completions of finished I/O, start waiting requests; never
    // blocks. Returns the completions run. MemoryVolume: always 0.
    virtual size_t poll() { return 0; }
    // An eventfd that becomes readable when I/O completes (-1: none, nothing
    // is ever pending). Register it in the engine's epoll (Engine::add_fd) and
    // call on_event() when it fires.
    virtual int event_fd() const { return -1; }
    virtual size_t on_event() { return poll(); }
    // Requests accepted but not completed yet (in flight + waiting).
    virtual size_t pending() const { return 0; }

    // Ok, or why [offset, offset + len) cannot be read or written.
    VolStatus check(uint64_t offset, uint64_t len) const;

protected:
    explicit Volume(uint64_t size) : size_(size) {}
    // Count an error and complete with it (no data).
    void fail(const Completion& done, VolStatus st) {
        stats_.errors[unsigned(st)]++;
        done(st, {});
    }

    uint64_t size_;      // a multiple of kBlockSize, > 0
    VolumeStats stats_;
};

// --- memory ------------------------------------------------------------------

class MemoryVolume final : public Volume {
public:
    // Pieces a block keeps as received; a block that arrives in more slices is
    // copied into one fresh obj (stats.blocks_coalesced). 4 covers the worst
    // case of 1448-byte segments: a tail, two whole segments, a head.
    static constexpr unsigned kMaxPieces = 4;

    // `size`: a multiple of kBlockSize. Needs the zbuf arena and a CoreScope on
    // the calling thread (the zero obj is allocated here).
    static std::unique_ptr<MemoryVolume> create(uint64_t size, std::string* err);

    void read(uint64_t offset, uint64_t len, Completion done) override;
    void write(uint64_t offset, std::span<Slice> data, Completion done) override;
    void flush(Completion done) override;

    // The slices block `index` holds now (empty: never written). For tests
    // and diagnostics.
    std::span<const Slice> block(uint64_t index) const {
        const Block& b = blocks_[index];
        return {b.piece, b.n};
    }
    // Blocks written at least once.
    uint64_t blocks_written() const { return blocks_written_; }

private:
    struct Block {
        Slice piece[kMaxPieces]; // the content, in order; sizes sum to kBlockSize when n > 0
        uint8_t n = 0;           // 0: never written (reads as zeros)
        void clear() {
            for (unsigned i = 0; i < n; ++i) piece[i].reset();
            n = 0;
        }
    };

    MemoryVolume(uint64_t size, Slice zeros);

    std::vector<Block> blocks_;    // blocks() entries
    Slice zeros_;                  // one zeroed obj, a multiple of kBlockSize long, never written
    std::vector<Block> staged_;    // write(): the new contents, committed only when all are ready
    std::vector<Slice> out_;       // read(): reply slices (capacity kept between calls)
    uint64_t blocks_written_ = 0;
};

// --- file (O_DIRECT + io_uring) ----------------------------------------------

struct FileOptions {
    std::string path;
    uint64_t size = 0;           // 0: the file's size (rounded down to blocks); else the
                                 // volume's size (a larger file is used in part, a smaller
                                 // one grown sparsely)
    bool create = true;          // create the file if missing (needs size)
    bool direct = true;          // O_DIRECT; false: buffered I/O on purpose
    bool allow_buffered = false; // the filesystem refuses O_DIRECT: fall back to buffered
                                 // I/O (logged) instead of failing
    unsigned queue_depth = 64;   // I/Os in flight (io_uring SQ entries), 1..4096
    size_t max_waiting = 65536;  // requests waiting for a slot; beyond: QueueFull
    uint64_t max_io = 1u << 20;  // longest read/write (bytes), a multiple of kBlockSize
    bool defer_submit = false;   // submit SQEs from poll() (one system call per loop
                                 // iteration) instead of one per request; only when the
                                 // owner calls poll() every iteration
};

class FileVolume final : public Volume {
public:
    // Opens (or creates) the file and the io_uring. nullptr and a one-line
    // *err naming the problem (the filesystem that refuses O_DIRECT, a file
    // that is empty or not regular, io_uring unavailable...). Needs the zbuf
    // arena (read buffers and write copies are its objs).
    static std::unique_ptr<FileVolume> open(const FileOptions& o, std::string* err);
    // Waits (bounded, 10 s) for I/O in flight so the kernel no longer touches
    // our buffers; runs no completions and drops waiting requests.
    ~FileVolume() override;

    void read(uint64_t offset, uint64_t len, Completion done) override;
    void write(uint64_t offset, std::span<Slice> data, Completion done) override;
    void flush(Completion done) override;
    size_t poll() override;
    int event_fd() const override { return efd_; }
    size_t on_event() override; // drains the eventfd, then poll()
    size_t pending() const override { return inflight_ + waiting_; }

    // poll() until nothing is pending or `timeout_ms` passed, sleeping on the
    // eventfd in between (blocks: for shutdown and tools, not the engine loop).
    // Returns true when nothing is pending.
    bool drain(int timeout_ms);

    bool direct() const { return direct_; }      // O_DIRECT in use
    uint32_t mem_align() const { return mem_align_; } // buffer address alignment used
    uint32_t chunk() const { return chunk_; }    // bytes per buffer obj
    unsigned inflight() const { return inflight_; }
    size_t waiting() const { return waiting_; }
    const std::string& describe() const { return describe_; } // one line: path, mode, alignment

    struct Op; // one request (defined in volume.cpp)

private:
    FileVolume(uint64_t size, const FileOptions& o);
    Op* get_op();
    void put_op(Op* op);
    void enqueue(Op* op);         // start now, or wait in the FIFO
    void start(Op* op);           // buffers + SQE (inflight_ < queue_depth)
    bool prep(Op* op);            // fill an SQE for the op's remaining bytes
    void submit();
    void on_cqe(Op* op, int res);
    void finish(Op* op, VolStatus st);
    void start_waiting();
    Slice alloc_aligned(size_t n);
    bool copy_in(Op* op, std::span<Slice> data, uint64_t total);

    FileOptions opts_;
    int fd_ = -1;
    int efd_ = -1;
    std::unique_ptr<io_uring> ring_;
    bool direct_ = true;
    uint32_t mem_align_ = 4096;   // buffers start on this boundary (power of two, <= 4096)
    uint32_t off_align_ = 512;    // I/O lengths and offsets: multiples of this (<= kBlockSize)
    uint32_t chunk_ = kBlockSize; // buffer obj size: the largest size class that is a
                                  // multiple of kBlockSize and <= max_io
    std::string describe_;

    std::vector<std::unique_ptr<Op>> ops_; // every Op ever made (grows to the high-water mark)
    std::vector<Op*> free_ops_;
    Op* wait_head_ = nullptr;     // FIFO of requests waiting for a slot
    Op* wait_tail_ = nullptr;
    size_t waiting_ = 0;
    unsigned inflight_ = 0;       // SQEs prepared and not yet completed (<= queue_depth)
    unsigned unsubmitted_ = 0;    // SQEs prepared but not yet accepted by io_uring_submit
    bool in_poll_ = false;        // poll() is running (a completion must not recurse into it)
};

// Why O_DIRECT cannot be used on a file, or "" when it can: `open_errno` is
// the errno of open(O_DIRECT) (0 if it succeeded), `fs` the filesystem's name,
// `dio_known` whether statx reported STATX_DIOALIGN and `mem_align` /
// `off_align` its values (0/0 from statx: the file does not support direct I/O).
std::string direct_io_problem(const std::string& path, const std::string& fs, int open_errno,
                              bool dio_known, uint32_t mem_align, uint32_t off_align);
// "ext2/3/4", "tmpfs", "xfs"... for statfs's f_type, or the number in hex.
std::string fs_name(int64_t f_type);

} // namespace crescent::blockd
