// The flag parser (typed fields, layering, errors, positional words), flags files (--config, the
// lab's --lab-prefix file) and the HOST:PORT parser of --metrics-address.
#include "cli/flags.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli/command_common.h"
#include "cli/serve_command.h"

namespace ad::cli {
namespace {

// A few scan flags, bound to a plain struct as the commands bind theirs.
struct ScanLike {
  std::vector<std::string> netns_dirs = {"/var/run/netns", "/run/other"};
  std::string host_netns;
  bool no_zds = false;
  int workers = 2;
};

void AddScanLike(FlagSet& flags, ScanLike& config) {
  flags.Add({.name = "netns-dir", .value_name = "DIR", .help = "Bind mounts."}, &config.netns_dirs);
  flags.Add({.name = "host-netns",
             .value_name = "PATH",
             .default_text = "<proc-root>/1/ns/net",
             .help = "Host netns."},
            &config.host_netns);
  flags.Add({.name = "no-zds", .help = "Skip ZDS."}, &config.no_zds);
  flags.Add({.name = "workers", .value_name = "N", .help = "Threads."}, &config.workers);
}

TEST(Flags, LaterParseOverridesEarlierLayer) {
  ScanLike config;
  FlagSet flags("report", "[flags]", "test");
  AddScanLike(flags, config);
  ASSERT_FALSE(flags.Parse({"--netns-dir", "/a", "--netns-dir", "/b", "--host-netns", "/h1"}));
  ASSERT_FALSE(flags.Parse({"--netns-dir", "/c", "--host-netns=/h2"}));
  EXPECT_EQ(config.netns_dirs, (std::vector<std::string>{"/c"}));
  EXPECT_EQ(config.host_netns, "/h2");
  ASSERT_FALSE(flags.Parse({"--no-zds"}));
  EXPECT_EQ(config.netns_dirs, (std::vector<std::string>{"/c"})) << "untouched: kept";
  EXPECT_TRUE(config.no_zds);
  EXPECT_TRUE(flags.Given("no-zds"));
  EXPECT_FALSE(flags.Given("netns-dir")) << "Given: the last parse (the command line) only";
}

TEST(Flags, DefaultsAreTheFieldsAndHelpShowsThem) {
  ScanLike config;
  FlagSet flags("report", "[flags]", "test");
  AddScanLike(flags, config);
  ASSERT_FALSE(flags.Parse({}));
  EXPECT_EQ(config.workers, 2);
  EXPECT_EQ(config.netns_dirs.size(), 2u);
  const std::string usage = flags.Usage();
  EXPECT_NE(usage.find("--netns-dir DIR"), std::string::npos) << usage;
  EXPECT_NE(usage.find("Bind mounts. (default: /var/run/netns and /run/other) [repeatable]"),
            std::string::npos)
      << usage;
  EXPECT_NE(usage.find("Host netns. (default: <proc-root>/1/ns/net)"), std::string::npos) << usage;
  EXPECT_NE(usage.find("Threads. (default: 2)"), std::string::npos) << usage;
  EXPECT_NE(usage.find("  -h, --help"), std::string::npos) << usage;
  EXPECT_EQ(usage.find("Skip ZDS. (default"), std::string::npos) << "a switch shows no default";
}

TEST(Flags, ValuesSwitchesAndErrors) {
  ScanLike config;
  FlagSet flags("report", "[flags]", "test");
  AddScanLike(flags, config);
  ASSERT_FALSE(flags.Parse({"--workers=4", "--workers", "5"})) << "the last one wins";
  EXPECT_EQ(config.workers, 5);
  ASSERT_FALSE(flags.Parse({"-h"}));
  EXPECT_TRUE(flags.help());
  auto unknown = flags.Parse({"--bogus", "1"});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(*unknown, "unknown flag --bogus (see: ambient-doctor report --help)");
  auto missing = flags.Parse({"--host-netns"});
  ASSERT_TRUE(missing);
  EXPECT_EQ(*missing, "flag --host-netns needs a value (PATH)");
  auto not_a_number = flags.Parse({"--workers", "9x"});
  ASSERT_TRUE(not_a_number);
  EXPECT_EQ(*not_a_number, "flag --workers needs a number, not \"9x\"");
}

TEST(Flags, PositionalWordsAreNamedInAnError) {
  ScanLike config;
  FlagSet flags("report", "[flags]", "test");
  AddScanLike(flags, config);
  ASSERT_FALSE(flags.Parse({"--no-zds"}));
  EXPECT_FALSE(flags.PositionalError());
  ASSERT_FALSE(flags.Parse({"default/web-0", "--host-netns", "/h"}));
  ASSERT_TRUE(flags.PositionalError());
  EXPECT_EQ(*flags.PositionalError(),
            "unexpected argument \"default/web-0\" (ambient-doctor report takes flags only; see "
            "--help)");
  EXPECT_EQ(config.host_netns, "/h");
  ASSERT_FALSE(flags.Parse({"a", "b", "--", "--c"}));
  EXPECT_NE(flags.PositionalError()->find("arguments \"a\", \"b\", \"--c\""), std::string::npos)
      << *flags.PositionalError();
}

// --metrics-address takes HOST:PORT as --api-address does (one parser).
TEST(Flags, MetricsAddressIsOneHostPortParser) {
  auto off = ParseMetricsAddress("off");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off.value());
  auto v4 = ParseMetricsAddress("0.0.0.0:9977");
  ASSERT_TRUE(v4.ok()) << v4.error().message;
  EXPECT_EQ(v4.value()->bind_address, "0.0.0.0");
  EXPECT_EQ(v4.value()->port, 9977);
  auto v6 = ParseMetricsAddress("[::1]:65535");
  ASSERT_TRUE(v6.ok()) << v6.error().message;
  EXPECT_EQ(v6.value()->bind_address, "::1");
  EXPECT_EQ(v6.value()->port, 65535);
  auto any_port = ParseMetricsAddress("127.0.0.1:0");
  ASSERT_TRUE(any_port.ok()) << "port 0 picks a free one (tests)";
  for (const char* bad : {"0.0.0.0:9977x", "0.0.0.0:65536", "::1:9977", "[::1]", "9977", "",
                          "localhost:9977", "0.0.0.0:-1"}) {
    auto parsed = ParseMetricsAddress(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.error().message.find("--metrics-address needs HOST:PORT (or off)"),
              std::string::npos)
        << parsed.error().message;
    EXPECT_NE(parsed.error().message.find("IPV4:PORT or [IPV6]:PORT"), std::string::npos)
        << parsed.error().message;
  }
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

// A lab without an API server writes --no-kube-api; a --kubeconfig typed over it turns the
// source on rather than being ignored, and --no-kube-api typed too keeps it off.
TEST_F(FlagsFileTest, KubeconfigOnTheCommandLineOverridesTheFilesNoKubeApi) {
  Write("--no-kube-api\n--no-zds\n");
  auto scan = [&](std::vector<std::string> extra) {
    ScanConfig config;
    FlagSet flags("report", "[flags]", "test");
    AddScanFlags(flags, config);
    std::vector<std::string> args = {"--config", path_};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_FALSE(ParseScanCommand(flags, args, config).has_value());
    return config.kube.enabled;
  };
  EXPECT_FALSE(scan({}));
  EXPECT_TRUE(scan({"--kubeconfig", "/k"}));
  EXPECT_FALSE(scan({"--kubeconfig", "/k", "--no-kube-api"}));
}

}  // namespace
}  // namespace ad::cli
