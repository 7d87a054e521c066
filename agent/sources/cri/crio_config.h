// CRI-O's own configuration, read over its CRI socket: CRI-O serves HTTP inspect endpoints beside
// gRPC on the same unix socket (`crio status config` is GET /config). Only its CNI config
// directory is taken, because its verbose CRI Status names none.
#pragma once

#include <chrono>
#include <string>

#include "model/result.h"

namespace ad::cri {

// GET /config on CRI-O's unix socket (`socket_path`, no scheme), bounded in time and size, then
// ParseCrioNetworkDir (runtime_status.h): [crio.network] network_dir, empty when absent. GET only:
// CRI-O's inspect endpoints change nothing.
Result<std::string> ReadCrioNetworkDir(const std::string& socket_path,
                                       std::chrono::milliseconds timeout);

}  // namespace ad::cri
