// The lab node as the Kubernetes API would show it (lab --kube): the objects kube-api-sim serves
// for the lab's pods and the kubeconfig the agent reads them with. Pure text; lab.cc starts the
// emulator.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ad::lab {

struct LabPod;
struct LabNode;

// Namespaces of the lab's pods: ambient pods (and the desired-state faults' pods) live in the
// namespace labelled istio.io/dataplane-mode=ambient, plain pods in one without the label.
inline constexpr std::string_view kLabAmbientNamespace = "lab";
inline constexpr std::string_view kLabPlainNamespace = "lab-plain";

// The namespace the API shows `pod` in (the desired-state faults' plain pods are in the ambient
// one).
std::string_view LabKubeNamespace(const LabPod& pod);

// The lab node's name in the API (--node-name).
std::string LabKubeNodeName(const std::string& prefix);

// {"namespaces":[...],"nodes":[...],"pods":[...]} (kube-api-sim --objects): every lab pod with its
// UID, name (its netns name, as cni-sim and cri-sim name it), IPs and phase Running, created at
// `created_unix_s`; istio-cni's own pod (hostNetwork, k8s-app=istio-cni-node, Ready); the node.
std::string LabKubeObjectsJson(const LabNode& node, int64_t created_unix_s);

// A kubeconfig (current context `lab`) for `server` with the CA file and a token file.
std::string LabKubeconfigText(const std::string& server, const std::string& ca_file,
                              const std::string& token_file);

}  // namespace ad::lab
