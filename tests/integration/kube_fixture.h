// What the desired-state integration tests share: kube-api-sim (the in-process kube-apiserver
// emulator) behind a kubeconfig with a CA and a token file, pod/namespace/node JSON as the API
// serves it, the real `ambient-doctor` run against a lab node (one-shot or as `serve`), and the
// daemon's gRPC API and /metrics read back.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ambientdoctor/v1/ambient_doctor.grpc.pb.h"
#include "integration/report_proto.h"
#include "integration/scoped_child.h"
#include "integration/tls_test_pki.h"
#include "kube_api/kube_api_server.h"
#include "sources/ztunnel/http_get.h"

namespace ad::test {

using kube_sim::KubeApiServer;
using kube_sim::Resource;

// ---- Objects as the API serves them ----------------------------------------------------------

inline std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

inline std::string JsonMap(const std::map<std::string, std::string>& values) {
  std::string out = "{";
  for (const auto& [key, value] : values) {
    if (out.size() > 1) out += ",";
    out += JsonString(key) + ":" + JsonString(value);
  }
  return out + "}";
}

inline int64_t NowUnixS() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::string Rfc3339(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

struct KubePodSpec {
  std::string ns;
  std::string name;
  std::string node;
  std::string uid;  // "" : the emulator makes one
  std::vector<std::string> ips;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string phase = "Running";
  bool host_network = false;
  bool ready = true;
  int64_t created_unix_s = 0;  // 0: an hour ago (past any grace period)
};

inline std::string PodJson(const KubePodSpec& pod) {
  std::string meta = "\"name\":" + JsonString(pod.name) + ",\"namespace\":" + JsonString(pod.ns);
  if (!pod.uid.empty()) meta += ",\"uid\":" + JsonString(pod.uid);
  const int64_t created = pod.created_unix_s != 0 ? pod.created_unix_s : NowUnixS() - 3600;
  meta += ",\"creationTimestamp\":" + JsonString(Rfc3339(created));
  meta += ",\"labels\":" + JsonMap(pod.labels) + ",\"annotations\":" + JsonMap(pod.annotations);
  std::string spec = "\"nodeName\":" + JsonString(pod.node);
  if (pod.host_network) spec += ",\"hostNetwork\":true";
  std::string status = "\"phase\":" + JsonString(pod.phase);
  if (!pod.ips.empty()) {
    status += ",\"podIP\":" + JsonString(pod.ips[0]) + ",\"podIPs\":[";
    for (size_t i = 0; i < pod.ips.size(); ++i) {
      status += (i ? ",{\"ip\":" : "{\"ip\":") + JsonString(pod.ips[i]) + "}";
    }
    status += "]";
  }
  status += R"(,"conditions":[{"type":"Ready","status":")" +
            std::string(pod.ready ? "True" : "False") + "\"}]";
  return "{\"metadata\":{" + meta + "},\"spec\":{" + spec + "},\"status\":{" + status + "}}";
}

// `mode`: the istio.io/dataplane-mode label ("" : none).
inline std::string NamespaceJson(const std::string& name, const std::string& mode = "") {
  std::map<std::string, std::string> labels = {{"kubernetes.io/metadata.name", name}};
  if (!mode.empty()) labels["istio.io/dataplane-mode"] = mode;
  return "{\"metadata\":{\"name\":" + JsonString(name) + ",\"labels\":" + JsonMap(labels) + "}}";
}

inline std::string NodeJson(const std::string& name, bool cni_not_ready_taint) {
  const std::string taints =
      cni_not_ready_taint
          ? R"(,"spec":{"taints":[{"key":"cni.istio.io/not-ready","effect":"NoSchedule"}]})"
          : "";
  return "{\"metadata\":{\"name\":" + JsonString(name) + "}" + taints + "}";
}

// ---- kube-api-sim behind a kubeconfig -----------------------------------------------------------

// The emulator with its PKI, token file and kubeconfig (block-style YAML with
// certificate-authority and tokenFile, as kubectl writes one). Objects are remembered, so a
// restart on the same port serves them again (an API server that was down, not wiped).
class KubeSim {
 public:
  static constexpr const char* kToken = "kd-token-1";

