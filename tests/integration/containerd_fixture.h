// A real containerd (CRI plugin, runc, CNI bridge) private to one test, set up as the project facts
// (§4) describe: own netns, private root/state/socket under a temp dir, native snapshotter, a
// static pause image built and imported locally, CNI on TEST-NET-1. The destructor removes every
// sandbox, process, mount, netns, cgroup and directory it caused, whether or not the test passed.
#pragma once

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cri/runtime_v1.grpc.pb.h"
#include "netns_test_util.h"
#include "sim/containerd/cri_workloads.pb.h"
#include "sources/cri/cri_client.h"

extern char** environ;

namespace ad::testing {

class ContainerdFixture {
 public:
  static constexpr const char* kPauseImage = "local.test/pause:1";

  // Empty when everything needed is installed, else what is missing (the test skips with it).
  static std::string MissingPrerequisites() {
    std::string missing;
    for (const char* tool : {"containerd", "containerd-shim-runc-v2", "ctr", "runc", "gcc",
                             "nsenter", "ip", "tar", "gzip", "sha256sum"}) {
      if (Run(std::string("command -v ") + tool) != 0) missing += std::string(" ") + tool;
    }
    for (const char* plugin : {"bridge", "host-local", "loopback"}) {
      if (!std::filesystem::exists(std::string(kCniBinDir) + "/" + plugin)) {
        missing += std::string(" ") + kCniBinDir + "/" + plugin;
      }
    }
    return missing.empty() ? "" : "missing:" + missing;
  }

  ContainerdFixture() = default;
  ContainerdFixture(const ContainerdFixture&) = delete;
  ContainerdFixture& operator=(const ContainerdFixture&) = delete;
  ~ContainerdFixture() { TearDown(); }

  // Brings containerd up and imports the pause image. Returns an explanation on failure (the
  // destructor still cleans up whatever was created).
  std::string Start() {
    RecordPreexisting();
    std::string pattern = "/tmp/adt-ctrd-XXXXXX";  // short: unix socket paths max 107 bytes
    if (::mkdtemp(pattern.data()) == nullptr) return "mkdtemp failed";
    dir_ = pattern;
    netns_.emplace("ctrd");
    if (!netns_->ok()) return "ip netns add failed";
    Run("ip -n " + netns_->name() + " link set lo up");

    if (std::string error = WriteConfig(); !error.empty()) return error;
    const std::string image_tar = dir_ + "/pause.tar";
    if (Run(ScriptDir() + "/make-pause-image.sh " + dir_ + "/image " + kPauseImage + " " +
            image_tar) != 0) {
      return "building the pause image failed (tests/sim/containerd/make-pause-image.sh)";
    }
    if (std::string error = SpawnContainerd(); !error.empty()) return error;
    if (std::string error = WaitUntilServing(std::chrono::seconds(20)); !error.empty()) {
      return error;
    }
    if (Run("ctr -a " + socket() + " -n k8s.io images import --snapshotter native " + image_tar) !=
        0) {
      return "ctr images import failed";
    }
    return {};
  }

  const std::string& dir() const { return dir_; }
  std::string socket() const { return dir_ + "/containerd.sock"; }
  std::string endpoint() const { return "unix://" + socket(); }
  std::string state_dir() const { return dir_ + "/state"; }
  std::string netns_name() const { return netns_ ? netns_->name() : ""; }
  // The last lines of containerd's log, for failure messages.
  std::string LogTail(size_t max_bytes = 4000) const {
    const std::string log = ReadFile(dir_ + "/containerd.log");
    return log.size() > max_bytes ? log.substr(log.size() - max_bytes) : log;
  }

  std::unique_ptr<runtime::v1::RuntimeService::Stub> NewStub() const {
    return runtime::v1::RuntimeService::NewStub(
        grpc::CreateChannel(endpoint(), grpc::InsecureChannelCredentials()));
  }

