// The kubectl plugin's transport: `kubectl` itself (the user's kubeconfig, contexts and auth
// plugins), run as a child process with a deadline, behind a small interface so the cluster logic
// is tested without processes. Also the readers of what `kubectl get ... -o json` prints.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/result.h"

namespace ad::cli {

// What a finished (or killed) child process gave.
struct ProcessOutput {
  int exit_code = -1;       // its exit status; -1 when it did not exit normally
  bool timed_out = false;   // killed at the deadline
  int signal = 0;           // the signal that ended it (SIGKILL at the deadline)
  bool truncated = false;   // stdout passed the size cap (the rest was discarded)
  std::string spawn_error;  // it could not be started ("kubectl: No such file or directory")
  std::string out;
  std::string err;
};

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  std::chrono::milliseconds timeout{30000};
  size_t max_output = size_t{256} << 20;  // stdout cap; stderr keeps its first 64 KiB
};

// Runs argv with stdin from /dev/null and its stdout and stderr read until both close and it
// exits, or until the deadline: then it is killed (SIGKILL) and reaped. Never leaves a child or
// an fd behind. Safe to call from several threads at once.
ProcessOutput RunProcess(const ProcessSpec& spec);

// The first non-empty line of a text, at most 300 characters ("" when none).
std::string FirstLine(const std::string& text);
// What kubectl's stderr says went wrong, in one line: its first line that is neither a klog
// line ("E1204 03:31:11.799645 17924 memcache.go:265] ...", client-go's retries) nor kubectl
// exec's "command terminated with exit code N"; else the first line.
std::string KubectlMessage(const std::string& err);

// Where kubectl is and which cluster it asks.
struct KubectlOptions {
  std::string binary = "kubectl";
  std::string context;     // --context, "" : the current context
  std::string kubeconfig;  // --kubeconfig, "" : kubectl's own choice ($KUBECONFIG, ~/.kube/config)
};

// Runs one kubectl command (the words after `kubectl` and its global flags).
class Kubectl {
 public:
  virtual ~Kubectl() = default;
  virtual ProcessOutput Run(const std::vector<std::string>& args,
                            std::chrono::milliseconds timeout) = 0;
};

// The real one: `kubectl [--kubeconfig F] [--context C] ARGS...`.
std::unique_ptr<Kubectl> MakeKubectl(const KubectlOptions& options);

// ---- What `kubectl get ... -o json` prints ---------------------------------------------------

// An agent pod of the DaemonSet, from a `kubectl get pods -o json` list.
struct AgentPod {
  std::string namespace_name;
  std::string name;
  std::string node;                // spec.nodeName ("" unscheduled)
  std::string phase;               // status.phase
  bool container_running = false;  // the agent container's state is running
  bool deleting = false;           // metadata.deletionTimestamp is set
  std::string image;               // the agent container's image
  std::string created;             // metadata.creationTimestamp (RFC 3339 sorts as text)
};

// The pods of a List (or one Pod object) with the named container; an error naming what is
// wrong when the text is not a pod list.
Result<std::vector<AgentPod>> ParseAgentPods(const std::string& json, const std::string& container);

// The names of a NodeList.
Result<std::vector<std::string>> ParseNodeNames(const std::string& json);

// Where one Pod object (`kubectl get pod NAME -o json`) is.
struct PodPlacement {
  std::string namespace_name;
  std::string name;
  std::string node;  // spec.nodeName, "" while unscheduled
};
Result<PodPlacement> ParsePodPlacement(const std::string& json);

// The tag of an image reference ("reg:5000/ambient-doctor:0.1.0" -> "0.1.0"); "" when it has
// none or is pinned by digest only.
std::string ImageTag(const std::string& image);

}  // namespace ad::cli
