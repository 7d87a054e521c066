// The daemon loop: it steps at start and on its interval, publishes every step to the hub, logs
// only changes, and stops within one wake-up of Stop() (streams then see the hub stopped).
#include "daemon/daemon.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "model/json_reader.h"
#include "netns_test_util.h"
#include "scripted_inspector.h"

namespace ad {
namespace {

using std::chrono::milliseconds;

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    netns_ = std::make_unique<testing::ScopedNetns>("daemon");
    ASSERT_TRUE(netns_->ok());
    options_.engine.discovery.proc_root.clear();
    options_.engine.discovery.netns_dirs = {"/run/netns"};
    options_.engine.discovery.name_glob = netns_->name();
    options_.engine.discovery.host_netns_path = netns_->path();
    options_.engine.zds = false;
    options_.engine.cri = false;
    options_.poll_interval = milliseconds(50);
  }

  std::unique_ptr<testing::ScopedNetns> netns_;
  DaemonOptions options_;
};

TEST_F(DaemonTest, PublishesEveryStepAndStopsPromptly) {
  auto inspector = std::make_unique<ScriptedInspector>();
  ScriptedInspector* script = inspector.get();
  script->SetNext(PartlyFailed("dump: EPERM"));
  Daemon daemon(options_, std::move(inspector), Engine::SystemClockMs);
  std::thread runner([&daemon] { daemon.Run(); });

  ResultHub::Since first = daemon.hub().WaitSince(0, milliseconds(10'000));
  ASSERT_FALSE(first.results.empty());
  EXPECT_EQ(first.results[0]->trigger, StepTrigger::kStartup);
  ASSERT_EQ(first.results[0]->step.changes.size(), 1u);
  script->SetNext(Readable());  // the condition goes away
  bool resolved = false;
  uint64_t seen = first.results.back()->sequence;
  for (int i = 0; i < 100 && !resolved; ++i) {
    ResultHub::Since next = daemon.hub().WaitSince(seen, milliseconds(1000));
    for (const auto& result : next.results) {
      EXPECT_NE(result->trigger, StepTrigger::kStartup);  // the re-read after watching, polls
      for (const FindingChange& change : result->step.changes) {
        resolved = resolved || change.kind == FindingChange::Kind::kResolved;
      }
      seen = result->sequence;
    }
  }
  EXPECT_TRUE(resolved);

  const auto stop_at = std::chrono::steady_clock::now();
  daemon.Stop();
  runner.join();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_at, std::chrono::seconds(5))
      << "generous bound: a hang, not speed, is what this catches";
  EXPECT_TRUE(daemon.hub().WaitSince(seen, milliseconds(10'000)).stopped);
  EXPECT_GE(daemon.steps(), 2u);
}

TEST(DaemonLog, OneLinePerChangeInTextAndJson) {
  EngineStep step;
  Finding finding;
  finding.code = FindingCode::kZdsStall;
  finding.severity = Severity::kCritical;
  finding.netns_path = "/run/netns/x";
  finding.netns_inode = 5;
  finding.pod = "demo/a";
  finding.subject = "hand-off";
  finding.summary = "stalled \"quoted\"";
  step.changes.push_back({FindingChange::Kind::kOpened, finding});
  step.source_changes.push_back({SourceChange::Kind::kDegraded, SourceKind::kCri, "refused"});
  const auto text = StepLogLines(step, LogFormat::kText);
  ASSERT_EQ(text.size(), 2u);
  EXPECT_EQ(text[0], "source degraded cri: refused");
  EXPECT_EQ(text[1],
            "finding opened ZDS_STALL critical /run/netns/x (inode 5) pod demo/a [hand-off]: "
            "stalled \"quoted\"");
  const auto json = StepLogLines(step, LogFormat::kJson);
  ASSERT_EQ(json.size(), 2u);
  rapidjson::Document parsed;
  const JsonStatus read = ParseJsonDocument(json[1], parsed);
  ASSERT_TRUE(read.ok()) << read.error;
  EXPECT_EQ(JsonStringMember(parsed, "event"), "finding_opened");
  EXPECT_EQ(JsonStringMember(parsed, "code"), "ZDS_STALL");
  EXPECT_EQ(JsonStringMember(parsed, "summary"), "stalled \"quoted\"");
  EXPECT_TRUE(StepLogLines(EngineStep{}, LogFormat::kText).empty()) << "no line per scan";
}

}  // namespace
}  // namespace ad
