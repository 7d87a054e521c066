// The Kubernetes API source (desired state) on a lab node, against kube-api-sim (the in-process
// KubeApiServer, HTTPS with a CA and a bearer token, realistic pod objects of about 5 KB):
//
// 1. footprint: the real `serve` at rest on a 250-pod lab, the API source on (--kubeconfig,
//    --node-name; the emulator serves the lab's pods, their namespace and the node, bookmarks
//    every --bookmark-ms, 60 s as the apiserver) and off (--no-kube-api), and optionally a
//    baseline binary (--baseline BINARY: e.g. a build without libcurl), alternated in one run
//    (ABBA order per round). Per run, after --settle seconds: RSS, peak RSS, CPU over --seconds
//    (the threads' schedstat run time), context switches (wake-ups), engine steps
//    (ambient_doctor_scans_total) and the watches' bookmarks and events in that window.
// 2. latency: a pod's label istio.io/dataplane-mode set to `none` on a pod that has Istio's rules
//    (POD_ENROLLED_AGAINST_INTENT opens) and removed again (it resolves), --trials times: from the
//    API change (Upsert) to the daemon's GetReport showing it (polled back to back; the figure
//    is the arrival of the first answer that shows it) and to the WatchFindings event.
// 3. list: the source's memory for its initial list (KubeLink, exactly as the daemon starts it,
//    page limit 500) in a fresh child process per run (peak RSS: VmHWM after /proc/self/clear_refs
//    reset, minus VmRSS before): no pods (the fixed cost), 250 pods on this node, 5,000 pods on
//    other nodes + 250 here (filtered by the server: fieldSelector spec.nodeName), and 5,000 pods
//    all on this node (10 pages of 500). Scenarios alternate.
//
//   kube_api_bench [--parts footprint,latency,list] [--pods 250] [--rounds 3] [--settle 15]
//                  [--seconds 65] [--bookmark-ms 60000] [--baseline BINARY] [--trials 50]
//                  [--list-runs 3] [--zds] [--serve-args "FLAGS"]
//
// Needs root (lab netns). Measures and prints; never asserts.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/serve_support.h"
#include "engine/kube_link.h"
#include "kube_api/kube_api_server.h"
#include "lab/lab.h"
#include "tests/integration/tls_test_pki.h"

namespace ad::bench {
namespace {

namespace pb = ambientdoctor::v1;
using kube_sim::KubeApiServer;
using kube_sim::Resource;
using namespace std::chrono_literals;

volatile std::sig_atomic_t g_interrupted = 0;
void OnTerminationSignal(int /*signal_number*/) { g_interrupted = 1; }
bool Interrupted() { return g_interrupted != 0; }

constexpr char kNode[] = "bench-node";
constexpr char kToken[] = "bench-token-0123456789";

struct Flags {
  std::string parts = "footprint,latency,list";
  int pods = 250;
  int rounds = 3;
  int settle_s = 15;
  int seconds = 65;
  int bookmark_ms = 60000;
  std::string baseline;
  int trials = 50;
  int list_runs = 3;
  bool zds = false;
  std::vector<std::string> serve_args;

  bool Part(const std::string& name) const {
    return ("," + parts + ",").find("," + name + ",") != std::string::npos;
  }
};

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto text = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    auto number = [&] { return std::atoi(text().c_str()); };
    if (arg == "--parts") flags.parts = text();
    if (arg == "--pods") flags.pods = number();
    if (arg == "--rounds") flags.rounds = number();
    if (arg == "--settle") flags.settle_s = number();
    if (arg == "--seconds") flags.seconds = number();
    if (arg == "--bookmark-ms") flags.bookmark_ms = number();
    if (arg == "--baseline") flags.baseline = text();
    if (arg == "--trials") flags.trials = number();
    if (arg == "--list-runs") flags.list_runs = number();
    if (arg == "--zds") flags.zds = true;
    if (arg == "--serve-args") flags.serve_args = Words(text());
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: kube_api_bench [--parts footprint,latency,list] [--pods 250] [--rounds 3]\n"
          "       [--settle 15] [--seconds 65] [--bookmark-ms 60000] [--baseline BINARY]\n"
          "       [--trials 50] [--list-runs 3] [--zds] [--serve-args \"FLAGS\"]\n");
      std::exit(0);
    }
  }
  return flags;
}

// ---- objects -----------------------------------------------------------------------------------

std::string Replace(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    for (size_t at; (at = text.find(key)) != std::string::npos;)
      text.replace(at, key.size(), value);
  }
  return text;
}

struct PodSpec {
  std::string name, namespace_name, uid, node, ip;
  std::string dataplane_mode;  // label istio.io/dataplane-mode; "" none
};

