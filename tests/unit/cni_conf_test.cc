// The CNI config directory reader and the nft userspace parsers on real files in a temporary
// directory (no root needed; the unreadable-directory case drops this thread's DAC capabilities
// when it runs as root).
#include "sources/cni/cni_conf.h"

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "sources/netfilter/nft_userspace.h"
#include "sources/watch/config_dir_watcher.h"

namespace ad {
namespace {

namespace fs = std::filesystem;

constexpr char kChain[] = R"({"cniVersion": "0.4.0", "name": "k8s-pod-network", "plugins": [
  {"type": "calico", "kubernetes": {"kubeconfig": "/etc/cni/net.d/calico-kubeconfig"}},
  {"type": "portmap"},
  {"type": "istio-cni", "kubeconfig": "/etc/cni/net.d/ZZZ-istio-cni-kubeconfig"}]})";

class CniConfDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ad-cni-chain-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    fs::create_directories(dir());
  }
  void TearDown() override {
    std::error_code ignored;
    fs::permissions(dir(), fs::perms::owner_all, ignored);
    fs::remove_all(root_, ignored);
  }
  std::string dir() const { return root_ + "/etc/cni/net.d"; }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir() + "/" + name) << text;
  }
  CniConfigState Read(const cni::CniReadLimits& limits = {}) {
    return cni::ReadCniConfDir(root_, "/etc/cni/net.d", limits);
  }
  std::string root_;
};

TEST_F(CniConfDir, ActiveChainAndKubeconfig) {
  Write("10-calico.conflist", kChain);
  Write("ZZZ-istio-cni-kubeconfig", "apiVersion: v1\n");
  Write("99-other.conf", R"({"name": "x", "type": "bridge"})");
  const CniConfigState state = Read();
  EXPECT_TRUE(state.dir_readable);
  EXPECT_EQ(state.active_file, "10-calico.conflist");
  EXPECT_EQ(state.network_name, "k8s-pod-network");
  EXPECT_EQ(state.plugin_types, (std::vector<std::string>{"calico", "portmap", "istio-cni"}));
  EXPECT_TRUE(state.istio_cni_chained);
  EXPECT_EQ(state.kubeconfig_path, "/etc/cni/net.d/ZZZ-istio-cni-kubeconfig");
  EXPECT_EQ(state.kubeconfig_error, "");
  EXPECT_GT(state.active_mtime_unix_ms, 0);
  ASSERT_EQ(state.files.size(), 2u);  // the kubeconfig is no candidate
  EXPECT_EQ(state.files[1].name, "99-other.conf");
}

TEST_F(CniConfDir, LexicallyFirstWinsAndByteOrder) {
  Write("10-calico.conflist", kChain);
  Write("05-cilium.conflist",
        R"({"cniVersion": "0.3.1", "name": "cilium", "plugins": [{"type": "cilium-cni"}]})");
  Write("Z-upper.conf", R"({"name": "x", "type": "bridge"})");  // byte order: digits first
  const CniConfigState state = Read();
  EXPECT_EQ(state.active_file, "05-cilium.conflist");
  EXPECT_FALSE(state.istio_cni_chained);
  EXPECT_EQ(state.plugin_types, (std::vector<std::string>{"cilium-cni"}));
}

TEST_F(CniConfDir, MalformedFirstFileIsSkippedAndNamed) {
  Write("00-bad.conflist", R"({"name": "x", "plugins": [)");
  Write("10-calico.conflist", kChain);
  const CniConfigState state = Read();
  EXPECT_EQ(state.active_file, "10-calico.conflist");
  ASSERT_GE(state.files.size(), 1u);
  EXPECT_EQ(state.files[0].name, "00-bad.conflist");
  EXPECT_NE(state.files[0].error.find("malformed JSON"), std::string::npos) << state.files[0].error;
}