  // RunPodSandbox, retried briefly: the CRI plugin learns about the imported image through an
  // event, so the first attempt can race the import.
  std::string RunSandbox(const runtime::v1::PodSandboxConfig& config, std::string& error) const {
    auto stub = NewStub();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      runtime::v1::RunPodSandboxRequest request;
      *request.mutable_config() = config;
      runtime::v1::RunPodSandboxResponse response;
      const grpc::Status status = stub->RunPodSandbox(&context, request, &response);
      if (status.ok()) return response.pod_sandbox_id();
      error = cri::DescribeStatus("RunPodSandbox", status);
      if (std::chrono::steady_clock::now() > give_up ||
          status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        return {};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }

  std::string StopSandbox(const std::string& id) const {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    runtime::v1::StopPodSandboxRequest request;
    request.set_pod_sandbox_id(id);
    runtime::v1::StopPodSandboxResponse response;
    const grpc::Status status = NewStub()->StopPodSandbox(&context, request, &response);
    return status.ok() ? "" : cri::DescribeStatus("StopPodSandbox", status);
  }

  std::string RemoveSandbox(const std::string& id) const {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    runtime::v1::RemovePodSandboxRequest request;
    request.set_pod_sandbox_id(id);
    runtime::v1::RemovePodSandboxResponse response;
    const grpc::Status status = NewStub()->RemovePodSandbox(&context, request, &response);
    return status.ok() ? "" : cri::DescribeStatus("RemovePodSandbox", status);
  }

  // A unary RuntimeService call with the kubelet's messages (cri_workloads.proto), by method name:
  // the agent's proto slice has no container RPCs.
  template <typename Request, typename Response>
  grpc::Status CallCri(const std::string& method, const Request& request, Response* response,
                       std::chrono::seconds timeout = std::chrono::seconds(30)) const {
    const std::string path = "/runtime.v1.RuntimeService/" + method;
    auto channel = grpc::CreateChannel(endpoint(), grpc::InsecureChannelCredentials());
    const grpc::internal::RpcMethod rpc(path.c_str(), grpc::internal::RpcMethod::NORMAL_RPC,
                                        channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    return grpc::internal::BlockingUnaryCall<Request, Response, google::protobuf::MessageLite,
                                             google::protobuf::MessageLite>(
        channel.get(), rpc, &context, request, response);
  }

  // Imports an OCI archive into the CRI namespace, unpacked for the native snapshotter, as a pull
  // would have; the archive's index must name it `ref` (io.containerd.image.name), fully
  // qualified, as the CRI plugin normalises references.
  std::string ImportImage(const std::string& archive, const std::string& ref) const {
    const std::string ctr = "ctr -a " + socket() + " -n k8s.io ";
    const std::string imported =
        Capture(ctr + "images import --snapshotter native " + archive + " 2>&1");
    const std::string listed = Capture(ctr + "images ls -q 2>&1");
    std::istringstream names(listed);
    for (std::string name; std::getline(names, name);) {
      if (name == ref) return {};
    }
    return ref + " is not among the images (" + listed + "); import: " + imported;
  }

  // RunPodSandbox with the kubelet's full sandbox config (namespaces, security context).
  std::string RunWorkloadSandbox(const test::cri::PodSandboxConfig& config,
                                 std::string& error) const {
    test::cri::RunPodSandboxRequest request;
    *request.mutable_config() = config;
    test::cri::RunPodSandboxResponse response;
    const grpc::Status status = Retried("RunPodSandbox", request, &response, error);
    return status.ok() ? response.pod_sandbox_id() : "";
  }

  // CreateContainer, retried briefly like RunSandbox (a just-imported image may not be known to
  // the CRI plugin yet); "" and `error` on failure.
  std::string CreateContainer(const std::string& sandbox_id,
                              const test::cri::ContainerConfig& config,
                              const test::cri::PodSandboxConfig& sandbox_config,
                              std::string& error) const {
    test::cri::CreateContainerRequest request;
    request.set_pod_sandbox_id(sandbox_id);
    *request.mutable_config() = config;
    *request.mutable_sandbox_config() = sandbox_config;
    test::cri::CreateContainerResponse response;
    const grpc::Status status = Retried("CreateContainer", request, &response, error);
    return status.ok() ? response.container_id() : "";
  }

  std::string StartContainer(const std::string& id) const {
    test::cri::StartContainerRequest request;
    request.set_container_id(id);
    test::cri::StartContainerResponse response;
    const grpc::Status status = CallCri("StartContainer", request, &response);
    return status.ok() ? "" : cri::DescribeStatus("StartContainer", status);
  }

  // StopContainer then RemoveContainer; the first error, if any.
  std::string RemoveContainer(const std::string& id, int64_t grace_seconds = 10) const {
    test::cri::StopContainerRequest stop;
    stop.set_container_id(id);
    stop.set_timeout(grace_seconds);
    test::cri::StopContainerResponse stopped;
    const grpc::Status stop_status =
        CallCri("StopContainer", stop, &stopped, std::chrono::seconds(grace_seconds + 20));
    test::cri::RemoveContainerRequest remove;
    remove.set_container_id(id);
    test::cri::RemoveContainerResponse removed;
    const grpc::Status remove_status = CallCri("RemoveContainer", remove, &removed);
    if (!stop_status.ok()) return cri::DescribeStatus("StopContainer", stop_status);
    return remove_status.ok() ? "" : cri::DescribeStatus("RemoveContainer", remove_status);
  }

  struct ExecResult {
    int exit_code = -1;
    std::string out;
    std::string err;
    std::string error;  // the call failed (not the command)
  };
  // What `kubectl exec` does: ExecSync runs `cmd` in the container and returns its output.
  ExecResult ExecSync(const std::string& id, const std::vector<std::string>& cmd,
                      int64_t timeout_seconds = 30) const {
    test::cri::ExecSyncRequest request;
    request.set_container_id(id);
    for (const std::string& arg : cmd) request.add_cmd(arg);
    request.set_timeout(timeout_seconds);
    test::cri::ExecSyncResponse response;
    ExecResult result;
    const grpc::Status status =
        CallCri("ExecSync", request, &response, std::chrono::seconds(timeout_seconds + 10));
    if (!status.ok()) {
      result.error = cri::DescribeStatus("ExecSync", status);
      return result;
    }
    result.exit_code = response.exit_code();
    result.out = response.stdout();
    result.err = response.stderr();
    return result;
  }

  // The container's state and, from the verbose info, its init process id (0 when unknown).
  struct ContainerState {
    test::cri::ContainerState state = test::cri::CONTAINER_UNKNOWN;
    int exit_code = 0;
    std::string reason;
    pid_t pid = 0;
    std::string error;
  };
  ContainerState InspectContainer(const std::string& id) const {
    test::cri::ContainerStatusRequest request;
    request.set_container_id(id);
    request.set_verbose(true);
    test::cri::ContainerStatusResponse response;
    ContainerState out;
    const grpc::Status status = CallCri("ContainerStatus", request, &response);
    if (!status.ok()) {
      out.error = cri::DescribeStatus("ContainerStatus", status);
      return out;
    }
    out.state = response.status().state();
    out.exit_code = response.status().exit_code();
    out.reason = response.status().reason() + " " + response.status().message();
    // info["info"] is containerd's JSON; "pid": N is all we need from it.
    const auto info = response.info().find("info");
    if (info != response.info().end()) {
      const size_t at = info->second.find("\"pid\":");
      if (at != std::string::npos) out.pid = std::atoi(info->second.c_str() + at + 6);
    }
    return out;
  }

  std::string SandboxIp(const std::string& id) const {
    test::cri::PodSandboxStatusRequest request;
    request.set_pod_sandbox_id(id);
    test::cri::PodSandboxStatusResponse response;
    const grpc::Status status = CallCri("PodSandboxStatus", request, &response);
    return status.ok() ? response.status().network().ip() : "";
  }

  static std::string ReadLink(const std::string& path) {
    std::error_code error;
    const auto target = std::filesystem::read_symlink(path, error);
    return error ? "" : target.string();
  }

  // SIGKILLs containerd without any sandbox teardown (a crash), for cleanup tests.
  void CrashContainerd() {
    if (containerd_pid_ <= 0) return;
    ::kill(containerd_pid_, SIGKILL);
    int status = 0;
    ::waitpid(containerd_pid_, &status, 0);
    containerd_pid_ = -1;
  }

  // Processes whose command line, cwd or root lies under `dir` (shims, pause processes).
  static std::vector<pid_t> ProcessesUnder(const std::string& dir) {
    std::vector<pid_t> pids;
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ignored)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
      const pid_t pid = std::stoi(name);
      if (pid == ::getpid()) continue;
      std::string cmdline = ReadFile(entry.path().string() + "/cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      if (cmdline.find(dir) != std::string::npos ||
          ReadLink(entry.path().string() + "/cwd").starts_with(dir) ||
          ReadLink(entry.path().string() + "/root").starts_with(dir)) {
        pids.push_back(pid);
      }
    }
    return pids;
  }

