// The hub every output reads: sequence numbers, the bounded ring, waiting, gaps and shutdown.
#include "engine/result_hub.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace ad {
namespace {

using std::chrono::milliseconds;

TEST(ResultHub, PublishesInSequenceAndKeepsTheLatest) {
  ResultHub hub(3);
  EXPECT_EQ(hub.Latest(), nullptr);
  for (int i = 0; i < 5; ++i) hub.Publish(StepTrigger::kPoll, EngineStep{});
  ASSERT_NE(hub.Latest(), nullptr);
  EXPECT_EQ(hub.Latest()->sequence, 5u);
  EXPECT_EQ(hub.Latest()->trigger, StepTrigger::kPoll);

  ResultHub::Since since = hub.WaitSince(3, milliseconds(0));
  ASSERT_EQ(since.results.size(), 2u);
  EXPECT_EQ(since.results[0]->sequence, 4u);
  EXPECT_FALSE(since.gap);
  since = hub.WaitSince(1, milliseconds(0));
  EXPECT_TRUE(since.gap) << "2 was dropped from the ring of 3";
  EXPECT_EQ(since.results.size(), 3u);
  EXPECT_TRUE(hub.WaitSince(5, milliseconds(0)).results.empty());
}

TEST(ResultHub, WaitersWakeOnPublishAndOnStop) {
  ResultHub hub;
  std::thread publisher([&hub] {
    std::this_thread::sleep_for(milliseconds(50));
    hub.Publish(StepTrigger::kEvent, EngineStep{});
  });
  ResultHub::Since since = hub.WaitSince(0, milliseconds(10'000));
  publisher.join();
  ASSERT_EQ(since.results.size(), 1u);
  EXPECT_EQ(since.results[0]->trigger, StepTrigger::kEvent);

  std::thread stopper([&hub] {
    std::this_thread::sleep_for(milliseconds(50));
    hub.Stop();
  });
  since = hub.WaitSince(1, milliseconds(10'000));
  stopper.join();
  EXPECT_TRUE(since.stopped);
  EXPECT_TRUE(since.results.empty());
  EXPECT_TRUE(hub.WaitSince(1, milliseconds(10'000)).stopped) << "returns at once when stopped";
}

TEST(ResultHub, OnlyTheLatestResultKeepsItsSnapshot) {
  ResultHub hub(4);
  EngineStep step;
  step.snapshot.netns.resize(3);
  step.analysis.findings.resize(2);
  step.changes.resize(1);
  hub.Publish(StepTrigger::kPoll, step);
  auto first = hub.Latest();
  hub.Publish(StepTrigger::kPoll, step);
  EXPECT_EQ(first->step.snapshot.netns.size(), 3u) << "a consumer's copy is never changed";
  const ResultHub::Since since = hub.WaitSince(0, milliseconds(0));
  ASSERT_EQ(since.results.size(), 2u);
  EXPECT_TRUE(since.results[0]->step.light);
  EXPECT_TRUE(since.results[0]->step.snapshot.netns.empty()) << "only netns with errors are kept";
  EXPECT_EQ(since.results[0]->step.analysis.findings.size(), 2u);
  EXPECT_EQ(since.results[0]->step.changes.size(), 1u);
  EXPECT_FALSE(since.results[1]->step.light);
  EXPECT_EQ(since.results[1]->step.snapshot.netns.size(), 3u);
}

TEST(ResultHub, OlderResultsDropTheResolvedRing) {
  // Under churn the engine's resolved ring is a new copy on most steps: a ring of results each
  // holding its own would keep ring-size copies of up to 1,000 records.
  ResultHub hub(4);
  for (int i = 0; i < 6; ++i) {
    EngineStep step;
    step.recently_resolved =
        std::make_shared<const std::vector<FindingRecord>>(static_cast<size_t>(i + 1));
    hub.Publish(StepTrigger::kEvent, std::move(step));
  }
  const ResultHub::Since since = hub.WaitSince(0, milliseconds(0));
  ASSERT_EQ(since.results.size(), 4u);
  for (size_t i = 0; i + 1 < since.results.size(); ++i) {
    EXPECT_EQ(since.results[i]->step.recently_resolved, nullptr) << "result " << i;
  }
  ASSERT_NE(hub.Latest()->step.recently_resolved, nullptr) << "a report reads the latest";
  EXPECT_EQ(hub.Latest()->step.recently_resolved->size(), 6u);
}

TEST(ResultHub, TriggerNames) {
  EXPECT_EQ(StepTriggerName(StepTrigger::kStartup), "startup");
  EXPECT_EQ(StepTriggerName(StepTrigger::kEvent), "event");
  EXPECT_EQ(StepTriggerName(StepTrigger::kPoll), "poll");
  EXPECT_EQ(StepTriggerName(StepTrigger::kResync), "resync");
}

}  // namespace
}  // namespace ad
