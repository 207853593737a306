// crescent — what the Tcb's source files share (tcb.cpp, tcb_ack.cpp,
// tcb_output.cpp, tcb_timers.cpp): ECN codepoints, the synchronized states.
// Internal to stack/tcp.
#pragma once

#include <cstdint>

#include "stack/tcp/tcb.hpp"

namespace crescent::tcp::detail {

inline constexpr uint8_t kEcnCe = 3, kEcnEct0 = 2;

// RFC 9293 §3.3.2: the states after the handshake's SYNs were exchanged.
inline bool synchronized(State s) {
    switch (s) {
    case State::Closed:
    case State::Listen:
    case State::SynSent:
        return false;
    case State::SynReceived:
    case State::Established:
    case State::FinWait1:
    case State::FinWait2:
    case State::CloseWait:
    case State::Closing:
    case State::LastAck:
    case State::TimeWait:
        return true;
    }
    return false;
}

} // namespace crescent::tcp::detail
