#include "model/host_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>

namespace ad {

std::string HostPort::ToString() const {
  const std::string port_text = std::to_string(port);
  return family == AF_INET6 ? "[" + host + "]:" + port_text : host + ":" + port_text;
}

namespace {

// The port digits as a number, or -1 (empty, not all digits, more than 5 digits).
int PortNumber(std::string_view digits) {
  if (digits.empty() || digits.size() > 5) return -1;
  int port = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    port = port * 10 + (c - '0');
  }
  return port;
}

}  // namespace

Result<HostPort> ParseHostPort(std::string_view text, PortZero zero) {
  const std::string shown(text);
  auto invalid = [&shown](const std::string& why) {
    return SourceError{SourceKind::kApi,
                       "address '" + shown + "': " + why +
                           " (give IPV4:PORT or [IPV6]:PORT, e.g. 0.0.0.0:9978 or [::]:9978)",
                       EINVAL};
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return invalid("no port");
  const int lowest = zero == PortZero::kPickFree ? 0 : 1;
  const int port = PortNumber(text.substr(colon + 1));
  if (port < lowest || port > 65535) {
    return invalid("the port is not a number from " + std::to_string(lowest) + " to 65535");
  }
  HostPort parsed{.host = std::string(text.substr(0, colon)), .port = static_cast<uint16_t>(port)};
  const bool bracketed =
      parsed.host.size() >= 2 && parsed.host.front() == '[' && parsed.host.back() == ']';
  if (bracketed) parsed.host = parsed.host.substr(1, parsed.host.size() - 2);
  in6_addr v6{};
  in_addr v4{};
  if (bracketed && ::inet_pton(AF_INET6, parsed.host.c_str(), &v6) == 1) {
    parsed.family = AF_INET6;
  } else if (!bracketed && ::inet_pton(AF_INET, parsed.host.c_str(), &v4) == 1) {
    parsed.family = AF_INET;
  } else if (!bracketed && parsed.host.find(':') != std::string::npos) {
    return invalid("an IPv6 address needs brackets");
  } else {
    return invalid("the host is not an IP address literal");
  }
  return parsed;
}

}  // namespace ad