// A Deployment's pod as `kubectl get pod -o json` shows it on an ambient node (managedFields,
// one container with env, probes and resources, the service-account volume, five conditions),
// about 5 KB: the size the list and watch bodies really have, though the source keeps a few
// fields of it.
std::string PodJson(const PodSpec& pod) {
  static const std::string kTemplate =
      R"({"metadata":{"name":"@NAME","generateName":"@APP-7d9f8c6b5d-","namespace":"@NS","uid":"@UID","creationTimestamp":"2026-11-02T08:15:42Z","labels":{"app":"@APP","pod-template-hash":"7d9f8c6b5d","service.istio.io/canonical-name":"@APP","service.istio.io/canonical-revision":"v1","version":"v1"@LABELS},"annotations":{"ambient.istio.io/redirection":"enabled","kubectl.kubernetes.io/restartedAt":"2026-11-02T08:15:40Z","prometheus.io/port":"8080","prometheus.io/scrape":"true"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"@APP-7d9f8c6b5d","uid":"5f0c2d4e-8a1b-4c3d-9e7f-0a1b2c3d4e5f","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"kube-controller-manager","operation":"Update","apiVersion":"v1","time":"2026-11-02T08:15:42Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/restartedAt":{},"f:prometheus.io/port":{},"f:prometheus.io/scrape":{}},"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{},"f:version":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"5f0c2d4e-8a1b-4c3d-9e7f-0a1b2c3d4e5f\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{".":{},"k:{\"name\":\"LOG_LEVEL\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:livenessProbe":{},"f:name":{},"f:ports":{},"f:readinessProbe":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:serviceAccount":{},"f:serviceAccountName":{},"f:terminationGracePeriodSeconds":{}}}},{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-11-02T08:15:49Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"@IP\"}":{".":{},"f:ip":{}}},"f:startTime":{}}},"subresource":"status"},{"manager":"istio-cni","operation":"Update","apiVersion":"v1","time":"2026-11-02T08:15:44Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{"f:ambient.istio.io/redirection":{}}}},"subresource":"status"}]},"spec":{"volumes":[{"name":"kube-api-access-x2k9p","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},{"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"}}]}}],"defaultMode":420}}],"containers":[{"name":"app","image":"registry.example.com/shop/@APP:1.8.3","ports":[{"name":"http","containerPort":8080,"protocol":"TCP"}],"env":[{"name":"LOG_LEVEL","value":"info"}],"resources":{"limits":{"memory":"256Mi"},"requests":{"cpu":"100m","memory":"128Mi"}},"volumeMounts":[{"name":"kube-api-access-x2k9p","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}],"livenessProbe":{"httpGet":{"path":"/healthz","port":8080,"scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"readinessProbe":{"httpGet":{"path":"/ready","port":8080,"scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":5,"successThreshold":1,"failureThreshold":3},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"@APP","serviceAccount":"@APP","nodeName":"@NODE","securityContext":{},"schedulerName":"default-scheduler","tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},"status":{"phase":"Running","conditions":[{"type":"PodReadyToStartContainers","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-02T08:15:45Z"},{"type":"Initialized","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-02T08:15:42Z"},{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-02T08:15:49Z"},{"type":"ContainersReady","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-02T08:15:49Z"},{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-02T08:15:42Z"}],"hostIP":"192.168.10.21","hostIPs":[{"ip":"192.168.10.21"}],"podIP":"@IP","podIPs":[{"ip":"@IP"}],"startTime":"2026-11-02T08:15:42Z","containerStatuses":[{"name":"app","state":{"running":{"startedAt":"2026-11-02T08:15:46Z"}},"lastState":{},"ready":true,"restartCount":0,"image":"registry.example.com/shop/@APP:1.8.3","imageID":"registry.example.com/shop/@APP@sha256:3b1f7c0e9a5d4c2b8e6f1a0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b","containerID":"containerd://9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0","started":true}],"qosClass":"Burstable"}})";
  const std::string labels = pod.dataplane_mode.empty()
                                 ? ""
                                 : R"(,"istio.io/dataplane-mode":")" + pod.dataplane_mode + "\"";
  return Replace(kTemplate, {{"@NAME", pod.name},
                             {"@NS", pod.namespace_name},
                             {"@UID", pod.uid},
                             {"@LABELS", labels},
                             {"@NODE", pod.node},
                             {"@IP", pod.ip},
                             {"@APP", "web"}});
}

std::string NamespaceJson(const std::string& name, const std::string& mode) {
  const std::string labels = mode.empty() ? "" : R"(,"istio.io/dataplane-mode":")" + mode + "\"";
  return R"({"metadata":{"name":")" + name +
         R"(","creationTimestamp":"2026-01-10T09:00:00Z","labels":{"kubernetes.io/metadata.name":")" +
         name + "\"" + labels +
         R"(}},"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}})";
}

std::string NodeJson(const std::string& name) {
  return R"({"metadata":{"name":")" + name + R"(","labels":{"kubernetes.io/hostname":")" + name +
         R"(","kubernetes.io/os":"linux"}},"spec":{"podCIDR":"10.244.0.0/16"},"status":{"conditions":[{"type":"Ready","status":"True"}]}})";
}

// ---- the emulator ------------------------------------------------------------------------------

struct ApiServer {
  std::unique_ptr<KubeApiServer> server;
  std::string kubeconfig;  // a kubeconfig file for it (block YAML, tokenFile, CA file)
};

