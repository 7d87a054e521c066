// CompareVersions: numeric, component by component; garbage gives no order (no root).
#include <gtest/gtest.h>

#include "model/version.h"

namespace ad {
namespace {

TEST(CompareVersions, ComponentsCompareAsNumbers) {
  EXPECT_LT(*CompareVersions("1.0.6", "1.1.0"), 0);
  EXPECT_GT(*CompareVersions("1.1.0", "1.0.6"), 0);
  EXPECT_GT(*CompareVersions("1.0.10", "1.0.9"), 0);  // not text order
  EXPECT_LT(*CompareVersions("0.9.8", "1.0.6"), 0);
  EXPECT_EQ(*CompareVersions("1.0.6", "1.0.6"), 0);
}

TEST(CompareVersions, MissingComponentsCountAsZero) {
  EXPECT_EQ(*CompareVersions("1.1", "1.1.0"), 0);
  EXPECT_GT(*CompareVersions("1.1.5.1", "1.1.5"), 0);  // a stable release of 1.1.5
  EXPECT_LT(*CompareVersions("1", "1.0.1"), 0);
}

TEST(CompareVersions, GarbageHasNoOrder) {
  for (const char* bad : {"", "garbage", "1..6", ".1", "1.", "1.0.6-2", "1.0.6+deb12u2", "v1.0",
                          "1.0.1234567890", "1.2.3.4.5.6.7.8.9", " 1.0"}) {
    EXPECT_FALSE(CompareVersions(bad, "1.0.6").has_value()) << bad;
    EXPECT_FALSE(CompareVersions("1.0.6", bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace ad
