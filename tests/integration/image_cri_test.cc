// The image scripts/image builds, run by a real containerd through the CRI API the way the kubelet
// runs the rendered DaemonSet (`kubectl kustomize deploy/base`): the sandbox and container config
// are derived from the rendered objects at test time (hostPID, capabilities, read-only root,
// seccomp, privileges, mounts, env, args, resources), the hostPath volumes mapped onto a lab node's
// paths. `ambient-doctor report -o json` through ExecSync (what `kubectl exec` does) must see the
// lab's pods and its intended finding, /healthz must answer on the pod IP, and the daemon must run
// under the runtime's default seccomp profile with exactly the listed capabilities. Then each
// added capability is removed in turn: some source must degrade each time, and the table of what
// degrades (docs/deploy.md, "Capabilities") is written to the build tree.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "containerd_fixture.h"
#include "lab/exec.h"
#include "lab/lab.h"
#include "model/json_reader.h"
#include "report_json.h"
#include "scoped_child.h"
#include "sources/ztunnel/http_get.h"

namespace ad {
namespace {

namespace fs = std::filesystem;
namespace cri_msg = test::cri;
using testing::ContainerdFixture;

const std::string kDoctor = std::string(AD_BINARY_DIR) + "/agent/ambient-doctor";
const std::string kSource = AD_SOURCE_DIR;

// Runs argv; its exit code and stdout (stderr appended when `merge`).
lab::CommandOutput Exec(const std::vector<std::string>& argv) {
  auto out = lab::RunCommand({argv, "", ""});
  return out.ok() ? *out : lab::CommandOutput{-1, "", out.error().message};
}

std::string MissingTools(const std::vector<std::string>& tools) {
  std::string missing;
  for (const std::string& tool : tools) {
    if (Exec({"sh", "-c", "command -v " + tool}).exit_code != 0) missing += " " + tool;
  }
  if (Exec({"python3", "-c", "import yaml"}).exit_code != 0) missing += " python3-yaml";
  return missing;
}

// ---- scripts/image --------------------------------------------------------------------------

struct BuiltImage {
  std::string archive;  // the last line scripts/image printed
  std::string error;
};

BuiltImage BuildImage(const std::string& output, const std::string& name) {
  const auto run =
      Exec({kSource + "/scripts/image", "--binary", kDoctor, "--output", output, "--name", name});
  BuiltImage image;
  if (run.exit_code != 0) {
    image.error = "scripts/image failed (" + std::to_string(run.exit_code) + "): " + run.err;
    return image;
  }
  std::string line;
  for (std::istringstream lines(run.out); std::getline(lines, line);) image.archive = line;
  return image;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A blob of an unpacked OCI layout parsed as JSON.
bool ReadBlob(const std::string& layout, std::string_view digest, rapidjson::Document& out) {
  const std::string hex(digest.substr(digest.find(':') + 1));
  return ParseJsonDocument(ReadText(layout + "/blobs/sha256/" + hex), out).ok();
}

TEST(ImageBuild, MinimalLabelledAndReproducible) {
  if (const std::string missing = MissingTools({"umoci", "tar", "gzip", "strip"});
      !missing.empty()) {
    GTEST_SKIP() << "missing:" << missing;
  }
  testing::ScopedTempDir dir("adt-image");
  const BuiltImage first = BuildImage(dir.path() + "/a.tar", "local.test/ambient-doctor");
  ASSERT_TRUE(first.error.empty()) << first.error;
  ASSERT_EQ(first.archive, dir.path() + "/a.tar");
  const BuiltImage second = BuildImage(dir.path() + "/b.tar", "local.test/ambient-doctor");
  ASSERT_TRUE(second.error.empty()) << second.error;
  const auto sums = Exec({"sha256sum", first.archive, second.archive});
  std::istringstream sum_lines(sums.out);
  std::string sum_a, sum_b, ignored;
  sum_lines >> sum_a >> ignored >> sum_b;
  EXPECT_EQ(sum_a, sum_b) << "the same binary and commit must give the same archive";

  const std::string layout = dir.path() + "/layout";
  fs::create_directories(layout);
  ASSERT_EQ(Exec({"tar", "-xf", first.archive, "-C", layout}).exit_code, 0);
  rapidjson::Document index, manifest, config;
  ASSERT_TRUE(ParseJsonDocument(ReadText(layout + "/index.json"), index).ok());
  const rapidjson::Value& entry = index["manifests"][0];
  ASSERT_TRUE(ReadBlob(layout, JsonStringMember(entry, "digest"), manifest));
  ASSERT_TRUE(
      ReadBlob(layout, JsonStringMember(*JsonMember(manifest, "config"), "digest"), config));

  // Labels: the version compiled into the binary, the commit, the licence.
  const std::string version_line = Exec({kDoctor, "version"}).out;  // "ambient-doctor X (rev)"
  const std::string version = version_line.substr(15, version_line.find(' ', 15) - 15);
  const rapidjson::Value& image_config = config["config"];
  const rapidjson::Value& labels = image_config["Labels"];
  EXPECT_EQ(JsonStringMember(labels, "org.opencontainers.image.version"), version);
  const auto head = Exec({"git", "-C", kSource, "rev-parse", "HEAD"});
  EXPECT_EQ(std::string(JsonStringMember(labels, "org.opencontainers.image.revision")) + "\n",
            head.exit_code == 0 ? head.out : "unknown\n");
  EXPECT_EQ(JsonStringMember(labels, "org.opencontainers.image.licenses"), "Apache-2.0");
  EXPECT_FALSE(JsonStringMember(labels, "org.opencontainers.image.source").empty());
  EXPECT_EQ(JsonStringMember(*JsonMember(entry, "annotations"), "io.containerd.image.name"),
            "local.test/ambient-doctor:" + version);
  EXPECT_EQ(JsonText(&image_config["Env"][0]), "PATH=/usr/local/bin");
  EXPECT_EQ(JsonText(&image_config["Entrypoint"][0]), "/usr/local/bin/ambient-doctor");

  // Files: the binary and exactly what ldd resolves; no shell.
  const rapidjson::Value& layers = manifest["layers"];
  ASSERT_EQ(layers.Size(), 1u);
  const std::string layer =
      layout + "/blobs/sha256/" + std::string(JsonStringMember(layers[0], "digest").substr(7));
  std::set<std::string> files;
  std::string line;
  for (std::istringstream listing(Exec({"tar", "-tzf", layer}).out); std::getline(listing, line);) {
    if (!line.ends_with("/")) files.insert("/" + line);
  }
  std::set<std::string> expected = {"/usr/local/bin/ambient-doctor"};
  const std::regex library(R"((?:=>\s*|^\s*)(/\S+) \()");
  for (std::istringstream ldd(Exec({"ldd", kDoctor}).out); std::getline(ldd, line);) {
    std::smatch match;
    if (std::regex_search(line, match, library)) expected.insert(match[1].str());
  }
  EXPECT_EQ(files, expected);
  EXPECT_FALSE(files.contains("/bin/sh"));
  const uintmax_t compressed = fs::file_size(layer);
  std::cout << "image layer: " << compressed / 1024 << " KiB compressed, " << files.size()
            << " files\n";
  EXPECT_LT(compressed, 30u << 20) << "the image should stay under 30 MiB compressed";
}

// ---- the rendered DaemonSet -------------------------------------------------------------------

struct Rendered {
  rapidjson::Document objects;  // every rendered object, as JSON
  const rapidjson::Value* daemonset = nullptr;
  const rapidjson::Value* configmap = nullptr;
  std::string error;
};

void Render(const std::string& work, Rendered& out) {
  const auto kustomize = Exec({"kubectl", "kustomize", kSource + "/deploy/base"});
  if (kustomize.exit_code != 0) {
    out.error = "kubectl kustomize failed: " + kustomize.err;
    return;
  }
  std::ofstream(work + "/rendered.yaml") << kustomize.out;
  const auto json =
      Exec({"python3", "-c",
            "import json, sys, yaml; "
            "print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))",
            work + "/rendered.yaml"});
  if (json.exit_code != 0 || !ParseJsonDocument(json.out, out.objects).ok()) {
    out.error = "cannot read the rendered YAML: " + json.err;
    return;
  }
  for (const rapidjson::Value& object : out.objects.GetArray()) {
    const std::string_view kind = JsonStringMember(object, "kind");
    if (kind == "DaemonSet") out.daemonset = &object;
    if (kind == "ConfigMap") out.configmap = &object;
  }
  if (out.daemonset == nullptr || out.configmap == nullptr) out.error = "no DaemonSet/ConfigMap";
}

const rapidjson::Value& PodSpec(const Rendered& r) {
  return (*r.daemonset)["spec"]["template"]["spec"];
}
const rapidjson::Value& Container(const Rendered& r) { return PodSpec(r)["containers"][0]; }

bool JsonTrue(const rapidjson::Value& object, std::string_view key) {
  const rapidjson::Value* value = JsonMember(object, key);
  return value != nullptr && value->IsBool() && value->GetBool();
}

std::vector<std::string> Strings(const rapidjson::Value* array) {
  std::vector<std::string> out;
  if (array == nullptr || !array->IsArray()) return out;
  for (const rapidjson::Value& item : array->GetArray()) out.emplace_back(JsonText(&item));
  return out;
}

// "500m" -> 0.5, "2" -> 2 (CPU); "192Mi" -> bytes (memory).
double CpuCores(std::string_view text) {
  if (text.ends_with("m")) return std::stod(std::string(text.substr(0, text.size() - 1))) / 1000;
  return std::stod(std::string(text));
}
int64_t MemoryBytes(std::string_view text) {
  static const std::map<std::string, int64_t> kUnits = {{"Ki", 1LL << 10}, {"Mi", 1LL << 20},
                                                        {"Gi", 1LL << 30}, {"K", 1000},
                                                        {"M", 1000000},    {"G", 1000000000}};
  for (const auto& [unit, scale] : kUnits) {
    if (text.ends_with(unit)) {
      return std::stoll(std::string(text.substr(0, text.size() - unit.size()))) * scale;
    }
  }
  return std::stoll(std::string(text));
}

// The lab's stand-ins for the node's host paths (the DaemonSet's hostPath volumes).
struct NodePaths {
  std::map<std::string, std::string> host_paths;  // DaemonSet hostPath -> path on this machine
  std::string scratch;                            // for unknown hostPaths, configMaps, emptyDirs
  std::string configmap_extra;                    // appended to the ConfigMap's files
};

// How the kubelet turns the pod template into a sandbox config.
cri_msg::PodSandboxConfig SandboxConfig(const Rendered& r, const std::string& node,
                                        const std::string& log_dir) {
  const rapidjson::Value& meta = (*r.daemonset)["spec"]["template"]["metadata"];
  const rapidjson::Value& spec = PodSpec(r);
  cri_msg::PodSandboxConfig config;
  config.mutable_metadata()->set_name("ambient-doctor-" + node);
  config.mutable_metadata()->set_namespace_(
      std::string(JsonStringMember((*r.daemonset)["metadata"], "namespace")));
  config.mutable_metadata()->set_uid("00000000-0000-4000-8000-00000000ad01");
  config.set_hostname(node);  // not hostNetwork: the kubelet uses the pod name; any name does
  config.set_log_directory(log_dir);
  for (const auto& [key, value] : meta["labels"].GetObject()) {
    (*config.mutable_labels())[key.GetString()] = value.GetString();
  }
  if (const rapidjson::Value* annotations = JsonMember(meta, "annotations")) {
    for (const auto& [key, value] : annotations->GetObject()) {
      (*config.mutable_annotations())[key.GetString()] = value.GetString();
    }
  }
  auto* options = config.mutable_linux()->mutable_security_context()->mutable_namespace_options();
  options->set_pid(JsonTrue(spec, "hostPID") ? cri_msg::NODE : cri_msg::POD);
  options->set_network(JsonTrue(spec, "hostNetwork") ? cri_msg::NODE : cri_msg::POD);
  options->set_ipc(JsonTrue(spec, "hostIPC") ? cri_msg::NODE : cri_msg::POD);
  return config;
}

cri_msg::SecurityProfile::ProfileType ProfileType(const rapidjson::Value* profile) {
  const std::string_view type = profile ? JsonStringMember(*profile, "type") : "";
  if (type == "RuntimeDefault") return cri_msg::SecurityProfile::RuntimeDefault;
  if (type == "Localhost") return cri_msg::SecurityProfile::Localhost;
  return cri_msg::SecurityProfile::Unconfined;  // the kubelet's default for an unset profile
}

void ApplySecurityContext(const rapidjson::Value& sc, const std::vector<std::string>& add,
                          cri_msg::LinuxContainerSecurityContext& out) {
  for (const std::string& cap : add) out.mutable_capabilities()->add_add_capabilities(cap);
  if (const rapidjson::Value* caps = JsonMember(sc, "capabilities")) {
    for (const std::string& cap : Strings(JsonMember(*caps, "drop"))) {
      out.mutable_capabilities()->add_drop_capabilities(cap);
    }
  }
  out.set_privileged(JsonTrue(sc, "privileged"));
  out.set_readonly_rootfs(JsonTrue(sc, "readOnlyRootFilesystem"));
  // allowPrivilegeEscalation unset means true; false sets no_new_privs.
  const rapidjson::Value* escalation = JsonMember(sc, "allowPrivilegeEscalation");
  out.set_no_new_privs(escalation != nullptr && escalation->IsBool() && !escalation->GetBool());
  if (const rapidjson::Value* user = JsonMember(sc, "runAsUser")) {
    out.mutable_run_as_user()->set_value(user->GetInt64());
  }
  if (const rapidjson::Value* group = JsonMember(sc, "runAsGroup")) {
    out.mutable_run_as_group()->set_value(group->GetInt64());
  }
  out.mutable_seccomp()->set_profile_type(ProfileType(JsonMember(sc, "seccompProfile")));
  out.mutable_apparmor()->set_profile_type(ProfileType(JsonMember(sc, "appArmorProfile")));
  out.mutable_namespace_options()->set_pid(cri_msg::NODE);  // hostPID (checked by the caller)
  // What the kubelet sends for procMount Default (pkg/securitycontext/util.go).
  for (const char* path :
       {"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
        "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
        "/sys/devices/virtual/powercap"}) {
    out.add_masked_paths(path);
  }
  for (const char* path :
       {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}) {
    out.add_readonly_paths(path);
  }
}

// The kubelet's cgroup settings from the container's requests and limits (absent ones unset).
void ApplyResources(const rapidjson::Value& c, cri_msg::LinuxContainerResources& out) {
  const rapidjson::Value* resources = JsonMember(c, "resources");
  const rapidjson::Value* limits = resources ? JsonMember(*resources, "limits") : nullptr;
  const rapidjson::Value* requests = resources ? JsonMember(*resources, "requests") : nullptr;
  const std::string_view cpu_limit = limits ? JsonStringMember(*limits, "cpu") : "";
  const std::string_view memory_limit = limits ? JsonStringMember(*limits, "memory") : "";
  const std::string_view cpu_request = requests ? JsonStringMember(*requests, "cpu") : "";
  if (!cpu_limit.empty()) {
    out.set_cpu_period(100000);
    out.set_cpu_quota(static_cast<int64_t>(CpuCores(cpu_limit) * 100000));
  }
  if (!memory_limit.empty()) out.set_memory_limit_in_bytes(MemoryBytes(memory_limit));
  const double shares = cpu_request.empty() ? 0 : CpuCores(cpu_request) * 1024;
  out.set_cpu_shares(std::max<int64_t>(2, static_cast<int64_t>(shares)));
}

// Where a volume comes from on this machine; "" and `error` when it cannot be provided.
std::string VolumeSource(const Rendered& r, const rapidjson::Value& volume, const NodePaths& node,
                         std::string& error) {
  const std::string name(JsonStringMember(volume, "name"));
  const std::string dir = node.scratch + "/volumes/" + name;
  if (const rapidjson::Value* host = JsonMember(volume, "hostPath")) {
    const std::string path(JsonStringMember(*host, "path"));
    const auto mapped = node.host_paths.find(path);
    if (mapped != node.host_paths.end()) return mapped->second;
    fs::create_directories(dir);  // a path the lab has nothing for: DirectoryOrCreate, empty
    return dir;
  }
  // An emptyDir, and the projected API token (the lab has no API server), stay empty.
  fs::create_directories(dir);
  if (const rapidjson::Value* map = JsonMember(volume, "configMap")) {
    // The rendered ConfigMap's files, as the kubelet projects them (the name must match).
    if (JsonStringMember(*map, "name") != JsonStringMember((*r.configmap)["metadata"], "name")) {
      error = "volume " + name + " refers to an unrendered ConfigMap";
      return "";
    }
    for (const auto& [key, value] : (*r.configmap)["data"].GetObject()) {
      std::ofstream(dir + "/" + key.GetString()) << value.GetString() << node.configmap_extra;
    }
  } else if (JsonMember(volume, "emptyDir") == nullptr &&
             JsonMember(volume, "projected") == nullptr) {
    error = "volume " + name + " has a source the test does not provide";
    return "";
  }
  return dir;
}

// How the kubelet turns the container into a container config, with `add` as the added
// capabilities (the rendered list, or it less one for the negative controls).
cri_msg::ContainerConfig ContainerConfig(const Rendered& r, const NodePaths& node,
                                         const std::string& node_name,
                                         const std::vector<std::string>& add, uint32_t attempt,
                                         std::string& error) {
  const rapidjson::Value& c = Container(r);
  cri_msg::ContainerConfig config;
  config.mutable_metadata()->set_name(std::string(JsonStringMember(c, "name")));
  config.mutable_metadata()->set_attempt(attempt);
  config.mutable_image()->set_image(std::string(JsonStringMember(c, "image")));
  for (const std::string& arg : Strings(JsonMember(c, "command"))) config.add_command(arg);
  for (const std::string& arg : Strings(JsonMember(c, "args"))) config.add_args(arg);
  if (const rapidjson::Value* env = JsonMember(c, "env")) {
    for (const rapidjson::Value& e : env->GetArray()) {
      auto* kv = config.add_envs();
      kv->set_key(std::string(JsonStringMember(e, "name")));
      if (const rapidjson::Value* from = JsonMember(e, "valueFrom")) {
        const rapidjson::Value* ref = JsonMember(*from, "fieldRef");
        const std::string_view field = ref ? JsonStringMember(*ref, "fieldPath") : "";
        kv->set_value(field == "spec.nodeName" ? node_name : "");  // others: not needed here
      } else {
        kv->set_value(std::string(JsonStringMember(e, "value")));
      }
    }
  }
  std::map<std::string, const rapidjson::Value*> volumes;
  static const rapidjson::Value kNone(rapidjson::kArrayType);
  const rapidjson::Value* pod_volumes = JsonMember(PodSpec(r), "volumes");
  for (const rapidjson::Value& v : (pod_volumes ? *pod_volumes : kNone).GetArray()) {
    volumes[std::string(JsonStringMember(v, "name"))] = &v;
  }
  const rapidjson::Value* container_mounts = JsonMember(c, "volumeMounts");
  for (const rapidjson::Value& m : (container_mounts ? *container_mounts : kNone).GetArray()) {
    const std::string name(JsonStringMember(m, "name"));
    auto* mount = config.add_mounts();
    mount->set_container_path(std::string(JsonStringMember(m, "mountPath")));
    mount->set_host_path(VolumeSource(r, *volumes.at(name), node, error));
    mount->set_readonly(JsonTrue(m, "readOnly"));
    const std::string_view propagation = JsonStringMember(m, "mountPropagation");
    mount->set_propagation(propagation == "HostToContainer" ? cri_msg::PROPAGATION_HOST_TO_CONTAINER
                           : propagation == "Bidirectional" ? cri_msg::PROPAGATION_BIDIRECTIONAL
                                                            : cri_msg::PROPAGATION_PRIVATE);
  }
  ApplyResources(c, *config.mutable_linux()->mutable_resources());
  static const rapidjson::Value kNoContext(rapidjson::kObjectType);
  const rapidjson::Value* security = JsonMember(c, "securityContext");
  ApplySecurityContext(security ? *security : kNoContext, add,
                       *config.mutable_linux()->mutable_security_context());
  config.set_log_path("ambient-doctor/" + std::to_string(attempt) + ".log");
  return config;
}

// ---- one run of the container -------------------------------------------------------------------

// An error any source reported, anywhere in the report (node, ZDS, CRI, a netns ...).
struct ReportedError {
  std::string where;  // the JSON member holding the errors array
  std::string source;
  std::string message;
  bool operator<(const ReportedError& o) const {
    return std::tie(where, source, message) < std::tie(o.where, o.source, o.message);
  }
};

void CollectErrors(const rapidjson::Value& value, const std::string& where,
                   std::set<ReportedError>& out, const std::string& prefix) {
  if (value.IsArray()) {
    for (const rapidjson::Value& item : value.GetArray()) CollectErrors(item, where, out, prefix);
    return;
  }
  if (!value.IsObject()) return;
  for (const auto& [key, member] : value.GetObject()) {
    const std::string name = key.GetString();
    if ((name == "errors" || name == "warnings") && member.IsArray()) {
      for (const rapidjson::Value& e : member.GetArray()) {
        if (!e.IsObject()) continue;
        // Pids, inodes and counts vary between runs; the lab prefix is the test's.
        std::string message = std::regex_replace(std::string(JsonStringMember(e, "message")),
                                                 std::regex("[0-9]+"), "N");
        message = std::regex_replace(message, std::regex(prefix), "<lab>");
        out.insert({where, std::string(JsonStringMember(e, "source")), message});
      }
    } else {
      CollectErrors(member, name, out, prefix);
    }
  }
}

struct ContainerRun {
  std::string label;  // "all" or "-CAP"
  std::string error;  // the run itself failed (not a degraded source)
  pid_t pid = 0;
  std::string status;     // /proc/<pid>/status
  std::string mountinfo;  // /proc/<pid>/mountinfo
  int healthz = 0;        // HTTP status of GET /healthz on the pod IP (0: no answer)
  std::string healthz_body;
  std::string metrics;  // body of GET /metrics on the pod IP
  std::string report;   // stdout of `ambient-doctor report -o json` through ExecSync
  int report_exit = -1;
  std::vector<test::JsonFinding> findings;
  std::set<ReportedError> errors;
  std::vector<std::string> netns;   // paths of the netns the report lists
  std::set<std::string> pod_names;  // namespace/name of the pods CRI named
  std::string node_name;            // the report's node name (NODE_NAME from the downward API)
  std::string istio_fds;  // "cni-sim 3, ztunnel-sim 3": netns fds the Istio processes hold
  std::string log;        // the container's log (CRI format)
};

std::string StatusField(const std::string& status, const std::string& field) {
  const std::regex line("(^|\n)" + field + ":\\s*([^\n]*)");
  std::smatch match;
  return std::regex_search(status, match, line) ? match[2].str() : "";
}

// Waits for the daemon's first published report (not the local fallback), through ExecSync.
void ReadReport(const ContainerdFixture& ctrd, const std::string& id, const std::string& prefix,
                ContainerRun& run) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  rapidjson::Document doc;
  for (;;) {
    const auto exec = ctrd.ExecSync(id, {"ambient-doctor", "report", "-o", "json"});
    run.report = exec.out + exec.err + exec.error;
    run.report_exit = exec.exit_code;
    const bool parsed = exec.error.empty() && ParseJsonDocument(exec.out, doc).ok();
    if (parsed && JsonMember(doc, "origin") &&
        JsonStringMember(doc["origin"], "source") == "daemon") {
      break;
    }
    if (std::chrono::steady_clock::now() > give_up) {
      run.error = "no report from the daemon through ExecSync: " + run.report;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  run.findings = test::ToFindings(JsonMember(doc, "findings"));
  CollectErrors(doc, "report", run.errors, prefix);
  run.node_name = JsonStringMember(doc["node"], "name");
  if (const rapidjson::Value* processes = JsonMember(doc["node"], "processes")) {
    for (const rapidjson::Value& p : processes->GetArray()) {
      const rapidjson::Value* fds = JsonMember(p, "netns_fd_inodes");
      run.istio_fds += (run.istio_fds.empty() ? "" : ", ") +
                       std::string(JsonStringMember(p, "comm")) + " " +
                       std::to_string(fds && fds->IsArray() ? fds->Size() : 0);
    }
  }
  for (const rapidjson::Value& n : doc["netns"].GetArray()) {
    run.netns.emplace_back(JsonStringMember(n, "path"));
    if (const std::string pod(JsonStringMember(n, "pod")); !pod.empty()) run.pod_names.insert(pod);
  }
}

// The kubelet's part: one sandbox from the rendered pod template on the lab's node, and the
// container, run with a given set of added capabilities.
struct Kubelet {
  const ContainerdFixture& ctrd;
  const Rendered& rendered;
  const NodePaths& paths;
  std::string lab_prefix;
  cri_msg::PodSandboxConfig sandbox_config;
  std::string sandbox;  // its id once RunPodSandbox succeeded

  std::string node_name() const { return lab_prefix + "-node"; }
  // Creates and starts the container, reads what it reports, stops and removes it again.
  ContainerRun RunContainer(const std::vector<std::string>& add, uint32_t attempt) const;
};

ContainerRun Kubelet::RunContainer(const std::vector<std::string>& add, uint32_t attempt) const {
  ContainerRun run;
  const cri_msg::ContainerConfig config =
      ContainerConfig(rendered, paths, node_name(), add, attempt, run.error);
  if (!run.error.empty()) return run;
  const std::string id = ctrd.CreateContainer(sandbox, config, sandbox_config, run.error);
  if (id.empty()) return run;
  if (run.error = ctrd.StartContainer(id); run.error.empty()) {
    run.pid = ctrd.InspectContainer(id).pid;
    run.status = ReadText("/proc/" + std::to_string(run.pid) + "/status");
    run.mountinfo = ReadText("/proc/" + std::to_string(run.pid) + "/mountinfo");
    ReadReport(ctrd, id, lab_prefix, run);
    // The kubelet's probe: GET /healthz on the pod IP. The test's CNI bridge gives the node no
    // route to pods, so it is sent from the pod's own netns, still to the pod IP.
    const ztunnel::HttpGetRequest probe{"/proc/" + std::to_string(run.pid) + "/ns/net",
                                        ctrd.SandboxIp(sandbox), 9977, "/healthz"};
    auto health = ztunnel::HttpGet(probe);
    for (int i = 0; i < 50 && health.ok() && health->status != 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      health = ztunnel::HttpGet(probe);
    }
    if (!health.ok()) run.healthz_body = health.error().message;
    if (health.ok()) {
      run.healthz = health->status;
      run.healthz_body = health->body;
    }
    ztunnel::HttpGetRequest scrape = probe;
    scrape.path = "/metrics";
    if (auto metrics = ztunnel::HttpGet(scrape); metrics.ok() && metrics->status == 200) {
      run.metrics = metrics->body;
    }
  }
  run.log = ReadText(ctrd.dir() + "/logs/" + config.log_path());
  if (const std::string removed = ctrd.RemoveContainer(id, 5); !removed.empty()) {
    run.error += " " + removed;
  }
  return run;
}

// ---- the lab's host paths ---------------------------------------------------------------------

// A directory of ours on /run, made a shared mount (bound on itself) so that HostToContainer
// propagation from it is allowed, as from /run/containerd on a node.
class SharedRunDir {
 public:
  SharedRunDir() : path_("/run/adimg-" + std::to_string(::getpid())) {
    fs::create_directories(path_);
  }
  bool Share() {
    mounted_ = ::mount(path_.c_str(), path_.c_str(), nullptr, MS_BIND, nullptr) == 0 &&
               ::mount(nullptr, path_.c_str(), nullptr, MS_SHARED, nullptr) == 0;
    return mounted_;
  }
  ~SharedRunDir() {
    for (const std::string& target : ContainerdFixture::MountsUnder(path_)) {
      ::umount2(target.c_str(), MNT_DETACH);
    }
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool mounted_ = false;
};

// The node's containerd socket directory (/run/containerd): a cri-sim of the test's own serving
// the lab's pods with their pins where containerd and CRI-O report them (/var/run/netns/..., the
// path the DaemonSet mounts; the lab's own cri-sim says /run/netns/..., the same directory on the
// host).
class NodeRuntime {
 public:
  NodeRuntime(const lab::LabNode& node, const std::string& work) {
    if (!run_dir_.Share()) {
      error_ = "cannot make " + run_dir_.path() + " a shared mount";
      return;
    }
    fs::create_directories(dir());
    const std::string pods_file = work + "/pods";
    std::ofstream(pods_file) << std::regex_replace(ReadText(node.zds.pods_file),
                                                   std::regex(" /run/netns/"), " /var/run/netns/");
    cri_sim_.emplace(std::vector<std::string>{
        std::string(AD_BINARY_DIR) + "/tests/sim/cri-sim", "--socket", dir() + "/containerd.sock",
        "--pods-file", pods_file, "--ips-file", node.zds.pod_ips_file, "--quiet"});
    for (int i = 0; i < 250 && !fs::exists(dir() + "/containerd.sock"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!fs::exists(dir() + "/containerd.sock")) error_ = "cri-sim did not start";
  }
  const std::string& error() const { return error_; }
  std::string dir() const { return run_dir_.path() + "/run-containerd"; }
  // CRI-O's socket directory, empty on this containerd node but mounted with HostToContainer
  // propagation too, so it must also lie in a shared mount.
  std::string crio_dir() const {
    fs::create_directories(run_dir_.path() + "/run-crio");
    return run_dir_.path() + "/run-crio";
  }

 private:
  SharedRunDir run_dir_;
  std::optional<testing::ScopedChild> cri_sim_;  // stopped before run_dir_ is unmounted
  std::string error_;
};

// The capabilities the rendered container adds.
std::vector<std::string> AddedCapabilities(const Rendered& r) {
  const rapidjson::Value* caps = JsonMember(Container(r)["securityContext"], "capabilities");
  return caps ? Strings(JsonMember(*caps, "add")) : std::vector<std::string>{};
}

// Bit numbers of the capabilities the DaemonSet may name (include/uapi/linux/capability.h).
uint64_t CapabilityMask(const std::vector<std::string>& names) {
  static const std::map<std::string, int> kBits = {
      {"CHOWN", 0},      {"DAC_OVERRIDE", 1},  {"DAC_READ_SEARCH", 2}, {"FOWNER", 3},
      {"KILL", 5},       {"SETGID", 6},        {"SETUID", 7},          {"NET_BIND_SERVICE", 10},
      {"NET_ADMIN", 12}, {"NET_RAW", 13},      {"IPC_LOCK", 14},       {"SYS_PTRACE", 19},
      {"SYS_ADMIN", 21}, {"SYS_RESOURCE", 24}, {"PERFMON", 38},        {"BPF", 39}};
  uint64_t mask = 0;
  for (const std::string& name : names) mask |= 1ULL << kBits.at(name);
  return mask;
}

// The evidence line of ZTUNNEL_LISTENERS_MISSING naming who holds ztunnel's port instead.
std::string ListenerOwner(const ContainerRun& run) {
  for (const test::JsonFinding& f : run.findings) {
    for (const std::string& line : f.evidence) {
      if (line.find("non-ztunnel socket") != std::string::npos) return line;
    }
  }
  return "";
}

std::string Findings(const ContainerRun& run) {
  std::string out;
  for (const test::JsonFinding& f : run.findings) {
    if (f.severity == "info") continue;
    out += (out.empty() ? "" : ", ") + f.code;
  }
  return out.empty() ? "none" : out;
}

// What a reduced run reports beyond the full run: the degraded sources and their messages.
std::set<ReportedError> NewErrors(const ContainerRun& full, const ContainerRun& reduced) {
  std::set<ReportedError> out;
  std::set_difference(reduced.errors.begin(), reduced.errors.end(), full.errors.begin(),
                      full.errors.end(), std::inserter(out, out.end()));
  return out;
}

std::string TableRow(const std::string& cap, const ContainerRun& full, const ContainerRun& run) {
  const std::set<ReportedError> added = NewErrors(full, run);
  std::set<std::string> sources;
  for (const ReportedError& e : added) sources.insert(e.source + " (" + e.where + ")");
  std::string joined;
  for (const std::string& s : sources) joined += (joined.empty() ? "" : ", ") + s;
  std::string message = added.empty() ? "-" : added.begin()->message;
  std::replace(message.begin(), message.end(), '|', '/');
  const std::string owner =
      std::regex_replace(ListenerOwner(run), std::regex("owners [0-9]+"), "owners <pid>");
  return "| " + cap + " | " + (joined.empty() ? "nothing" : joined) + " | " + message + " | " +
         std::to_string(run.netns.size()) + " | " + std::to_string(run.healthz) + " | " +
         Findings(run) + " | " + (owner.empty() ? "-" : owner) + " | " +
         (run.istio_fds.empty() ? "-" : run.istio_fds) + " |\n";
}

uint64_t HexMask(const std::string& text) {
  return std::stoull(text.empty() ? "0" : text, nullptr, 16);
}

// The run as shipped: the runtime's seccomp filter, exactly the listed capabilities, the lab's
// pods named through CRI, its one intended finding, /healthz answering.
void CheckFullRun(const Rendered& r, const lab::LabNode& node, const std::vector<std::string>& caps,
                  pid_t app_pid, const ContainerRun& run) {
  EXPECT_EQ(StatusField(run.status, "Seccomp"), "2") << "RuntimeDefault is a seccomp filter";
  const rapidjson::Value* escalation =
      JsonMember(Container(r)["securityContext"], "allowPrivilegeEscalation");
  const bool no_new_privs = escalation != nullptr && escalation->IsBool() && !escalation->GetBool();
  EXPECT_EQ(StatusField(run.status, "NoNewPrivs"), no_new_privs ? "1" : "0");
  EXPECT_EQ(HexMask(StatusField(run.status, "CapEff")), CapabilityMask(caps)) << run.status;
  EXPECT_EQ(HexMask(StatusField(run.status, "CapBnd")), CapabilityMask(caps)) << run.status;
  EXPECT_EQ(run.healthz, 200) << run.healthz_body;
  EXPECT_EQ(run.node_name, node.prefix + "-node") << "NODE_NAME from spec.nodeName";
  EXPECT_NE(run.metrics.find("ambient_doctor_findings{code=\"MIXED_BACKEND\""), std::string::npos)
      << "the Prometheus scrape on the pod IP:\n"
      << run.metrics.substr(0, 2000);
  // readOnlyRootFilesystem: the container's / is mounted read-only ("ID PARENT DEV ROOT / ro,...").
  EXPECT_TRUE(std::regex_search(run.mountinfo, std::regex(R"((^|\n)\S+ \S+ \S+ \S+ / ro[, ])")))
      << run.mountinfo;
  std::set<std::string> netns(run.netns.begin(), run.netns.end());
  std::set<std::string> pods;
  for (const lab::LabPod& pod : node.pods) {
    EXPECT_TRUE(netns.contains("/host/var/run/netns/" + pod.netns_name)) << run.report;
    pods.insert("lab/" + pod.netns_name);
  }
  EXPECT_EQ(run.pod_names, pods) << "pods named through the runtime (CRI)\n" << run.report;
  std::multiset<std::pair<std::string, std::string>> warnings;
  for (const test::JsonFinding& f : run.findings) {
    if (f.severity != "info") warnings.insert({f.netns_path, f.code});
  }
  const std::multiset<std::pair<std::string, std::string>> expected = {
      {"/host/var/run/netns/" + node.pods.at(0).netns_name, "MIXED_BACKEND"},
      {"/host/var/run/netns/" + node.pods.at(1).netns_name, "ZTUNNEL_LISTENERS_MISSING"}};
  EXPECT_EQ(warnings, expected) << run.report;
  EXPECT_EQ(ListenerOwner(run),
            "port 15008 is held by a non-ztunnel socket (owners " + std::to_string(app_pid) + ")")
      << run.report;
  EXPECT_NE(run.log.find("metrics on"), std::string::npos) << run.log;
}

// The container run once per added capability with that one removed: each must degrade some
// source (or the capability is not needed). Returns the table and the messages behind it.
std::string NegativeControls(const Kubelet& kubelet, const std::vector<std::string>& caps,
                             const ContainerRun& full) {
  std::string table =
      "| capability removed | sources that degrade (report section) | first new message | "
      "netns | /healthz | findings (warning+) | pod 1's port 15008 | netns fds of istio-cni, "
      "ztunnel |\n|---|---|---|---|---|---|---|---|\n";
  table += TableRow("none (as shipped)", full, full);
  std::string details = "as shipped:\n";
  for (const ReportedError& e : full.errors) {
    details += "  " + e.where + " / " + e.source + ": " + e.message + "\n";
  }
  uint32_t attempt = 1;
  for (const std::string& cap : caps) {
    std::vector<std::string> fewer;
    std::copy_if(caps.begin(), caps.end(), std::back_inserter(fewer),
                 [&cap](const std::string& c) { return c != cap; });
    const ContainerRun reduced = kubelet.RunContainer(fewer, attempt++);
    if (!reduced.error.empty()) {
      ADD_FAILURE() << "without " << cap << ": " << reduced.error << "\n" << reduced.log;
      continue;
    }
    table += TableRow(cap, full, reduced);
    details += "without " + cap + ":\n";
    for (const ReportedError& e : NewErrors(full, reduced)) {
      details += "  " + e.where + " / " + e.source + ": " + e.message + "\n";
    }
    const bool degraded =
        !NewErrors(full, reduced).empty() || Findings(reduced) != Findings(full) ||
        ListenerOwner(reduced) != ListenerOwner(full) || reduced.istio_fds != full.istio_fds;
    EXPECT_TRUE(degraded) << "no source needs " << cap << ": drop it from the DaemonSet";
  }
  return table + "\n```\n" + details + "```\n";
}

class ImageCriTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (containerd, network namespaces)";
    if (std::string missing = ContainerdFixture::MissingPrerequisites(); !missing.empty()) {
      GTEST_SKIP() << missing;
    }
    if (std::string missing = MissingTools({"umoci", "kubectl", "strip", "setpriv"});
        !missing.empty()) {
      GTEST_SKIP() << "missing:" << missing;
    }
  }
};

TEST_F(ImageCriTest, RunsUnderTheRenderedDaemonSet) {
  testing::ScopedTempDir work("adt-imgcri");
  Rendered rendered;
  Render(work.path(), rendered);
  ASSERT_TRUE(rendered.error.empty()) << rendered.error;
  const rapidjson::Value& container = Container(rendered);
  const std::string image(JsonStringMember(container, "image"));
  ASSERT_TRUE(JsonTrue(PodSpec(rendered), "hostPID")) << "the container config assumes hostPID";
  const std::vector<std::string> caps = AddedCapabilities(rendered);
  ASSERT_FALSE(caps.empty());

  // The image, named as the rendered DaemonSet references it: its tag is the binary's version.
  const BuiltImage built =
      BuildImage(work.path() + "/image.tar", image.substr(0, image.rfind(':')));
  ASSERT_TRUE(built.error.empty()) << built.error;

  lab::LabOptions options;
  options.prefix = "adic" + std::to_string(::getpid() % 100000);
  options.pods = 3;
  options.zds = true;
  // Pod 0: legacy + nft copies (MIXED_BACKEND); pod 1: ztunnel opens no listeners in it
  // (ZTUNNEL_LISTENERS_MISSING), and its application holds one of ztunnel's ports.
  options.faults = {{lab::FaultKind::kFlip, 0}, {lab::FaultKind::kZtunnelNoListeners, 1}};
  lab::ScopedLab lab(options);
  ASSERT_TRUE(lab.ok()) << lab.error().message;
  const lab::LabNode& node = lab.node();
  // Pod 1's application, of another uid as most pods' are (its /proc/<pid>/fd is mode 0500),
  // listening on ztunnel's HBONE port: the finding names it as the port's owner.
  testing::ScopedChild app(
      {"/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
       "/usr/bin/python3", "-c",
       "import socket, time\ns = socket.socket()\ns.bind(('0.0.0.0', 15008))\ns.listen()\n"
       "time.sleep(600)"},
      node.pods.at(1).netns_path);

  NodeRuntime runtime(node, work.path());
  ASSERT_EQ(runtime.error(), "");
  NodePaths paths;
  paths.scratch = work.path();
  paths.host_paths = {{"/proc", "/proc"},
                      {"/var/run/netns", "/run/netns"},
                      {"/run/containerd", runtime.dir()},
                      {"/run/crio", runtime.crio_dir()},
                      {"/var/run/ztunnel", node.zds.run_dir},
                      {"/etc/cni/net.d", node.cni_conf_dir},
                      {"/sys/kernel/btf", "/sys/kernel/btf"}};
  // The agent on a real node scans every netns; here it is confined to the lab node, as the
  // lab's own flags do (container paths: /host is where the DaemonSet mounts the host's).
  paths.configmap_extra = "\n--no-proc\n--netns-match " + node.prefix +
                          "-*\n--host-netns /host/var/run/netns/" + node.host_netns_name +
                          "\n--ztunnel-netns /host/var/run/netns/" + node.zds.ztunnel_netns_name +
                          "\n";

  ContainerdFixture ctrd;
  ASSERT_EQ(ctrd.Start(), "") << ctrd.LogTail();
  ASSERT_EQ(ctrd.ImportImage(built.archive, image), "");
  fs::create_directories(ctrd.dir() + "/logs");
  Kubelet kubelet{ctrd, rendered, paths, node.prefix, {}, {}};
  kubelet.sandbox_config = SandboxConfig(rendered, kubelet.node_name(), ctrd.dir() + "/logs");
  std::string error;
  kubelet.sandbox = ctrd.RunWorkloadSandbox(kubelet.sandbox_config, error);
  ASSERT_FALSE(kubelet.sandbox.empty()) << error << "\n" << ctrd.LogTail();

  const ContainerRun full = kubelet.RunContainer(caps, 0);
  ASSERT_TRUE(full.error.empty()) << full.error << "\nlog:\n" << full.log << ctrd.LogTail();
  CheckFullRun(rendered, node, caps, app.pid(), full);

  const std::string table = NegativeControls(kubelet, caps, full);
  std::cout << table;
  std::ofstream(std::string(AD_BINARY_DIR) + "/tests/image_cri_capabilities.md") << table;
}

}  // namespace
}  // namespace ad
