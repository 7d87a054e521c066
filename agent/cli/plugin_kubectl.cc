#include "cli/plugin_kubectl.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>

#include "base/unique_fd.h"
#include "model/json_reader.h"

extern char** environ;  // NOLINT: POSIX

namespace ad::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxStderr = 64 << 10;

// The child process: killed (if it still runs) and reaped when the scope ends, so an early
// return or a timeout never leaves a zombie or a running kubectl behind.
class SpawnedChild {
 public:
  explicit SpawnedChild(pid_t pid) : pid_(pid) {}
  SpawnedChild(const SpawnedChild&) = delete;
  SpawnedChild& operator=(const SpawnedChild&) = delete;
  ~SpawnedChild() {
    if (pid_ <= 0) return;
    (void)::kill(pid_, SIGKILL);
    (void)Reap(0);
  }

  // Waits for the child's exit; `status` is set when it has exited. Non-blocking with
  // WNOHANG.
  bool Reap(int flags, int* status = nullptr) {
    int local = 0;
    pid_t got = 0;
    do {
      got = ::waitpid(pid_, &local, flags);
    } while (got < 0 && errno == EINTR);
    if (got != pid_) return false;
    pid_ = -1;
    if (status != nullptr) *status = local;
    return true;
  }
  void Kill() const { (void)::kill(pid_, SIGKILL); }

 private:
  pid_t pid_;
};

// posix_spawn's file actions and attributes, destroyed with the scope.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  SpawnSetup() { posix_spawn_file_actions_init(&actions); }
  ~SpawnSetup() { posix_spawn_file_actions_destroy(&actions); }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

int MsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// Reads both pipes until they close or the deadline passes; false at the deadline.
bool Drain(UniqueFd& out, UniqueFd& err, Clock::time_point deadline, size_t max_output,
           ProcessOutput& result) {
  std::array<char, 65536> chunk;
  while (out.valid() || err.valid()) {
    const int left = MsLeft(deadline);
    if (left == 0) return false;
    pollfd fds[2] = {{out.valid() ? out.get() : -1, POLLIN, 0},
                     {err.valid() ? err.get() : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, left);
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      UniqueFd& fd = i == 0 ? out : err;
      const ssize_t n = ::read(fd.get(), chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fd.Reset();
        continue;
      }
      std::string& sink = i == 0 ? result.out : result.err;
      const size_t cap = i == 0 ? max_output : kMaxStderr;
      const size_t room = cap - std::min(cap, sink.size());
      if (static_cast<size_t>(n) > room && i == 0) result.truncated = true;
      sink.append(chunk.data(), std::min(static_cast<size_t>(n), room));
    }
  }
  return true;
}

}  // namespace

ProcessOutput RunProcess(const ProcessSpec& spec) {
  ProcessOutput result;
  if (spec.argv.empty()) {
    result.spawn_error = "no command";
    return result;
  }
  // O_CLOEXEC from the start: a child spawned by another thread at the same moment must not
  // inherit these ends (it would hold the write end open and hide this child's EOF).
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    result.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  UniqueFd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    result.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  UniqueFd err_read(err_pipe[0]), err_write(err_pipe[1]);
  SpawnSetup setup;
  posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, out_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, err_write.get(), STDERR_FILENO);
  std::vector<char*> argv;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, argv[0], &setup.actions, nullptr, argv.data(), environ);
  if (spawned != 0) {
    result.spawn_error = spec.argv[0] + ": " + std::strerror(spawned);
    return result;
  }
  SpawnedChild child(pid);
  out_write.Reset();
  err_write.Reset();
  const Clock::time_point deadline = Clock::now() + spec.timeout;
  bool in_time = Drain(out_read, err_read, deadline, spec.max_output, result);
  int status = 0;
  // Both pipes closed: the child exits about now (or holds on without output until the deadline).
  while (in_time && !child.Reap(WNOHANG, &status)) {
    if (MsLeft(deadline) == 0) {
      in_time = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!in_time) {
    child.Kill();
    (void)child.Reap(0, &status);
    result.timed_out = true;
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

std::string FirstLine(const std::string& text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) return line.size() > 300 ? line.substr(0, 300) + "..." : line;
    start = end + 1;
  }
  return "";
}

namespace {

bool IsKlogLine(const std::string& line) {
  // Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg
  return line.size() > 14 && std::string_view("IWEF").find(line[0]) != std::string_view::npos &&
         std::isdigit(static_cast<unsigned char>(line[1])) && line[5] == ' ' && line[8] == ':';
}

}  // namespace

std::string KubectlMessage(const std::string& err) {
  size_t start = 0;
  while (start < err.size()) {
    size_t end = err.find('\n', start);
    if (end == std::string::npos) end = err.size();
    const std::string line = FirstLine(err.substr(start, end - start));
    if (!line.empty() && !IsKlogLine(line) && !line.starts_with("command terminated with exit")) {
      return line;
    }
    start = end + 1;
  }
  return FirstLine(err);
}

