// crescent — RPC framing: a streaming decoder from received zbuf slices to
// messages, and the encoder of outgoing headers (internal to rpc/).
//
// The wire format is include/crescent/rpc/protocol.hpp (32-byte header, then
// meta_len bytes of metadata, then data_len bytes of data). Issue 9 "Wire
// format": the decoder copes with a message split at any byte across slices and
// with hundreds of messages in one slice, and never copies data bytes — a
// message's data reaches the sink as Slices that share the received zbufs.
//
// Threads: a Decoder or Encoder belongs to one connection and is used on its
// engine's thread only (the Encoder allocates from that thread's zbuf core).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <crescent/rpc/protocol.hpp>
#include <crescent/zbuf.hpp>

namespace crescent::rpc {

// One decoded message, as the sink sees it.
struct Message {
    Header h;
    // The metadata, exactly h.meta_len bytes. Valid only during the sink call:
    // it points into a received slice when the metadata lay inside one slice,
    // else into the decoder's own reusable buffer (copied only when split).
    // The decoder keeps the memory alive for the whole call, whatever the sink
    // does with `data`.
    std::span<const std::byte> meta;
    // Exactly h.data_len bytes in total, as non-empty Slices sharing the
    // received zbufs (zero copy; several slices when the data spanned several
    // received slices). The sink may move them out (or swap the vector with
    // one of its own; a moved-from vector costs the decoder one allocation for
    // the next message, a swapped one with capacity costs nothing).
    std::vector<Slice> data;
    // No byte follows this message in the delivery being decoded: what the
    // sink sends in answer is the delivery's last output (Stream::send_now()).
    bool last = false;
};

class MessageSink {
public:
    virtual ~MessageSink() = default;
    // Called once per complete message, in stream order. The sink may call
    // back into the decoder's owner (send replies, close, ...) but must not
    // call Decoder::feed() on the same decoder (no re-entry).
    virtual void on_message(Message& m) = 0;
};

class Decoder {
public:
    // Why the stream cannot be read any further (the connection is to be closed).
    enum class DecodeError : uint8_t {
        None,
        BadMagic,      // the header does not start with "CRPC"
        BadVersion,    // header version != kVersion
        MetaTooLarge,  // meta_len > Limits::max_meta
        DataTooLarge,  // data_len > Limits::max_data
    };
    static constexpr size_t kDecodeErrorCount = 5;

    explicit Decoder(Limits lim);
    Decoder(const Decoder&) = delete;
    Decoder& operator=(const Decoder&) = delete;

    // Consumes every byte of `in`: each slice is MOVED out (every entry is
    // left empty, reset(), also when an error stops decoding), so the last reference to
    // a received obj travels with the message data cut from it. Calls
    // sink.on_message() once per complete message, in order; keeps the partial
    // header (in a 32-byte staging array), metadata and data of an incomplete
    // message across calls. Returns DecodeError::None, or the first error —
    // then the bytes held are released and every later feed() returns the same
    // error without reading its input (beyond emptying it). Unknown Kind
    // values and unknown flag bits are passed on, not refused.
    // Not re-entrant: the sink must not call feed() on this decoder.
    DecodeError feed(std::span<Slice> in, MessageSink& sink);

    // An incomplete message's bytes are held (for "truncated at close"
    // counting). False after an error.
    bool mid_message() const { return partial_ != 0; }
    // Bytes of the incomplete message received so far (header, metadata and
    // data; 0 between messages and after an error).
    size_t buffered_bytes() const { return partial_; }
    // Complete messages delivered to sinks.
    uint64_t messages() const { return messages_; }
    DecodeError error() const { return err_; }
    const Limits& limits() const { return lim_; }

private:
    enum class Stage : uint8_t { Header, Meta, Data };

    DecodeError fail(DecodeError e);
    void deliver(MessageSink& sink);

