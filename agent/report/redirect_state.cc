#include "report/redirect_state.h"

#include <set>

namespace ad {

std::string_view RedirectStateName(RedirectState state) {
  switch (state) {
    case RedirectState::kHostEnrolled:
      return "host_enrolled";
    case RedirectState::kMixedBackend:
      return "mixed_backend";
    case RedirectState::kConflict:
      return "conflict";
    case RedirectState::kIncomplete:
      return "incomplete";
    case RedirectState::kListenersMissing:
      return "listeners_missing";
    case RedirectState::kRedirectMissing:
      return "redirect_missing";
    case RedirectState::kDuplicate:
      return "duplicate";
    case RedirectState::kHealthy:
      return "healthy";
    case RedirectState::kNotEnrolled:
      return "not_enrolled";
  }
  return "not_enrolled";
}

const std::array<RedirectState, kRedirectStateCount>& AllRedirectStates() {
  using enum RedirectState;
  static const std::array<RedirectState, kRedirectStateCount> states = {
      kHostEnrolled,    kMixedBackend, kConflict, kIncomplete, kListenersMissing,
      kRedirectMissing, kDuplicate,    kHealthy,  kNotEnrolled};
  return states;
}

std::optional<RedirectState> ClassifyRedirectState(const NetnsClassification& netns,
                                                   const std::vector<Finding>& findings) {
  std::set<FindingCode> codes;
  for (const Finding& f : findings) {
    if (f.netns_inode == netns.netns_inode) codes.insert(f.code);
  }
  const auto has = [&codes](FindingCode code) { return codes.contains(code); };

  if (has(FindingCode::kHostNetnsEnrolled)) return RedirectState::kHostEnrolled;
  if (netns.is_host) return std::nullopt;
  // Only an unreadable netns with no rule-based finding is left uncounted: a partly readable one
  // may still have shown enough for a state.
  if (has(FindingCode::kMixedBackend)) return RedirectState::kMixedBackend;
  if (has(FindingCode::kDataplaneConflict) || netns.mode == DataplaneMode::kConflict) {
    return RedirectState::kConflict;
  }
  if (has(FindingCode::kIncompleteRuleset)) return RedirectState::kIncomplete;
  if (has(FindingCode::kZtunnelListenersMissing)) return RedirectState::kListenersMissing;
  if (has(FindingCode::kRedirectMissing)) return RedirectState::kRedirectMissing;
  if (has(FindingCode::kDuplicateRule)) return RedirectState::kDuplicate;
  if (has(FindingCode::kNetnsUnreadable)) return std::nullopt;
  if (netns.mode == DataplaneMode::kAmbient) return RedirectState::kHealthy;
  return RedirectState::kNotEnrolled;
}

}  // namespace ad