  // Starts on a free port; false with `error` set on failure. Idle watches get a bookmark every
  // `bookmark_interval` (the apiserver: about a minute).
  bool Start(std::string* error,
             std::chrono::milliseconds bookmark_interval = std::chrono::milliseconds(1000)) {
    bookmark_interval_ = bookmark_interval;
    if (!pki_.ok()) {
      *error = pki_.error();
      return false;
    }
    WriteToken(kToken);
    token_ = kToken;
    if (!Listen(0, error)) return false;
    kubeconfig_ = pki_.Path("kubeconfig");
    std::ofstream(kubeconfig_) << "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n"
                               << "    certificate-authority: " << pki_.Path("ca.crt") << "\n"
                               << "    server: " << server_->url() << "\n"
                               << "  name: sim\ncontexts:\n- context:\n    cluster: sim\n"
                               << "    user: doctor\n  name: sim\ncurrent-context: sim\n"
                               << "users:\n- name: doctor\n  user:\n    tokenFile: token\n";
    return true;
  }

  KubeApiServer& server() { return *server_; }
  bool running() const { return server_ != nullptr; }
  const std::string& kubeconfig() const { return kubeconfig_; }
  std::string token_file() const { return pki_.Path("token"); }

  // As the kubelet swaps a rotated token: a new file renamed over the old one.
  void WriteToken(const std::string& token) const {
    std::ofstream(token_file() + ".tmp") << token << "\n";
    std::filesystem::rename(token_file() + ".tmp", token_file());
  }
  void RemoveToken() const { std::filesystem::remove(token_file()); }
  // The token the server accepts (kept across a restart).
  void SetServerToken(const std::string& token) {
    token_ = token;
    server_->SetToken(token);
  }

  void Upsert(Resource resource, const std::string& key, const std::string& json) {
    objects_[{resource, key}] = json;
    if (server_) server_->Upsert(resource, json);
  }
  void UpsertPod(const KubePodSpec& pod) {
    Upsert(Resource::kPods, pod.ns + "/" + pod.name, PodJson(pod));
  }
  void UpsertNamespace(const std::string& name, const std::string& mode = "") {
    Upsert(Resource::kNamespaces, name, NamespaceJson(name, mode));
  }
  void UpsertNode(const std::string& name, bool cni_not_ready_taint) {
    Upsert(Resource::kNodes, name, NodeJson(name, cni_not_ready_taint));
  }

  // Down: every connection closed, the port refuses.
  void Stop() {
    if (!server_) return;
    stopped_at_rv_ = std::stoull(server_->ResourceVersion());
    server_->Stop();
    requests_before_.push_back(server_->Requests());
    server_.reset();
  }
  // Up again on the same port with the same objects, its versions past the old ones (etcd keeps
  // its revision across an apiserver restart).
  bool Restart(std::string* error) {
    if (!Listen(port_, error)) return false;
    for (const auto& [key, json] : objects_) server_->Upsert(key.first, json);
    while (std::stoull(server_->ResourceVersion()) <= stopped_at_rv_) {
      server_->Upsert(Resource::kNamespaces, NamespaceJson("kd-filler"));
    }
    return true;
  }

  // Every request any incarnation of the server received.
  std::vector<kube_sim::RequestRecord> AllRequests() const {
    std::vector<kube_sim::RequestRecord> all;
    for (const auto& earlier : requests_before_)
      all.insert(all.end(), earlier.begin(), earlier.end());
    if (server_) {
      const auto now = server_->Requests();
      all.insert(all.end(), now.begin(), now.end());
    }
    return all;
  }

 private:
  bool Listen(uint16_t port, std::string* error) {
    kube_sim::KubeApiServerOptions options;
    options.cert_file = pki_.Path("server.crt");
    options.key_file = pki_.Path("server.key");
    options.token = token_;
    options.port = port;
    options.bookmark_interval = bookmark_interval_;
    server_ = KubeApiServer::Start(options, error);
    if (server_) port_ = server_->port();
    return server_ != nullptr;
  }

