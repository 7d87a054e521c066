// Internal helpers of the ipset reader shared with the nf_tables reader (xt `set` matches
// reference ipsets by kernel index).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "model/result.h"

namespace ad {

// Index -> name of every ipset in the calling thread's netns (header-only list dump). Empty when
// ipset is not supported by the kernel.
Result<std::map<uint16_t, std::string>> ReadIpSetNamesByIndex();

}  // namespace ad
