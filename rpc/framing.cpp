// crescent — RPC framing: the streaming message decoder and the header encoder
// (issue 9 "Wire format"; the layout is include/crescent/rpc/protocol.hpp).
//
// Decoder: a three-stage machine (header, metadata, data) run over each
// received slice in turn. The common case — a whole header and its metadata in
// one slice — reads them in place; only a header split across slices goes
// through the 32-byte staging array, and only split metadata is copied into the
// reusable meta buffer. Data bytes are never copied: each message's data is cut
// from the received slices with Slice::sub (one reference), or, when it runs to
// the end of a slice, the received slice itself is moved into the message so
// that its reference travels with the data (no refcount traffic at all).
//
// Encoder: carves header+meta regions out of a per-connection header block and
// appends the caller's data slices behind them (zero copy on TX too; data of
// at most inline_max bytes is copied into the header region instead).
#include "rpc/framing.hpp"

#include <algorithm>
#include <cstring>

namespace crescent::rpc {

namespace {
// Slices per message the reused data vector holds without growing.
constexpr size_t kDataReserve = 8;
} // namespace

std::string_view decode_error_name(Decoder::DecodeError e) {
    using E = Decoder::DecodeError;
    switch (e) {
    case E::None: return "None";
    case E::BadMagic: return "BadMagic";
    case E::BadVersion: return "BadVersion";
    case E::MetaTooLarge: return "MetaTooLarge";
    case E::DataTooLarge: return "DataTooLarge";
    }
    return "unknown";
}

Decoder::Decoder(Limits lim) : lim_(lim) { msg_.data.reserve(kDataReserve); }

Decoder::DecodeError Decoder::fail(DecodeError e) {
    err_ = e;
    msg_.data.clear();
    msg_.meta = {};
    meta_hold_.reset();
    stage_ = Stage::Header;
    staged_ = meta_copied_ = data_have_ = 0;
    partial_ = 0;
    return e;
}

void Decoder::deliver(MessageSink& sink) {
    ++messages_;
    sink.on_message(msg_);
    msg_.data.clear();
    // A sink that moved the vector out left it without capacity.
    if (msg_.data.capacity() == 0) msg_.data.reserve(kDataReserve);
    msg_.meta = {};
    meta_hold_.reset();
    data_have_ = 0;
    partial_ = 0;
    stage_ = Stage::Header;
}

namespace {
bool rest_empty(std::span<const Slice> rest) {
    for (const Slice& s : rest)
        if (s && !s.empty()) return false;
    return true;
}
} // namespace

Decoder::DecodeError Decoder::feed(std::span<Slice> in, MessageSink& sink) {
    if (err_ != DecodeError::None) {
        for (Slice& s : in) s.reset();
        return err_;
    }
    for (size_t i = 0; i < in.size(); ++i) {
        Slice cur = std::move(in[i]);
        in[i].reset();  // a moved-from Slice keeps its window: leave the entry truly empty
        if (!cur) continue;
        const size_t n = cur.size();
        if (n == 0) continue;
        const std::byte* const p = cur.data();
        size_t pos = 0;
        // msg_.meta points into `cur` (so `cur` must outlive the sink call, or
        // move to meta_hold_ when the message continues in a later slice).
        bool meta_in_cur = false;
        for (;;) {
            if (stage_ == Stage::Header) {
                if (pos == n) break;
                const std::byte* hp;
                if (staged_ == 0 && n - pos >= kHeaderSize) {
                    hp = p + pos;
                    pos += kHeaderSize;
                    partial_ = kHeaderSize;
                } else {
                    size_t take = std::min(kHeaderSize - staged_, n - pos);
                    std::memcpy(stage_buf_.data() + staged_, p + pos, take);
                    staged_ += uint32_t(take);
                    pos += take;
                    partial_ += take;
                    if (staged_ < kHeaderSize) break;
                    hp = stage_buf_.data();
                    staged_ = 0;
                }
                msg_.h = Header::decode(hp);
                const Header& h = msg_.h;
                DecodeError e = DecodeError::None;
                if (h.magic != kMagic) e = DecodeError::BadMagic;
                else if (h.version != kVersion) e = DecodeError::BadVersion;
                else if (h.meta_len > lim_.max_meta) e = DecodeError::MetaTooLarge;
                else if (h.data_len > lim_.max_data) e = DecodeError::DataTooLarge;
                if (e != DecodeError::None) {
                    for (size_t j = i + 1; j < in.size(); ++j) in[j].reset();
                    return fail(e);
                }
                stage_ = Stage::Meta;
            }
            if (stage_ == Stage::Meta) {
                const uint32_t ml = msg_.h.meta_len;
                if (meta_copied_ == 0 && n - pos >= ml) {
                    msg_.meta = {p + pos, ml};  // in place
                    meta_in_cur = ml != 0;
                    pos += ml;
                    partial_ += ml;
                } else {
                    // Split across slices: assemble a copy.
                    if (pos == n) break;
                    if (meta_buf_.size() < ml) meta_buf_.resize(ml);
                    size_t take = std::min(size_t(ml - meta_copied_), n - pos);
                    std::memcpy(meta_buf_.data() + meta_copied_, p + pos, take);
                    meta_copied_ += uint32_t(take);
                    pos += take;
                    partial_ += take;
                    if (meta_copied_ < ml) break;
                    msg_.meta = {meta_buf_.data(), ml};
                    meta_copied_ = 0;
                }
                stage_ = Stage::Data;
            }
            // Stage::Data
            const uint32_t dl = msg_.h.data_len;
            const size_t take = std::min(size_t(dl - data_have_), n - pos);
            if (take != 0) {
                if (pos + take == n && !meta_in_cur) {
                    // The rest of the slice: its reference goes with the data.
                    cur.remove_prefix(pos);
                    msg_.data.push_back(std::move(cur));
                } else {
                    msg_.data.push_back(cur.sub(pos, take));
                }
                pos += take;
                data_have_ += uint32_t(take);
                partial_ += take;
            }
            if (data_have_ < dl) {
                // pos == n: the message continues in a later slice.
                if (meta_in_cur) meta_hold_ = std::move(cur);
                break;
            }
            msg_.last = pos == n && rest_empty(in.subspan(i + 1));
            deliver(sink);
            meta_in_cur = false;
        }
    }
    return DecodeError::None;
}

// --- Encoder ----------------------------------------------------------------

Encoder::Encoder(size_t block_size, size_t inline_max)
    : block_size_(std::max(block_size, kHeaderSize)), inline_max_(inline_max) {}

bool Encoder::encode(Header h, std::span<const std::byte> meta, std::span<Slice> data, std::vector<Slice>& out) {
    uint64_t total = 0;
    for (const Slice& s : data)
        if (s) total += s.size();  // a Slice without a buffer counts as empty
    if (meta.size() > UINT32_MAX || total > UINT32_MAX) {
        ++oversize_;
        return false;
    }
    h.meta_len = uint32_t(meta.size());
    h.data_len = uint32_t(total);
    // Small data rides in the header slice (copied), when that still fits a block.
    const bool inline_data = total != 0 && total <= inline_max_ && kHeaderSize + meta.size() + total <= block_size_;
    const size_t need = kHeaderSize + meta.size() + (inline_data ? total : 0);

    zbuf::Arena* arena = zbuf::Arena::current();
    Slice hs;         // the header slice, unless the message widens out.back()
    std::byte* at;    // where the header goes
    if (need > block_size_) {
        // Too big for a block: an obj of its own (the current block stays).
        Zbuf z = arena ? arena->alloc(need) : Zbuf();
        if (!z) {
            ++alloc_failed_;
            return false;
        }
        ++own_objs_;
        hs = Slice(std::move(z), 0, need);
        at = hs.data();
    } else {
        if (!block_ || block_.capacity() - used_ < need) {
            // Drop the full block first: if every header in it was already
            // acknowledged, its obj is what the new allocation gets back.
            release_block();
            block_ = arena ? arena->alloc(block_size_) : Zbuf();
            if (!block_) {
                ++alloc_failed_;
                return false;
            }
            ++blocks_;
        }
        at = block_.data() + used_;
        // The previous message of a batch ends where this one starts, in this
        // block: widen its slice (no new reference, one entry for both).
        Slice* last = out.empty() ? nullptr : &out.back();
        if (last && *last && last->buf().data() == block_.data() && last->offset() + last->size() == used_) {
            last->set_size(last->size() + need);
            ++merged_;
        } else {
            hs = Slice(block_.share(), used_, need);
        }
        used_ += need;
        if (block_.capacity() - used_ < kHeaderSize) release_block();  // nothing more fits
    }
    last_bytes_ = kHeaderSize + meta.size() + total;
    h.encode(at);
    if (!meta.empty()) std::memcpy(at + kHeaderSize, meta.data(), meta.size());
    if (inline_data) {
        std::byte* d = at + kHeaderSize + meta.size();
        for (Slice& s : data) {
            if (s && !s.empty()) {
                std::memcpy(d, s.data(), s.size());
                d += s.size();
            }
            s.reset();
        }
        ++inlined_;
        if (hs) out.push_back(std::move(hs));
        return true;
    }

    if (hs) out.push_back(std::move(hs));
    for (Slice& s : data) {
        if (s && !s.empty()) out.push_back(std::move(s));
        s.reset();  // also clears the window a moved-from Slice keeps
    }
    return true;
}

bool Encoder::encode_error(uint64_t call_id, uint32_t method, Status st, std::string_view reason,
                           std::vector<Slice>& out) {
    if (reason.size() > kMaxErrorReason) {
        size_t n = kMaxErrorReason;
        // Do not cut a UTF-8 sequence: back up over continuation bytes (10xxxxxx).
        while (n > 0 && (uint8_t(reason[n]) & 0xC0) == 0x80) --n;
        reason = reason.substr(0, n);
    }
    Header h;
    h.kind = Kind::Error;
    h.method = method;
    h.status = uint32_t(st);
    h.call_id = call_id;
    return encode(h, std::as_bytes(std::span(reason.data(), reason.size())), {}, out);
}

} // namespace crescent::rpc
