// The redirect drift state of a pod netns (ambient_doctor_pods{redirect_state}): each state and
// the precedence when several findings apply to one netns.
#include "report/redirect_state.h"

#include <gtest/gtest.h>

#include <set>

namespace ad {
namespace {

constexpr uint64_t kInode = 4026532000;

NetnsClassification Pod(DataplaneMode mode = DataplaneMode::kAmbient) {
  NetnsClassification netns;
  netns.netns_inode = kInode;
  netns.netns_path = "/run/netns/pod";
  netns.mode = mode;
  return netns;
}

Finding On(FindingCode code, uint64_t inode = kInode) {
  Finding finding;
  finding.code = code;
  finding.severity = FindingCodeDetails(code).severity;
  finding.netns_inode = inode;
  return finding;
}

std::optional<RedirectState> StateOf(const NetnsClassification& netns,
                                     std::vector<FindingCode> codes) {
  std::vector<Finding> findings;
  for (FindingCode code : codes) findings.push_back(On(code));
  return ClassifyRedirectState(netns, findings);
}

TEST(RedirectState, NamesAreStableAndUnique) {
  std::set<std::string_view> names;
  for (RedirectState s : AllRedirectStates()) names.insert(RedirectStateName(s));
  EXPECT_EQ(names,
            (std::set<std::string_view>{"healthy", "duplicate", "mixed_backend", "incomplete",
                                        "conflict", "host_enrolled", "listeners_missing",
                                        "redirect_missing", "not_enrolled", "out_of_mesh"}));
}

TEST(RedirectState, OutOfMeshOnlyWhenTheApiSaysThePodIsNotMeantToBeInTheMesh) {
  using enum FindingCode;
  const std::set<uint64_t> out = {kInode};
  const std::vector<Finding> none;
  EXPECT_EQ(ClassifyRedirectState(Pod(DataplaneMode::kNone), none, &out),
            RedirectState::kOutOfMesh);
  EXPECT_EQ(ClassifyRedirectState(Pod(DataplaneMode::kNone), none, nullptr),
            RedirectState::kNotEnrolled)
      << "without a judged API source nothing says whether it should be";
  const std::set<uint64_t> other = {kInode + 1};
  EXPECT_EQ(ClassifyRedirectState(Pod(DataplaneMode::kNone), none, &other),
            RedirectState::kNotEnrolled);
  EXPECT_EQ(ClassifyRedirectState(Pod(DataplaneMode::kNone), {On(kPodNotEnrolled)}, nullptr),
            RedirectState::kNotEnrolled);
  EXPECT_EQ(ClassifyRedirectState(Pod(), none, &out), RedirectState::kHealthy)
      << "redirected pods keep their rule states (POD_ENROLLED_AGAINST_INTENT says the rest)";
}

TEST(RedirectState, OutOfMeshNetnsAreThoseOfJudgedPodsNotMeantForAmbient) {
  DesiredAnalysis desired;
  desired.judged = true;
  PodStory out;
  out.desired.state = DesiredState::kNotAmbient;
  out.pairing.method = PairMethod::kCriSandbox;
  out.pairing.netns_inode = 11;
  PodStory in = out;
  in.desired.state = DesiredState::kAmbient;
  in.pairing.netns_inode = 12;
  PodStory young = out;
  young.judge.block = JudgeBlock::kYoung;
  young.pairing.netns_inode = 13;
  PodStory host = out;
  host.pairing.method = PairMethod::kHostNetwork;
  host.pairing.netns_inode = 14;
  desired.pods = {out, in, young, host};
  EXPECT_EQ(OutOfMeshNetns(desired), (std::set<uint64_t>{11}));
  desired.judged = false;
  EXPECT_TRUE(OutOfMeshNetns(desired).empty());
}

TEST(RedirectState, EachStateFromItsFinding) {
  using enum FindingCode;
  EXPECT_EQ(StateOf(Pod(), {}), RedirectState::kHealthy);
  EXPECT_EQ(StateOf(Pod(DataplaneMode::kNone), {}), RedirectState::kNotEnrolled);
  EXPECT_EQ(StateOf(Pod(DataplaneMode::kSidecar), {}), RedirectState::kNotEnrolled)
      << "a sidecar pod is not in the ambient mesh";
  EXPECT_EQ(StateOf(Pod(), {kDuplicateRule}), RedirectState::kDuplicate);
  EXPECT_EQ(StateOf(Pod(), {kMixedBackend}), RedirectState::kMixedBackend);
  EXPECT_EQ(StateOf(Pod(), {kIncompleteRuleset}), RedirectState::kIncomplete);
  EXPECT_EQ(StateOf(Pod(), {kDataplaneConflict}), RedirectState::kConflict);
  EXPECT_EQ(StateOf(Pod(DataplaneMode::kConflict), {}), RedirectState::kConflict);
  EXPECT_EQ(StateOf(Pod(), {kZtunnelListenersMissing}), RedirectState::kListenersMissing);
  EXPECT_EQ(StateOf(Pod(DataplaneMode::kNone), {kRedirectMissing}),
            RedirectState::kRedirectMissing);

  NetnsClassification host = Pod();
  host.is_host = true;
  EXPECT_EQ(StateOf(host, {kHostNetnsEnrolled, kIncompleteRuleset}), RedirectState::kHostEnrolled);
}

TEST(RedirectState, FindingsThatDoNotChangeTheRedirectKeepItHealthy) {
  using enum FindingCode;
  EXPECT_EQ(StateOf(Pod(), {kBackendDrift, kProbeSnatMissing, kZdsPending, kZdsStall,
                            kMultipleZtunnels, kZtunnelStaleWorkload}),
            RedirectState::kHealthy);
}

TEST(RedirectState, PrecedencePutsCausesBeforeSymptoms) {
  using enum FindingCode;
  EXPECT_EQ(StateOf(Pod(), {kDuplicateRule, kIncompleteRuleset, kMixedBackend}),
            RedirectState::kMixedBackend);
  EXPECT_EQ(StateOf(Pod(), {kIncompleteRuleset, kDataplaneConflict}), RedirectState::kConflict);
  EXPECT_EQ(StateOf(Pod(), {kZtunnelListenersMissing, kIncompleteRuleset}),
            RedirectState::kIncomplete);
  EXPECT_EQ(StateOf(Pod(), {kDuplicateRule, kZtunnelListenersMissing}),
            RedirectState::kListenersMissing);
  EXPECT_EQ(StateOf(Pod(), {kDuplicateRule, kRedirectMissing}), RedirectState::kRedirectMissing);
  // Every pair follows the documented order: the earlier state wins.
  const auto& states = AllRedirectStates();
  const std::vector<FindingCode> code_of = {
      kHostNetnsEnrolled,       kMixedBackend,    kDataplaneConflict, kIncompleteRuleset,
      kZtunnelListenersMissing, kRedirectMissing, kDuplicateRule};
  for (size_t i = 0; i < code_of.size(); ++i) {
    for (size_t j = i + 1; j < code_of.size(); ++j) {
      EXPECT_EQ(StateOf(Pod(), {code_of[j], code_of[i]}), states[i])
          << RedirectStateName(states[i]) << " over " << RedirectStateName(states[j]);
    }
  }
}

TEST(RedirectState, OnlyFindingsOfThisNetnsCount) {
  const std::vector<Finding> findings = {On(FindingCode::kMixedBackend, kInode + 1)};
  EXPECT_EQ(ClassifyRedirectState(Pod(), findings), RedirectState::kHealthy);
}

TEST(RedirectState, UncountedNetns) {
  NetnsClassification host = Pod(DataplaneMode::kNone);
  host.is_host = true;
  EXPECT_EQ(StateOf(host, {}), std::nullopt) << "the host is no pod unless it is enrolled";
  EXPECT_EQ(StateOf(Pod(), {FindingCode::kNetnsUnreadable}), std::nullopt)
      << "healthy is not claimed for a netns that was not fully read";
  EXPECT_EQ(StateOf(Pod(), {FindingCode::kNetnsUnreadable, FindingCode::kIncompleteRuleset}),
            RedirectState::kIncomplete)
      << "what was read still shows a broken redirect";
}

}  // namespace
}  // namespace ad
