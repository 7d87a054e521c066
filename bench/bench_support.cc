#include "bench/bench_support.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <numeric>
#include <random>
#include <string_view>

#include "base/unique_fd.h"

extern char** environ;

namespace ad::bench {
namespace {

class SpawnFileActions {
 public:
  SpawnFileActions() { posix_spawn_file_actions_init(&actions_); }
  ~SpawnFileActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;

  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

}  // namespace

double MillisecondsBetween(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

ChildResult RunChild(const std::vector<std::string>& argv, OutputHandling output) {
  ChildResult result;
  UniqueFd read_end;
  UniqueFd write_end;
  SpawnFileActions actions;
  posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (output == OutputHandling::kDevNull) {
    posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(actions.get(), STDOUT_FILENO, STDERR_FILENO);
  } else {
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
      result.spawn_error = std::string("pipe2: ") + std::strerror(errno);
      return result;
    }
    read_end = UniqueFd(pipe_fds[0]);
    write_end = UniqueFd(pipe_fds[1]);
    posix_spawn_file_actions_adddup2(actions.get(), write_end.get(), STDOUT_FILENO);
    if (output == OutputHandling::kDrainAndDiscard) {
      posix_spawn_file_actions_adddup2(actions.get(), write_end.get(), STDERR_FILENO);
    }
  }
  std::vector<char*> argv_pointers;
  argv_pointers.reserve(argv.size() + 1);
  for (const std::string& argument : argv)
    argv_pointers.push_back(const_cast<char*>(argument.c_str()));
  argv_pointers.push_back(nullptr);

  const Clock::time_point start = Clock::now();
  pid_t pid = -1;
  if (int error =
          posix_spawn(&pid, argv[0].c_str(), actions.get(), nullptr, argv_pointers.data(), environ);
      error != 0) {
    result.spawn_error = "posix_spawn " + argv[0] + ": " + std::strerror(error);
    return result;
  }
  write_end.Reset();
  if (read_end.get() >= 0) {
    char buffer[64 * 1024];
    for (;;) {
      const ssize_t count = ::read(read_end.get(), buffer, sizeof(buffer));
      if (count > 0) {
        if (output == OutputHandling::kKeepStdout) result.stdout_text.append(buffer, count);
        continue;
      }
      if (count < 0 && errno == EINTR) continue;
      break;
    }
  }
  int status = 0;
  struct rusage usage {};
  while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  result.wall_ms = MillisecondsBetween(start, Clock::now());
  result.max_rss_kb = usage.ru_maxrss;
  auto milliseconds = [](const timeval& time) {
    return static_cast<double>(time.tv_sec) * 1e3 + static_cast<double>(time.tv_usec) / 1e3;
  };
  result.cpu_ms = milliseconds(usage.ru_utime) + milliseconds(usage.ru_stime);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::optional<std::string> FindExecutable(const std::string& name) {
  std::vector<std::string> directories;
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest = path;
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      directories.emplace_back(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
  }
  for (const char* fallback : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    directories.emplace_back(fallback);
  }
  for (const std::string& directory : directories) {
    if (directory.empty()) continue;
    const std::string candidate = directory + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::string LoadAverage() {
  std::string text;
  if (std::FILE* file = std::fopen("/proc/loadavg", "r")) {
    char buffer[128] = {};
    if (std::fgets(buffer, sizeof(buffer), file)) text = buffer;
    std::fclose(file);
  }
  // "0.52 0.58 0.59 1/123 4567\n": keep the three averages.
  size_t end = 0;
  for (int field = 0; field < 3 && end != std::string::npos; ++field) {
    end = text.find(' ', end + (field == 0 ? 0 : 1));
  }
  return text.substr(0, end);
}

std::string SelfPath() {
  std::error_code error;
  std::filesystem::path path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string() : path.string();
}

double ProcessCpuMilliseconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto milliseconds = [](const timeval& time) {
    return static_cast<double>(time.tv_sec) * 1e3 + static_cast<double>(time.tv_usec) / 1e3;
  };
  return milliseconds(usage.ru_utime) + milliseconds(usage.ru_stime);
}

Result<ShellOutTools> FindShellOutTools() {
  ShellOutTools found;
  std::optional<std::string> ip = FindExecutable("ip");
  if (!ip) return SourceError{SourceKind::kLab, "`ip` not found", ENOENT};
  found.ip_path = *ip;
  for (const char* name : {"iptables-legacy-save", "iptables-nft-save", "ip6tables-legacy-save",
                           "ip6tables-nft-save"}) {
    std::optional<std::string> path = FindExecutable(name);
    if (!path) return SourceError{SourceKind::kLab, std::string(name) + " not found", ENOENT};
    found.tools.push_back({name, {*path}});
  }
  std::optional<std::string> nft = FindExecutable("nft");
  if (!nft) return SourceError{SourceKind::kLab, "nft not found", ENOENT};
  found.tools.push_back({"nft -j list ruleset", {*nft, "-j", "list", "ruleset"}});
  return found;
}

ShellOutResult MeasureShellOut(const std::vector<std::string>& netns_names,
                               const ShellOutTools& tools, int sample,
                               const std::function<bool()>& interrupted) {
  constexpr unsigned kSampleSeed = 20240611;  // fixed: the same netns are sampled every run
  ShellOutResult result;
  result.netns_total = static_cast<int>(netns_names.size());
  std::vector<std::string> measured = netns_names;
  if (sample > 0 && sample < result.netns_total) {
    measured.clear();
    std::mt19937 generator(kSampleSeed);
    std::sample(netns_names.begin(), netns_names.end(), std::back_inserter(measured), sample,
                generator);
    result.sampled = true;
  }
  std::vector<double> netns_ms;
  std::vector<std::vector<double>> tool_ms(tools.tools.size());
  for (const std::string& netns_name : measured) {
    if (interrupted()) break;
    double this_netns_ms = 0;
    for (size_t t = 0; t < tools.tools.size(); ++t) {
      std::vector<std::string> argv = {tools.ip_path, "netns", "exec", netns_name};
      argv.insert(argv.end(), tools.tools[t].argv.begin(), tools.tools[t].argv.end());
      ChildResult child = RunChild(argv, OutputHandling::kDrainAndDiscard);
      if (!child.ran() || child.exit_code != 0) {
        if (result.failed_commands++ == 0) {
          result.first_failure =
              netns_name + " " + tools.tools[t].label + ": " +
              (child.ran() ? "exit " + std::to_string(child.exit_code) : child.spawn_error);
        }
      }
      tool_ms[t].push_back(child.wall_ms);
      this_netns_ms += child.wall_ms;
    }
    netns_ms.push_back(this_netns_ms);
  }
  result.netns_measured = static_cast<int>(netns_ms.size());
  result.mean_netns_ms = Mean(netns_ms);
  result.median_netns_ms = Median(netns_ms);
  for (const std::vector<double>& samples : tool_ms) result.tool_mean_ms.push_back(Mean(samples));
  return result;
}

}  // namespace ad::bench