// Starts an emulator with this PKI and writes a kubeconfig for it next to the PKI's files.
ApiServer StartServer(const testing::TestPki& pki, std::chrono::milliseconds bookmarks,
                      const std::string& tag) {
  kube_sim::KubeApiServerOptions options;
  options.cert_file = pki.Path("server.crt");
  options.key_file = pki.Path("server.key");
  options.token = kToken;
  options.bookmark_interval = bookmarks;
  std::string error;
  ApiServer api;
  api.server = KubeApiServer::Start(options, &error);
  if (!api.server) {
    std::fprintf(stderr, "kube_api_bench: kube-api-sim: %s\n", error.c_str());
    return api;
  }
  api.kubeconfig = pki.Path("kubeconfig-" + tag);
  pki.Write("kubeconfig-" + tag,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: bench\n  cluster:\n    server: " +
                api.server->url() + "\n    certificate-authority: " + pki.Path("ca.crt") +
                "\nusers:\n- name: bench\n  user:\n    tokenFile: " + pki.Path("token") +
                "\ncontexts:\n- name: bench\n  context:\n    cluster: bench\n    user: bench\n"
                "current-context: bench\n");
  return api;
}

// The lab's pods as the API sees them: namespace "lab" (labelled ambient), name = netns name and
// uid = the lab's fake UID (as cri-sim and cni-sim name them), the lab's IPv4 (pairing by IP).
void LoadLab(KubeApiServer& server, const lab::LabNode& node) {
  server.Upsert(Resource::kNodes, NodeJson(kNode));
  server.Upsert(Resource::kNamespaces, NamespaceJson("lab", "ambient"));
  server.Upsert(Resource::kNamespaces, NamespaceJson("kube-system", ""));
  server.Upsert(Resource::kNamespaces, NamespaceJson("default", ""));
  for (const lab::LabPod& pod : node.pods) {
    server.Upsert(Resource::kPods,
                  PodJson({pod.netns_name, "lab", pod.pod_uid, kNode, pod.ipv4, ""}));
  }
}

// ---- the daemon at rest ------------------------------------------------------------------------

struct Arm {
  std::string name;
  std::string binary;  // "" : this build's ambient-doctor
  std::vector<std::string> extra;
  bool kube = false;
};

struct RunFigures {
  bool ok = false;
  long rss_kib = 0, hwm_kib = 0;
  double millicores = 0;     // schedstat run time over the window
  double wakeups_per_s = 0;  // context switches of every thread
  double steps = 0;          // engine steps published in the window
  double bookmarks = 0, events = 0;
  int threads = 0;
  long anon_kib = 0, file_kib = 0;          // RssAnon, RssFile
  std::map<std::string, long> by_map;       // Rss by mapping: file name, [heap], [stack], [anon]
  std::map<std::string, double> by_thread;  // millicores by thread name (comm)
};

// /proc/PID/status field in KiB, or -1.
long StatusKib(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
  }
  return -1;
}

// Rss of every mapping of `pid`, summed by what it maps (a file's base name, [heap], [anon]...):
// where an arm's extra RSS lives (heap, thread stacks, libcrypto's pages, the binary's).
std::map<std::string, long> RssByMapping(pid_t pid) {
  std::map<std::string, long> rss;
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
  std::string name;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < 17) {
      std::istringstream fields(line);
      std::string range, perms, offset, device, inode, path;
      fields >> range >> perms >> offset >> device >> inode >> path;
      name = path.empty() ? "[anon]" : std::filesystem::path(path).filename().string();
      if (name.empty()) name = path;
    } else if (line.rfind("Rss:", 0) == 0) {
      rss[name] += std::atol(line.c_str() + 4);
    }
  }
  return rss;
}

uint64_t SumTaskField(pid_t pid, const std::string& file, const std::vector<std::string>& keys) {
  uint64_t sum = 0;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / file);
    if (keys.empty()) {  // schedstat: the first number is the run time in ns
      uint64_t ns = 0;
      in >> ns;
      sum += ns;
      continue;
    }
    for (std::string line; std::getline(in, line);) {
      for (const std::string& key : keys) {
        if (line.rfind(key + ":", 0) == 0)
          sum += std::strtoull(line.c_str() + key.size() + 1, nullptr, 10);
      }
    }
  }
  return sum;
}
uint64_t RunNs(pid_t pid) { return SumTaskField(pid, "schedstat", {}); }

// Run time (ns) of every thread by thread id, with its name.
std::map<std::string, std::pair<std::string, uint64_t>> ThreadRunNs(pid_t pid) {
  std::map<std::string, std::pair<std::string, uint64_t>> threads;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::string comm;
    uint64_t ns = 0;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    std::ifstream(task.path() / "schedstat") >> ns;
    threads[task.path().filename().string()] = {comm, ns};
  }
  return threads;
}

// Millicores over `seconds` by thread name, from two ThreadRunNs samples.
std::map<std::string, double> ByThread(
    const std::map<std::string, std::pair<std::string, uint64_t>>& before,
    const std::map<std::string, std::pair<std::string, uint64_t>>& after, double seconds) {
  // Threads are unnamed but for gRPC's: "name#k", k the rank of the thread id among those of the
  // same name (creation order), tells the engine thread from the API source's.
  std::map<std::string, double> millicores;
  std::map<std::string, int> seen;
  std::vector<std::pair<long, std::string>> order;
  for (const auto& [tid, thread] : after) order.push_back({std::atol(tid.c_str()), tid});
  std::sort(order.begin(), order.end());
  for (const auto& [number, tid] : order) {
    const auto& thread = after.at(tid);
    auto it = before.find(tid);
    const uint64_t start = it == before.end() ? 0 : it->second.second;
    const std::string key = thread.first + "#" + std::to_string(seen[thread.first]++);
    millicores[key] += static_cast<double>(thread.second - start) / 1e9 / seconds * 1000;
  }
  return millicores;
}
uint64_t Switches(pid_t pid) {
  return SumTaskField(pid, "status", {"voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"});
}

