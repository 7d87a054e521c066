// ParseSandboxInfo against the captured and shape fixtures in shared/corpus/cri, plus malformed
// input. Fixtures are read from ../shared; the tests skip when it is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "shared_corpus.h"
#include "sources/cri/sandbox_info.h"

namespace ad::cri {
namespace {

const std::string kContainerdPin =
    "/run/containerd/io.containerd.grpc.v1.cri/netns/cni-38825486-8ced-638e-5ff1-7688e309fdbd";
const std::string kCrioPin = "/var/run/netns/5a1c2f0e-7b1d-4c59-9d2b-3f0e8a6c1d2e";

std::string ReadFixture(const std::string& name) {
  std::ifstream in(corpus::CorpusPath("cri") / name);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class CriFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!corpus::HaveCorpus()) GTEST_SKIP() << corpus::CorpusAbsentReason();
  }
};

TEST_F(CriFixtureTest, Containerd16RealCapture) {
  const auto info =
      ParseSandboxInfo(ReadFixture("containerd-1.6.20-PodSandboxStatus-verbose-info.json"));
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->netns_path, kContainerdPin);
  EXPECT_EQ(info->pid, 31651);
  EXPECT_FALSE(info->netns_closed);
  EXPECT_EQ(info->runtime_type, "io.containerd.runc.v2");
}

TEST_F(CriFixtureTest, Containerd2Shape) {
  const auto info = ParseSandboxInfo(ReadFixture("SYNTHETIC-containerd-2.x-shape-info.json"));
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->netns_path, kContainerdPin);
  EXPECT_EQ(info->pid, 31651);
}

TEST_F(CriFixtureTest, CrioInfraContainer) {
  const auto info = ParseSandboxInfo(ReadFixture("SYNTHETIC-crio-infra-ctr-info.json"));
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->netns_path, kCrioPin);
  EXPECT_EQ(info->pid, 4242);
  EXPECT_TRUE(info->runtime_type.empty());
}

TEST_F(CriFixtureTest, CrioDroppedInfraHasNoPid) {
  const auto info = ParseSandboxInfo(ReadFixture("SYNTHETIC-crio-dropped-infra-info.json"));
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->netns_path, kCrioPin);
  EXPECT_EQ(info->pid, 0);
}

TEST_F(CriFixtureTest, TruncatedFixturesFailWithOffset) {
  for (const char* name :
       {"containerd-1.6.20-PodSandboxStatus-verbose-info.json",
        "SYNTHETIC-containerd-2.x-shape-info.json", "SYNTHETIC-crio-infra-ctr-info.json",
        "SYNTHETIC-crio-dropped-infra-info.json"}) {
    const std::string text = ReadFixture(name);
    ASSERT_GT(text.size(), 100u) << name;
    for (size_t cut : {size_t{1}, text.size() / 3, text.size() / 2, text.size() - 2}) {
      const auto info = ParseSandboxInfo(std::string_view(text).substr(0, cut));
      ASSERT_FALSE(info.ok()) << name << " cut at " << cut;
      EXPECT_NE(info.error().message.find("info JSON: offset"), std::string::npos)
          << info.error().message;
    }
  }
}

// A stopped containerd sandbox keeps the stale pin path in runtimeSpec; it must not be reported.
TEST(CriSandboxInfo, ClosedNetnsGivesNoPath) {
  const auto info =
      ParseSandboxInfo(R"({"pid":0,"processStatus":"deleted","netNamespaceClosed":true,
    "runtimeSpec":{"linux":{"namespaces":[{"type":"network","path":"/run/netns/cni-stale"}]}},
    "sandboxMetadata":{"Metadata":{"NetNSPath":"/run/netns/cni-stale"}}})");
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_TRUE(info->netns_closed);
  EXPECT_EQ(info->netns_path, "");
  EXPECT_EQ(info->pid, 0);
}

TEST(CriSandboxInfo, HostNetworkSandboxHasNoNetworkNamespace) {
  const auto info = ParseSandboxInfo(
      R"({"pid":77,"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"},{"type":"ipc"}]}}})");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->netns_path, "");
  EXPECT_EQ(info->pid, 77);
}

TEST(CriSandboxInfo, SandboxMetadataIsTheFallback) {
  const auto info = ParseSandboxInfo(
      R"({"pid":5,"runtimeSpec":{"linux":{}},"sandboxMetadata":{"Version":"v1",
          "Metadata":{"NetNSPath":"/var/run/netns/cni-1"}}})");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->netns_path, "/var/run/netns/cni-1");
}

TEST(CriSandboxInfo, NetworkWithoutPathFallsBackToSandboxMetadata) {
  const auto info = ParseSandboxInfo(
      R"({"runtimeSpec":{"linux":{"namespaces":[{"type":"network"}]}},
          "sandboxMetadata":{"Metadata":{"NetNSPath":"/var/run/netns/cni-2"}}})");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->netns_path, "/var/run/netns/cni-2");
}

TEST(CriSandboxInfo, OddPidsMeanUnknown) {
  for (const char* json : {R"({"pid":-4})", R"({"pid":1.5})", R"({"pid":"12"})", R"({"pid":1e30})",
                           R"({"pid":null})", R"({})"}) {
    const auto info = ParseSandboxInfo(json);
    ASSERT_TRUE(info.ok()) << json;
    EXPECT_EQ(info->pid, 0) << json;
  }
}

TEST(CriSandboxInfo, WrongTypesAreIgnoredNotFatal) {
  const auto info = ParseSandboxInfo(
      R"({"runtimeSpec":{"linux":{"namespaces":{"type":"network"}}},"netNamespaceClosed":"yes",
          "sandboxMetadata":[1,2]})");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->netns_path, "");
  EXPECT_FALSE(info->netns_closed);
}

TEST(CriSandboxInfo, GarbageIsAnError) {
  for (const char* text : {"", "not json", "{\"pid\":", "[1,2,3]", "\"info\"", "{}}", "\x01\xff"}) {
    const auto info = ParseSandboxInfo(text);
    EXPECT_FALSE(info.ok()) << text;
    if (!info.ok()) {
      EXPECT_EQ(info.error().source(), "cri");
      EXPECT_TRUE(info.error().message.starts_with("info JSON: ")) << info.error().message;
    }
  }
}

TEST(CriSandboxInfo, OversizedAndDeepInputIsRejected) {
  std::string huge = "{\"pad\":\"" + std::string(kMaxSandboxInfoBytes, 'x') + "\"}";
  EXPECT_FALSE(ParseSandboxInfo(huge).ok());
  std::string deep = std::string(10000, '[') + std::string(10000, ']');
  const auto info = ParseSandboxInfo(deep);
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.error().message.find("nesting"), std::string::npos) << info.error().message;
}

}  // namespace
}  // namespace ad::cri
