// crescent — packets held while the kernel resolves their next hop.
//
// When `Snapshot::next_hop()` says Unresolved, the engine asks the kernel to
// resolve the neighbour (RTM_NEWNEIGH + NTF_USE, netlink.hpp) and holds the
// packet here. Like the kernel's own unresolved queue (neigh->arp_queue,
// bounded by unres_qlen; RFC 1122 §2.3.2.2 "SHOULD save at least one"), each
// destination keeps at most `per_destination` packets and drops the OLDEST
// when full. A destination gives up `timeout` after its first held packet.
// The number of destinations is bounded too, so memory is bounded.
//
// This is the slow path (a neighbour is missing); the queue never reads a
// clock (`now` is passed in) and never sends anything itself: it hands packets
// back through the caller's callbacks —
//   send(T&& item, const MacAddr& mac)     the neighbour resolved: transmit
//   drop(T&& item, PendingDrop reason)     give up: free it and count `reason`
// One queue per engine; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <crescent/time.hpp>

#include "stack/ctrl/types.hpp"

namespace crescent::ctrl {

enum class PendingDrop : uint8_t {
    QueueFull,            // the destination already held `per_destination` packets (oldest dropped)
    TooManyDestinations,  // `destinations` next hops already pending (the new packet dropped)
    Timeout,              // not resolved within `timeout`
    Failed,               // the kernel reported the neighbour FAILED, or it cannot be resolved
    Count_
};
inline constexpr size_t kPendingDropCount = size_t(PendingDrop::Count_);

constexpr std::string_view pending_drop_name(PendingDrop r) {
    switch (r) {
    case PendingDrop::QueueFull: return "pending queue full";
    case PendingDrop::TooManyDestinations: return "too many unresolved next hops";
    case PendingDrop::Timeout: return "next hop not resolved in time";
    case PendingDrop::Failed: return "next hop resolution failed";
    case PendingDrop::Count_: break;
    }
    return "?";
}

struct PendingLimits {
    size_t per_destination = 16;   // packets held per next hop (>= 1)
    size_t destinations = 64;      // next hops pending at once (>= 1)
    Duration timeout = std::chrono::seconds(3); // about the kernel's 3 ARP probes at 1 s
};

// What hold() did with a packet.
enum class Held : uint8_t {
    AskKernel,  // queued; first packet for this next hop: ask the kernel to resolve it now
    Queued,     // queued behind earlier packets (resolution already asked)
    Dropped,    // not queued (drop() was called with the reason)
};

template <class T>
class PendingQueue {
public:
    struct Counters {
        uint64_t held = 0;       // packets accepted
        uint64_t sent = 0;       // packets handed to send()
        uint64_t dropped[kPendingDropCount] = {};
    };

    explicit PendingQueue(PendingLimits limits = {}) : limits_(limits) {
        if (limits_.per_destination == 0) limits_.per_destination = 1;
        if (limits_.destinations == 0) limits_.destinations = 1;
    }
    PendingQueue(const PendingQueue&) = delete;
    PendingQueue& operator=(const PendingQueue&) = delete;

    // Holds `item` for next hop `nh`. May call drop() for the oldest packet of
    // `nh` (QueueFull) or for `item` itself (TooManyDestinations).
    template <class Drop>
    Held hold(Ipv4Addr nh, T&& item, Instant now, Drop&& drop) {
        Dest* d = find(nh);
        if (d == nullptr) {
            if (dests_.size() >= limits_.destinations) {
                count_drop(PendingDrop::TooManyDestinations);
                drop(std::move(item), PendingDrop::TooManyDestinations);
                return Held::Dropped;
            }
            dests_.push_back(Dest{nh, now + limits_.timeout, {}});
            dests_.back().items.push_back(std::move(item));
            ++counters_.held;
            return Held::AskKernel;
        }
        if (d->items.size() >= limits_.per_destination) {
            T oldest = std::move(d->items.front());
            d->items.erase(d->items.begin()); // at most per_destination moves
            count_drop(PendingDrop::QueueFull);
            drop(std::move(oldest), PendingDrop::QueueFull);
        }
        d->items.push_back(std::move(item));
        ++counters_.held;
        return Held::Queued;
    }

