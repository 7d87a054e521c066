// A source that could not be read, as data (never an exception through the scan).
#pragma once

#include <string>

namespace ad {

struct SourceError {
  std::string source;   // "nft", "iptables-legacy/ipv4", "route", "ipset", "netns", "zds" ...
  std::string message;  // names the syscall, the target and the errno text
  int error_number = 0;
};

}  // namespace ad
