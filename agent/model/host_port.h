// HOST:PORT text as the agent takes it on its command line (--api-address, --metrics-address):
// one parser, so every flag accepts and refuses the same spellings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "model/result.h"

namespace ad {

// An IPv4 literal or a bracketed IPv6 literal, and a port. Host names are refused: a listener
// binds an address, and a name that resolves differently later would move it silently.
struct HostPort {
  std::string host;  // without brackets
  int family = 0;    // AF_INET or AF_INET6
  uint16_t port = 0;

  // "1.2.3.4:80" or "[::1]:80".
  std::string ToString() const;
};

// Whether port 0 is a port: listeners may take it to let the kernel pick a free port (which the
// daemon then logs; labs and tests run several daemons side by side), addresses to connect to
// may not.
enum class PortZero { kRefuse, kPickFree };

// Ports 1-65535 (and 0 with kPickFree). The error says what is wrong and shows both spellings.
Result<HostPort> ParseHostPort(std::string_view text, PortZero zero = PortZero::kRefuse);

}  // namespace ad