std::optional<pb::Report> GetReport(ServeProcess& serve) {
  auto stub = pb::AmbientDoctor::NewStub(serve.Channel());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  pb::Report report;
  if (!stub->GetReport(&context, {}, &report).ok()) return std::nullopt;
  return report;
}

// Bookmarks and events the daemon's watches received so far (GetReport's kubernetes section).
std::pair<double, double> KubeCounters(ServeProcess& serve) {
  const auto report = GetReport(serve);
  double bookmarks = 0, events = 0;
  if (report) {
    for (const auto& collection : report->kubernetes().collections()) {
      bookmarks += collection.bookmarks();
      events += collection.events();
    }
  }
  return {bookmarks, events};
}

bool WaitKubeHealthy(ServeProcess& serve, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline && !Interrupted()) {
    const auto report = GetReport(serve);
    if (report && report->kubernetes().healthy()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

ServeOptions BaseServeOptions(const std::string& prefix, const std::string& tag) {
  const std::string run_dir = "/run/ambient-doctor-" + prefix + "-" + tag;
  return {.lab_prefix = prefix,
          .api_socket = run_dir + "/api.sock",
          .metrics_port = 30000 + static_cast<int>((static_cast<size_t>(::getpid()) * 31 +
                                                    std::hash<std::string>{}(tag)) %
                                                   20000),
          .log_path = "/tmp/" + prefix + "-" + tag + "-serve.log"};
}

RunFigures RunArm(const Arm& arm, const std::string& prefix, const Flags& flags) {
  RunFigures figures;
  ServeOptions options = BaseServeOptions(prefix, arm.name);
  options.extra = arm.extra;
  options.extra.insert(options.extra.end(), flags.serve_args.begin(), flags.serve_args.end());
  // ServeProcess starts DoctorPath(), which $AD_DOCTOR overrides (no other thread reads it).
  if (!arm.binary.empty()) ::setenv("AD_DOCTOR", arm.binary.c_str(), 1);
  ServeProcess serve(options);
  ::unsetenv("AD_DOCTOR");
  if (!serve.running() || !serve.WaitReady(60s)) {
    std::fprintf(stderr, "  %s: %s\n", arm.name.c_str(), serve.error().c_str());
    return figures;
  }
  if (arm.kube && !WaitKubeHealthy(serve, 60s)) {
    std::fprintf(stderr, "  %s: the API source never got healthy (see %s)\n", arm.name.c_str(),
                 options.log_path.c_str());
    return figures;
  }
  std::this_thread::sleep_for(std::chrono::seconds(flags.settle_s));
  const pid_t pid = serve.pid();
  const auto [bookmarks0, events0] = KubeCounters(serve);
  const double steps0 =
      MetricValue(ScrapeMetrics(options.metrics_port), "ambient_doctor_scans_total").value_or(0);
  const uint64_t run0 = RunNs(pid), switches0 = Switches(pid);
  const auto threads0 = ThreadRunNs(pid);
  const Clock::time_point start = Clock::now();
  for (int s = 0; s < flags.seconds && !Interrupted(); ++s) std::this_thread::sleep_for(1s);
  const uint64_t run1 = RunNs(pid), switches1 = Switches(pid);
  const auto threads1 = ThreadRunNs(pid);
  const double elapsed_s = MillisecondsBetween(start, Clock::now()) / 1000;
  const ProcSample sample = ReadProcSample(pid);
  const double steps1 =
      MetricValue(ScrapeMetrics(options.metrics_port), "ambient_doctor_scans_total").value_or(0);
  const auto [bookmarks1, events1] = KubeCounters(serve);
  figures = {.ok = sample.ok,
             .rss_kib = sample.rss_kib,
             .hwm_kib = sample.hwm_kib,
             .millicores = static_cast<double>(run1 - run0) / 1e9 / elapsed_s * 1000,
             .wakeups_per_s = static_cast<double>(switches1 - switches0) / elapsed_s,
             .steps = steps1 - steps0,
             .bookmarks = bookmarks1 - bookmarks0,
             .events = events1 - events0,
             .threads = sample.threads,
             .anon_kib = StatusKib(pid, "RssAnon:"),
             .file_kib = StatusKib(pid, "RssFile:"),
             .by_map = RssByMapping(pid),
             .by_thread = ByThread(threads0, threads1, elapsed_s)};
  return figures;
}

void PrintRun(int round, const Arm& arm, const RunFigures& f) {
  std::printf(
      "  round %d %-9s RSS %6.2f MiB (peak %6.2f)  CPU %6.2f mc  wake-ups %6.1f/s  steps %3.0f  "
      "bookmarks %2.0f  events %2.0f  threads %d  anon %.2f file %.2f MiB  load %s\n",
      round, arm.name.c_str(), f.rss_kib / 1024.0, f.hwm_kib / 1024.0, f.millicores,
      f.wakeups_per_s, f.steps, f.bookmarks, f.events, f.threads, f.anon_kib / 1024.0,
      f.file_kib / 1024.0, LoadAverage().c_str());
  std::fflush(stdout);
}

// "median M [min .. max]" of `values`, each printed with `format`.
std::string Spread(std::vector<double> values, const std::string& format) {
  if (values.empty()) return "-";
  std::sort(values.begin(), values.end());
  char text[160];
  const std::string pattern = "median " + format + " [" + format + " .. " + format + "]";
  std::snprintf(text, sizeof(text), pattern.c_str(), Median(values), values.front(), values.back());
  return text;
}

using Round = std::map<std::string, RunFigures>;

double RssMib(const RunFigures& f) { return static_cast<double>(f.rss_kib) / 1024; }
double HwmMib(const RunFigures& f) { return static_cast<double>(f.hwm_kib) / 1024; }
double Millicores(const RunFigures& f) { return f.millicores; }
double Wakeups(const RunFigures& f) { return f.wakeups_per_s; }
double Steps(const RunFigures& f) { return f.steps; }

// `field` of one arm over the rounds, or its paired difference to `minus` round by round.
std::vector<double> Column(const std::vector<Round>& rounds, const std::string& arm,
                           const std::string& minus, double (*field)(const RunFigures&)) {
  std::vector<double> values;
  for (const Round& round : rounds) {
    auto a = round.find(arm);
    if (a == round.end() || !a->second.ok) continue;
    if (minus.empty()) {
      values.push_back(field(a->second));
      continue;
    }
    auto b = round.find(minus);
    if (b != round.end() && b->second.ok) values.push_back(field(a->second) - field(b->second));
  }
  return values;
}

void PrintFootprintLine(const std::vector<Round>& rounds, const std::string& label,
                        const std::string& arm, const std::string& minus) {
  const char* sign = minus.empty() ? "" : "+";
  std::printf(
      "  %-22s RSS %s MiB, peak %s MiB, CPU %s mc, wake-ups %s /s, steps %s\n", label.c_str(),
      Spread(Column(rounds, arm, minus, RssMib), std::string("%") + sign + ".2f").c_str(),
      Spread(Column(rounds, arm, minus, HwmMib), std::string("%") + sign + ".2f").c_str(),
      Spread(Column(rounds, arm, minus, Millicores), std::string("%") + sign + ".2f").c_str(),
      Spread(Column(rounds, arm, minus, Wakeups), std::string("%") + sign + ".1f").c_str(),
      Spread(Column(rounds, arm, minus, Steps), std::string("%") + sign + ".0f").c_str());
}

// The mappings whose RSS differs most between two arms (median of the paired differences).
void PrintMappingDiff(const std::vector<Round>& rounds, const std::string& a,
                      const std::string& b) {
  std::map<std::string, std::vector<double>> diffs;
  for (const Round& round : rounds) {
    auto ia = round.find(a), ib = round.find(b);
    if (ia == round.end() || ib == round.end() || !ia->second.ok || !ib->second.ok) continue;
    std::map<std::string, long> names = ia->second.by_map;
    names.insert(ib->second.by_map.begin(), ib->second.by_map.end());
    for (const auto& [name, unused] : names) {
      auto in = [&](const RunFigures& f) {
        auto it = f.by_map.find(name);
        return it == f.by_map.end() ? 0L : it->second;
      };
      diffs[name].push_back(static_cast<double>(in(ia->second) - in(ib->second)));
    }
  }
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [name, values] : diffs) ranked.push_back({Median(values), name});
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& x, const auto& y) { return std::abs(x.first) > std::abs(y.first); });
  double shared_libraries = 0;
  for (const auto& [kib, name] : ranked) {
    if (name.find(".so") != std::string::npos) shared_libraries += kib;
  }
  std::printf("    RSS by mapping, %s - %s (median KiB; shared libraries together %+.0f):",
              a.c_str(), b.c_str(), shared_libraries);
  for (size_t i = 0; i < ranked.size() && i < 12 && std::abs(ranked[i].first) >= 64; ++i) {
    std::printf(" %s %+.0f", ranked[i].second.c_str(), ranked[i].first);
  }
  std::printf("\n");
}

