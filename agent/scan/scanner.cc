#include "scan/scanner.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>
#include <vector>

namespace ad {
namespace {

std::string NodeName(const std::string& configured) {
  if (!configured.empty()) {
    return configured;
  }
  if (const char* env = std::getenv("NODE_NAME"); env != nullptr && env[0] != '\0') {
    return env;
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) {
    return host;
  }
  return "unknown";
}

}  // namespace

NodeSnapshot ScanNode(const ScanOptions& options, NetnsInspector& inspector) {
  const auto started = std::chrono::steady_clock::now();
  NodeSnapshot node;
  node.node_name = NodeName(options.node_name);
  node.taken_at_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();

  std::vector<NetnsRecord> records = DiscoverNetns(options.discovery, &node.errors);
  node.netns.resize(records.size());

  // Each worker owns its thread's netns switches; results land at the discovery index so the
  // output order does not depend on scheduling.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < records.size(); i = next.fetch_add(1)) {
      node.netns[i] = inspector.Inspect(records[i]);
    }
  };
  const size_t workers =
      std::min(records.size(), static_cast<size_t>(std::max(1, options.workers)));
  std::vector<std::jthread> pool;
  pool.reserve(workers);
  for (size_t w = 0; w < workers; ++w) {
    pool.emplace_back(work);
  }
  pool.clear();  // joins

  for (const auto& source : options.node_sources) {
    if (source) source->Collect(node);
  }

  node.scan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return node;
}

}  // namespace ad
