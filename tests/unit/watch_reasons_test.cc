// Dirty reasons are stable names (they appear in logs and metric labels) and compose as bit sets.
#include <gtest/gtest.h>

#include "sources/watch/change_monitor.h"

namespace ad::watch {
namespace {

TEST(WatchReasonsTest, EveryReasonHasItsStableName) {
  EXPECT_EQ(DirtyReasonName(DirtyReason::kNftCommit), "nft-commit");
  EXPECT_EQ(DirtyReasonName(DirtyReason::kRoute), "route");
  EXPECT_EQ(DirtyReasonName(DirtyReason::kRule), "rule");
  EXPECT_EQ(DirtyReasonName(DirtyReason::kLegacyChanged), "legacy-changed");
  EXPECT_EQ(DirtyReasonName(DirtyReason::kOverflow), "overflow");
  EXPECT_EQ(DirtyReasonName(DirtyReason::kAdded), "added");
  EXPECT_EQ(DirtyReasonName(DirtyReason::kRemoved), "removed");
}

TEST(WatchReasonsTest, ReasonSetsDescribeInDeclarationOrder) {
  const DirtyReasons reasons = ReasonBit(DirtyReason::kRule) | ReasonBit(DirtyReason::kNftCommit) |
                               ReasonBit(DirtyReason::kOverflow);
  EXPECT_TRUE(HasReason(reasons, DirtyReason::kRule));
  EXPECT_FALSE(HasReason(reasons, DirtyReason::kRoute));
  EXPECT_EQ(DescribeReasons(reasons), "nft-commit,rule,overflow");
  EXPECT_EQ(DescribeReasons(0), "");
}

}  // namespace
}  // namespace ad::watch
