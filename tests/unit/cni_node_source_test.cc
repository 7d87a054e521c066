// The CNI node source's gap history (when the chain lacked istio-cni), on real files with a fake
// clock and file mtimes set by hand (no root needed).
#include "scan/cni_node_source.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace ad {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kT0 = 1787392800000;  // 2026-08-22T10:00:00Z

class CniSource : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ad-cni-chain-src-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    fs::create_directories(root_ + "/etc/cni/net.d");
    CniSourceOptions options;
    options.host_root = root_;
    options.clock = [this] { return now_; };
    options.max_gaps = 2;
    source_ = std::make_unique<CniNodeSource>(options);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  // Writes the conflist (with or without istio-cni) with mtime `mtime_ms`.
  void WriteChain(bool istio, int64_t mtime_ms) {
    const std::string path = root_ + "/etc/cni/net.d/10-x.conflist";
    std::ofstream(path) << R"({"name": "x", "plugins": [{"type": "ptp"})"
                        << (istio ? R"(, {"type": "istio-cni", "kubeconfig": "/k"})" : "") << "]}";
    const timespec times[2] = {{mtime_ms / 1000, (mtime_ms % 1000) * 1000000},
                               {mtime_ms / 1000, (mtime_ms % 1000) * 1000000}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  }
  CniConfigState Collect(int64_t at) {
    now_ = at;
    NodeSnapshot snapshot;
    source_->Collect(snapshot);
    return snapshot.cni;
  }
  std::string root_;
  int64_t now_ = kT0;
  std::unique_ptr<CniNodeSource> source_;
};

TEST_F(CniSource, GapStartsAtTheBrokenFilesMtimeAndEndsAtTheRestoredOnes) {
  WriteChain(true, kT0 - 100000);
  EXPECT_TRUE(Collect(kT0).gaps.empty());
  WriteChain(false, kT0 + 1000);  // broken at +1 s, seen at +5 s
  CniConfigState state = Collect(kT0 + 5000);
  ASSERT_EQ(state.gaps.size(), 1u);
  EXPECT_EQ(state.gaps[0].start_unix_ms, kT0 + 1000);
  EXPECT_EQ(state.gaps[0].end_unix_ms, 0);
  EXPECT_EQ(state.gaps[0].file, "10-x.conflist");
  // Unchanged: the state compares equal (the daemon's quiet polls stay unpublished).
  EXPECT_EQ(Collect(kT0 + 10000), Collect(kT0 + 15000));
  WriteChain(true, kT0 + 20000);  // restored at +20 s, seen at +25 s
  state = Collect(kT0 + 25000);
  ASSERT_EQ(state.gaps.size(), 1u);
  EXPECT_EQ(state.gaps[0].end_unix_ms, kT0 + 20000);
}

TEST_F(CniSource, MtimeBeforeTheLastGoodObservationIsNotTrusted) {
  WriteChain(true, kT0 - 100000);
  (void)Collect(kT0);
  WriteChain(false, kT0 - 50000);  // e.g. `cp -p` of an old file: its mtime predates the break
  const CniConfigState state = Collect(kT0 + 5000);
  ASSERT_EQ(state.gaps.size(), 1u);
  EXPECT_EQ(state.gaps[0].start_unix_ms, kT0 + 5000);
}

TEST_F(CniSource, FirstObservationBrokenStartsAtMtime) {
  WriteChain(false, kT0 - 3600000);
  const CniConfigState state = Collect(kT0);
  ASSERT_EQ(state.gaps.size(), 1u);
  EXPECT_EQ(state.gaps[0].start_unix_ms, kT0 - 3600000);
}

TEST_F(CniSource, GapsAreBounded) {
  for (int i = 0; i < 4; ++i) {
    WriteChain(false, kT0 + i * 20000 + 1000);
    (void)Collect(kT0 + i * 20000 + 2000);
    WriteChain(true, kT0 + i * 20000 + 3000);
    (void)Collect(kT0 + i * 20000 + 4000);
  }
  const CniConfigState state = Collect(kT0 + 100000);
  EXPECT_EQ(state.gaps.size(), 2u);
  EXPECT_EQ(state.gaps_dropped, 2u);
}

TEST_F(CniSource, NoConfigThenABrokenFile) {
  fs::remove_all(root_ + "/etc/cni/net.d");
  CniConfigState state = Collect(kT0);
  ASSERT_EQ(state.gaps.size(), 1u);
  EXPECT_EQ(state.gaps[0].file, "");
  fs::create_directories(root_ + "/etc/cni/net.d");
  WriteChain(false, kT0 + 1000);
  state = Collect(kT0 + 2000);
  ASSERT_EQ(state.gaps.size(), 1u);
  EXPECT_EQ(state.gaps[0].start_unix_ms, kT0);
  EXPECT_EQ(state.gaps[0].file, "10-x.conflist");
}

