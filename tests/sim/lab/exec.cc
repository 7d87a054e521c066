#include "lab/exec.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "base/unique_fd.h"

extern char** environ;

namespace ad::lab {
namespace {

constexpr SourceKind kSource = SourceKind::kLab;

std::string ResolveProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::string search = "/usr/sbin:/sbin:/usr/bin:/bin";
  if (const char* path = std::getenv("PATH")) search = std::string(path) + ":" + search;
  std::istringstream dirs(search);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

struct Pipe {
  UniqueFd read_end;
  UniqueFd write_end;
};

bool MakePipe(Pipe& pipe) {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) return false;
  pipe.read_end = UniqueFd(fds[0]);
  pipe.write_end = UniqueFd(fds[1]);
  return true;
}

// Only async-signal-safe calls between fork and execve: the parent may be multithreaded.
[[noreturn]] void ExecChild(int netns_fd, const Pipe& in, const Pipe& out, const Pipe& err,
                            const char* program, char* const* argv) {
  if (::dup2(in.read_end.get(), STDIN_FILENO) < 0 ||
      ::dup2(out.write_end.get(), STDOUT_FILENO) < 0 ||
      ::dup2(err.write_end.get(), STDERR_FILENO) < 0) {
    ::_exit(126);
  }
  if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) {
    constexpr char kMessage[] = "lab-exec: setns failed; refusing to run in the caller's netns\n";
    [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    ::_exit(125);
  }
  ::execve(program, argv, environ);
  ::_exit(127);
}

}  // namespace

std::string DescribeCommand(const Command& command) {
  std::string text;
  if (!command.netns_path.empty()) text = "[netns " + command.netns_path + "] ";
  for (size_t i = 0; i < command.argv.size(); ++i) text += (i ? " " : "") + command.argv[i];
  return text;
}

Result<CommandOutput> RunCommand(const Command& command) {
  if (command.argv.empty()) return SourceError{kSource, "empty argv", EINVAL};
  const std::string program = ResolveProgram(command.argv[0]);
  if (program.empty()) {
    return SourceError{kSource, command.argv[0] + ": not found in PATH", ENOENT};
  }
  UniqueFd netns;
  if (!command.netns_path.empty()) {
    netns = UniqueFd(::open(command.netns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns.valid()) return ErrnoError(kSource, "open(" + command.netns_path + ")");
  }
  Pipe in, out, err;
  if (!MakePipe(in) || !MakePipe(out) || !MakePipe(err)) return ErrnoError(kSource, "pipe2");

  std::vector<char*> argv;
  std::vector<std::string> args = command.argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoError(kSource, "fork");
  if (pid == 0) ExecChild(netns.get(), in, out, err, program.c_str(), argv.data());

  in.read_end.Reset();
  out.write_end.Reset();
  err.write_end.Reset();
  // A short write to a closed stdin is the child's choice; SIGPIPE must not kill us for it.
  static const bool sigpipe_ignored = [] { return ::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
  (void)sigpipe_ignored;

  CommandOutput result;
  size_t written = 0;
  if (command.stdin_text.empty()) in.write_end.Reset();
  std::array<char, 65536> buffer{};
  while (out.read_end.valid() || err.read_end.valid()) {
    std::array<pollfd, 3> fds{};
    nfds_t count = 0;
    auto watch = [&](const UniqueFd& fd, short events) {
      if (fd.valid()) fds[count++] = pollfd{fd.get(), events, 0};
    };
    watch(out.read_end, POLLIN);
    watch(err.read_end, POLLIN);
    watch(in.write_end, POLLOUT);
    if (::poll(fds.data(), count, -1) < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(kSource, "poll");
    }
    for (nfds_t i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      if (in.write_end.valid() && fds[i].fd == in.write_end.get()) {
        const ssize_t n = ::write(fds[i].fd, command.stdin_text.data() + written,
                                  command.stdin_text.size() - written);
        if (n < 0 && errno != EINTR && errno != EAGAIN) {
          in.write_end.Reset();
        } else if (n > 0) {
          written += static_cast<size_t>(n);
          if (written == command.stdin_text.size()) in.write_end.Reset();
        }
        continue;
      }
      UniqueFd& source =
          (out.read_end.valid() && fds[i].fd == out.read_end.get()) ? out.read_end : err.read_end;
      std::string& sink = (&source == &out.read_end) ? result.out : result.err;
      const ssize_t n = ::read(fds[i].fd, buffer.data(), buffer.size());
      if (n > 0) {
        sink.append(buffer.data(), static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        source.Reset();
      }
    }
  }
  in.write_end.Reset();
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoError(kSource, "waitpid");
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Result<CommandOutput> RunChecked(const Command& command) {
  Result<CommandOutput> result = RunCommand(command);
  if (!result.ok()) return result;
  if (result->exit_code != 0) {
    std::string stderr_text = result->err;
    while (!stderr_text.empty() && stderr_text.back() == '\n') stderr_text.pop_back();
    return SourceError{kSource,
                       DescribeCommand(command) + " exited " + std::to_string(result->exit_code) +
                           (stderr_text.empty() ? "" : ": " + stderr_text),
                       0};
  }
  return result;
}

}  // namespace ad::lab