// CPU by thread name, median over the rounds, of two arms side by side.
void PrintThreadDiff(const std::vector<Round>& rounds, const std::string& a, const std::string& b) {
  std::map<std::string, std::vector<double>> va, vb;
  for (const Round& round : rounds) {
    auto ia = round.find(a), ib = round.find(b);
    if (ia == round.end() || ib == round.end() || !ia->second.ok || !ib->second.ok) continue;
    for (const auto& [name, mc] : ia->second.by_thread) va[name].push_back(mc);
    for (const auto& [name, mc] : ib->second.by_thread) vb[name].push_back(mc);
  }
  std::printf("    CPU by thread name, median mc %s / %s:", a.c_str(), b.c_str());
  std::map<std::string, int> names;
  for (const auto& [name, v] : va) names[name];
  for (const auto& [name, v] : vb) names[name];
  for (const auto& [name, unused] : names) {
    const double x = va.count(name) ? Median(va[name]) : 0,
                 y = vb.count(name) ? Median(vb[name]) : 0;
    if (x >= 0.05 || y >= 0.05) std::printf(" %s %.2f/%.2f", name.c_str(), x, y);
  }
  std::printf("\n");
}

void RunFootprint(const Flags& flags, const std::string& prefix, const ApiServer& api) {
  std::vector<Arm> arms = {
      {"api-on", "", {"--kubeconfig", api.kubeconfig, "--node-name", kNode}, true},
      {"api-off", "", {"--no-kube-api"}, false},
  };
  if (!flags.baseline.empty()) arms.push_back({"baseline", flags.baseline, {}, false});
  std::printf(
      "\n== footprint: serve at rest on %d pods, settle %d s, window %d s, bookmarks every %d ms, "
      "%d rounds, arms alternated (ABBA)\n",
      flags.pods, flags.settle_s, flags.seconds, flags.bookmark_ms, flags.rounds);
  std::fflush(stdout);
  std::vector<Round> rounds;
  for (int r = 0; r < flags.rounds && !Interrupted(); ++r) {
    std::vector<Arm> order = arms;
    if (r % 2 == 1) std::reverse(order.begin(), order.end());
    Round round;
    for (const Arm& arm : order) {
      if (Interrupted()) break;
      round[arm.name] = RunArm(arm, prefix, flags);
      PrintRun(r, arm, round[arm.name]);
    }
    rounds.push_back(std::move(round));
  }
  std::printf("\n== daemon at rest: median [min .. max] over %zu rounds; paired = per round\n",
              rounds.size());
  for (const Arm& arm : arms) PrintFootprintLine(rounds, arm.name, arm.name, "");
  PrintFootprintLine(rounds, "paired api-on - off", "api-on", "api-off");
  PrintMappingDiff(rounds, "api-on", "api-off");
  PrintThreadDiff(rounds, "api-on", "api-off");
  if (!flags.baseline.empty()) {
    PrintFootprintLine(rounds, "paired off - baseline", "api-off", "baseline");
    PrintMappingDiff(rounds, "api-off", "baseline");
  }
  std::printf(
      "  targets: the API source adds <= 2 MiB RSS; a quiet cluster wakes the daemon no more "
      "than the watches' bookmarks (steps equal on and off)\n");
  std::fflush(stdout);
}

