// knb — the command line of `knb server` and `knb client` (Luna §3.1, §8.1:
// threads, long-lived connections, message size, iodepth, latency CDF).
//
// parse() never exits and never prints: it fills Options or returns one line
// naming the problem, so it is unit-tested as it is (tests/unit/knb_options_test).
// The same Options, with `role` set, describe one side of one run; the sweep
// builds them for every point of its grid and hands them to child processes
// as arguments (to_args()), so a sweep point and a hand-typed run are the same.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <crescent/runtime.hpp>

namespace knb {

enum class Role : uint8_t { Server, Client };
enum class Stack : uint8_t { Crescent, Kernel };
// Crescent's dispatch, both sides: zero-copy inline callbacks, zero-copy
// batch (epoll-like), batch with the copy API (Conn::read/write). Kernel
// sockets always copy (read/write); their mode is reported as "copy".
enum class Mode : uint8_t { Inline, Batch, Copy };
enum class Proto : uint8_t { Rpc, Echo };
// Kernel threads: sleep in epoll_wait (Luna's baseline) or spin on it (a
// fair, tuned kernel).
enum class Wait : uint8_t { Block, Busy };

std::string_view name(Stack s);
std::string_view name(Mode m);
std::string_view name(Proto p);
std::string_view name(Wait w);
bool parse_stack(std::string_view s, Stack* out);
bool parse_mode(std::string_view s, Mode* out);
bool parse_proto(std::string_view s, Proto* out);
bool parse_wait(std::string_view s, Wait* out);
// "0-3,6" -> {0,1,2,3,6}; false on a malformed list, a CPU above 1023 or a repeat.
bool parse_cpu_list(std::string_view s, std::vector<unsigned>* out);

inline constexpr uint16_t kDefaultPort = 7300;
inline constexpr uint64_t kMaxMessage = 1u << 20;  // --msg-size / --resp-size bound (1 MiB)

struct Options {
    Role role = Role::Client;
    Stack stack = Stack::Crescent;
    Mode mode = Mode::Inline;
    bool mode_given = false;
    Proto proto = Proto::Rpc;
    Wait kernel_wait = Wait::Busy;
    unsigned threads = 1;
    std::vector<unsigned> cpus;          // empty: the process's affinity as it is
    uint16_t port = kDefaultPort;
    bool stats = false;                  // per-engine counters on stderr at the end
    // Crescent connections' options (--cc, --keepalive) live in rt.engine.conn:
    // the engine applies them to accepted connections, stream_options() to
    // connect()ed ones.

    // Crescent device and addressing (--iface / --eal ...): RuntimeOptions.
    crescent::RuntimeOptions rt;

    // Client.
    std::string server;                  // server IPv4 address
    uint64_t msg_size = 64;
    uint64_t resp_size = 64;
    bool resp_given = false;
    uint32_t iodepth = 1;                // calls in flight per connection
    unsigned conns = 1;                  // per client-thread/server-thread pair
    unsigned server_threads = 0;         // 0: ask the server (rpc); echo: 1
    double duration = 10;                // seconds measured
    double warmup = 1;                   // seconds before
    double rate = 0;                     // RPC/s in all (open loop); 0: closed loop
    std::string json;                    // write the result here
    std::string label;                   // free text carried into the result
    int progress = -1;                   // -1: when stderr is a terminal; 0/1 forced
    bool verify_full = false;            // --verify full: every byte, not the 8 at each end
};

// argv[0] is the role ("server" / "client"). false + *err (one line).
bool parse(int argc, const char* const* argv, Options* out, std::string* err);
// The arguments that parse() turns back into the same Options (role first).
std::vector<std::string> to_args(const Options& o);
const char* usage();

}  // namespace knb
