// Internal helpers of the ipset reader shared with the nf_tables reader (xt `set` matches
// reference ipsets by kernel index).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "model/result.h"

namespace ad {

// Index -> name of every ipset in the calling thread's netns (header-only list dump). Empty when
// ipset is not supported by the kernel.
Result<std::map<uint16_t, std::string>> ReadIpSetNamesByIndex();

// Index -> name for the rule readers (nf_tables xt `set` matches and legacy `-m set`): lists the
// ipsets of the calling thread's netns once, on first use, and answers "" for unknown indexes.
class IpSetNameCache {
 public:
  std::string Name(uint16_t index);

 private:
  std::optional<std::map<uint16_t, std::string>> names_;
};

}  // namespace ad