// ---- API change -> finding ----------------------------------------------------------------------

bool ReportShows(const pb::Report& report, const std::string& pod) {
  for (const pb::Finding& finding : report.findings()) {
    if (finding.code() == "POD_ENROLLED_AGAINST_INTENT" && finding.pod() == pod) return true;
  }
  return false;
}

// GetReport back to back until the finding is there (`open`) or gone; the ms from `start` to the
// arrival of the first answer that says so, or nullopt after `timeout`.
std::optional<double> PollReport(pb::AmbientDoctor::Stub& stub, const std::string& pod, bool open,
                                 Clock::time_point start, std::chrono::milliseconds timeout) {
  while (Clock::now() - start < timeout && !Interrupted()) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    pb::Report report;
    if (stub.GetReport(&context, {}, &report).ok() && ReportShows(report, pod) == open) {
      return MillisecondsBetween(start, Clock::now());
    }
  }
  return std::nullopt;
}

struct Latency {
  std::vector<double> report, stream;
  int missed_report = 0, missed_stream = 0;
};

// One direction of one trial: the change through the API, then the report and the event.
void Trial(KubeApiServer& server, const std::string& pod_json, const std::string& pod, bool open,
           pb::AmbientDoctor::Stub& stub, FindingStream& stream, Latency& latency) {
  stream.Clear();
  const Clock::time_point start = Clock::now();
  server.Upsert(Resource::kPods, pod_json);
  if (auto ms = PollReport(stub, pod, open, start, 10s)) {
    latency.report.push_back(*ms);
  } else {
    ++latency.missed_report;
  }
  const auto kind = open ? pb::FindingEvent::KIND_OPENED : pb::FindingEvent::KIND_RESOLVED;
  const auto event = stream.WaitFor(
      [&](const pb::FindingEvent& e) {
        return e.kind() == kind && e.finding().code() == "POD_ENROLLED_AGAINST_INTENT" &&
               e.finding().pod() == pod;
      },
      5s);
  if (event) {
    latency.stream.push_back(MillisecondsBetween(start, event->arrived));
  } else {
    ++latency.missed_stream;
  }
}

void PrintLatency(const char* what, const Latency& l) {
  auto line = [](const char* via, const std::vector<double>& v, int missed) {
    std::printf(
        "    %-26s p50 %7.1f ms  p90 %7.1f ms  p99 %7.1f ms  max %7.1f ms  (n=%zu, "
        "missed %d)\n",
        via, Percentile(v, 0.5), Percentile(v, 0.9), Percentile(v, 0.99), Percentile(v, 1.0),
        v.size(), missed);
  };
  std::printf("  %s\n", what);
  line("-> visible in GetReport", l.report, l.missed_report);
  line("-> WatchFindings event", l.stream, l.missed_stream);
}