namespace {

class KubectlProcess : public Kubectl {
 public:
  explicit KubectlProcess(KubectlOptions options) : options_(std::move(options)) {}
  ProcessOutput Run(const std::vector<std::string>& args,
                    std::chrono::milliseconds timeout) override {
    ProcessSpec spec;
    spec.argv = {options_.binary};
    if (!options_.kubeconfig.empty())
      spec.argv.insert(spec.argv.end(), {"--kubeconfig", options_.kubeconfig});
    if (!options_.context.empty())
      spec.argv.insert(spec.argv.end(), {"--context", options_.context});
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.timeout = timeout;
    return RunProcess(spec);
  }

 private:
  KubectlOptions options_;
};

SourceError BadJson(const std::string& what) {
  return SourceError{SourceKind::kKubeApi, what, EINVAL};
}

// The document, or why kubectl's output is not JSON.
Result<rapidjson::Document> ParseKubectlJson(const std::string& json) {
  rapidjson::Document document;
  const JsonStatus status = ParseJsonDocument(json, document);
  if (!status.ok()) return BadJson("kubectl printed no JSON: " + status.error);
  if (!document.IsObject()) return BadJson("kubectl printed JSON that is not an object");
  return document;
}

const rapidjson::Value* Path(const rapidjson::Value& object,
                             std::initializer_list<std::string_view> keys) {
  const rapidjson::Value* at = &object;
  for (std::string_view key : keys) {
    at = JsonMember(*at, key);
    if (at == nullptr) return nullptr;
  }
  return at;
}

AgentPod ReadAgentPod(const rapidjson::Value& pod, const std::string& container) {
  AgentPod agent;
  agent.namespace_name = JsonText(Path(pod, {"metadata", "namespace"}));
  agent.name = JsonText(Path(pod, {"metadata", "name"}));
  agent.created = JsonText(Path(pod, {"metadata", "creationTimestamp"}));
  agent.deleting = Path(pod, {"metadata", "deletionTimestamp"}) != nullptr;
  agent.node = JsonText(Path(pod, {"spec", "nodeName"}));
  agent.phase = JsonText(Path(pod, {"status", "phase"}));
  const rapidjson::Value* containers = Path(pod, {"spec", "containers"});
  if (containers != nullptr && containers->IsArray()) {
    for (const rapidjson::Value& c : containers->GetArray()) {
      if (JsonStringMember(c, "name") == container) agent.image = JsonStringMember(c, "image");
    }
  }
  const rapidjson::Value* statuses = Path(pod, {"status", "containerStatuses"});
  if (statuses != nullptr && statuses->IsArray()) {
    for (const rapidjson::Value& s : statuses->GetArray()) {
      if (JsonStringMember(s, "name") != container) continue;
      const rapidjson::Value* running = Path(s, {"state", "running"});
      agent.container_running = running != nullptr && running->IsObject();
    }
  }
  return agent;
}

}  // namespace

std::unique_ptr<Kubectl> MakeKubectl(const KubectlOptions& options) {
  return std::make_unique<KubectlProcess>(options);
}

Result<std::vector<AgentPod>> ParseAgentPods(const std::string& json,
                                             const std::string& container) {
  Result<rapidjson::Document> document = ParseKubectlJson(json);
  if (!document.ok()) return document.error();
  std::vector<AgentPod> pods;
  const rapidjson::Value* items = JsonMember(*document, "items");
  if (items == nullptr) {
    // One object (`kubectl get pod NAME -o json`).
    if (JsonStringMember(*document, "kind") != "Pod") return BadJson("not a pod list");
    pods.push_back(ReadAgentPod(*document, container));
    return pods;
  }
  if (!items->IsArray()) return BadJson("a pod list whose items are not an array");
  for (const rapidjson::Value& pod : items->GetArray()) {
    if (!pod.IsObject()) return BadJson("a pod list item that is not an object");
    pods.push_back(ReadAgentPod(pod, container));
  }
  return pods;
}

Result<std::vector<std::string>> ParseNodeNames(const std::string& json) {
  Result<rapidjson::Document> document = ParseKubectlJson(json);
  if (!document.ok()) return document.error();
  const rapidjson::Value* items = JsonMember(*document, "items");
  if (items == nullptr || !items->IsArray()) return BadJson("not a node list");
  std::vector<std::string> names;
  for (const rapidjson::Value& node : items->GetArray()) {
    const std::string name(JsonText(Path(node, {"metadata", "name"})));
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

Result<PodPlacement> ParsePodPlacement(const std::string& json) {
  Result<rapidjson::Document> document = ParseKubectlJson(json);
  if (!document.ok()) return document.error();
  PodPlacement placement;
  placement.name = JsonText(Path(*document, {"metadata", "name"}));
  placement.namespace_name = JsonText(Path(*document, {"metadata", "namespace"}));
  placement.node = JsonText(Path(*document, {"spec", "nodeName"}));
  if (placement.name.empty() || placement.namespace_name.empty()) return BadJson("not a pod");
  return placement;
}

std::string ImageTag(const std::string& image) {
  const std::string name = image.substr(0, image.find('@'));
  const size_t slash = name.rfind('/');
  const size_t colon = name.rfind(':');
  // A colon before the last slash is a registry's port, not a tag.
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash)) return "";
  return name.substr(colon + 1);
}

}  // namespace ad::cli
