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
    case RedirectState::kOutOfMesh:
      return "out_of_mesh";
  }
  return "not_enrolled";
}

const std::array<RedirectState, kRedirectStateCount>& AllRedirectStates() {
  using enum RedirectState;
  static const std::array<RedirectState, kRedirectStateCount> states = {
      kHostEnrolled,    kMixedBackend, kConflict, kIncomplete,  kListenersMissing,
      kRedirectMissing, kDuplicate,    kHealthy,  kNotEnrolled, kOutOfMesh};
  return states;
}

std::optional<RedirectState> ClassifyRedirectState(const NetnsClassification& netns,
                                                   const std::vector<Finding>& findings,
                                                   const std::set<uint64_t>* out_of_mesh) {
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
  if (has(FindingCode::kPodNotEnrolled) || has(FindingCode::kEnrollmentAnnotationStale)) {
    return RedirectState::kNotEnrolled;
  }
  if (out_of_mesh != nullptr && out_of_mesh->contains(netns.netns_inode)) {
    return RedirectState::kOutOfMesh;
  }
  return RedirectState::kNotEnrolled;
}

std::set<uint64_t> OutOfMeshNetns(const DesiredAnalysis& desired) {
  std::set<uint64_t> inodes;
  if (!desired.judged) return inodes;
  for (const PodStory& story : desired.pods) {
    if (story.desired.state == DesiredState::kNotAmbient && story.judge.judgeable() &&
        story.pairing.netns_inode != 0 && story.pairing.method != PairMethod::kHostNetwork) {
      inodes.insert(story.pairing.netns_inode);
    }
  }
  return inodes;
}

}  // namespace ad