void RunLatency(const Flags& flags, const std::string& prefix, const lab::LabNode& node,
                ApiServer& api) {
  ServeOptions options = BaseServeOptions(prefix, "latency");
  options.extra = {"--kubeconfig", api.kubeconfig, "--node-name", kNode};
  options.extra.insert(options.extra.end(), flags.serve_args.begin(), flags.serve_args.end());
  ServeProcess serve(options);
  if (!serve.running() || !serve.WaitReady(60s) || !WaitKubeHealthy(serve, 60s)) {
    std::fprintf(stderr, "kube_api_bench: latency: serve not ready: %s\n", serve.error().c_str());
    return;
  }
  const Clock::time_point ready = Clock::now();
  FindingStream stream(serve.Channel());
  if (!stream.WaitCurrent(10s)) {
    std::fprintf(stderr, "kube_api_bench: no WatchFindings: %s\n", stream.status_text().c_str());
    return;
  }
  std::this_thread::sleep_for(3s);
  auto stub = pb::AmbientDoctor::NewStub(serve.Channel());
  std::printf(
      "\n== API change -> finding: %d trials, pod label istio.io/dataplane-mode=none on a "
      "pod with Istio's rules and back (load %s)\n",
      flags.trials, LoadAverage().c_str());
  std::fflush(stdout);
  std::mt19937 random(22);
  Latency opened, resolved;
  const ProcSample before = ReadProcSample(serve.pid());
  for (int trial = 0; trial < flags.trials && !Interrupted() && !stream.broken(); ++trial) {
    const lab::LabPod& pod = node.pods[static_cast<size_t>(trial) * 7 % node.pods.size()];
    const std::string key = "lab/" + pod.netns_name;
    PodSpec spec{pod.netns_name, "lab", pod.pod_uid, kNode, pod.ipv4, "none"};
    // A random pause, so trials do not line up with the daemon's poll or resync.
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + random() % 500));
    Trial(*api.server, PodJson(spec), key, true, *stub, stream, opened);
    spec.dataplane_mode.clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + random() % 500));
    Trial(*api.server, PodJson(spec), key, false, *stub, stream, resolved);
  }
  const ProcSample after = ReadProcSample(serve.pid());
  if (const auto report = GetReport(serve)) {
    std::printf("  the daemon's watches after %.0f s:",
                MillisecondsBetween(ready, Clock::now()) / 1000);
    for (const auto& c : report->kubernetes().collections()) {
      std::printf(" %s: lists %u relists %u reconnects %u events %u bookmarks %u;",
                  c.name().c_str(), c.lists(), c.relists(), c.reconnects(), c.events(),
                  c.bookmarks());
    }
    std::printf("\n");
  }
  PrintLatency("label set -> POD_ENROLLED_AGAINST_INTENT opened [target p99 <= 1 s]", opened);
  PrintLatency("label removed -> resolved", resolved);
  std::printf(
      "  daemon CPU over the trials (GetReport polled back to back included): %.1f s; "
      "RSS %.2f MiB (peak %.2f)\n",
      after.cpu_seconds - before.cpu_seconds, after.rss_kib / 1024.0, after.hwm_kib / 1024.0);
  std::fflush(stdout);
}

// ---- the initial list's memory -----------------------------------------------------------------

long StatusKib(const char* key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key) + 1);
  }
  return -1;
}

// The child of one list run: KubeLink as the daemon starts it, until synced. Prints
// "pods N rss0 K hwm K rss1 K ms X cpu_ms Y" (KiB; hwm is the peak since just before the start).
int ListChild(const std::string& kubeconfig) {
  const long rss0 = StatusKib("VmRSS:");
  const long anon0 = StatusKib("RssAnon:");
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS (Linux >= 4.0)
  const double cpu0 = ProcessCpuMilliseconds();
  const Clock::time_point start = Clock::now();
  auto link = KubeLink::Start({.enabled = true, .kubeconfig = kubeconfig, .node_name = kNode});
  const bool synced = link->WaitSynced(120s);
  const double ms = MillisecondsBetween(start, Clock::now());
  const size_t pods = link->View()->pods.size();
  const long hwm = StatusKib("VmHWM:");
  const long rss1 = StatusKib("VmRSS:");
  const long anon1 = StatusKib("RssAnon:");
  const double cpu_ms = ProcessCpuMilliseconds() - cpu0;
  link->Stop();
  if (!synced) return 1;
  std::printf("pods %zu rss0 %ld hwm %ld rss1 %ld ms %.1f cpu_ms %.1f anon %ld\n", pods, rss0, hwm,
              rss1, ms, cpu_ms, anon1 - anon0);
  return 0;
}

struct ListScenario {
  std::string name;
  ApiServer api;
  std::vector<double> peak_mib, kept_mib, anon_mib, ms, cpu_ms;
  size_t pods = 0;
  int failures = 0;
};

// `here` pods on this node and `elsewhere` spread over 20 other nodes, in 25 ambient namespaces.
void LoadPods(KubeApiServer& server, int here, int elsewhere) {
  server.Upsert(Resource::kNodes, NodeJson(kNode));
  for (int n = 0; n < 25; ++n) {
    server.Upsert(Resource::kNamespaces, NamespaceJson("shop-" + std::to_string(n), "ambient"));
  }
  for (int i = 0; i < here + elsewhere; ++i) {
    const std::string node = i < here ? kNode : "node-" + std::to_string(i % 20);
    const std::string name = "web-" + std::to_string(i);
    const std::string ip = "10." + std::to_string(8 + i / 65536) + "." +
                           std::to_string(i / 256 % 256) + "." + std::to_string(i % 256);
    server.Upsert(Resource::kPods,
                  PodJson({name, "shop-" + std::to_string(i % 25), "uid-" + name, node, ip, ""}));
  }
}