    Limits lim_;
    DecodeError err_ = DecodeError::None;  // sticky once set
    Stage stage_ = Stage::Header;
    uint32_t staged_ = 0;                  // header bytes in stage_buf_ (< kHeaderSize)
    uint32_t meta_copied_ = 0;             // metadata bytes in meta_buf_ (split metadata only)
    uint32_t data_have_ = 0;               // data bytes in msg_.data
    size_t partial_ = 0;                   // bytes of the current message consumed so far
    uint64_t messages_ = 0;
    std::array<std::byte, kHeaderSize> stage_buf_{};
    // Metadata that arrived split across slices, assembled here (grows to the
    // largest meta_len seen, never shrinks: no allocation in steady state).
    std::vector<std::byte> meta_buf_;
    // Keeps the slice alive that the metadata points into while the message's
    // data is still arriving in later slices.
    Slice meta_hold_;
    Message msg_;                          // reused: msg_.data keeps its capacity
};

std::string_view decode_error_name(Decoder::DecodeError e);  // "None", "BadMagic", ...

// Builds the header and metadata of outgoing messages in "header blocks": one
// arena obj at a time, carved into successive header+meta regions, each handed
// out as a Slice sharing the block (one reference each; regions encoded one
// after another into the same vector share one widened Slice). Bytes handed out are
// never written again — the TX path reads them in place until the peer has
// acknowledged them — so the encoder only ever appends to its current block
// and takes a fresh obj when it is full. A header+meta larger than a block gets
// an obj of its own.
//
// Small data (at most `inline_max` bytes in all, 0 = never) is copied into the
// header block behind the metadata, so that the message is one slice: a
// hundred bytes cost less to copy than a reference, a send-queue entry, a TX
// view and an unref when acknowledged. Larger data is never copied.
class Encoder {
public:
    static constexpr size_t kDefaultBlockSize = 2048;
    // What rpc::Channel and rpc::Server use for inline_max: a small RPC's
    // data (a key, a status record) rides with its header.
    static constexpr size_t kInlineData = 256;
    // Error reasons longer than this are cut (at a UTF-8 character boundary),
    // so they stay well under any receiver's Limits::max_meta.
    static constexpr size_t kMaxErrorReason = 512;

    // `block_size`: bytes asked of the arena per header block (the block is the
    // whole obj of the size class that fits, so it may be larger).
    explicit Encoder(size_t block_size = kDefaultBlockSize, size_t inline_max = 0);
    Encoder(const Encoder&) = delete;
    Encoder& operator=(const Encoder&) = delete;

    // Sets h.meta_len and h.data_len from `meta` and `data`, appends to `out`
    // one slice holding the header and a copy of `meta`, then MOVES the data
    // slices onto `out` (every entry of `data` is left empty, reset(); empty
    // slices are dropped, not appended) — or, data of at most inline_max bytes
    // in all, copies it into that one slice and drops the data slices. When
    // `out` already ends with this encoder's previous header slice and this
    // header follows it in the same block (a batch of messages encoded into
    // one vector), that slice is widened over the new header instead: a
    // burst of small messages is one slice, one reference. Returns false with
    // nothing appended or widened and `data` untouched when the arena has no
    // memory for the header (alloc_failed()) or when the lengths do not fit
    // the header's 32-bit fields (oversize()).
    bool encode(Header h, std::span<const std::byte> meta, std::span<Slice> data, std::vector<Slice>& out);
    // A Kind::Error message for a call: status `st`, the reason as metadata
    // (cut to kMaxErrorReason bytes), no data.
    bool encode_error(uint64_t call_id, uint32_t method, Status st, std::string_view reason,
                      std::vector<Slice>& out);

    // Drops the encoder's reference to its current block (the slices handed
    // out keep it alive); the next encode() takes a fresh one.
    void release_block() { block_.reset(); used_ = 0; }

    size_t block_size() const { return block_size_; }
    size_t inline_max() const { return inline_max_; }
    // Bytes the last successful encode() added to `out`: header, metadata and data.
    size_t last_bytes() const { return last_bytes_; }
    uint64_t inlined() const { return inlined_; }            // messages whose data was copied in
    uint64_t merged() const { return merged_; }              // headers that widened out.back() (a batch)
    uint64_t blocks() const { return blocks_; }              // header blocks taken from the arena
    uint64_t own_objs() const { return own_objs_; }          // objs for one oversized header+meta
    uint64_t alloc_failed() const { return alloc_failed_; }  // encode() refused: no memory
    uint64_t oversize() const { return oversize_; }          // encode() refused: length above 2^32-1

private:
    size_t block_size_;
    size_t inline_max_;
    uint64_t inlined_ = 0;
    uint64_t merged_ = 0;
    size_t last_bytes_ = 0;
    Zbuf block_;       // the current header block, or empty
    size_t used_ = 0;  // bytes of block_ handed out (never written again)
    uint64_t blocks_ = 0;
    uint64_t own_objs_ = 0;
    uint64_t alloc_failed_ = 0;
    uint64_t oversize_ = 0;
};

} // namespace crescent::rpc
