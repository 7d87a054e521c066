#include "bench/serve_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/unique_fd.h"

extern char** environ;

namespace ad::bench {
namespace {

namespace pb = ambientdoctor::v1;

class SpawnActions {
 public:
  SpawnActions() { posix_spawn_file_actions_init(&actions_); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

pid_t Spawn(const std::vector<std::string>& argv, SpawnActions& actions) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], actions.get(), nullptr, args.data(), environ) != 0) return -1;
  return pid;
}

bool Exited(pid_t pid, int* code) {
  int status = 0;
  const pid_t done = ::waitpid(pid, &status, WNOHANG);
  if (done != pid) return false;
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

}  // namespace

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = fraction * static_cast<double>(values.size());
  size_t index = rank <= 1 ? 0 : static_cast<size_t>(rank + 0.999999) - 1;
  return values[std::min(index, values.size() - 1)];
}

std::string DoctorPath() {
  if (const char* path = std::getenv("AD_DOCTOR")) return path;
  const std::filesystem::path self = SelfPath();
  return (self.parent_path().parent_path() / "agent" / "ambient-doctor").string();
}

ServeProcess::ServeProcess(ServeOptions options) : options_(std::move(options)) {
  std::vector<std::string> argv = {
      DoctorPath(),        "serve",
      "--lab-prefix",      options_.lab_prefix,
      "--api-socket",      options_.api_socket,
      "--metrics-address", "127.0.0.1:" + std::to_string(options_.metrics_port),
      "--log-level",       "info"};
  argv.insert(argv.end(), options_.extra.begin(), options_.extra.end());
  SpawnActions actions;
  posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  const std::string log = options_.log_path.empty() ? "/dev/null" : options_.log_path;
  posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(actions.get(), STDOUT_FILENO, STDERR_FILENO);
  pid_ = Spawn(argv, actions);
  if (pid_ <= 0) error_ = "posix_spawn " + argv[0] + " failed";
}

ServeProcess::~ServeProcess() { Stop(); }

std::shared_ptr<grpc::Channel> ServeProcess::Channel() const {
  return grpc::CreateChannel("unix:" + options_.api_socket, grpc::InsecureChannelCredentials());
}

bool ServeProcess::WaitReady(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto stub = pb::AmbientDoctor::NewStub(Channel());
  while (Clock::now() < deadline) {
    int code = 0;
    if (pid_ <= 0 || Exited(pid_, &code)) {
      error_ = "serve exited (" + std::to_string(code) + "), see " + options_.log_path;
      pid_ = -1;
      return false;
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    pb::Report report;
    if (stub->GetReport(&context, {}, &report).ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  error_ = "serve did not answer GetReport in time";
  return false;
}

int ServeProcess::Stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int code = -1;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!Exited(pid_, &code)) {
    if (Clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      code = 128 + SIGKILL;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  // serve removed its socket; its directory goes too when nothing else is in it.
  std::error_code ignored;
  std::filesystem::remove(std::filesystem::path(options_.api_socket).parent_path(), ignored);
  return code;
}

ProcSample ReadProcSample(pid_t pid) {
  ProcSample sample;
  const std::string base = "/proc/" + std::to_string(pid);
  std::ifstream stat_file(base + "/stat");
  std::string stat_text((std::istreambuf_iterator<char>(stat_file)), {});
  // comm may hold spaces: the fields after it start past the last ')'.
  const size_t close = stat_text.rfind(')');
  if (close == std::string::npos) return sample;
  std::istringstream fields(stat_text.substr(close + 2));
  std::vector<std::string> values;
  for (std::string value; fields >> value;) values.push_back(value);
  // After comm: state is field 3, utime 14, stime 15, num_threads 20 (1-based, man proc).
  if (values.size() < 18) return sample;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  sample.cpu_seconds = (std::stod(values[11]) + std::stod(values[12])) / ticks;
  sample.threads = std::atoi(values[17].c_str());
  std::ifstream status(base + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) sample.rss_kib = std::atol(line.c_str() + 6);
    if (line.rfind("VmHWM:", 0) == 0) sample.hwm_kib = std::atol(line.c_str() + 6);
  }
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator(base + "/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++sample.fds;
  }
  sample.ok = !error;
  return sample;
}

std::string ScrapeMetrics(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return {};
  timeval timeout{.tv_sec = 3, .tv_usec = 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return {};
  const std::string request =
      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) < 0) return {};
  std::string response;
  char buffer[16384];
  for (;;) {
    const ssize_t count = ::recv(fd.get(), buffer, sizeof(buffer), 0);
    if (count <= 0) break;
    response.append(buffer, static_cast<size_t>(count));
  }
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? std::string() : response.substr(body + 4);
}

std::optional<double> MetricValue(const std::string& exposition, const std::string& name) {
  std::optional<double> sum;
  std::istringstream lines(exposition);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != ' ' && next != '{') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    sum = sum.value_or(0) + std::strtod(line.c_str() + space + 1, nullptr);
  }
  return sum;
}

FindingStream::FindingStream(std::shared_ptr<grpc::Channel> channel)
    : stub_(pb::AmbientDoctor::NewStub(std::move(channel))) {
  reader_ = stub_->WatchFindings(&context_, {});
  thread_ = std::thread([this] { Read(); });
}

FindingStream::~FindingStream() {
  context_.TryCancel();
  if (thread_.joinable()) thread_.join();
}

void FindingStream::Read() {
  pb::FindingEvent event;
  while (reader_->Read(&event)) {
    const Clock::time_point arrived = Clock::now();
    std::lock_guard lock(mutex_);
    if (event.kind() == pb::FindingEvent::KIND_CURRENT) {
      if (event.end_of_current()) current_done_ = true;
    } else {
      events_.push_back({arrived, event});
    }
    changed_.notify_all();
  }
  const grpc::Status status = reader_->Finish();
  std::lock_guard lock(mutex_);
  ended_ = true;
  status_text_ = std::to_string(status.error_code()) + " " + status.error_message();
  changed_.notify_all();
}

bool FindingStream::WaitCurrent(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [this] { return current_done_ || ended_; }) &&
         current_done_;
}

std::optional<FindingStream::Event> FindingStream::WaitFor(
    const std::function<bool(const pb::FindingEvent&)>& match, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lock(mutex_);
  for (;;) {
    while (!events_.empty()) {
      Event front = std::move(events_.front());
      events_.pop_front();
      if (match(front.event)) return front;
    }
    if (ended_) return std::nullopt;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && events_.empty()) {
      return std::nullopt;
    }
  }
}

void FindingStream::Clear() {
  std::lock_guard lock(mutex_);
  events_.clear();
}

bool FindingStream::broken() const {
  std::lock_guard lock(mutex_);
  return ended_;
}

std::string FindingStream::status_text() const {
  std::lock_guard lock(mutex_);
  return status_text_;
}

pid_t SpawnQuiet(const std::vector<std::string>& argv) {
  SpawnActions actions;
  posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(actions.get(), STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  return Spawn(argv, actions);
}

int WaitExit(pid_t pid) {
  int status = 0;
  if (pid <= 0) return -1;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int RunQuiet(const std::vector<std::string>& argv) { return WaitExit(SpawnQuiet(argv)); }

std::string CaptureOutput(const std::vector<std::string>& argv) {
  ChildResult child = RunChild(argv, OutputHandling::kKeepStdout);
  return child.ran() && child.exit_code == 0 ? child.stdout_text : std::string();
}

void RaiseFileLimit() {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
}

}  // namespace ad::bench
