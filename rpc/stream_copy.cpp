// crescent — the copy API under a crescent stream (StreamOptions::copy_api):
// Luna §5.1's batch mode with a socket-like API. Reading copies the bytes the
// engine queued for the connection out with Conn::read() into arena objs the
// stream owns; writing copies the stream's slices in with Conn::write(). The
// RPC layer above sees the same slices as on the zero-copy path, so the two
// differ by exactly these copies (the knb "copy" mode).
#include <algorithm>

#include "rpc/stream_impl.hpp"

namespace crescent::rpc::detail {

size_t copy_in(Conn c, size_t chunk, std::vector<Slice>& out, bool* no_memory) {
    *no_memory = false;
    zbuf::Arena* arena = zbuf::Arena::current();
    if (chunk == 0) chunk = 16384;
    size_t total = 0;
    for (size_t avail = c.readable(); avail > 0; avail = c.readable()) {
        Slice s = arena ? arena->alloc_slice(std::min(avail, chunk)) : Slice();
        if (!s) {
            *no_memory = true;
            break;
        }
        const size_t n = c.read(s.data(), s.size());
        if (n == 0) break;  // closed under us
        if (n < s.size()) s.remove_suffix(s.size() - n);
        total += n;
        out.push_back(std::move(s));
    }
    return total;
}

size_t copy_out(Conn c, Backlog& b, uint64_t* writes, bool* no_memory) {
    *no_memory = false;
    size_t total = 0;
    while (!b.empty()) {
        const Slice& f = b.pending().front();
        const size_t want = f.size();
        const size_t n = c.write(f.data(), want);
        if (n > 0) {
            ++*writes;
            total += n;
            b.consume(n);  // the bytes are copied: the references go now
        }
        if (n < want) {
            // Full (on_writable() is armed), or no arena obj for the copy.
            *no_memory = n == 0 && c.send_space() > 0;
            break;
        }
    }
    return total;
}

} // namespace crescent::rpc::detail