// Which directory: the given one, else the runtime's, else /etc/cni/net.d when it holds a
// config file, else none (not judged). Real directories under a temp host root.
class CniDirPrecedence : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ad-cni-dir-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    options_.host_root = root_;
    options_.conf_dir.clear();  // auto, as without --cni-conf-dir
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  // A conflist in host path `dir` (under the host root), with or without istio-cni.
  void WriteChain(const std::string& dir, const std::string& name, bool istio) {
    fs::create_directories(root_ + dir);
    std::ofstream(root_ + dir + "/" + name)
        << R"({"name": "n", "plugins": [{"type": "flannel"})"
        << (istio ? R"(, {"type": "istio-cni", "kubeconfig": "/k"})" : "") << "]}";
  }
  static CriState Containerd(const std::string& conf_dir) {
    CriState cri;
    cri.available = true;
    cri.runtime = "containerd v1.7.22-k3s1";
    cri.cni_conf_dir = conf_dir;
    cri.cni_note = "Status config.cni.confDir; networks loaded: cbr0";
    return cri;
  }
  CniConfigState Collect(CniNodeSource& source, CriState cri) {
    NodeSnapshot snapshot;
    snapshot.cri = std::move(cri);
    source.Collect(snapshot);
    return snapshot.cni;
  }
  std::string root_;
  CniSourceOptions options_;
};

constexpr const char* kK3sDir = "/var/lib/rancher/k3s/agent/etc/cni/net.d";

TEST_F(CniDirPrecedence, GivenDirectoryWinsOverTheRuntimesAndIsReadEvenWhenMissing) {
  WriteChain(kK3sDir, "10-flannel.conflist", true);
  options_.conf_dir = "/etc/cni/net.d";
  CniNodeSource source(options_);
  const CniConfigState state = Collect(source, Containerd(kK3sDir));
  EXPECT_EQ(state.dir_origin, CniDirOrigin::kFlag);
  EXPECT_EQ(state.dir, root_ + "/etc/cni/net.d");
  EXPECT_FALSE(state.dir_readable);
  EXPECT_TRUE(state.not_judged.empty());
  EXPECT_EQ(state.runtime_dir, kK3sDir);  // named beside it, for the evidence
  EXPECT_EQ(state.runtime, "containerd v1.7.22-k3s1");
}

TEST_F(CniDirPrecedence, RuntimeDirectoryWinsOverTheDefault) {
  WriteChain(kK3sDir, "10-flannel.conflist", true);
  WriteChain("/etc/cni/net.d", "10-stale.conflist", false);  // a leftover the runtime ignores
  CniNodeSource source(options_);
  const CniConfigState state = Collect(source, Containerd(kK3sDir));
  EXPECT_EQ(state.dir_origin, CniDirOrigin::kRuntime);
  EXPECT_EQ(state.dir, root_ + kK3sDir);
  EXPECT_EQ(state.active_file, "10-flannel.conflist");
  EXPECT_TRUE(state.istio_cni_chained);
  EXPECT_TRUE(state.gaps.empty());
  EXPECT_EQ(source.dir(), root_ + kK3sDir);
}

TEST_F(CniDirPrecedence, RuntimeDirectoryMissingIsJudgedAsNoConfig) {
  CniNodeSource source(options_);
  const CniConfigState state = Collect(source, Containerd(kK3sDir));
  EXPECT_EQ(state.dir_origin, CniDirOrigin::kRuntime);
  EXPECT_FALSE(state.dir_readable);
  EXPECT_TRUE(state.errors.empty());
  EXPECT_TRUE(state.not_judged.empty());
  ASSERT_EQ(state.gaps.size(), 1u);  // the runtime has no config at all: broken
}

// The runtime loaded its pod network from a directory the agent cannot see (its pod mounts only
// /etc/cni/net.d): a mount problem, not a missing CNI config.
TEST_F(CniDirPrecedence, RuntimeDirectoryNotVisibleHereIsNotJudged) {
  CriState cri = Containerd(kK3sDir);
  cri.cni_pod_network = "cbr0";
  CniNodeSource source(options_);
  const CniConfigState state = Collect(source, cri);
  EXPECT_EQ(state.dir_origin, CniDirOrigin::kNone);
  EXPECT_EQ(state.dir, "");
  EXPECT_TRUE(state.gaps.empty());
  EXPECT_NE(state.not_judged.find("loaded the pod network \"cbr0\""), std::string::npos)
      << state.not_judged;
  EXPECT_NE(state.not_judged.find("Mount the node's " + std::string(kK3sDir)), std::string::npos)
      << state.not_judged;
  EXPECT_EQ(state.runtime_dir, kK3sDir);
}