  // Mount points at or below `dir`.
  static std::vector<std::string> MountsUnder(const std::string& dir) {
    std::istringstream mountinfo(ReadFile("/proc/self/mountinfo"));
    std::vector<std::string> targets;
    for (std::string line; std::getline(mountinfo, line);) {
      std::istringstream fields(line);
      std::string id, parent, devno, root, mount_point;
      fields >> id >> parent >> devno >> root >> mount_point;
      if (mount_point == dir || mount_point.starts_with(dir + "/")) targets.push_back(mount_point);
    }
    return targets;
  }

  // Everything Start() created is gone again (safe to call twice).
  void TearDown() {
    if (containerd_pid_ > 0) {
      RemoveAllSandboxes();
      StopContainerd();
    }
    if (!dir_.empty()) {
      // Shims (by path) and pause processes (by cgroup: their root is a pivoted rootfs) left by
      // a crash or a failed stop.
      KillProcessesInNewCgroups();
      KillProcessesUnder(dir_);
      UnmountUnder(dir_);  // netns pins and rootfs mounts
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
      dir_.clear();
    }
    netns_.reset();
    if (!recorded_) return;  // never started: nothing global can be ours
    for (const std::string& path : created_if_absent_) {
      if (!preexisting_.count(path)) {
        UnmountUnder(path);
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
      }
    }
    RemoveNewCgroups();
  }