    // The neighbour `nh` resolved to `mac`: hands its packets to send(), oldest
    // first. Returns how many.
    template <class Send>
    size_t resolve(Ipv4Addr nh, const MacAddr& mac, Send&& send) {
        auto it = find_it(nh);
        if (it == dests_.end()) return 0;
        Dest d = std::move(*it);
        dests_.erase(it);
        for (T& item : d.items) send(std::move(item), mac);
        counters_.sent += d.items.size();
        return d.items.size();
    }

    // For every pending next hop, asks `lookup(Ipv4Addr) -> std::optional<MacAddr>`
    // (e.g. over a new Snapshot) and sends what resolved. Returns packets sent.
    template <class Lookup, class Send>
    size_t resolve_from(Lookup&& lookup, Send&& send) {
        size_t n = 0;
        for (size_t i = 0; i < dests_.size();) {
            std::optional<MacAddr> mac = lookup(dests_[i].nh);
            if (!mac) {
                ++i;
                continue;
            }
            n += resolve(dests_[i].nh, *mac, send); // erases dests_[i]
        }
        return n;
    }

    // The neighbour `nh` failed (kernel NUD_FAILED, or no resolver): drops its
    // packets with PendingDrop::Failed. Returns how many.
    template <class Drop>
    size_t fail(Ipv4Addr nh, Drop&& drop) {
        auto it = find_it(nh);
        if (it == dests_.end()) return 0;
        Dest d = std::move(*it);
        dests_.erase(it);
        return drop_all(d, PendingDrop::Failed, drop);
    }

    // Gives up on every next hop whose deadline is <= now. Returns packets dropped.
    template <class Drop>
    size_t expire(Instant now, Drop&& drop) {
        size_t n = 0;
        for (size_t i = 0; i < dests_.size();) {
            if (dests_[i].deadline > now) {
                ++i;
                continue;
            }
            Dest d = std::move(dests_[i]);
            dests_.erase(dests_.begin() + ptrdiff_t(i));
            n += drop_all(d, PendingDrop::Timeout, drop);
        }
        return n;
    }

    // The earliest deadline, or Instant::never() when nothing is pending.
    Instant next_deadline() const {
        Instant t = Instant::never();
        for (const Dest& d : dests_) t = min(t, d.deadline);
        return t;
    }

    bool empty() const { return dests_.empty(); }
    size_t destinations() const { return dests_.size(); }
    size_t held(Ipv4Addr nh) const {
        for (const Dest& d : dests_)
            if (d.nh == nh) return d.items.size();
        return 0;
    }
    size_t held() const {
        size_t n = 0;
        for (const Dest& d : dests_) n += d.items.size();
        return n;
    }
    const Counters& counters() const { return counters_; }
    const PendingLimits& limits() const { return limits_; }

private:
    struct Dest {
        Ipv4Addr nh;
        Instant deadline;     // first hold + timeout
        // Oldest first; 1 <= size <= per_destination. A vector (not a deque)
        // because its move is noexcept, so move-only packets work.
        std::vector<T> items;
    };

    typename std::vector<Dest>::iterator find_it(Ipv4Addr nh) {
        for (auto it = dests_.begin(); it != dests_.end(); ++it)
            if (it->nh == nh) return it;
        return dests_.end();
    }
    Dest* find(Ipv4Addr nh) {
        auto it = find_it(nh);
        return it == dests_.end() ? nullptr : &*it;
    }
    void count_drop(PendingDrop r) { ++counters_.dropped[size_t(r)]; }
    template <class Drop>
    size_t drop_all(Dest& d, PendingDrop r, Drop& drop) {
        for (T& item : d.items) {
            count_drop(r);
            drop(std::move(item), r);
        }
        return d.items.size();
    }

    PendingLimits limits_;
    std::vector<Dest> dests_; // at most limits_.destinations; searched linearly
    Counters counters_;
};

} // namespace crescent::ctrl
