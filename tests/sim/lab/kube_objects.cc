#include "lab/kube_objects.h"

#include <ctime>

#include "lab/lab.h"
#include "model/json.h"

namespace ad::lab {
namespace {

std::string Rfc3339(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

bool Has(const LabPod& pod, FaultKind kind) {
  for (const std::string& name : pod.faults) {
    if (name == FaultName(kind)) return true;
  }
  return false;
}

void Namespace(JsonWriter& j, std::string_view name, bool ambient) {
  j.BeginObject().Key("metadata").BeginObject().Field("name", name);
  if (ambient) {
    j.Key("labels").BeginObject().Field("istio.io/dataplane-mode", "ambient").EndObject();
  }
  j.EndObject().EndObject();
}

void PodStatus(JsonWriter& j, const std::vector<std::string>& ips, bool ready) {
  j.Key("status").BeginObject().Field("phase", "Running");
  j.Key("podIPs").BeginArray();
  for (const std::string& ip : ips) j.BeginObject().Field("ip", ip).EndObject();
  j.EndArray();
  j.Key("conditions").BeginArray();
  j.BeginObject().Field("type", "Ready").Field("status", ready ? "True" : "False").EndObject();
  j.EndArray().EndObject();
}

// A lab pod: where the desired-state faults put it and what its labels and annotation say.
void Pod(JsonWriter& j, const LabPod& pod, const std::string& node, const std::string& created) {
  const bool stale = Has(pod, FaultKind::kAnnotationStale);
  const bool opted_out = Has(pod, FaultKind::kOptedOut);
  j.BeginObject().Key("metadata").BeginObject();
  j.Field("name", pod.netns_name)
      .Field("namespace", LabKubeNamespace(pod))
      .Field("uid", pod.pod_uid)
      .Field("creationTimestamp", created);
  j.Key("labels").BeginObject().Field("app", pod.netns_name);
  if (opted_out) j.Field("istio.io/dataplane-mode", "none");
  j.EndObject();
  // istio-cni writes `enabled` once it enrolled a pod (and removes it when it unenrolls one).
  if ((pod.meshed && !opted_out) || stale) {
    j.Key("annotations").BeginObject().Field("ambient.istio.io/redirection", "enabled").EndObject();
  }
  j.EndObject();
  j.Key("spec").BeginObject().Field("nodeName", node).EndObject();
  std::vector<std::string> ips = {pod.ipv4};
  if (!pod.ipv6.empty()) ips.push_back(pod.ipv6);
  PodStatus(j, ips, true);
  j.EndObject();
}

void IstioCniPod(JsonWriter& j, const std::string& prefix, const std::string& node,
                 const std::string& created) {
  j.BeginObject().Key("metadata").BeginObject();
  j.Field("name", "istio-cni-node-" + prefix)
      .Field("namespace", "istio-system")
      .Field("uid", prefix + "-istio-cni")
      .Field("creationTimestamp", created);
  j.Key("labels").BeginObject().Field("k8s-app", "istio-cni-node").EndObject();
  j.EndObject();
  j.Key("spec").BeginObject().Field("nodeName", node).Field("hostNetwork", true).EndObject();
  PodStatus(j, {"10.244.0.1"}, true);
  j.EndObject();
}

}  // namespace

std::string_view LabKubeNamespace(const LabPod& pod) {
  const bool ambient =
      pod.meshed || Has(pod, FaultKind::kNotEnrolled) || Has(pod, FaultKind::kAnnotationStale);
  return ambient ? kLabAmbientNamespace : kLabPlainNamespace;
}

std::string LabKubeNodeName(const std::string& prefix) { return prefix + "-node"; }

std::string LabKubeObjectsJson(const LabNode& node, int64_t created_unix_s) {
  const std::string node_name = LabKubeNodeName(node.prefix);
  const std::string created = Rfc3339(created_unix_s);
  JsonWriter j(/*pretty=*/false);
  j.BeginObject().Key("namespaces").BeginArray();
  Namespace(j, kLabAmbientNamespace, true);
  Namespace(j, kLabPlainNamespace, false);
  Namespace(j, "istio-system", false);
  Namespace(j, "kube-system", false);
  j.EndArray().Key("nodes").BeginArray();
  j.BeginObject().Key("metadata").BeginObject().Field("name", node_name).EndObject().EndObject();
  j.EndArray().Key("pods").BeginArray();
  for (const LabPod& pod : node.pods) Pod(j, pod, node_name, created);
  IstioCniPod(j, node.prefix, node_name, created);
  j.EndArray().EndObject();
  return j.str();
}

std::string LabKubeconfigText(const std::string& server, const std::string& ca_file,
                              const std::string& token_file) {
  return "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: " + server +
         "\n    certificate-authority: " + ca_file +
         "\nusers:\n- name: lab\n  user:\n    tokenFile: " + token_file +
         "\ncontexts:\n- name: lab\n  context:\n    cluster: lab\n    user: lab\n"
         "current-context: lab\n";
}

}  // namespace ad::lab
