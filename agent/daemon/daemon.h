// The node daemon's core loop (the `serve` command's engine room): one long-lived Engine whose
// results are published to a ResultHub for every output (gRPC, metrics, logs), stepped at start,
// then on its poll interval (later also on change events), with one log line per finding opened
// or resolved and per source degraded or recovered, never one per scan. Stop() ends Run() within
// one wake-up, from any thread or a signal handler.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/result_hub.h"
#include "sources/unique_fd.h"

namespace ad {

enum class LogFormat : uint8_t { kText, kJson };

struct DaemonOptions {
  EngineConfig engine;
  std::chrono::milliseconds poll_interval{5000};  // ZDS sources and legacy fingerprints
  size_t resolved_ring = 1000;                    // resolved findings kept for history
  size_t hub_ring = 64;                           // published results kept for lagging streams
};

// One log line (without timestamp and level, which the logger adds) per change of one step: the
// daemon's log contract, pure so it is tested without a logger. Text: "finding opened ZDS_STALL
// /run/netns/x (inode 5) pod demo/a [hand-off]: summary"; JSON: one object per line.
std::vector<std::string> StepLogLines(const EngineStep& step, LogFormat format);

class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  Daemon(DaemonOptions options, std::unique_ptr<NetnsInspector> inspector, Engine::Clock clock);

  ResultHub& hub() { return hub_; }

  // Steps at start, then every poll interval, until Stop(). Logs through spdlog's default logger.
  void Run(LogFormat format = LogFormat::kText);
  // Async-signal-safe (writes an eventfd).
  void Stop();
  uint64_t steps() const { return steps_; }

 private:
  DaemonOptions options_;
  Engine engine_;
  ResultHub hub_;
  UniqueFd wake_;  // eventfd: Stop() writes it, Run() waits on it between steps
  uint64_t steps_ = 0;
};

}  // namespace ad
