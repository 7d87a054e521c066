// Policy routing and addresses of the netns the calling thread is in (rtnetlink dumps, read only).
#pragma once

#include <cstdint>
#include <vector>

#include "model/result.h"
#include "model/snapshot.h"

namespace ad {

// ip rules (v4 + v6), routes of `tables` (Istio uses 100), all interface addresses, and whether
// IPv6 is disabled on lo.
Result<RoutingState> ReadRouting(const std::vector<uint32_t>& tables);

}  // namespace ad
