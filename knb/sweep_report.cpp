// knb sweep's report: the sweep's JSON document and the tables printed
// once every run has ended (see sweep.cpp for what runs).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "knb/report.hpp"
#include "knb/sweep_impl.hpp"

namespace knb::sweep {

std::string frame_label(const RawPoint& r) {
    std::string s = std::to_string(r.frame ? r.frame : r.frame_wanted);
    if (r.frames > 1) s += "x" + std::to_string(r.frames);
    if (r.resp_frame != 0) s += "/" + std::to_string(r.resp_frame);
    return s;
}

std::string variant(const Point& p) {
    if (!p.served_by.empty()) return "kernel>" + p.served_by;
    return p.stack == Stack::Crescent ? "crescent/" + std::string(name(p.mode)) : "kernel/" + std::string(name(p.wait));
}

namespace {

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A point's successful runs over the rounds of the sweep (--repeat; one
// round without it), summarised by their medians.
struct Runs {
    std::vector<const Point*> ok;  // in the order they ran
    double med(double Point::*f) const {
        std::vector<double> v;
        for (const Point* p : ok) v.push_back(p->*f);
        return median(std::move(v));
    }
    const Point* in_round(unsigned r) const {
        for (const Point* p : ok)
            if (p->round == r) return p;
        return nullptr;
    }
    double rps_in(unsigned r) const {  // 0: none in round r
        const Point* p = in_round(r);
        return p ? p->rps : 0;
    }
};

// The same for the raw limit at a point: every round's successful ping.
struct RawRuns {
    std::vector<const RawPoint*> ok;
    RawRuns(const Results& res, const RawPoint& at) {
        for (const RawPoint& q : res.raws)
            if (q.ok && q.size == at.size && q.iodepth == at.iodepth && q.threads == at.threads) ok.push_back(&q);
    }
    double rps() const {
        std::vector<double> v;
        for (const RawPoint* q : ok) v.push_back(q->rps);
        return median(std::move(v));
    }
    double rps_in(unsigned r) const {
        for (const RawPoint* q : ok)
            if (q->round == r) return q->rps;
        return 0;
    }
};

// "1.55-1.77x in 5": the range over the rounds of a's RPC/s (or round
// trips/s) over b's, where both ran in the round; "-" where they never did.
template <class A, class B>
std::string rounds_ratio(const Sweep& sw, const A& a, const B& b, const char* unit) {
    double lo = 0, hi = 0;
    unsigned n = 0;
    for (unsigned r = 1; r <= sw.repeat; ++r) {
        const double x = a.rps_in(r), y = b.rps_in(r);
        if (x <= 0 || y <= 0) continue;
        lo = n ? std::min(lo, x / y) : x / y;
        hi = n ? std::max(hi, x / y) : x / y;
        ++n;
    }
    char buf[64] = "-";
    if (n) std::snprintf(buf, sizeof buf, "%.2f-%.2f%s in %u", lo, hi, unit, n);
    return buf;
}

// threads, size, iodepth, and variant(p) ("crescent/inline", "kernel/busy",
// "kernel>crescent/inline" for a --kernel-client run).
using Key = std::tuple<uint64_t, uint64_t, uint64_t, std::string>;

// Every successful run of the sweep by point and variant, each point's rounds
// together: what every table reads.
class RunIndex {
public:
    explicit RunIndex(const Results& res) {
        for (const Point& p : res.points)
            if (p.ok) at_[{p.threads, p.size, p.iodepth, variant(p)}].ok.push_back(&p);
    }
    // nullptr when no run of `v` succeeded at the point.
    const Runs* find(uint64_t threads, uint64_t size, uint64_t iodepth, const std::string& v) const {
        auto it = at_.find({threads, size, iodepth, v});
        return it == at_.end() ? nullptr : &it->second;
    }
    const Runs* find(const RawPoint& r, const std::string& v) const { return find(r.threads, r.size, r.iodepth, v); }

private:
    std::map<Key, Runs> at_;
};

// The variants of the runs that `keep` accepts, in the order they first ran
// (failed runs count: a variant whose runs all failed still gets its rows).
template <class F>
std::vector<std::string> variants_of(const Results& res, F keep) {
    std::vector<std::string> v;
    for (const Point& p : res.points)
        if (keep(p) && std::find(v.begin(), v.end(), variant(p)) == v.end()) v.push_back(variant(p));
    return v;
}
bool is_crescent(const Point& p) { return p.stack == Stack::Crescent && p.served_by.empty(); }
bool is_kernel(const Point& p) { return p.stack == Stack::Kernel && p.served_by.empty(); }
bool at_point(const Point& p, const RawPoint& r) {
    return p.size == r.size && p.iodepth == r.iodepth && p.threads == r.threads;
}

std::string medians_note(const Sweep& sw) {
    return sw.repeat > 1 ? "; each figure the median of " + std::to_string(sw.repeat) +
                               " interleaved rounds, and the range of the rounds' own ratios"
                         : "";
}

}  // namespace

std::optional<double> json_number(const std::string& doc, const std::string& key, const std::string& after) {
    size_t from = after.empty() ? 0 : doc.find("\"" + after + "\":");
    if (from == std::string::npos) return std::nullopt;
    size_t at = doc.find("\"" + key + "\":", from);
    if (at == std::string::npos) return std::nullopt;
    const char* p = doc.c_str() + at + key.size() + 3;
    char* end = nullptr;
    double d = std::strtod(p, &end);
    if (end == p) return std::nullopt;
    return d;
}

std::optional<std::array<double, crescent::EngineStats::kPhases>> phase_means(const std::string& doc,
                                                                              const std::string& side) {
    const size_t at = doc.find("\"phase_ns\":{");
    if (at == std::string::npos) return std::nullopt;
    const size_t from = doc.find("\"" + side + "\":{", at);  // a side without phases is "side":null
    if (from == std::string::npos) return std::nullopt;
    const std::string obj = doc.substr(from, doc.find('}', from) - from);
    std::array<double, crescent::EngineStats::kPhases> v{};
    for (size_t i = 0; i < v.size(); ++i) {
        const std::optional<double> x = json_number(obj, std::string(crescent::EngineStats::phase_name(i)));
        if (!x) return std::nullopt;  // null: no iteration was timed
        v[i] = *x;
    }
    return v;
}

void write_document(const Sweep& sw, const Results& res) {
    std::string d = "{\"knb\":1,\"kind\":\"sweep\",\"bed\":\"" + json_escape(sw.bed) + "\",\"proto\":\"" +
                    std::string(name(sw.proto)) + "\"";
    char num[64];
    std::snprintf(num, sizeof num, ",\"duration\":%g,\"warmup\":%g", sw.duration, sw.warmup);
    d += num;
    if (sw.resp_size != 0) d += ",\"resp_size\":" + std::to_string(sw.resp_size);
    if (sw.repeat > 1) d += ",\"repeat\":" + std::to_string(sw.repeat);
    if (sw.loss > 0) {
        std::snprintf(num, sizeof num, ",\"loss_pct\":%g", sw.loss);
        d += num;
    }
    if (sw.kernel_rto_min != 0) d += ",\"kernel_rto_min_ms\":" + std::to_string(sw.kernel_rto_min);
    if (!sw.raw_args.empty()) d += ",\"raw_args\":\"" + json_escape(sw.raw_args) + "\"";
    // A --repeat sweep's run documents say their round; a --loss sweep's, how they lost frames.
    auto doc_of = [&](const Point& p) {
        if (p.doc.empty() || p.doc[0] != '{') return p.doc;
        std::string head;
        if (sw.repeat > 1) head += "\"round\":" + std::to_string(p.round) + ",";
        if (!p.loss_json.empty()) head += "\"loss\":" + p.loss_json + ",";
        return head.empty() ? p.doc : "{" + head + p.doc.substr(1);
    };
    d += ",\"runs\":[";
    bool first = true;
    for (const Point& p : res.points) {
        if (p.doc.empty() || !p.served_by.empty()) continue;
        d += (first ? "" : ",\n") + doc_of(p);
        first = false;
    }
    d += "],\"failed\":[";
    first = true;
    for (const Point& p : res.points) {
        if (p.ok) continue;
        d += std::string(first ? "" : ",") + "{\"variant\":\"" + json_escape(variant(p)) +
             "\",\"msg_size\":" + std::to_string(p.size) + ",\"iodepth\":" + std::to_string(p.iodepth) +
             ",\"threads\":" + std::to_string(p.threads) + ",\"round\":" + std::to_string(p.round) +
             ",\"error\":\"" + json_escape(p.error) + "\"}";
        first = false;
    }
    if (sw.kernel_client) {
        // Not in "runs": a kernel client's document says stack kernel, and
        // tools/knb-plot would draw it as the kernel/busy variant.
        d += "],\"kernel_client\":[";
        first = true;
        for (const Point& p : res.points) {
            if (p.doc.empty() || p.served_by.empty()) continue;
            d += std::string(first ? "" : ",\n") + "{\"served_by\":\"" + json_escape(p.served_by) + "\",\"run\":" +
                 doc_of(p) + "}";
            first = false;
        }
    }
    d += "],\"probes\":[";
    for (size_t i = 0; i < res.probes.size(); ++i) d += (i ? "," : "") + res.probes[i];
    d += "]";
    if (sw.raw) {
        d += ",\"raw\":[";
        for (size_t i = 0; i < res.raws.size(); ++i) {
            const RawPoint& r = res.raws[i];
            d += std::string(i ? ",\n" : "") + "{\"point\":{\"msg_size\":" + std::to_string(r.size) +
                 ",\"iodepth\":" + std::to_string(r.iodepth) + ",\"threads\":" + std::to_string(r.threads) +
                 ",\"conns\":" + std::to_string(sw.conns) + "},\"frame\":" +
                 std::to_string(r.frame ? r.frame : r.frame_wanted) + ",\"frames\":" + std::to_string(r.frames) +
                 ",\"frame_wanted\":" + std::to_string(r.frame_wanted) +
                 ",\"resp_frame\":" + std::to_string(r.resp_frame) +
                 ",\"raw_iodepth\":" + std::to_string(r.raw_iodepth) + ",\"queues\":" +
                 std::to_string(r.threads) + ",\"round\":" + std::to_string(r.round) +
                 ",\"ok\":" + (r.ok ? "true" : "false") + ",\"error\":\"" +
                 json_escape(r.error) + "\",\"result\":" + (r.doc.empty() ? "null" : r.doc) + "}";
        }
        d += "]";
    }
    d += "}";
    std::string err;
    if (!write_file(sw.json, d, &err)) std::fprintf(stderr, "knb sweep: %s\n", err.c_str());
}

// Each crescent variant against each kernel variant at the same point.
void print_comparison(const Sweep& sw, const Results& res) {
    const std::vector<std::string> cres = variants_of(res, is_crescent), kern = variants_of(res, is_kernel);
    if (cres.empty() || kern.empty()) return;
    const RunIndex idx(res);
    std::printf("\n# crescent against kernel TCP, same bed, same knb, same parameters (%s, %g s per point after "
                "%g s warm-up): RPC/s, p50/p99 us; ratio = crescent RPC/s / kernel RPC/s (p99: kernel / "
                "crescent, > 1 = crescent lower)%s\n",
                std::string(name(sw.proto)).c_str(), sw.duration, sw.warmup, medians_note(sw).c_str());
    for (const std::string& c : cres)
        for (const std::string& k : kern) {
            std::printf("%-6s %-4s %-3s | %-14s %11s %7s %7s | %-14s %11s %7s %7s | %8s %8s", "size", "qd",
                        "thr", c.c_str(), "RPC/s", "p50", "p99", k.c_str(), "RPC/s", "p50", "p99", "RPC/s x",
                        "p99 x");
            if (sw.repeat > 1) std::printf(" | %s", "rounds' RPC/s x");
            std::printf("\n");
            for (uint64_t t : sw.threads)
                for (uint64_t size : sw.sizes)
                    for (uint64_t qd : sw.iodepths) {
                        const Runs* x = idx.find(t, size, qd, c);
                        const Runs* y = idx.find(t, size, qd, k);
                        if (!x || !y) continue;
                        const double xr = x->med(&Point::rps), yr = y->med(&Point::rps);
                        const double x99 = x->med(&Point::p99), y99 = y->med(&Point::p99);
                        std::printf("%-6" PRIu64 " %-4" PRIu64 " %-3" PRIu64 " | %-14s %11.0f %7.1f %7.1f | %-14s "
                                    "%11.0f %7.1f %7.1f | %7.2fx %7.2fx",
                                    size, qd, t, "", xr, x->med(&Point::p50), x99, "", yr, y->med(&Point::p50), y99,
                                    yr > 0 ? xr / yr : 0.0, x99 > 0 ? y99 / x99 : 0.0);
                        if (sw.repeat > 1) std::printf(" | %s", rounds_ratio(sw, *x, *y, "x").c_str());
                        std::printf("\n");
                    }
        }
    std::fflush(stdout);
}

void print_phases(const Sweep& sw, const Results& res, const RunIndex& idx);

// --raw beside kernel variants: the bed's raw round trips/s over each kernel
// variant's RPC/s at the same point. crescent sends the request's frames
// (the raw message's) and answers once all are in, so it cannot beat the
// raw limit, and no ratio of crescent to that kernel variant above this one
// is reachable on this bed at that point (the kernel itself is not held to
// it: its GSO sends a 4 KiB message as one super-packet through veth).
void print_ceiling(const Sweep& sw, const Results& res, const RunIndex& idx) {
    const std::vector<std::string> kern = variants_of(res, is_kernel);
    bool header = false;
    for (const RawPoint& r : res.raws) {
        if (r.round != 1) continue;  // each point once, its rounds together
        const RawRuns raw(res, r);
        if (raw.ok.empty()) continue;
        const double raw_rps = raw.rps();
        for (const std::string& k : kern) {
            const Runs* y = idx.find(r, k);
            const double krps = y ? y->med(&Point::rps) : 0;
            if (krps <= 0) continue;
            if (!header) {
                header = true;
                std::printf("\n# the bed's ceiling over the kernel: knb raw round trips/s / kernel RPC/s at the same "
                            "point, the most crescent (which sends the raw message's frames) can reach over that "
                            "kernel on this bed%s\n", sw.repeat > 1 ? "; medians, and the rounds' own range" : "");
                std::printf("%-6s %-4s %-3s | %8s %13s | %-14s %11s | %8s", "size", "qd", "thr", "frame",
                            "round trips/s", "kernel", "RPC/s", "ceiling");
                if (sw.repeat > 1) std::printf(" | %s", "rounds' ceilings");
                std::printf("\n");
            }
            const std::string frame = frame_label(r);
            std::printf("%-6" PRIu64 " %-4" PRIu64 " %-3" PRIu64 " | %8s %13.0f | %-14s %11.0f | %7.2fx", r.size,
                        r.iodepth, r.threads, frame.c_str(), raw_rps, k.c_str(), krps, raw_rps / krps);
            if (sw.repeat > 1) std::printf(" | %s", rounds_ratio(sw, raw, *y, "x").c_str());
            std::printf("\n");
        }
    }
}

namespace {

// --raw-args holds --touch: the reflector read every frame it answered.
bool raw_touch(const Sweep& sw) { return (" " + sw.raw_args + " ").find(" --touch ") != std::string::npos; }

} // namespace

// Each crescent variant against the raw limit at the same point.
void print_raw_comparison(const Sweep& sw, const Results& res) {
    if (!sw.raw) return;
    const RunIndex idx(res);
    std::printf("\n# crescent against the bed's raw limit (%s bed, %g s per point after %g s warm-up): crescent "
                "RPC/s beside knb raw round trips/s of the frame(s) that carry the request, with iodepth x conns "
                "x threads of them in flight per queue; fraction = RPC/s / round trips/s%s\n",
                sw.bed.c_str(), sw.duration, sw.warmup, medians_note(sw).c_str());
    std::printf("%-6s %-4s %-3s | %-16s %11s | %8s %6s %13s | %8s", "size", "qd", "thr", "crescent", "RPC/s",
                "frame", "raw-qd", "round trips/s", "fraction");
    if (sw.repeat > 1) std::printf(" | %s", "rounds' fractions");
    std::printf("\n");
    bool any_split = false;
    for (const RawPoint& r : res.raws) {
        if (r.round != 1) continue;  // each point once, its rounds together
        const RawRuns raw(res, r);
        const double raw_rps = raw.rps();
        const auto ran_here = [&](const Point& p) { return is_crescent(p) && at_point(p, r); };
        for (const std::string& v : variants_of(res, ran_here)) {
            const Runs* x = idx.find(r, v);
            const double rps = x ? x->med(&Point::rps) : 0;
            char crps[32] = "FAILED", rrps[32] = "FAILED", frac[32] = "-";
            if (x) std::snprintf(crps, sizeof crps, "%.0f", rps);
            if (!raw.ok.empty()) std::snprintf(rrps, sizeof rrps, "%.0f", raw_rps);
            if (x && raw_rps > 0) std::snprintf(frac, sizeof frac, "%.3f", rps / raw_rps);
            const std::string frame = frame_label(r);
            any_split = any_split || r.frames > 1;
            std::printf("%-6" PRIu64 " %-4" PRIu64 " %-3" PRIu64 " | %-16s %11s | %8s %6" PRIu64 " %13s | %8s", r.size,
                        r.iodepth, r.threads, v.c_str(), crps, frame.c_str(), r.raw_iodepth, rrps, frac);
            if (sw.repeat > 1) std::printf(" | %s", x ? rounds_ratio(sw, *x, raw, "").c_str() : "-");
            std::printf("\n");
        }
    }
    if (any_split && sw.resp_size == 0)
        std::printf("xN: the request needs N frames of up to the bed's MTU + 14; the raw round trip is a message of "
                    "N frames each way, answered once all N are in\n");
    if (sw.resp_size != 0)
        std::printf("xN/R: the request's N frame(s) of up to the bed's MTU + 14 one way, answered once all are in "
                    "by one frame of R bytes (--resp-size %" PRIu64 ")\n", sw.resp_size);
    if (raw_touch(sw))
        std::printf("--raw-args --touch: the reflector read every frame before answering, as a TCP receiver's "
                    "checksum must\n");
    print_ceiling(sw, res, idx);
    print_phases(sw, res, idx);
    std::fflush(stdout);
}

// Where a turn's time goes at each point: crescent's engines' sampled phase
// means (EngineStats::phase_ns, from the run documents) beside the raw
// reflector's own split of its loop. poll and flush are the device's part
// (the reflector has the same two), rest lies after the output left; the
// phases between them are the stack's.
namespace {
bool stack_phase(std::string_view name) { return name != "poll" && name != "flush" && name != "rest"; }
} // namespace

void print_phases(const Sweep& sw, const Results& res, const RunIndex& idx) {
    using crescent::EngineStats;
    using Means = std::array<double, EngineStats::kPhases>;
    bool header = false;
    for (const RawPoint& r : res.raws) {
        if (r.round != 1) continue;  // each point once, its rounds' means averaged
        for (const std::string& v : variants_of(res, is_crescent)) {
            const Runs* x = idx.find(r, v);
            if (!x) continue;
            for (const char* side : {"server", "client"}) {
                Means m{};
                unsigned n = 0;
                for (const Point* p : x->ok)
                    if (const std::optional<Means> y = phase_means(p->doc, side)) {
                        for (size_t i = 0; i < m.size(); ++i) m[i] += (*y)[i];
                        ++n;
                    }
                if (n == 0) continue;
                for (double& y : m) y /= n;
                if (!header) {
                    header = true;
                    std::string stack;
                    for (size_t i = 0; i < EngineStats::kPhases; ++i)
                        if (stack_phase(EngineStats::phase_name(i)))
                            stack += (stack.empty() ? "" : " + ") + std::string(EngineStats::phase_name(i));
                    std::printf("\n# where a turn's time goes (%s bed): mean ns of crescent's loop iterations that "
                                "received frames, one in 64 timed (EngineStats::phase_ns%s); poll and flush are the "
                                "device's part, stack = %s\n", sw.bed.c_str(),
                                sw.repeat > 1 ? ", the rounds' means averaged" : "", stack.c_str());
                    std::printf("%-6s %-4s %-3s | %-16s %-6s |", "size", "qd", "thr", "crescent", "side");
                    for (size_t i = 0; i < EngineStats::kPhases; ++i)
                        std::printf(" %7s", std::string(EngineStats::phase_name(i)).c_str());
                    std::printf(" | %7s\n", "stack");
                }
                std::printf("%-6" PRIu64 " %-4" PRIu64 " %-3" PRIu64 " | %-16s %-6s |", r.size, r.iodepth, r.threads,
                            v.c_str(), side);
                double stack_ns = 0;
                for (size_t i = 0; i < EngineStats::kPhases; ++i) {
                    std::printf(" %7.0f", m[i]);
                    if (stack_phase(EngineStats::phase_name(i))) stack_ns += m[i];
                }
                std::printf(" | %7.0f\n", stack_ns);
            }
        }
    }
    for (const std::string& l : res.raw_phases)
        std::printf("raw reflector, %s, over all its points\n", l.c_str());
}

// --kernel-client: a busy kernel client served by each crescent variant
// beside the same client served by the busy kernel (the kernel/busy runs),
// and by the busy kernel behind crescent's steering program.
void print_kernel_client_comparison(const Sweep& sw, const Results& res) {
    if (!sw.kernel_client) return;
    const RunIndex idx(res);
    // The crescent servers, in the order they ran (one whose runs all failed too).
    std::vector<std::string> servers;
    for (const Point& p : res.points)
        if (p.served_by.rfind("crescent/", 0) == 0 &&
            std::find(servers.begin(), servers.end(), p.served_by) == servers.end())
            servers.push_back(p.served_by);
    std::printf("\n# a busy kernel client served by crescent against the same client served by the busy kernel "
                "(%s, %g s per point after %g s warm-up): RPC/s and p99 us by server; %s = the kernel server on the "
                "same veth while crescent's steering program is attached (XDP on the interface: the bed's cost for "
                "kernel flows); ratios = crescent RPC/s / the other's%s\n",
                std::string(name(sw.proto)).c_str(), sw.duration, sw.warmup, kKernelBehindXdp,
                sw.repeat > 1 ? ("; medians of " + std::to_string(sw.repeat) + " interleaved rounds").c_str() : "");
    auto cell = [](const Runs* r) {
        char buf[40];
        if (r) std::snprintf(buf, sizeof buf, "%19.0f %7.1f", r->med(&Point::rps), r->med(&Point::p99));
        else std::snprintf(buf, sizeof buf, "%19s %7s", "FAILED", "-");
        return std::string(buf);
    };
    auto ratio = [](const Runs* a, const Runs* b) {
        char buf[16] = "-";
        const double d = b ? b->med(&Point::rps) : 0;
        if (a && d > 0) std::snprintf(buf, sizeof buf, "%.2fx", a->med(&Point::rps) / d);
        return std::string(buf);
    };
    const std::string behind_xdp = std::string("kernel>") + kKernelBehindXdp;
    for (const std::string& c : servers) {
        std::printf("%-6s %-4s %-3s | %19s %7s | %19s %7s | %19s %7s | %8s %8s\n", "size", "qd", "thr", c.c_str(),
                    "p99", "kernel/busy", "p99", kKernelBehindXdp, "p99", "x kernel", "x +xdp");
        for (uint64_t t : sw.threads)
            for (uint64_t size : sw.sizes)
                for (uint64_t qd : sw.iodepths) {
                    const Runs* pc = idx.find(t, size, qd, "kernel>" + c);
                    const Runs* pk = idx.find(t, size, qd, "kernel/busy");
                    const Runs* px = idx.find(t, size, qd, behind_xdp);
                    std::printf("%-6" PRIu64 " %-4" PRIu64 " %-3" PRIu64 " | %s | %s | %s | %8s %8s\n", size, qd, t,
                                cell(pc).c_str(), cell(pk).c_str(), cell(px).c_str(), ratio(pc, pk).c_str(),
                                ratio(pc, px).c_str());
                }
    }
    std::fflush(stdout);
}

}  // namespace knb::sweep
