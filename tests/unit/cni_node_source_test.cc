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

}  // namespace
}  // namespace ad
