// The flag parser's layering and flags files (--config, the lab's --lab-prefix file).
#include "cli/flags.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace ad::cli {
namespace {

FlagSet ScanLikeFlags() {
  FlagSet flags("report", "[flags]", "test");
  flags.Add({.name = "netns-dir", .repeatable = true, .value_name = "DIR"});
  flags.Add({.name = "host-netns", .value_name = "PATH"});
  flags.Add({.name = "no-zds", .takes_value = false});
  return flags;
}

TEST(Flags, LaterParseOverridesEarlierLayer) {
  FlagSet flags = ScanLikeFlags();
  ASSERT_FALSE(flags.Parse({"--netns-dir", "/a", "--netns-dir", "/b", "--host-netns", "/h1"}));
  ASSERT_FALSE(flags.Parse({"--netns-dir", "/c", "--host-netns=/h2"}));
  EXPECT_EQ(flags.GetAll("netns-dir"), (std::vector<std::string>{"/c"}));
  EXPECT_EQ(flags.Get("host-netns"), "/h2");
  ASSERT_FALSE(flags.Parse({"--no-zds"}));
  EXPECT_EQ(flags.GetAll("netns-dir"), (std::vector<std::string>{"/c"})) << "untouched: kept";
  EXPECT_TRUE(flags.Has("no-zds"));
  EXPECT_FALSE(flags.EmptyCopy().Has("no-zds"));
}

TEST(Flags, PositionalWordsAreNamedInAnError) {
  FlagSet flags = ScanLikeFlags();
  ASSERT_FALSE(flags.Parse({"--no-zds"}));
  EXPECT_FALSE(flags.PositionalError());
  ASSERT_FALSE(flags.Parse({"default/web-0", "--host-netns", "/h"}));
  ASSERT_TRUE(flags.PositionalError());
  EXPECT_EQ(*flags.PositionalError(),
            "unexpected argument \"default/web-0\" (ambient-doctor report takes flags only; see "
            "--help)");
  ASSERT_FALSE(flags.Parse({"a", "--", "--b"}));
  EXPECT_NE(flags.PositionalError()->find("arguments \"default/web-0\", \"a\", \"--b\""),
            std::string::npos)
      << *flags.PositionalError();
}

class FlagsFileTest : public ::testing::Test {
 protected:
  void SetUp() override { path_ = "/tmp/ad-flags-test-" + std::to_string(::getpid()); }
  void TearDown() override { std::remove(path_.c_str()); }
  void Write(const std::string& text) { std::ofstream(path_) << text; }
  std::string path_;
};

TEST_F(FlagsFileTest, ReadsOneFlagPerLine) {
  Write(
      "# lab flags\n\n--no-zds\n  --netns-dir /run/netns  \n--netns-match adlab-*\n"
      "--host-netns=/run/netns/x y\n");
  auto words = ReadFlagsFile(path_);
  ASSERT_TRUE(words.ok()) << words.error().message;
  EXPECT_EQ(*words,
            (std::vector<std::string>{"--no-zds", "--netns-dir", "/run/netns", "--netns-match",
                                      "adlab-*", "--host-netns=/run/netns/x y"}));
}

TEST_F(FlagsFileTest, BadLinesAndMissingFilesAreErrors) {
  Write("--no-zds\nnetns-dir /x\n");
  auto bad = ReadFlagsFile(path_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find(":2: not a flag"), std::string::npos) << bad.error().message;
  auto missing = ReadFlagsFile(path_ + ".absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("No such file"), std::string::npos);
}

}  // namespace
}  // namespace ad::cli
