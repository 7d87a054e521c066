#include <gtest/gtest.h>

#include "model/rule.h"

TEST(Smoke, MatchesCompareSemantically) {
  ad::Match a{ad::MatchKind::kMark, false, 0x539, 0xfff, ""};
  ad::Match b = a;
  EXPECT_EQ(a, b);
}
