#include "daemon/bypass_feed.h"

#include <chrono>
#include <optional>

#include "flows/flow_joins.h"

namespace ad {

std::optional<std::vector<uint32_t>> BypassNetnsOf(const PublishedResult& result) {
  if (!result.step.usable || result.step.light) return std::nullopt;
  const FlowCheckContext context = FlowContextOf(result.step.snapshot, result.step.analysis.netns);
  return std::vector<uint32_t>(context.ambient_netns.begin(), context.ambient_netns.end());
}

void FollowResultsIntoBypassNetns(const ResultHub& results,
                                  const std::function<void(const std::vector<uint32_t>&)>& apply) {
  uint64_t last = 0;
  std::optional<std::vector<uint32_t>> applied;
  for (;;) {
    // Publishing and Stop() wake it: the timeout only bounds a wait, it is no poll.
    const ResultHub::Since since = results.WaitSince(last, std::chrono::seconds(60));
    if (since.stopped) return;
    if (since.results.empty()) continue;
    last = since.results.back()->sequence;
    // Only the newest matters (the map follows the node's current pods).
    const auto latest = results.Latest();
    if (!latest) continue;
    std::optional<std::vector<uint32_t>> wanted = BypassNetnsOf(*latest);
    if (!wanted || wanted == applied) continue;
    apply(*wanted);
    applied = std::move(wanted);
  }
}

}  // namespace ad
