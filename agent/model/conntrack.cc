#include "model/conntrack.h"

#include <array>

namespace ad {

std::string TcpConntrackStateName(uint8_t state) {
  // enum tcp_conntrack (linux/netfilter/nf_conntrack_tcp.h), as conntrack(8) prints it.
  static constexpr std::array<const char*, 10> kNames = {
      "NONE",       "SYN_SENT", "SYN_RECV",  "ESTABLISHED", "FIN_WAIT",
      "CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE",       "SYN_SENT2"};
  if (state < kNames.size()) return kNames[state];
  return "state " + std::to_string(state);
}

}  // namespace ad
