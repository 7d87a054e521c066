#include "lab/emulators.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "base/unique_fd.h"
#include "sources/ztunnel/http_get.h"

extern char** environ;

namespace ad::lab {
namespace {

namespace fs = std::filesystem;
constexpr SourceKind kSource = SourceKind::kLab;

[[noreturn]] void ReportErrnoAndExit(int report, int code) {
  const int err = errno;
  [[maybe_unused]] ssize_t ignored = ::write(report, &err, sizeof(err));
  ::_exit(code);
}

// Only async-signal-safe calls: the parent may be multithreaded. Reports errno on `report`.
[[noreturn]] void ExecDaemon(int netns_fd, int log_fd, int null_fd, int report, const char* program,
                             char* const* argv) {
  auto fail = [report](int code) { ReportErrnoAndExit(report, code); };
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &default_action, nullptr);
  if (::dup2(null_fd, STDIN_FILENO) < 0 || ::dup2(log_fd, STDOUT_FILENO) < 0 ||
      ::dup2(log_fd, STDERR_FILENO) < 0) {
    fail(126);
  }
  if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) fail(125);
  ::execve(program, argv, environ);
  ReportErrnoAndExit(report, 127);
}

bool ReadExact(int fd, void* data, size_t size) {
  auto* bytes = static_cast<char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Result<int> SpawnDaemon(const DaemonSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return SourceError{kSource, "daemon argv[0] must be an absolute path", EINVAL};
  }
  if (::access(spec.argv[0].c_str(), X_OK) != 0) return ErrnoError(kSource, spec.argv[0]);
  UniqueFd netns;
  if (!spec.netns_path.empty()) {
    netns = UniqueFd(::open(spec.netns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns.valid()) return ErrnoError(kSource, "open(" + spec.netns_path + ")");
  }
  UniqueFd log(::open(spec.log_path.empty() ? "/dev/null" : spec.log_path.c_str(),
                      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log.valid()) return ErrnoError(kSource, "open(" + spec.log_path + ")");
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null.valid()) return ErrnoError(kSource, "open(/dev/null)");
  // Two pipes: the middle child reports the daemon pid, the daemon reports a failed setns/exec
  // (the write end closes on a successful exec).
  std::array<int, 2> pid_fds{};
  std::array<int, 2> exec_fds{};
  if (::pipe2(pid_fds.data(), O_CLOEXEC) != 0) return ErrnoError(kSource, "pipe2");
  UniqueFd pid_read(pid_fds[0]);
  UniqueFd pid_write(pid_fds[1]);
  if (::pipe2(exec_fds.data(), O_CLOEXEC) != 0) return ErrnoError(kSource, "pipe2");
  UniqueFd exec_read(exec_fds[0]);
  UniqueFd exec_write(exec_fds[1]);

  std::vector<std::string> args = spec.argv;
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const pid_t middle = ::fork();
  if (middle < 0) return ErrnoError(kSource, "fork");
  if (middle == 0) {
    ::setsid();  // no controlling terminal: a closed shell does not take the daemon down
    const pid_t daemon = ::fork();
    if (daemon < 0) ::_exit(1);
    if (daemon == 0) {
      ExecDaemon(netns.get(), log.get(), null.get(), exec_write.get(), argv[0], argv.data());
    }
    [[maybe_unused]] ssize_t ignored = ::write(pid_write.get(), &daemon, sizeof(daemon));
    ::_exit(0);
  }
  pid_write.Reset();
  exec_write.Reset();
  int status = 0;
  while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }
  pid_t daemon = -1;
  if (!ReadExact(pid_read.get(), &daemon, sizeof(daemon)) || daemon <= 0) {
    return SourceError{kSource, "could not start " + spec.argv[0], ECHILD};
  }
  int child_errno = 0;
  if (ReadExact(exec_read.get(), &child_errno, sizeof(child_errno))) {
    return ErrnoError(kSource, "exec " + spec.argv[0] + " in " + spec.netns_path, child_errno);
  }
  return static_cast<int>(daemon);
}

bool DaemonRunning(int pid, const std::string& comm) {
  if (pid <= 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t open = line.find('(');
  const size_t close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= line.size()) {
    return false;
  }
  const char state = line[close + 2];
  return line.substr(open + 1, close - open - 1) == comm.substr(0, 15) && state != 'Z' &&
         state != 'X';
}

void StopDaemon(int pid, const std::string& comm, int grace_ms) {
  if (!DaemonRunning(pid, comm)) return;
  ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (DaemonRunning(pid, comm) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!DaemonRunning(pid, comm)) return;
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 200 && DaemonRunning(pid, comm); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string SimBinaryPath(const std::string& name) {
  std::vector<fs::path> candidates;
  if (const char* dir = std::getenv("AD_SIM_BIN_DIR")) candidates.emplace_back(dir);
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back(self.parent_path());
    candidates.push_back(self.parent_path() / "sim");  // tests/<test> -> tests/sim/
  }
#ifdef AD_SIM_BIN_DIR
  candidates.emplace_back(AD_SIM_BIN_DIR);
#endif
  for (const fs::path& dir : candidates) {
    const fs::path candidate = dir / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

std::map<std::string, uint64_t> ReadStatsFile(const std::string& path) {
  std::map<std::string, uint64_t> stats;
  std::ifstream in(path);
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) stats[key] = value;
  return stats;
}

Result<HttpReply> HttpGetInNetns(const std::string& netns_path, const std::string& address,
                                 uint16_t port, const std::string& path, int timeout_ms) {
  // The agent's own bounded client: the lab checks its emulators with the code the agent uses.
  ztunnel::HttpGetOptions options;
  options.total_timeout = std::chrono::milliseconds(timeout_ms);
  auto response = ztunnel::HttpGet({netns_path, address, port, path}, options);
  if (!response.ok()) return response.error();
  return HttpReply{response->status, std::move(response->body)};
}

}  // namespace ad::lab