 private:
  static constexpr const char* kCniBinDir = "/usr/lib/cni";

  // A unary call retried for up to 20 s while it fails for another reason than its deadline.
  template <typename Request, typename Response>
  grpc::Status Retried(const std::string& method, const Request& request, Response* response,
                       std::string& error) const {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      const grpc::Status status = CallCri(method, request, response);
      if (status.ok()) return status;
      error = cri::DescribeStatus(method, status);
      if (std::chrono::steady_clock::now() > give_up ||
          status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }

  static std::string ScriptDir() {
    // Not __FILE__: ccache (CCACHE_BASEDIR) compiles with relative paths.
    return std::string(AD_SOURCE_DIR) + "/tests/sim/containerd";
  }

  // Global paths containerd/runc/CNI write whatever the config says (facts §4 pitfalls).
  const std::vector<std::string> created_if_absent_ = {"/run/containerd", "/var/lib/containerd",
                                                       "/var/lib/cni", "/opt/containerd"};

  void RecordPreexisting() {
    recorded_ = true;
    for (const std::string& path : created_if_absent_) {
      if (std::filesystem::exists(path)) preexisting_.insert(path);
    }
    std::error_code ignored;
    for (const auto& controller : std::filesystem::directory_iterator("/sys/fs/cgroup", ignored)) {
      const std::string k8s = controller.path().string() + "/k8s.io";
      cgroups_before_[k8s] = std::filesystem::is_directory(k8s);
      if (cgroups_before_[k8s]) {
        for (const auto& child : std::filesystem::directory_iterator(k8s, ignored)) {
          if (child.is_directory()) cgroup_children_before_.insert(child.path().string());
        }
      }
    }
  }

  // Replaces every @KEY@ in `text`.
  static std::string Fill(std::string text, const std::map<std::string, std::string>& values) {
    for (const auto& [key, value] : values) {
      const std::string marker = "@" + key + "@";
      for (size_t at = text.find(marker); at != std::string::npos;
           at = text.find(marker, at + value.size())) {
        text.replace(at, marker.size(), value);
      }
    }
    return text;
  }

  std::string WriteConfig() {
    std::error_code error;
    std::filesystem::create_directories(dir_ + "/cni", error);
    if (error) return "mkdir " + dir_ + "/cni: " + error.message();
    const std::map<std::string, std::string> values = {{"DIR", dir_},
                                                       {"STATE", state_dir()},
                                                       {"SOCKET", socket()},
                                                       {"IMAGE", kPauseImage},
                                                       {"CNI_BIN", kCniBinDir}};
    // No traffic is sent: a plain bridge on TEST-NET-1, no gateway, no masquerading.
    std::ofstream(dir_ + "/cni/10-adt.conflist") << Fill(R"({
  "cniVersion": "0.4.0",
  "name": "adt-cri",
  "plugins": [
    {"type": "bridge", "bridge": "adtbr0", "isGateway": false, "ipMasq": false,
     "ipam": {"type": "host-local", "dataDir": "@DIR@/ipam",
              "ranges": [[{"subnet": "192.0.2.0/24"}]]}},
    {"type": "loopback"}
  ]
}
)",
                                                         values);
    // Top-level keys must precede every table header, or TOML files them under that table.
    // restrict_oom_score_adj: the machine lacks CAP_SYS_RESOURCE for runc's -998.
    std::ofstream(dir_ + "/config.toml") << Fill(R"(version = 2
root = "@DIR@/root"
state = "@STATE@"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "@SOCKET@"

[plugins."io.containerd.internal.v1.opt"]
  path = "@DIR@/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "@IMAGE@"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "@CNI_BIN@"
    conf_dir = "@DIR@/cni"
    max_conf_num = 1
)",
                                                 values);
    return {};
  }

  std::string SpawnContainerd() {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log = dir_ + "/containerd.log";
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    // nsenter, not `ip netns exec`: the latter remounts /sys and runc then finds no cgroups.
    std::vector<std::string> args = {"nsenter", "--net=" + netns_->path(), "containerd", "--config",
                                     dir_ + "/config.toml"};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, "nsenter", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return std::string("posix_spawnp nsenter: ") + std::strerror(rc);
    containerd_pid_ = pid;  // nsenter execs containerd: same pid
    return {};
  }

  std::string WaitUntilServing(std::chrono::seconds limit) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    std::string last_error = "socket never appeared";
    while (std::chrono::steady_clock::now() < give_up) {
      int status = 0;
      if (::waitpid(containerd_pid_, &status, WNOHANG) == containerd_pid_) {
        containerd_pid_ = -1;
        return "containerd exited during start-up; log:\n" + LogTail();
      }
      if (std::filesystem::exists(socket())) {
        cri::CriClientOptions options;
        options.endpoints = {endpoint()};
        options.call_timeout = std::chrono::milliseconds(1000);
        auto client = cri::CriClient::Connect(options);
        if (client.ok()) return {};
        last_error = client.error().message;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "containerd CRI did not come up: " + last_error + "; log:\n" + LogTail();
  }

  void RemoveAllSandboxes() {
    cri::CriClientOptions options;
    options.endpoints = {endpoint()};
    options.call_timeout = std::chrono::milliseconds(2000);
    auto client = cri::CriClient::Connect(options);
    if (!client.ok()) return;
    auto sandboxes = client->ListPodSandbox(false);
    if (!sandboxes.ok()) return;
    for (const auto& sandbox : *sandboxes) {
      StopSandbox(sandbox.id());
      RemoveSandbox(sandbox.id());
    }
  }

  void StopContainerd() {
    ::kill(containerd_pid_, SIGTERM);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    while (::waitpid(containerd_pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > give_up) {
        ::kill(containerd_pid_, SIGKILL);
        ::waitpid(containerd_pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    containerd_pid_ = -1;
  }

  // Our shims and pause processes only: the temp dir name is unique to this fixture.
  static void KillProcessesUnder(const std::string& dir) {
    for (pid_t pid : ProcessesUnder(dir)) ::kill(pid, SIGKILL);
    // Give the kernel a moment to reap them, so mounts and cgroups are no longer busy.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!ProcessesUnder(dir).empty() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  static void UnmountUnder(const std::string& dir) {
    std::vector<std::string> targets = MountsUnder(dir);
    // Deepest first, so nested mounts come off before their parents.
    std::sort(targets.begin(), targets.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    for (const std::string& target : targets) ::umount2(target.c_str(), MNT_DETACH);
  }

  // Sandbox cgroups (<controller>/k8s.io/<id>) that appeared since Start(), i.e. ours.
  std::vector<std::string> NewCgroups() const {
    std::vector<std::string> cgroups;
    for (const auto& [k8s, existed] : cgroups_before_) {
      std::error_code ignored;
      if (!std::filesystem::is_directory(k8s)) continue;
      for (const auto& child : std::filesystem::directory_iterator(k8s, ignored)) {
        if (child.is_directory() && !cgroup_children_before_.count(child.path().string())) {
          cgroups.push_back(child.path().string());
        }
      }
    }
    return cgroups;
  }

  void KillProcessesInNewCgroups() const {
    for (const std::string& cgroup : NewCgroups()) {
      std::istringstream procs(ReadFile(cgroup + "/cgroup.procs"));
      for (pid_t pid = 0; procs >> pid;) ::kill(pid, SIGKILL);
    }
  }

  void RemoveNewCgroups() {
    for (const std::string& cgroup : NewCgroups()) {
      // A just-killed task can keep the cgroup busy for a moment.
      for (int attempt = 0; attempt < 50 && ::rmdir(cgroup.c_str()) != 0 && errno == EBUSY;
           ++attempt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    for (const auto& [k8s, existed] : cgroups_before_) {
      if (!existed) ::rmdir(k8s.c_str());
    }
  }

  std::string dir_;
  std::optional<ScopedNetns> netns_;
  pid_t containerd_pid_ = -1;
  bool recorded_ = false;
  std::set<std::string> preexisting_;
  std::map<std::string, bool> cgroups_before_;
  std::set<std::string> cgroup_children_before_;
};

}  // namespace ad::testing