TEST_F(CniConfDir, DanglingSymlinkHugeFileAndDirectories) {
  ASSERT_EQ(::symlink("/nonexistent/cni.conflist", (dir() + "/01-link.conflist").c_str()), 0);
  Write("02-huge.conflist", std::string(2 << 20, ' '));
  fs::create_directory(dir() + "/03-dir.conf");  // a directory is no candidate
  Write("04-notype.conf", R"({"name": "x"})");
  Write("05-noplugins.conflist", R"({"name": "x", "plugins": []})");
  Write("06-array.json", "[1, 2]");
  const CniConfigState state = Read();
  EXPECT_EQ(state.active_file, "");
  ASSERT_EQ(state.files.size(), 5u);
  EXPECT_NE(state.files[0].error.find("dangling symlink to /nonexistent"), std::string::npos);
  EXPECT_NE(state.files[1].error.find("too large to check"), std::string::npos);
  EXPECT_EQ(state.files[2].error, "network type not found");
  EXPECT_EQ(state.files[3].error, "no plugins in the list");
  EXPECT_EQ(state.files[4].error, "not a JSON object");
}

TEST_F(CniConfDir, NoConfigAtAll) {
  Write("README", "not a config");
  const CniConfigState state = Read();
  EXPECT_TRUE(state.dir_readable);
  EXPECT_TRUE(state.errors.empty());
  EXPECT_TRUE(state.files.empty());
  EXPECT_EQ(state.active_file, "");
}

TEST_F(CniConfDir, MissingDirectoryIsDataNotAnError) {
  fs::remove_all(dir());
  const CniConfigState state = Read();
  EXPECT_FALSE(state.dir_readable);
  EXPECT_TRUE(state.errors.empty());
}

TEST_F(CniConfDir, FileCountIsBounded) {
  for (int i = 0; i < 10; ++i) Write("0" + std::to_string(i) + "-bad.conf", "{");
  const CniConfigState state = Read({.max_files = 4});
  EXPECT_EQ(state.files.size(), 4u);
  EXPECT_EQ(state.files_omitted, 6u);
  const CniConfigState too_many = Read({.max_candidates = 5});
  EXPECT_FALSE(too_many.dir_readable);
  ASSERT_EQ(too_many.errors.size(), 1u);
  EXPECT_NE(too_many.errors[0].message.find("more than the 5 checked"), std::string::npos);
}

TEST_F(CniConfDir, KubeconfigMissingOrFieldAbsent) {
  Write("10-calico.conflist", kChain);
  CniConfigState state = Read();
  EXPECT_NE(state.kubeconfig_error.find("No such file or directory"), std::string::npos)
      << state.kubeconfig_error;
  Write("10-calico.conflist",
        R"({"name": "n", "plugins": [{"type": "ptp"}, {"type": "istio-cni"}]})");
  state = Read();
  EXPECT_EQ(state.kubeconfig_error, "the istio-cni plugin has no \"kubeconfig\"");
  // Releases before ambient nested it under "kubernetes".
  Write("10-calico.conflist",
        R"({"name": "n", "plugins": [{"type": "istio-cni", "kubernetes": {"kubeconfig": "/k"}}]})");
  Write("../../../k", "x");
  state = Read();
  EXPECT_EQ(state.kubeconfig_path, "/k");
  EXPECT_EQ(state.kubeconfig_error, "");
}

// Capabilities are per thread: this thread alone loses CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH.
bool DropDacCapabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  for (int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH}) {
    data[cap / 32].effective &= ~(1u << (cap % 32));
  }
  return ::syscall(SYS_capset, &header, data) == 0;
}

TEST_F(CniConfDir, UnreadableDirectoryIsAnError) {
  Write("10-calico.conflist", kChain);
  fs::permissions(dir(), fs::perms::none);
  CniConfigState state;
  bool dropped = false;
  std::thread reader([&] {
    dropped = ::geteuid() != 0 || DropDacCapabilities();
    if (dropped) state = Read();
  });
  reader.join();
  if (!dropped) GTEST_SKIP() << "cannot drop CAP_DAC_OVERRIDE on this thread";
  EXPECT_FALSE(state.dir_readable);
  ASSERT_EQ(state.errors.size(), 1u);
  EXPECT_EQ(state.errors[0].kind, SourceKind::kCniConfig);
  EXPECT_NE(state.errors[0].message.find("Permission denied"), std::string::npos);
}

