// crescent — congestion control: NewReno, CUBIC, DCTCP.
//
// RFC 5681 §3.1 (slow start, congestion avoidance, ssthresh on loss and on
// RTO), RFC 3465 (appropriate byte counting, L = 2), RFC 6928 (initial
// window), RFC 9438 (CUBIC), RFC 8257 (DCTCP), RFC 3168 §6.1.2 (ECE as a
// congestion signal). All windows are in bytes; time only comes from the
// arguments (AckSample::now), never from a clock.
#include "stack/tcp/cc.hpp"

#include <algorithm>
#include <cmath>

namespace crescent::tcp {

std::string_view cc_name(CcAlgo a) {
    switch (a) {
    case CcAlgo::NewReno: return "newreno";
    case CcAlgo::Cubic: return "cubic";
    case CcAlgo::Dctcp: return "dctcp";
    }
    return "?";
}

std::optional<CcAlgo> cc_from_name(std::string_view s) {
    if (s == "newreno" || s == "reno") return CcAlgo::NewReno;
    if (s == "cubic") return CcAlgo::Cubic;
    if (s == "dctcp") return CcAlgo::Dctcp;
    return std::nullopt;
}

namespace {

// "Infinite" initial ssthresh (RFC 5681 §3.1: arbitrarily high).
constexpr uint32_t kInitialSsthresh = CongestionControl::kMaxCwnd;

double to_seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// RFC 9438 §4.3: alpha_cubic = 3 * (1 - beta) / (1 + beta).
constexpr double kCubicAlpha = 3.0 * (1.0 - CongestionControl::kCubicBeta) / (1.0 + CongestionControl::kCubicBeta);

} // namespace

uint32_t CongestionControl::initial_window(uint32_t mss) {
    // RFC 6928 §2: IW = min(10*MSS, max(2*MSS, 14600)).
    return std::min(10 * mss, std::max(2 * mss, 14600u));
}

CongestionControl::CongestionControl(CcAlgo algo, uint32_t mss, Instant /*now*/, uint32_t abc_limit)
    : st_(make_state(algo)), mss_(std::max(mss, 1u)), cwnd_(initial_window(mss_)), ssthresh_(kInitialSsthresh),
      abc_limit_(abc_limit) {
    if (auto* d = std::get_if<Dctcp>(&st_)) d->window_end_bytes = cwnd_;
}

auto CongestionControl::make_state(CcAlgo algo) -> State {
    switch (algo) {
    case CcAlgo::NewReno: return NewReno{};
    case CcAlgo::Cubic: return Cubic{};
    case CcAlgo::Dctcp: return Dctcp{};
    }
    return NewReno{};
}

CcAlgo CongestionControl::algo() const {
    switch (st_.index()) {
    case 1: return CcAlgo::Cubic;
    case 2: return CcAlgo::Dctcp;
    default: return CcAlgo::NewReno;
    }
}

uint32_t CongestionControl::cwnd() const { return cwnd_; }
uint32_t CongestionControl::ssthresh() const { return ssthresh_; }

uint32_t CongestionControl::dctcp_alpha_x1024() const {
    if (auto* d = std::get_if<Dctcp>(&st_)) return (d->alpha_q20 + 512) >> 10;
    return 0;
}

uint32_t CongestionControl::cubic_wmax() const {
    if (auto* c = std::get_if<Cubic>(&st_)) return uint32_t(c->w_max);
    return 0;
}

double CongestionControl::cubic_k_seconds() const {
    if (auto* c = std::get_if<Cubic>(&st_)) return c->k;
    return 0;
}

double CongestionControl::cubic_w_at(Duration t) const {
    auto* c = std::get_if<Cubic>(&st_);
    if (!c) return 0;
    // RFC 9438 eq. 1: W_cubic(t) = C * (t - K)^3 + W_max, in segments.
    double d = to_seconds(t) - c->k;
    return (kCubicC * d * d * d + c->w_max / mss_) * mss_;
}

void CongestionControl::set_mss(uint32_t mss) {
    mss = std::max(mss, 1u);
    if (mss == mss_) return;
    mss_ = mss;
    if (pristine_) {
        cwnd_ = initial_window(mss_);
        if (auto* d = std::get_if<Dctcp>(&st_)) d->window_end_bytes = cwnd_;
    }
    cwnd_ = std::max(cwnd_, mss_);
}

// RFC 5681 §3.1 with RFC 3465: slow start grows by min(acked, L*SMSS) (by
// acked when L is 0); in congestion avoidance one SMSS per cwnd of
// acknowledged bytes.
void CongestionControl::grow_reno(uint32_t acked, uint32_t* ca_acked) {
    if (cwnd_ < ssthresh_) {
        uint32_t next = cwnd_ + (abc_limit_ != 0 ? std::min(acked, abc_limit_ * mss_) : acked);
        cwnd_ = std::min(next, ssthresh_); // what is left over counts in CA next time
        *ca_acked = 0;
        return;
    }
    *ca_acked += acked;
    if (*ca_acked >= cwnd_) {
        *ca_acked -= cwnd_;
        cwnd_ += mss_;
    }
    cwnd_ = std::min(cwnd_, kMaxCwnd);
}

void CongestionControl::reno_congestion_event(uint32_t in_flight) {
    // RFC 5681 eq. (4): ssthresh = max(FlightSize / 2, 2*SMSS), FlightSize
    // no larger than cwnd: in a SACK recovery new data goes out as the pipe
    // drains, so the unacknowledged flight can grow many times past cwnd
    // behind a lost retransmission, and half of it would be a window far
    // larger than the one that just lost (Linux halves cwnd itself).
    ssthresh_ = std::max(std::min(in_flight, cwnd_) / 2, 2 * mss_);
}

// RFC 9438 §4.6 (multiplicative decrease) and §4.7 (fast convergence).
void CongestionControl::cubic_congestion_event(Cubic& c) {
    double cwnd = cwnd_;
    c.cwnd_prior = cwnd;
    if (cwnd < c.w_max) c.w_max = cwnd * (1.0 + kCubicBeta) / 2.0; // fast convergence
    else c.w_max = cwnd;
    c.w_last_max = c.w_max;
    ssthresh_ = std::max(uint32_t(cwnd * kCubicBeta), 2 * mss_);
    c.epoch_start = Instant::never();
    c.bytes_acked = 0;
    c.cwnd_frac = 0;
}

// RFC 9438 §4.2–§4.5, congestion avoidance only (slow start is Reno's).
void CongestionControl::grow_cubic(Cubic& c, const AckSample& s) {
    if (s.rtt) c.rtt = *s.rtt;
    if (cwnd_ < ssthresh_) {
        grow_reno(s.acked, &c.bytes_acked);
        return;
    }
    const double mss = mss_;
    if (c.epoch_start.is_never()) {
        // A new congestion-avoidance epoch (§4.2): K from the window at its start.
        c.epoch_start = s.now;
        double cwnd_epoch = cwnd_;
        if (c.w_max <= cwnd_epoch) {
            c.w_max = cwnd_epoch; // no loss yet (or grew past it): the curve starts at its plateau
            c.k = 0;
        } else {
            c.k = std::cbrt((c.w_max - cwnd_epoch) / mss / kCubicC);
        }
        c.w_est = cwnd_epoch; // §4.3
        c.cwnd_frac = 0;
    }
    const double cwnd = cwnd_;
    // §4.3 Reno-friendly region: W_est grows by alpha_cubic segments per cwnd
    // of acked segments, alpha_cubic becoming 1 once W_est reaches cwnd_prior.
    double alpha = c.w_est >= c.cwnd_prior ? 1.0 : kCubicAlpha;
    c.w_est += alpha * double(s.acked) * mss / cwnd;

    double t = to_seconds(s.now - c.epoch_start);
    double rtt = to_seconds(c.rtt);
    auto w_cubic = [&](double tt) {
        double d = tt - c.k;
        return (kCubicC * d * d * d) * mss + c.w_max;
    };
    double next;
    const bool reno_friendly = w_cubic(t) < c.w_est;
    if (reno_friendly) {
        next = c.w_est; // Reno-friendly region
        c.cwnd_frac = 0;
    } else {
        // §4.4/§4.5: target = W_cubic(t + RTT) clamped to [cwnd, 1.5*cwnd];
        // cwnd grows by (target - cwnd) / cwnd per acked segment.
        double target = std::clamp(w_cubic(t + rtt), cwnd, 1.5 * cwnd);
        next = cwnd + (target - cwnd) * double(s.acked) / cwnd + c.cwnd_frac;
    }
    if (next <= cwnd) return;
    next = std::min(next, double(kMaxCwnd));
    auto whole = uint32_t(next);
    if (!reno_friendly) c.cwnd_frac = next - whole;
    cwnd_ = whole;
}

// RFC 8257 §3.3: per observation window (about one cwnd of bytes),
// F = marked / acked and alpha = (1 - g) * alpha + g * F.
void CongestionControl::dctcp_observe(Dctcp& d, const AckSample& s) {
    d.bytes_acked += s.acked;
    if (s.ece) d.bytes_marked += s.acked;
    if (d.bytes_acked < d.window_end_bytes) return;
    uint64_t f_q20 = d.bytes_acked ? (d.bytes_marked << 20) / d.bytes_acked : 0;
    // alpha_q20 stays <= 2^20, so the products fit in 64 bits.
    uint64_t a = (uint64_t(d.alpha_q20) * ((1u << kDctcpGShift) - 1) + f_q20) >> kDctcpGShift;
    d.alpha_q20 = uint32_t(std::min<uint64_t>(a, 1u << 20));
    d.bytes_acked = d.bytes_marked = 0;
    d.window_end_bytes = cwnd_;
    d.reduced_this_window = false;
}

// RFC 8257 §3.3: cwnd = cwnd * (1 - alpha / 2), at most once per window.
void CongestionControl::dctcp_reduce(Dctcp& d) {
    if (d.reduced_this_window) return;
    d.reduced_this_window = true;
    uint64_t cut = (uint64_t(cwnd_) * d.alpha_q20) >> 21;
    uint32_t next = std::max(uint32_t(cwnd_ - cut), 2 * mss_);
    cwnd_ = next;
    ssthresh_ = next;
    d.ca_acked = 0;
}

void CongestionControl::on_ack(const AckSample& s) {
    if (s.acked == 0) return;
    pristine_ = false;
    rto_backoff_ = false;
    if (auto* d = std::get_if<Dctcp>(&st_)) {
        dctcp_observe(*d, s);
        if (s.ece) {
            bool was_reduced = d->reduced_this_window;
            dctcp_reduce(*d);
            if (!was_reduced) return; // no growth on the ACK that cut the window
        }
        if (!s.app_limited) grow_reno(s.acked, &d->ca_acked);
        return;
    }
    if (s.app_limited) return;
    if (auto* c = std::get_if<Cubic>(&st_)) {
        grow_cubic(*c, s);
        return;
    }
    grow_reno(s.acked, &std::get<NewReno>(st_).bytes_acked);
}

void CongestionControl::on_loss(uint32_t in_flight, Instant /*now*/) {
    pristine_ = false;
    if (auto* c = std::get_if<Cubic>(&st_)) {
        cubic_congestion_event(*c);
    } else {
        reno_congestion_event(in_flight);
        if (auto* n = std::get_if<NewReno>(&st_)) n->bytes_acked = 0;
        if (auto* d = std::get_if<Dctcp>(&st_)) d->ca_acked = 0;
    }
    // RFC 6675 §5 step 4.2 / RFC 9438 §4.6: cwnd = ssthresh, never below 2*SMSS.
    cwnd_ = std::max(ssthresh_, 2 * mss_);
}

void CongestionControl::on_ecn(uint32_t in_flight, Instant now) {
    if (auto* d = std::get_if<Dctcp>(&st_)) {
        pristine_ = false;
        dctcp_reduce(*d);
        return;
    }
    // RFC 3168 §6.1.2: react to ECE as to a loss (the TCB limits it to once per window).
    on_loss(in_flight, now);
}

void CongestionControl::on_recovery_exit(Instant /*now*/) {
    // RFC 6582 §3.2 step 3 ("full ACK"): deflate to ssthresh.
    cwnd_ = std::min(cwnd_, ssthresh_);
    if (auto* c = std::get_if<Cubic>(&st_)) c->epoch_start = Instant::never();
}

void CongestionControl::on_rto(uint32_t in_flight, Instant /*now*/) {
    pristine_ = false;
    // RFC 5681 §3.1 implementation note: when the segment was already
    // retransmitted by the timer, ssthresh is held constant.
    if (!rto_backoff_) {
        if (auto* c = std::get_if<Cubic>(&st_)) cubic_congestion_event(*c); // RFC 9438 §4.8
        else reno_congestion_event(in_flight);
    }
    rto_backoff_ = true;
    cwnd_ = mss_; // loss window (RFC 5681 §3.1)
    std::visit([](auto& st) {
        using T = std::decay_t<decltype(st)>;
        if constexpr (std::is_same_v<T, NewReno>) st.bytes_acked = 0;
        else if constexpr (std::is_same_v<T, Cubic>) { st.bytes_acked = 0; st.epoch_start = Instant::never(); }
        else st.ca_acked = 0;
    }, st_);
}

} // namespace crescent::tcp
