// knb — runtime start-up and the counters both sides report (see setup.hpp).
#include "knb/setup.hpp"

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "knb/proto.hpp"

namespace knb {

using namespace crescent;

std::unique_ptr<Runtime> start_runtime(const Options& o, std::string* err) {
    if (!o.cpus.empty()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (unsigned c : o.cpus) CPU_SET(c, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            *err = "--cpus: cannot run on the CPUs asked for: " + std::string(std::strerror(errno));
            return nullptr;
        }
    }
    RuntimeOptions rt = o.rt;
    rt.cores = o.threads;
    if (o.mode != Mode::Inline) rt.engine.mode = DispatchMode::Batch;
    if (o.stack == Stack::Kernel) {
        rt.kernel_only = true;
        rt.engine.kernel_wait = o.kernel_wait == Wait::Block ? KernelWait::Block : KernelWait::Busy;
        rt.engine.mode = DispatchMode::Batch;
    } else if (o.role == Role::Server) {
        rt.listen_ports.push_back(o.port);
    }
    if (o.role == Role::Client) {
        // Room for every request in flight twice over (request + response) beyond the default.
        const uint64_t mesh = o.server_threads ? o.server_threads : 1;
        uint64_t need = 4 * (o.msg_size + o.resp_size + 16384) * o.iodepth * o.conns * mesh;
        rt.arena_bytes = std::max<uint64_t>(rt.arena_bytes, std::min<uint64_t>(need, uint64_t(1) << 30));
    }
    return Runtime::start(rt, err);
}

rpc::Transport transport_of(Stack s) {
    return s == Stack::Crescent ? rpc::Transport::Crescent : rpc::Transport::Kernel;
}

rpc::StreamOptions stream_options(const Options& o) {
    rpc::StreamOptions so;
    so.kernel_reuse_port = true;
    so.copy_api = o.stack == Stack::Crescent && o.mode == Mode::Copy;
    so.conn = o.rt.engine.conn;  // --cc, --keepalive (accepted connections: the engine's EngineConfig::conn)
    return so;
}

uint64_t engine_drops(const EngineStats& s) {
    uint64_t d = s.tx_overflow + s.tx_no_mbuf + s.tx_too_large + s.drop_no_route + s.drop_neigh_pending +
                 s.drop_neigh_failed + s.rx_no_memory + s.rx_multiseg + s.tcp_drop_wrong_dst +
                 s.tcp_drop_backlog_full;
    for (uint64_t p : s.parse_drops) d += p;
    return d;
}

PhaseSums PhaseSums::of(const EngineStats& s) {
    PhaseSums p;
    p.samples = s.phase_samples;
    p.ns = s.phase_ns;
    return p;
}

PhaseSums& PhaseSums::operator+=(const PhaseSums& o) {
    samples += o.samples;
    for (size_t i = 0; i < ns.size(); ++i) ns[i] += o.ns[i];
    return *this;
}

void Published::store_phases(const PhaseSums& p) {
    phase_samples.store(p.samples, std::memory_order_relaxed);
    for (size_t i = 0; i < p.ns.size(); ++i) phase_ns[i].store(p.ns[i], std::memory_order_relaxed);
}

PhaseSums Published::phases() const {
    PhaseSums p;
    p.samples = phase_samples.load(std::memory_order_relaxed);
    for (size_t i = 0; i < p.ns.size(); ++i) p.ns[i] = phase_ns[i].load(std::memory_order_relaxed);
    return p;
}

std::string PhaseSums::to_kv() const {
    std::string m = "phase_samples=" + std::to_string(samples);
    for (size_t i = 0; i < ns.size(); ++i)
        m += ";phase_" + std::string(EngineStats::phase_name(i)) + "_ns=" + std::to_string(ns[i]);
    return m;
}

bool PhaseSums::from_kv(std::string_view kv) {
    if (!kv_u64(kv, "phase_samples", &samples)) return false;
    for (size_t i = 0; i < ns.size(); ++i)
        if (!kv_u64(kv, "phase_" + std::string(EngineStats::phase_name(i)) + "_ns", &ns[i])) return false;
    return true;
}

PhaseSums PhaseSums::since(const PhaseSums& earlier) const {
    auto minus = [](uint64_t a, uint64_t b) { return a >= b ? a - b : 0; };
    PhaseSums d;
    d.samples = minus(samples, earlier.samples);
    for (size_t i = 0; i < ns.size(); ++i) d.ns[i] = minus(ns[i], earlier.ns[i]);
    return d;
}

uint64_t process_cpu_ns() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto ns = [](const timeval& t) { return uint64_t(t.tv_sec) * 1'000'000'000u + uint64_t(t.tv_usec) * 1000u; };
    return ns(ru.ru_utime) + ns(ru.ru_stime);
}

}  // namespace knb
