// The kubectl plugin's entry: `kubectl ambient-doctor ...` (this binary run as
// kubectl-ambient_doctor) and `ambient-doctor kubectl ...`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ad::cli {

// The name kubectl finds the plugin by: `kubectl ambient-doctor` runs kubectl-ambient_doctor.
inline constexpr std::string_view kKubectlPluginName = "kubectl-ambient_doctor";

// `args`: the words after the plugin's name (status, explain pod NAME, ...).
int RunKubectlPlugin(const std::vector<std::string>& args);

}  // namespace ad::cli
