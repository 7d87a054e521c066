// CriNodeSource against a real containerd 1.6 + runc + CNI bridge (private instance, see
// containerd_fixture.h): a sandbox started through our own runtime.v1 proto must come back with
// its identity, netns pin and the pin's inode. Needs root; skips when the tools are missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "containerd_fixture.h"
#include "netns_test_util.h"
#include "scan/cri_node_source.h"

namespace ad {
namespace {

using testing::ContainerdFixture;

const PodIdentity* FindPod(const CriState& cri, const std::string& uid) {
  for (const PodIdentity& pod : cri.pods) {
    if (pod.uid == uid) return &pod;
  }
  return nullptr;
}

std::string AllErrors(const CriState& cri) {
  std::string text;
  for (const SourceError& error : cri.errors) text += "[" + error.message + "] ";
  return text;
}

// Alive and not a zombie (killed orphans wait a moment for init to reap them).
bool IsRunning(int pid) {
  const std::string stat = testing::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t end_of_comm = stat.rfind(')');
  return end_of_comm != std::string::npos && end_of_comm + 2 < stat.size() &&
         stat[end_of_comm + 2] != 'Z';
}

CriState CollectFrom(const ContainerdFixture& containerd) {
  CriSourceOptions options;
  options.client.endpoints = {containerd.endpoint()};
  NodeSnapshot snapshot;
  CriNodeSource(options).Collect(snapshot);
  return snapshot.cri;
}

TEST(CriRealContainerd, SandboxIdentityAndNetnsInode) {
  if (!testing::IsRoot()) GTEST_SKIP() << "needs root (containerd, runc, netns, mounts)";
  if (std::string missing = ContainerdFixture::MissingPrerequisites(); !missing.empty()) {
    GTEST_SKIP() << missing;
  }
  const std::string uid = "adt-" + std::to_string(::getpid()) + "-6f1e2d3c-aaaa-bbbb-cccc";
  std::string fixture_dir;
  std::string netns_name;
  {
    ContainerdFixture containerd;
    const std::string start_error = containerd.Start();
    fixture_dir = containerd.dir();
    netns_name = containerd.netns_name();
    ASSERT_EQ(start_error, "");

    runtime::v1::PodSandboxConfig config;
    config.mutable_metadata()->set_name("web-0");
    config.mutable_metadata()->set_uid(uid);
    config.mutable_metadata()->set_namespace_("adt-demo");
    config.set_hostname("web-0");
    (*config.mutable_labels())["io.kubernetes.pod.uid"] = uid;
    (*config.mutable_labels())["istio.io/dataplane-mode"] = "ambient";
    std::string run_error;
    const std::string sandbox_id = containerd.RunSandbox(config, run_error);
    ASSERT_FALSE(sandbox_id.empty()) << run_error << "\ncontainerd log:\n" << containerd.LogTail();

    const CriState cri = CollectFrom(containerd);
    EXPECT_TRUE(cri.available) << AllErrors(cri);
    EXPECT_EQ(cri.endpoint, containerd.endpoint());
    EXPECT_TRUE(cri.runtime.starts_with("containerd ")) << cri.runtime;
    EXPECT_TRUE(cri.errors.empty()) << AllErrors(cri);
    // Its verbose Status names the conf_dir of its config (the CNI source reads that one).
    EXPECT_EQ(cri.cni_conf_dir, containerd.dir() + "/cni") << cri.cni_note;
    const PodIdentity* pod = FindPod(cri, uid);
    ASSERT_NE(pod, nullptr) << AllErrors(cri);
    EXPECT_EQ(pod->name, "web-0");
    EXPECT_EQ(pod->namespace_name, "adt-demo");
    EXPECT_EQ(pod->sandbox_id, sandbox_id);
    EXPECT_FALSE(pod->host_network);
    // netns_mounts_under_state_dir = true puts the pin under our private state dir.
    EXPECT_TRUE(pod->netns_path.starts_with(containerd.state_dir() +
                                            "/io.containerd.grpc.v1.cri/netns/cni-"))
        << pod->netns_path;
    ASSERT_NE(pod->netns_inode, 0u);
    EXPECT_EQ(pod->netns_inode, testing::InodeOf(pod->netns_path));
    ASSERT_GT(pod->pid, 0);
    EXPECT_EQ(pod->netns_inode, testing::InodeOf("/proc/" + std::to_string(pod->pid) + "/ns/net"));
    ASSERT_EQ(pod->ips.size(), 1u);
    EXPECT_TRUE(pod->ips[0].starts_with("192.0.2.")) << pod->ips[0];

    // A stopped sandbox is NOTREADY: its (now stale) pin must no longer be reported.
    ASSERT_EQ(containerd.StopSandbox(sandbox_id), "");
    const CriState after_stop = CollectFrom(containerd);
    EXPECT_TRUE(after_stop.available);
    EXPECT_EQ(FindPod(after_stop, uid), nullptr);
    EXPECT_EQ(containerd.RemoveSandbox(sandbox_id), "");
  }
  // The fixture left nothing behind.
  EXPECT_FALSE(std::filesystem::exists(fixture_dir)) << fixture_dir;
  EXPECT_FALSE(std::filesystem::exists("/run/netns/" + netns_name)) << netns_name;
}

// containerd dies with a sandbox running (no Stop/Remove): the fixture must still leave no shim,
// pause process, netns pin mount, cgroup or directory behind.
TEST(CriRealContainerd, CleanupAfterRuntimeCrash) {
  if (!testing::IsRoot()) GTEST_SKIP() << "needs root (containerd, runc, netns, mounts)";
  if (std::string missing = ContainerdFixture::MissingPrerequisites(); !missing.empty()) {
    GTEST_SKIP() << missing;
  }
  std::string fixture_dir;
  std::string netns_name;
  std::string pin;
  int pause_pid = 0;
  {
    ContainerdFixture containerd;
    const std::string start_error = containerd.Start();
    fixture_dir = containerd.dir();
    netns_name = containerd.netns_name();
    ASSERT_EQ(start_error, "");
    runtime::v1::PodSandboxConfig config;
    config.mutable_metadata()->set_name("orphan-0");
    config.mutable_metadata()->set_uid("adt-orphan-" + std::to_string(::getpid()));
    config.mutable_metadata()->set_namespace_("adt-demo");
    std::string run_error;
    ASSERT_FALSE(containerd.RunSandbox(config, run_error).empty()) << run_error;
    const CriState cri = CollectFrom(containerd);
    ASSERT_EQ(cri.pods.size(), 1u) << AllErrors(cri);
    pin = cri.pods[0].netns_path;
    pause_pid = cri.pods[0].pid;
    ASSERT_GT(pause_pid, 0);
    EXPECT_FALSE(ContainerdFixture::ProcessesUnder(fixture_dir).empty());  // shim + pause
    containerd.CrashContainerd();
  }
  EXPECT_TRUE(ContainerdFixture::ProcessesUnder(fixture_dir).empty());
  if (pause_pid > 0) {
    EXPECT_FALSE(IsRunning(pause_pid)) << "pause process " << pause_pid << " survived";
  }
  EXPECT_TRUE(ContainerdFixture::MountsUnder(fixture_dir).empty());
  EXPECT_FALSE(std::filesystem::exists(pin)) << pin;
  EXPECT_FALSE(std::filesystem::exists(fixture_dir)) << fixture_dir;
  EXPECT_FALSE(std::filesystem::exists("/run/netns/" + netns_name)) << netns_name;
}

}  // namespace
}  // namespace ad
