// ReadIpSets against a real kernel: sets created with the ipset tool in a throwaway netns.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sources/netfilter/readers.h"
#include "sources/netns/netns_guard.h"

namespace ad {
namespace {

int RunShell(const std::string& command) {
  int status = std::system((command + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class IpSetReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root to create network namespaces";
    }
    static std::atomic<int> counter{0};
    netns_ = "adt-nft-" + std::to_string(::getpid()) + "-ipset" + std::to_string(counter++);
    ASSERT_EQ(RunShell("ip netns add " + netns_), 0);
  }
  void TearDown() override {
    if (!netns_.empty()) RunShell("ip netns del " + netns_);
  }

  void Exec(const std::string& command) {
    ASSERT_EQ(RunShell("ip netns exec " + netns_ + " " + command), 0) << command;
  }

  Result<std::vector<IpSet>> Read(const ReadLimits& limits = ReadLimits{}) {
    std::optional<Result<std::vector<IpSet>>> out;
    std::thread worker([&] {
      auto guard = NetnsGuard::Enter("/run/netns/" + netns_);
      if (!guard) {
        out.emplace(guard.error());
        return;
      }
      out.emplace(ReadIpSets(limits));
    });
    worker.join();
    return std::move(*out);
  }

  std::string netns_;
};

TEST_F(IpSetReaderTest, EmptyNetnsHasNoSets) {
  auto sets = Read();
  ASSERT_TRUE(sets.ok()) << sets.error().message;
  EXPECT_TRUE(sets->empty());
}

TEST_F(IpSetReaderTest, ReadsIstioProbeSetsWithMembers) {
  Exec("ipset create istio-inpod-probes-v4 hash:ip comment");
  Exec("ipset create istio-inpod-probes-v6 hash:ip family inet6 comment");
  Exec("ipset add istio-inpod-probes-v4 10.244.0.5 comment pod-uid-1");
  Exec("ipset add istio-inpod-probes-v4 10.244.0.6");
  Exec("ipset add istio-inpod-probes-v6 fd00::5");
  Exec("ipset create nets hash:net");
  Exec("ipset add nets 10.1.0.0/16");
  auto sets = Read();
  ASSERT_TRUE(sets.ok()) << sets.error().message;
  std::map<std::string, IpSet> by_name;
  for (const IpSet& s : *sets) by_name[s.name] = s;
  ASSERT_EQ(by_name.size(), 3u);
  const IpSet& v4 = by_name["istio-inpod-probes-v4"];
  EXPECT_EQ(v4.type, "hash:ip");
  EXPECT_EQ(v4.family, Family::kIpv4);
  auto members = v4.members;
  std::sort(members.begin(), members.end());
  EXPECT_EQ(members, (std::vector<std::string>{"10.244.0.5", "10.244.0.6"}));
  const IpSet& v6 = by_name["istio-inpod-probes-v6"];
  EXPECT_EQ(v6.family, Family::kIpv6);
  EXPECT_EQ(v6.members, (std::vector<std::string>{"fd00::5"}));
  EXPECT_EQ(by_name["nets"].type, "hash:net");
  EXPECT_EQ(by_name["nets"].members, (std::vector<std::string>{"10.1.0.0/16"}));
}

TEST_F(IpSetReaderTest, ManyMembersAcrossMessagesAndLimit) {
  Exec("ipset create big hash:ip maxelem 70000");
  std::string restore;
  for (int i = 0; i < 5000; ++i) {
    restore += "add big 10.9." + std::to_string(i / 256) + "." + std::to_string(i % 256) + "\n";
  }
  FILE* pipe = ::popen(("ip netns exec " + netns_ + " ipset restore").c_str(), "w");
  ASSERT_NE(pipe, nullptr);
  std::fwrite(restore.data(), 1, restore.size(), pipe);
  ASSERT_EQ(::pclose(pipe), 0);
  auto sets = Read();
  ASSERT_TRUE(sets.ok()) << sets.error().message;
  ASSERT_EQ(sets->size(), 1u);
  EXPECT_EQ((*sets)[0].members.size(), 5000u);
  ReadLimits limits;
  limits.max_set_elements = 100;
  auto limited = Read(limits);
  ASSERT_TRUE(limited.ok());
  ASSERT_EQ(limited->size(), 1u);
  EXPECT_LE((*limited)[0].members.size(), 100u);
}

TEST_F(IpSetReaderTest, ReadingDoesNotCreateOrChangeSets) {
  Exec("ipset create s hash:ip");
  Exec("ipset add s 1.2.3.4");
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(Read().ok());
  }
  auto sets = Read();
  ASSERT_TRUE(sets.ok());
  ASSERT_EQ(sets->size(), 1u);
  EXPECT_EQ((*sets)[0].members, (std::vector<std::string>{"1.2.3.4"}));
}

}  // namespace
}  // namespace ad
