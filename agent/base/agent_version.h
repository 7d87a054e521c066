// The agent's version: CMake's PROJECT_VERSION, compiled in, and the checkout's
// `git describe --always --dirty` when the build had git and a checkout (else "").
#pragma once

#include <string>

namespace ad {

// "0.1.0": what the API's Version reply and ambient_doctor_build_info{version} report.
const char* AgentVersion();
// "1590782-dirty", "v0.1.0-3-g1590782", or "" (built without git or outside a checkout).
const char* AgentGitDescribe();
// "0.1.0 (1590782-dirty)", or "0.1.0" without a git describe: `ambient-doctor version`.
std::string AgentVersionText();

}  // namespace ad