TEST_F(CniConfDir, WatcherSeesChangesAndWaitsForAMissingDirectory) {
  fs::remove_all(root_ + "/etc/cni");
  Result<watch::ConfigDirWatcher> watcher = watch::ConfigDirWatcher::Open(dir());
  ASSERT_TRUE(watcher.ok()) << watcher.error().message;
  EXPECT_FALSE(watcher->watching_dir());
  std::ofstream(root_ + "/etc/unrelated") << "x";  // another name in the watched ancestor
  EXPECT_FALSE(watcher->Drain());
  fs::create_directories(dir());  // etc/cni (and net.d in it) appear
  EXPECT_TRUE(watcher->Drain());
  EXPECT_TRUE(watcher->watching_dir());  // re-armed on the directory itself
  Write("10-calico.conflist", kChain);
  EXPECT_TRUE(watcher->Drain());
  EXPECT_FALSE(watcher->Drain());  // nothing new
  fs::rename(dir() + "/10-calico.conflist", dir() + "/20-calico.conflist");
  EXPECT_TRUE(watcher->Drain());
}

// The directory in use changed (the runtime reported its own): the same fd follows the new one,
// and events of the old one are no longer reported.
TEST_F(CniConfDir, WatcherRetargetsToAnotherDirectory) {
  const std::string other = root_ + "/var/lib/rancher/k3s/agent/etc/cni/net.d";
  fs::create_directories(other);
  Result<watch::ConfigDirWatcher> watcher = watch::ConfigDirWatcher::Open(dir());
  ASSERT_TRUE(watcher.ok()) << watcher.error().message;
  const int fd = watcher->fd();
  Write("10-calico.conflist", kChain);  // queued on the old directory, never drained
  watcher->Retarget(other + "/");
  EXPECT_EQ(watcher->dir(), other);
  EXPECT_EQ(watcher->fd(), fd);
  EXPECT_TRUE(watcher->watching_dir());
  EXPECT_FALSE(watcher->Drain()) << "the old directory's events are stale";
  Write("20-calico.conflist", kChain);
  EXPECT_FALSE(watcher->Drain()) << "the old directory is no longer watched";
  std::ofstream(other + "/10-flannel.conflist") << kChain;
  EXPECT_TRUE(watcher->Drain());
  watcher->Retarget(other);  // the same: nothing changes
  EXPECT_FALSE(watcher->Drain());
}

TEST(CniConfParse, BadInputNeverCrashes) {
  for (const char* text : {"", "{", "null", "\"x\"", "{\"plugins\": 5}",
                           "{\"name\": \"n\", "
                           "\"plugins\": [5]}",
                           "{\"name\": \"n\", \"plugins\": [{}]}"}) {
    const cni::CniParsedConf parsed = cni::ParseCniConf("x.conflist", text);
    EXPECT_FALSE(parsed.error.empty()) << text;
    EXPECT_FALSE(parsed.istio_cni) << text;
  }
  const std::string deep(200, '[');
  EXPECT_FALSE(cni::ParseCniConf("x.conf", deep).error.empty());
}

TEST(NftUserspace, DpkgVersion) {
  const std::string status =
      "Package: libnftables1\nStatus: install ok installed\nVersion: 1.0.6-2+deb12u2\n\n"
      "Package: nftables\nStatus: deinstall ok config-files\nVersion: 0.9.0-1\n\n"
      "Package: iptables\nStatus: install ok installed\nVersion: 1.8.9-2\n\n"
      "Package: nftables\nStatus: install ok installed\nVersion: 1:1.1.1-1\n";
  EXPECT_EQ(nft::DpkgUpstreamVersion(status, "nftables"), "1.1.1");
  EXPECT_EQ(nft::DpkgUpstreamVersion(status, "libnftables1"), "1.0.6");
  EXPECT_EQ(nft::DpkgUpstreamVersion(status, "ipset"), "");
  EXPECT_EQ(nft::DpkgUpstreamVersion("", "nftables"), "");
}

TEST(NftUserspace, JudgeProbe) {
  std::optional<bool> json;
  EXPECT_EQ(nft::JudgeProbe(0, "{\"nftables\": [{\"metainfo\": {}}]}\n", "", json), "ok");
  EXPECT_EQ(json, true);
  json.reset();
  EXPECT_NE(nft::JudgeProbe(1, "", "Error: JSON support not compiled-in\n", json)
                .find("JSON support not compiled-in"),
            std::string::npos);
  EXPECT_EQ(json, false);
  json.reset();
  EXPECT_EQ(nft::JudgeProbe(139, "", "", json), "exit 139");
  EXPECT_FALSE(json.has_value());
  EXPECT_NE(nft::JudgeProbe(0, "table inet x {}", "", json).find("no JSON"), std::string::npos);
}

}  // namespace
}  // namespace ad
