// Helpers the daemon benches share (serve_bench, churn_bench, serve_soak): the real
// `ambient-doctor serve` binary as a child on a lab, its /proc figures, its /metrics, and a
// WatchFindings stream whose events are stamped when they arrive. Benchmarks measure and print;
// they never assert.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.grpc.pb.h"
#include "bench/bench_support.h"

namespace ad::bench {

// p in [0, 1]; nearest rank (p99 of 200 values is the 198th).
double Percentile(std::vector<double> values, double fraction);

// `ambient-doctor` next to this bench's build tree (build/agent/ambient-doctor), or $AD_DOCTOR.
std::string DoctorPath();

struct ServeOptions {
  std::string lab_prefix;
  std::string api_socket;          // unix socket path
  int metrics_port = 0;            // on 127.0.0.1
  std::string log_path;            // stdout + stderr of serve (appended)
  std::vector<std::string> extra;  // more serve flags
};

// The daemon as a child process: started in the constructor, SIGTERM (then SIGKILL) and reaped
// in the destructor.
class ServeProcess {
 public:
  explicit ServeProcess(ServeOptions options);
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& error() const { return error_; }
  const ServeOptions& options() const { return options_; }
  std::shared_ptr<grpc::Channel> Channel() const;
  // Waits until GetReport answers (the first scan is published); false on timeout or exit.
  bool WaitReady(std::chrono::milliseconds timeout);
  // SIGTERM, wait up to 10 s, then SIGKILL. Returns the exit code (128 + signal when killed).
  int Stop();

 private:
  ServeOptions options_;
  pid_t pid_ = -1;
  std::string error_;
};

struct ProcSample {
  bool ok = false;
  double cpu_seconds = 0;  // utime + stime (/proc/<pid>/stat)
  long rss_kib = 0;        // VmRSS
  long hwm_kib = 0;        // VmHWM (peak RSS)
  int threads = 0;
  int fds = 0;
};
ProcSample ReadProcSample(pid_t pid);

// GET http://127.0.0.1:<port>/metrics; empty on failure.
std::string ScrapeMetrics(int port);
// The sum of every sample of `name` (any labels); nullopt when absent.
std::optional<double> MetricValue(const std::string& exposition, const std::string& name);

// One WatchFindings stream, read on its own thread; every event is kept with its arrival time.
class FindingStream {
 public:
  struct Event {
    Clock::time_point arrived;
    ambientdoctor::v1::FindingEvent event;
  };

  explicit FindingStream(std::shared_ptr<grpc::Channel> channel);
  ~FindingStream();
  FindingStream(const FindingStream&) = delete;
  FindingStream& operator=(const FindingStream&) = delete;

  // Waits for the initial set (end_of_current); false on timeout or a broken stream.
  bool WaitCurrent(std::chrono::milliseconds timeout);
  // Removes and returns the first event (in arrival order) that `match` accepts, waiting up to
  // `timeout` for it; events before it that do not match are dropped.
  std::optional<Event> WaitFor(
      const std::function<bool(const ambientdoctor::v1::FindingEvent&)>& match,
      std::chrono::milliseconds timeout);
  // Drops every queued event.
  void Clear();
  bool broken() const;
  std::string status_text() const;

 private:
  void Read();

  std::unique_ptr<ambientdoctor::v1::AmbientDoctor::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<ambientdoctor::v1::FindingEvent>> reader_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Event> events_;
  bool current_done_ = false;
  bool ended_ = false;
  std::string status_text_;
  std::thread thread_;
};

// posix_spawn with stdout/stderr to /dev/null; returns the pid or -1.
pid_t SpawnQuiet(const std::vector<std::string>& argv);
// waitpid; the exit code, or -1.
int WaitExit(pid_t pid);
// Spawn and wait; the exit code, or -1.
int RunQuiet(const std::vector<std::string>& argv);
// Spawn with stdout captured (stderr to /dev/null); empty on failure.
std::string CaptureOutput(const std::vector<std::string>& argv);

// Raises RLIMIT_NOFILE to its hard limit (the daemon holds ~7 fds per netns).
void RaiseFileLimit();

}  // namespace ad::bench
