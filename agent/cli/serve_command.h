// `ambient-doctor serve`: the node daemon (ServeApp) configured from its flags.
#pragma once

#include <optional>
#include <string>

#include "cli/command_common.h"
#include "metrics/http_server.h"
#include "model/result.h"

namespace ad::cli {

// --metrics-address: "off" (nullopt), or HOST:PORT as --api-address takes it (ParseHostPort: an
// IPv4 literal or a bracketed IPv6 one, a port from 1 to 65535, or 0 to let the kernel pick a
// free one); a clear error otherwise.
Result<std::optional<HttpServerOptions>> ParseMetricsAddress(const std::string& text);

}  // namespace ad::cli
