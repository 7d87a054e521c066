// Long-lived threads for work that enters another netns. setns() is per thread, so every read of a
// foreign netns runs off the caller's thread; starting a thread per read cost more than many reads
// (clone, a stack, thread-local receive buffers set up and unmapped each time), and the daemon's
// every poll reads a few netns from several sources. Each task enters its netns through a
// NetnsGuard, which restores the worker's netns before the task returns (or aborts the process),
// so a worker is always back in the agent's own netns between tasks.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace ad {

class NetnsWorkers {
 public:
  // The process's pool. Threads start on first use; at most `kept_idle` idle ones are kept, and
  // a caller that finds none idle gets a new one, so concurrent callers (a gRPC rules view
  // during a scan) never wait for each other.
  static NetnsWorkers& Shared();

  explicit NetnsWorkers(size_t kept_idle = 3);
  ~NetnsWorkers();  // joins the idle workers (callers must have returned)
  NetnsWorkers(const NetnsWorkers&) = delete;
  NetnsWorkers& operator=(const NetnsWorkers&) = delete;

  // Runs `task` on a worker and waits for it. On a worker thread (a task that reads another
  // netns itself) it runs inline: the task's own NetnsGuard restores that worker's netns. An
  // exception leaves the worker and is rethrown here.
  void Run(const std::function<void()>& task);
  // Runs `task` on `copies` workers at once and waits for all (a scan's parallel netns reads,
  // which share their work through the task). Inline, once, on a worker thread.
  void RunOnEach(size_t copies, const std::function<void()>& task);

  struct Stats {
    uint64_t threads_started = 0;
    uint64_t tasks = 0;  // tasks handed to a worker (not those run inline)
  };
  Stats stats() const;

 private:
  struct Worker;
  std::unique_ptr<Worker> Acquire();
  void Release(std::unique_ptr<Worker> worker);
  static void Loop(Worker* worker);

  const size_t kept_idle_;
  const pid_t owner_;  // a forked child runs its tasks on plain threads: the pool is its parent's
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Worker>> idle_;
  Stats stats_;
};

}  // namespace ad
