#include "base/agent_version.h"

#include "ad_git_describe.h"  // generated at build time (cmake/git_describe.cmake)

namespace ad {

const char* AgentVersion() { return AD_PROJECT_VERSION; }

const char* AgentGitDescribe() { return AD_GIT_DESCRIBE; }

std::string AgentVersionText() {
  std::string text = AgentVersion();
  const std::string describe = AgentGitDescribe();
  if (!describe.empty()) text += " (" + describe + ")";
  return text;
}

}  // namespace ad
