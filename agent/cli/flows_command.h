// `ambient-doctor flows`: traces HBONE connections with the eBPF tracer for a while and prints the
// open and recently closed flows (table or JSON).
#pragma once

#include <string>
#include <vector>

#include "cli/flows_render.h"

namespace ad::cli {

int RunFlows(const std::vector<std::string>& args);

}  // namespace ad::cli
