// The nft userspace check on the real machine (root): the host's nft answers the JSON probe in a
// throwaway netns; a JSON-less, a hung and an absent nft give clear results, never a hang.
#include "sources/netfilter/nft_userspace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "child_process_util.h"

namespace ad {
namespace {

class NftUserspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to unshare a network namespace";
  }
  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }
  testing::ScopedTempDir dir_{"adt-nft-probe"};
};

TEST_F(NftUserspaceTest, HostNftPrintsJsonInAThrowawayNetns) {
  if (!std::filesystem::exists("/usr/sbin/nft")) GTEST_SKIP() << "no /usr/sbin/nft";
  // The probe itself (the library's libjansson dependency alone decides otherwise).
  const NftUserspaceState state = nft::ReadNftUserspace({.probe_binary = "/usr/sbin/nft"});
  EXPECT_EQ(state.binary, "/usr/sbin/nft");
  EXPECT_TRUE(state.probe_ran);
  EXPECT_EQ(state.probe_result, "ok") << state.probe_result;
  ASSERT_TRUE(state.json_support.has_value());
  EXPECT_TRUE(*state.json_support);
  EXPECT_TRUE(state.errors.empty());
  // The version is evidence only: read when JSON support is missing or unknown (below).
  EXPECT_EQ(state.version, "");
}

TEST_F(NftUserspaceTest, LibraryDecidesWithoutAProbe) {
  if (!std::filesystem::exists("/usr/sbin/nft")) GTEST_SKIP() << "no /usr/sbin/nft";
  const NftUserspaceState state = nft::ReadNftUserspace({});
  if (!state.json_support.has_value()) GTEST_SKIP() << "libnftables.so.1 not in a known dir";
  EXPECT_FALSE(state.probe_ran);
  EXPECT_NE(state.json_evidence.find("libnftables.so.1"), std::string::npos);
}

TEST_F(NftUserspaceTest, ProbeRunsInAnotherNetns) {
  if (!std::filesystem::exists("/usr/sbin/nft")) GTEST_SKIP() << "no /usr/sbin/nft";
  nft::NftUserspaceOptions options;
  options.probe_binary = Script("netns", "readlink /proc/self/ns/net");
  const NftUserspaceState state = nft::ReadNftUserspace(options);
  char own[64] = {};
  ASSERT_GT(::readlink("/proc/self/ns/net", own, sizeof(own) - 1), 0);
  EXPECT_NE(state.probe_result.find("net:["), std::string::npos) << state.probe_result;
  EXPECT_EQ(state.probe_result.find(own), std::string::npos) << state.probe_result;
}

TEST_F(NftUserspaceTest, JsonlessHungAndAbsentNft) {
  if (!std::filesystem::exists("/usr/sbin/nft")) GTEST_SKIP() << "no /usr/sbin/nft";
  nft::NftUserspaceOptions options;
  options.probe_binary = Script("nojson", "echo 'Error: JSON support not compiled-in' >&2; exit 1");
  NftUserspaceState state = nft::ReadNftUserspace(options);
  ASSERT_TRUE(state.json_support.has_value());
  EXPECT_FALSE(*state.json_support);
  EXPECT_NE(state.probe_result.find("JSON support not compiled-in"), std::string::npos);
  if (std::filesystem::exists("/var/lib/dpkg/status")) {
    EXPECT_FALSE(state.version.empty()) << "dpkg knows nftables";
    EXPECT_EQ(state.version_source, "dpkg");
  }

  options.probe_binary = Script("hung", "exec sleep 60");
  options.probe_timeout = std::chrono::milliseconds(300);
  state = nft::ReadNftUserspace(options);
  EXPECT_NE(state.probe_result.find("killed"), std::string::npos) << state.probe_result;
  ASSERT_EQ(state.errors.size(), 1u);
  EXPECT_EQ(state.errors[0].kind, SourceKind::kNftProbe);

  // A host root without nft: a clear result, no probe, no error.
  state = nft::ReadNftUserspace({.host_root = dir_.path()});
  EXPECT_EQ(state.binary, "");
  EXPECT_FALSE(state.probe_ran);
  EXPECT_NE(state.probe_result.find("no nft binary"), std::string::npos);
  EXPECT_TRUE(state.errors.empty());
}

TEST_F(NftUserspaceTest, NoHostBinaryIsExecutedUnderAHostRoot) {
  // A host root whose nft would leave a mark when executed.
  std::filesystem::create_directories(dir_.path() + "/usr/sbin");
  const std::string mark = dir_.path() + "/executed";
  std::ofstream(dir_.path() + "/usr/sbin/nft") << "#!/bin/sh\ntouch " << mark << "\n";
  ::chmod((dir_.path() + "/usr/sbin/nft").c_str(), 0755);
  const NftUserspaceState state = nft::ReadNftUserspace({.host_root = dir_.path()});
  EXPECT_EQ(state.binary, "/usr/sbin/nft");
  EXPECT_FALSE(state.probe_ran);
  EXPECT_NE(state.probe_result.find("does not execute host binaries"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(mark));
}

}  // namespace
}  // namespace ad