  testing::TestPki pki_;
  std::unique_ptr<KubeApiServer> server_;
  uint16_t port_ = 0;
  std::chrono::milliseconds bookmark_interval_{1000};
  std::string token_;
  std::string kubeconfig_;
  std::map<std::pair<Resource, std::string>, std::string> objects_;
  uint64_t stopped_at_rv_ = 0;
  std::vector<std::vector<kube_sim::RequestRecord>> requests_before_;
};

// ---- Polling ----------------------------------------------------------------------------------

inline bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                      std::chrono::milliseconds every = std::chrono::milliseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---- The daemon -------------------------------------------------------------------------------

// `ambient-doctor serve` on a lab with the API source, its API on a private socket and its metrics
// on 127.0.0.1:0 (the port read from its log). Killed when the scope ends.
class ServeProcess {
 public:
  ServeProcess(const std::string& dir, std::vector<std::string> flags)
      : log_(dir + "/serve.log"), socket_(dir + "/api/api.sock") {
    std::vector<std::string> argv = {DoctorBinary(),      "serve",       "--interval",   "1s",
                                     "--metrics-address", "127.0.0.1:0", "--api-socket", socket_,
                                     "--no-flows"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    child_ = std::make_unique<testing::ScopedChild>(argv, "", log_, /*with_stderr=*/true);
  }

  // Waits for the metrics port and the first report over the API; false after `timeout`.
  bool WaitReady(std::chrono::milliseconds timeout) {
    const std::regex bound("metrics on 127\\.0\\.0\\.1:([0-9]+)");
    return WaitUntil(
        [&] {
          std::smatch match;
          const std::string text = ReadFile(log_);
          if (port_ == 0 && std::regex_search(text, match, bound)) {
            port_ = static_cast<uint16_t>(std::stoi(match[1].str()));
          }
          return port_ != 0 && Report().has_value();
        },
        timeout, std::chrono::milliseconds(100));
  }

  std::optional<pb::Report> Report() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    pb::Report report;
    if (!Stub().GetReport(&context, pb::GetReportRequest{}, &report).ok()) return std::nullopt;
    return report;
  }
  std::optional<pb::Status> Status() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    pb::Status status;
    if (!Stub().GetStatus(&context, pb::GetStatusRequest{}, &status).ok()) return std::nullopt;
    return status;
  }
  std::string Metrics() const {
    auto got = ztunnel::HttpGet({"", "127.0.0.1", port_, "/metrics"});
    return got.ok() ? got->body : "";
  }

  const std::string& socket() const { return socket_; }
  std::string log() const { return ReadFile(log_); }
  pid_t pid() const { return child_->pid(); }

 private:
  pb::AmbientDoctor::Stub& Stub() {
    if (!stub_) {
      stub_ = pb::AmbientDoctor::NewStub(
          grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials()));
    }
    return *stub_;
  }

  std::string log_;
  std::string socket_;
  uint16_t port_ = 0;
  std::unique_ptr<testing::ScopedChild> child_;
  std::unique_ptr<pb::AmbientDoctor::Stub> stub_;
};

// ---- Reading reports --------------------------------------------------------------------------

// (code, pod) of every finding with a pod, and of the others (code, netns path).
inline std::multimap<std::string, std::string> FindingsByCode(const pb::Report& report) {
  std::multimap<std::string, std::string> out;
  for (const pb::Finding& f : report.findings()) {
    out.emplace(f.code(), f.pod().empty() ? f.netns().path() : f.pod());
  }
  return out;
}

inline std::vector<std::string> PodsWithCode(const pb::Report& report, const std::string& code) {
  std::vector<std::string> pods;
  for (const pb::Finding* f : FindingsWithCode(report, code)) pods.push_back(f->pod());
  std::sort(pods.begin(), pods.end());
  return pods;
}

inline bool IsDesiredCode(const std::string& code) {
  return code == "POD_NOT_ENROLLED" || code == "ENROLLMENT_ANNOTATION_STALE" ||
         code == "POD_ENROLLED_AGAINST_INTENT" || code == "ZTUNNEL_NETNS_STALE";
}

inline size_t DesiredFindingCount(const pb::Report& report) {
  size_t count = 0;
  for (const pb::Finding& f : report.findings()) count += IsDesiredCode(f.code()) ? 1 : 0;
  return count;
}

// The value of a metric series (exact name{labels} as exposed); nullopt when absent.
inline std::optional<double> MetricValue(const std::string& metrics, const std::string& series) {
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

inline std::optional<pb::PodReport> ParsePodJson(const std::string& json) {
  pb::PodReport pod;
  if (!google::protobuf::util::JsonStringToMessage(json, &pod).ok()) return std::nullopt;
  return pod;
}

inline std::string LabPrefix(const std::string& tag) {
  return "adk" + tag + std::to_string(::getpid() % 100000);
}

}  // namespace ad::test
