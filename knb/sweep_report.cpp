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

std::optional<std::array<double, crescent::EngineStats::kPhases>> phase_means(const std::string& doc, const std::string& side) {
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
    d += ",\"runs\":[";
    bool first = true;
    for (const Point& p : res.points) {
        if (p.doc.empty() || !p.served_by.empty()) continue;
        d += (first ? "" : ",\n") + p.doc;
        first = false;
    }
    d += "],\"failed\":[";
    first = true;
    for (const Point& p : res.points) {
        if (p.ok) continue;
        d += std::string(first ? "" : ",") + "{\"variant\":\"" + json_escape(variant(p)) +
             "\",\"msg_size\":" + std::to_string(p.size) + ",\"iodepth\":" + std::to_string(p.iodepth) +
             ",\"threads\":" + std::to_string(p.threads) + ",\"error\":\"" + json_escape(p.error) + "\"}";
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
                 p.doc + "}";
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
                 std::to_string(r.threads) + ",\"ok\":" + (r.ok ? "true" : "false") + ",\"error\":\"" +
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
    std::vector<std::string> cres, kern;
    for (const Point& p : res.points) {
        if (!p.served_by.empty()) continue;  // print_kernel_client_comparison()
        auto& v = p.stack == Stack::Crescent ? cres : kern;
        if (std::find(v.begin(), v.end(), variant(p)) == v.end()) v.push_back(variant(p));
    }
    if (cres.empty() || kern.empty()) return;
    std::map<std::tuple<uint64_t, uint64_t, uint64_t, std::string>, const Point*> at;
    for (const Point& p : res.points)
        if (p.ok) at[{p.threads, p.size, p.iodepth, variant(p)}] = &p;
    std::printf("\n# crescent against kernel TCP, same bed, same knb, same parameters (%s, %g s per point after "
                "%g s warm-up): RPC/s, p50/p99 us; ratio = crescent RPC/s / kernel RPC/s (p99: kernel / "
                "crescent, > 1 = crescent lower)\n",
                std::string(name(sw.proto)).c_str(), sw.duration, sw.warmup);
    for (const std::string& c : cres)
        for (const std::string& k : kern) {
            std::printf("%-6s %-4s %-3s | %-14s %11s %7s %7s | %-14s %11s %7s %7s | %8s %8s\n", "size", "qd",
                        "thr", c.c_str(), "RPC/s", "p50", "p99", k.c_str(), "RPC/s", "p50", "p99", "RPC/s x",
                        "p99 x");
            for (uint64_t t : sw.threads)
                for (uint64_t size : sw.sizes)
                    for (uint64_t qd : sw.iodepths) {
                        auto a = at.find({t, size, qd, c});
                        auto b = at.find({t, size, qd, k});
                        if (a == at.end() || b == at.end()) continue;
                        const Point& x = *a->second;
                        const Point& y = *b->second;
                        std::printf("%-6" PRIu64 " %-4" PRIu64 " %-3" PRIu64 " | %-14s %11.0f %7.1f %7.1f | %-14s "
                                    "%11.0f %7.1f %7.1f | %7.2fx %7.2fx\n",
                                    size, qd, t, "", x.rps, x.p50, x.p99, "", y.rps, y.p50, y.p99,
                                    y.rps > 0 ? x.rps / y.rps : 0.0, x.p99 > 0 ? y.p99 / x.p99 : 0.0);
                    }
        }
    std::fflush(stdout);
}

void print_phases(const Sweep& sw, const Results& res);

// Each crescent variant against the raw limit at the same point.
void print_raw_comparison(const Sweep& sw, const Results& res) {
    if (!sw.raw) return;
    std::printf("\n# crescent against the bed's raw limit (%s bed, %g s per point after %g s warm-up): crescent "
                "RPC/s beside knb raw round trips/s of the frame(s) that carry the request, with iodepth x conns "
                "x threads of them in flight per queue; fraction = RPC/s / round trips/s\n",
                sw.bed.c_str(), sw.duration, sw.warmup);
    std::printf("%-6s %-4s %-3s | %-16s %11s | %8s %6s %13s | %8s\n", "size", "qd", "thr", "crescent", "RPC/s",
                "frame", "raw-qd", "round trips/s", "fraction");
    bool any_split = false;
    for (const RawPoint& r : res.raws)
        for (const Point& p : res.points) {
            if (p.stack != Stack::Crescent || !p.served_by.empty() || p.size != r.size || p.iodepth != r.iodepth ||
                p.threads != r.threads)
                continue;
            char crps[32] = "FAILED", rrps[32] = "FAILED", frac[32] = "-";
            if (p.ok) std::snprintf(crps, sizeof crps, "%.0f", p.rps);
            if (r.ok) std::snprintf(rrps, sizeof rrps, "%.0f", r.rps);
            if (p.ok && r.ok && r.rps > 0) std::snprintf(frac, sizeof frac, "%.3f", p.rps / r.rps);
            const std::string frame = frame_label(r);
            any_split = any_split || r.frames > 1;
            std::printf("%-6" PRIu64 " %-4" PRIu64 " %-3" PRIu64 " | %-16s %11s | %8s %6" PRIu64 " %13s | %8s\n",
                        r.size, r.iodepth, r.threads, variant(p).c_str(), crps, frame.c_str(), r.raw_iodepth, rrps,
                        frac);
        }
    if (any_split && sw.resp_size == 0)
        std::printf("xN: the request needs N frames of up to the bed's MTU + 14; the raw round trip is a message of "
                    "N frames each way, answered once all N are in\n");
    if (sw.resp_size != 0)
        std::printf("xN/R: the request's N frame(s) of up to the bed's MTU + 14 one way, answered once all are in "
                    "by one frame of R bytes (--resp-size %" PRIu64 ")\n", sw.resp_size);
    print_phases(sw, res);
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

void print_phases(const Sweep& sw, const Results& res) {
    using crescent::EngineStats;
    bool header = false;
    for (const RawPoint& r : res.raws)
        for (const Point& p : res.points) {
            if (p.stack != Stack::Crescent || !p.served_by.empty() || !p.ok || p.size != r.size ||
                p.iodepth != r.iodepth || p.threads != r.threads)
                continue;
            for (const char* side : {"server", "client"}) {
                const auto m = phase_means(p.doc, side);
                if (!m) continue;
                if (!header) {
                    header = true;
                    std::string stack;
                    for (size_t i = 0; i < EngineStats::kPhases; ++i)
                        if (stack_phase(EngineStats::phase_name(i)))
                            stack += (stack.empty() ? "" : " + ") + std::string(EngineStats::phase_name(i));
                    std::printf("\n# where a turn's time goes (%s bed): mean ns of crescent's loop iterations that "
                                "received frames, one in 64 timed (EngineStats::phase_ns); poll and flush are the "
                                "device's part, stack = %s\n", sw.bed.c_str(), stack.c_str());
                    std::printf("%-6s %-4s %-3s | %-16s %-6s |", "size", "qd", "thr", "crescent", "side");
                    for (size_t i = 0; i < EngineStats::kPhases; ++i)
                        std::printf(" %7s", std::string(EngineStats::phase_name(i)).c_str());
                    std::printf(" | %7s\n", "stack");
                }
                std::printf("%-6" PRIu64 " %-4" PRIu64 " %-3" PRIu64 " | %-16s %-6s |", p.size, p.iodepth, p.threads,
                            variant(p).c_str(), side);
                double stack_ns = 0;
                for (size_t i = 0; i < EngineStats::kPhases; ++i) {
                    std::printf(" %7.0f", (*m)[i]);
                    if (stack_phase(EngineStats::phase_name(i))) stack_ns += (*m)[i];
                }
                std::printf(" | %7.0f\n", stack_ns);
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
    std::map<std::tuple<uint64_t, uint64_t, uint64_t, std::string>, const Point*> at;
    std::vector<std::string> servers;  // crescent variants, in the order they ran
    for (const Point& p : res.points) {
        if (p.served_by.empty() && !(p.stack == Stack::Kernel && p.wait == Wait::Busy)) continue;
        const std::string by = p.served_by.empty() ? variant(p) : p.served_by;
        if (p.ok) at[{p.threads, p.size, p.iodepth, by}] = &p;
        // A variant whose runs all failed still gets its rows (FAILED cells).
        if (by.rfind("crescent/", 0) == 0 && std::find(servers.begin(), servers.end(), by) == servers.end())
            servers.push_back(by);
    }
    std::printf("\n# a busy kernel client served by crescent against the same client served by the busy kernel "
                "(%s, %g s per point after %g s warm-up): RPC/s and p99 us by server; %s = the kernel server on the same "
                "veth while crescent's steering program is attached (XDP on the interface: the bed's cost for "
                "kernel flows); ratios = crescent RPC/s / the other's\n",
                std::string(name(sw.proto)).c_str(), sw.duration, sw.warmup, kKernelBehindXdp);
    auto cell = [](const Point* p) {
        char buf[40];
        if (p) std::snprintf(buf, sizeof buf, "%19.0f %7.1f", p->rps, p->p99);
        else std::snprintf(buf, sizeof buf, "%19s %7s", "FAILED", "-");
        return std::string(buf);
    };
    auto ratio = [](const Point* a, const Point* b) {
        char buf[16] = "-";
        if (a && b && b->rps > 0) std::snprintf(buf, sizeof buf, "%.2fx", a->rps / b->rps);
        return std::string(buf);
    };
    for (const std::string& c : servers) {
        std::printf("%-6s %-4s %-3s | %19s %7s | %19s %7s | %19s %7s | %8s %8s\n", "size", "qd", "thr", c.c_str(),
                    "p99", "kernel/busy", "p99", kKernelBehindXdp, "p99", "x kernel", "x +xdp");
        for (uint64_t t : sw.threads)
            for (uint64_t size : sw.sizes)
                for (uint64_t qd : sw.iodepths) {
                    auto find = [&](const std::string& by) {
                        auto it = at.find({t, size, qd, by});
                        return it == at.end() ? nullptr : it->second;
                    };
                    const Point* pc = find(c);
                    const Point* pk = find("kernel/busy");
                    const Point* px = find(kKernelBehindXdp);
                    std::printf("%-6" PRIu64 " %-4" PRIu64 " %-3" PRIu64 " | %s | %s | %s | %8s %8s\n", size, qd, t,
                                cell(pc).c_str(), cell(pk).c_str(), cell(px).c_str(), ratio(pc, pk).c_str(),
                                ratio(pc, px).c_str());
                }
    }
    std::fflush(stdout);
}

}  // namespace knb::sweep