TEST_F(CniDirPrecedence, DefaultOnlyWhenItHoldsAConfigFile) {
  CriState silent;  // CRI-O: answers, but its Status names no CNI directory
  silent.available = true;
  silent.runtime = "cri-o 1.30.4";
  silent.cni_note = "its verbose Status reports no CNI config directory";
  CniNodeSource source(options_);
  fs::create_directories(root_ + "/etc/cni/net.d");  // exists, but empty
  CniConfigState state = Collect(source, silent);
  EXPECT_EQ(state.dir_origin, CniDirOrigin::kNone);
  EXPECT_TRUE(state.collected);
  EXPECT_EQ(state.dir, "");
  EXPECT_NE(state.not_judged.find("cri-o 1.30.4 does not report its CNI config directory"),
            std::string::npos)
      << state.not_judged;
  EXPECT_NE(state.not_judged.find("holds no .conflist, .conf or .json file"), std::string::npos)
      << state.not_judged;
  EXPECT_NE(state.not_judged.find("Set --cni-conf-dir"), std::string::npos) << state.not_judged;
  EXPECT_TRUE(state.gaps.empty());

  WriteChain("/etc/cni/net.d", "10-calico.conflist", false);
  state = Collect(source, silent);
  EXPECT_EQ(state.dir_origin, CniDirOrigin::kDefault);
  EXPECT_EQ(state.dir, root_ + "/etc/cni/net.d");
  EXPECT_TRUE(state.not_judged.empty());
  EXPECT_EQ(state.gaps.size(), 1u);  // judged: lacks istio-cni
}

TEST_F(CniDirPrecedence, UnknowableIsNotJudgedAndSaysWhichFlagToSet) {
  CriState none;  // no runtime socket answered
  none.errors.push_back({SourceKind::kCri, "no CRI runtime socket found (probed ...)"});
  CniNodeSource source(options_);
  const CniConfigState state = Collect(source, none);
  EXPECT_EQ(state.dir_origin, CniDirOrigin::kNone);
  EXPECT_TRUE(state.errors.empty());  // not a failure of the source
  EXPECT_NE(state.not_judged.find("no container runtime answered over CRI"), std::string::npos)
      << state.not_judged;
  EXPECT_NE(state.not_judged.find(root_ + "/etc/cni/net.d does not exist"), std::string::npos)
      << state.not_judged;
  EXPECT_NE(state.not_judged.find("--cni-conf-dir"), std::string::npos) << state.not_judged;
  // --no-cri: the runtime was not asked.
  EXPECT_NE(Collect(source, CriState{}).not_judged.find("not asked (--no-cri)"), std::string::npos);
}

TEST_F(CniDirPrecedence, RuntimesDirectoryIsKeptWhileItDoesNotAnswer) {
  WriteChain(kK3sDir, "10-flannel.conflist", false);
  CniNodeSource source(options_);
  CniConfigState state = Collect(source, Containerd(kK3sDir));
  ASSERT_EQ(state.gaps.size(), 1u);
  CriState down;
  down.errors.push_back({SourceKind::kCri, "ListPodSandbox: UNAVAILABLE"});
  state = Collect(source, down);
  EXPECT_EQ(state.dir_origin, CniDirOrigin::kRuntime);
  EXPECT_EQ(state.dir, root_ + kK3sDir);
  EXPECT_EQ(state.gaps.size(), 1u);  // the same directory: its history goes on
}

TEST_F(CniDirPrecedence, AnotherDirectoryStartsItsOwnHistory) {
  WriteChain("/etc/cni/net.d", "10-calico.conflist", false);
  WriteChain(kK3sDir, "10-flannel.conflist", true);
  CniNodeSource source(options_);
  CniConfigState state = Collect(source, CriState{});  // default, broken
  EXPECT_EQ(state.dir_origin, CniDirOrigin::kDefault);
  ASSERT_EQ(state.gaps.size(), 1u);
  state = Collect(source, Containerd(kK3sDir));  // the runtime answers: its own, healthy
  EXPECT_EQ(state.dir_origin, CniDirOrigin::kRuntime);
  EXPECT_TRUE(state.gaps.empty());
}

}  // namespace
}  // namespace ad