void RunList(const Flags& flags, const testing::TestPki& pki) {
  std::vector<ListScenario> scenarios;
  auto add = [&](const std::string& name, int here, int elsewhere) {
    ListScenario scenario{name, StartServer(pki, 60s, "list" + std::to_string(scenarios.size()))};
    if (!scenario.api.server) return;
    LoadPods(*scenario.api.server, here, elsewhere);
    scenarios.push_back(std::move(scenario));
  };
  add("no pods (fixed cost)", 0, 0);
  add("250 here", 250, 0);
  add("5,000 elsewhere + 250 here", 250, 5000);
  add("5,000 here (10 pages)", 5000, 0);
  std::printf(
      "\n== initial list: KubeLink in a fresh process per run, %d runs per scenario, "
      "pod objects of %zu bytes (load %s)\n",
      flags.list_runs, PodJson({"web-0", "shop-0", "uid-web-0", kNode, "10.8.0.0", ""}).size(),
      LoadAverage().c_str());
  std::fflush(stdout);
  for (int run = 0; run < flags.list_runs && !Interrupted(); ++run) {
    for (size_t k = 0; k < scenarios.size(); ++k) {
      // Rotated, so no scenario always runs first.
      ListScenario& s = scenarios[(k + static_cast<size_t>(run)) % scenarios.size()];
      const std::string out = CaptureOutput({SelfPath(), "--list-child", s.api.kubeconfig});
      size_t pods = 0;
      long rss0 = 0, hwm = 0, rss1 = 0, anon = 0;
      double ms = 0, cpu_ms = 0;
      if (std::sscanf(out.c_str(), "pods %zu rss0 %ld hwm %ld rss1 %ld ms %lf cpu_ms %lf anon %ld",
                      &pods, &rss0, &hwm, &rss1, &ms, &cpu_ms, &anon) != 7) {
        ++s.failures;
        continue;
      }
      s.pods = pods;
      s.peak_mib.push_back(static_cast<double>(hwm - rss0) / 1024);
      s.kept_mib.push_back(static_cast<double>(rss1 - rss0) / 1024);
      s.anon_mib.push_back(static_cast<double>(anon) / 1024);
      s.ms.push_back(ms);
      s.cpu_ms.push_back(cpu_ms);
    }
  }
  for (const ListScenario& s : scenarios) {
    std::printf(
        "  %-28s %4zu pods kept: peak added %s MiB, kept %s MiB (anonymous %s), synced in %s "
        "ms, CPU %s ms%s\n",
        s.name.c_str(), s.pods, Spread(s.peak_mib, "%.2f").c_str(),
        Spread(s.kept_mib, "%.2f").c_str(), Spread(s.anon_mib, "%.2f").c_str(),
        Spread(s.ms, "%.0f").c_str(), Spread(s.cpu_ms, "%.0f").c_str(),
        s.failures ? (", " + std::to_string(s.failures) + " failed").c_str() : "");
  }
  std::printf(
      "  (peak added = VmHWM after the sync - VmRSS before the start; kept = VmRSS after "
      "it - before; the server runs in the parent)\n");
  std::fflush(stdout);
}

// ---- main --------------------------------------------------------------------------------------

int Main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--list-child") return ListChild(argv[2]);
  const Flags flags = ParseFlags(argc, argv);
  const bool lab_parts = flags.Part("footprint") || flags.Part("latency");
  if (lab_parts && ::geteuid() != 0) {
    std::fprintf(stderr, "kube_api_bench: footprint and latency need root (lab netns)\n");
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal_number, &action, nullptr);
  RaiseFileLimit();
  testing::TestPki pki;
  if (!pki.ok()) {
    std::fprintf(stderr, "kube_api_bench: %s\n", pki.error().c_str());
    return 1;
  }
  pki.Write("token", std::string(kToken) + "\n");
  std::printf("kube_api_bench: %s, load %s\n", DoctorPath().c_str(), LoadAverage().c_str());
  if (lab_parts) {
    const std::string prefix = "adkb" + std::to_string(::getpid() % 100000);
    lab::ScopedLab lab({.prefix = prefix, .pods = flags.pods, .zds = flags.zds});
    if (!lab.ok()) {
      std::fprintf(stderr, "kube_api_bench: lab up: %s\n", lab.error().message.c_str());
      return 1;
    }
    ApiServer api = StartServer(pki, std::chrono::milliseconds(flags.bookmark_ms), "lab");
    if (!api.server) return 1;
    LoadLab(*api.server, lab.node());
    std::printf("lab %s: %d pods%s; kube-api-sim %s\n", prefix.c_str(), flags.pods,
                flags.zds ? " (ZDS emulators, CRI pairing)" : " (pairing by pod IP)",
                api.server->url().c_str());
    if (flags.Part("footprint")) RunFootprint(flags, prefix, api);
    if (flags.Part("latency") && !Interrupted()) RunLatency(flags, prefix, lab.node(), api);
    int non_get = 0;
    for (const auto& request : api.server->Requests()) non_get += request.method != "GET";
    std::printf("requests to the API: %zu, not GET: %d\n", api.server->Requests().size(), non_get);
  }
  if (flags.Part("list") && !Interrupted()) RunList(flags, pki);
  return 0;
}

}  // namespace
}  // namespace ad::bench

int main(int argc, char** argv) { return ad::bench::Main(argc, argv); }
