// crescent — congestion control, chosen per connection.
//
// NewReno (RFC 5681 + RFC 6582 semantics for the window; the TCB runs loss
// recovery itself), CUBIC (RFC 9438), DCTCP (RFC 8257). The TCB owns loss
// detection and recovery (RFC 6675 / RFC 6582); this module only decides
// cwnd and ssthresh from the events the TCB reports. All sizes in bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>

#include <crescent/time.hpp>

namespace crescent::tcp {

enum class CcAlgo : uint8_t { NewReno, Cubic, Dctcp };
std::string_view cc_name(CcAlgo a);
std::optional<CcAlgo> cc_from_name(std::string_view s);

// One cumulative or SACK ACK that advanced the sender's knowledge.
struct AckSample {
    uint32_t acked = 0;        // bytes newly acked (cumulative + newly SACKed)
    uint32_t in_flight = 0;    // bytes in flight before this ACK (RFC 6675 pipe)
    std::optional<Duration> rtt; // a valid RTT sample (Karn-safe), if any
    bool ece = false;          // ACK carried ECE (DCTCP: bytes acked with ECE count as marked)
    bool app_limited = false;  // the sender was not cwnd-limited: do not grow cwnd (RFC 7661 spirit)
    Instant now;
};

class CongestionControl {
public:
    // abc_limit: RFC 3465's L, the most one ACK grows cwnd in slow start, in
    // segments; 0 = none (an ACK for N segments counts as N ACKs, as Linux has
    // since 3.13 for GRO's stretch ACKs).
    CongestionControl(CcAlgo algo, uint32_t mss, Instant now, uint32_t abc_limit = kAbcLimit);

    CcAlgo algo() const;
    uint32_t cwnd() const;
    uint32_t ssthresh() const;
    bool in_slow_start() const { return cwnd() < ssthresh(); }
    // The TCB negotiates ECN (RFC 3168) when this is true, and then sends ECT(0).
    bool wants_ecn() const { return algo() == CcAlgo::Dctcp; }

    // New data acknowledged outside loss recovery: grow cwnd.
    void on_ack(const AckSample& s);
    // Loss detected by dupacks / SACK (once per window of data): set ssthresh,
    // cwnd = ssthresh (RFC 5681 §3.2 step 2 / RFC 6675 §5 step 4.2).
    void on_loss(uint32_t in_flight, Instant now);
    // ECN congestion signal (ECE, at most once per window for RFC 3168; DCTCP
    // reacts once per observation window using alpha).
    void on_ecn(uint32_t in_flight, Instant now);
    // Recovery finished (snd.una passed the recovery point).
    void on_recovery_exit(Instant now);
    // Retransmission timeout: ssthresh from flight, cwnd = 1 MSS (RFC 5681 §3.1).
    void on_rto(uint32_t in_flight, Instant now);
    // Path MSS changed (after negotiation).
    void set_mss(uint32_t mss);

    // Inspection for tests and stats (DCTCP alpha scaled by 1024; CUBIC W_max in bytes).
    uint32_t dctcp_alpha_x1024() const;
    uint32_t cubic_wmax() const;

    // The RFC 6928 initial window for `mss`: min(10*MSS, max(2*MSS, 14600)).
    static uint32_t initial_window(uint32_t mss);
    // CUBIC inspection for tests: K in seconds and W_cubic(t) in bytes (RFC 9438 §4.2).
    double cubic_k_seconds() const;
    double cubic_w_at(Duration t) const;

    // Constants (RFC 9438 §4.1/§4.2, RFC 8257 §3.3, RFC 3465 §2.2).
    static constexpr double kCubicC = 0.4;
    static constexpr double kCubicBeta = 0.7;
    static constexpr uint32_t kAbcLimit = 2;          // L: at most L*SMSS per ACK in slow start (default)
    static constexpr uint32_t kDctcpGShift = 4;       // g = 1/16
    static constexpr uint32_t kMaxCwnd = 1u << 30;    // keeps byte arithmetic in 32 bits

private:
    struct NewReno { uint32_t bytes_acked = 0; };   // appropriate byte counting (RFC 3465) in CA
    struct Cubic {                                   // RFC 9438 state (windows in bytes, K in seconds)
        double w_max = 0, w_last_max = 0, k = 0, w_est = 0, cwnd_prior = 0;
        double cwnd_frac = 0;                        // sub-byte growth carried between ACKs
        Instant epoch_start = Instant::never();      // start of the current CA epoch; never = not started
        Duration rtt{0};                             // latest RTT sample, for W_cubic(t + RTT)
        uint32_t bytes_acked = 0;
    };
    struct Dctcp {                                   // RFC 8257 §3.3
        uint32_t alpha_q20 = 1u << 20;               // alpha scaled by 2^20; starts at 1 (conservative)
        uint64_t bytes_acked = 0, bytes_marked = 0;  // in the current observation window
        uint32_t window_end_bytes = 0;               // bytes to observe before updating alpha (~one cwnd)
        bool reduced_this_window = false;            // cwnd already cut in this observation window
        uint32_t ca_acked = 0;                       // ABC counter in congestion avoidance
    };

    using State = std::variant<NewReno, Cubic, Dctcp>;
    static State make_state(CcAlgo algo);
    void grow_reno(uint32_t acked, uint32_t* ca_acked);
    void grow_cubic(Cubic& c, const AckSample& s);
    void cubic_congestion_event(Cubic& c);
    void reno_congestion_event(uint32_t in_flight);
    void dctcp_observe(Dctcp& d, const AckSample& s);
    void dctcp_reduce(Dctcp& d);

    State st_;
    uint32_t mss_, cwnd_, ssthresh_;
    uint32_t abc_limit_;       // RFC 3465 L in segments; 0 = no limit
    bool pristine_ = true;     // no ACK or congestion event yet: set_mss() may resize the initial window
    bool rto_backoff_ = false; // cwnd is the loss window of an RTO and no new data was acked since
};

} // namespace crescent::tcp
