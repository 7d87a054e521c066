// Runs a deploy/ check script (tests/deploy/*.py, Debian's /usr/bin/python3, which has PyYAML)
// and maps its exit code: 0 pass, 77 skip with the reason on the last "SKIP: " line, else fail.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace ad::testing {

struct ScriptRun {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

inline ScriptRun RunDeployScript(const std::string& script, const std::string& arguments) {
  const std::string command = std::string("/usr/bin/python3 ") + AD_SOURCE_DIR + "/tests/deploy/" +
                              script + " " + arguments + " 2>&1";
  ScriptRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[1024];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) run.output += buffer;
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

inline std::string SkipReason(const std::string& output) {
  const size_t at = output.rfind("SKIP: ");
  if (at == std::string::npos) return "skipped";
  const size_t end = output.find('\n', at);
  return output.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
}

}  // namespace ad::testing

// Runs the script; skips with its reason (exit 77), fails with its whole output otherwise.
#define AD_EXPECT_DEPLOY_SCRIPT(script, arguments)                                           \
  do {                                                                                       \
    if (std::system("test -x /usr/bin/python3 && /usr/bin/python3 -c 'import yaml' "         \
                    ">/dev/null 2>&1") != 0) {                                               \
      GTEST_SKIP() << "/usr/bin/python3 with PyYAML (python3-yaml) not installed";           \
    }                                                                                        \
    const ::ad::testing::ScriptRun run_ = ::ad::testing::RunDeployScript(script, arguments); \
    if (run_.exit_code == 77) GTEST_SKIP() << ::ad::testing::SkipReason(run_.output);        \
    EXPECT_EQ(run_.exit_code, 0) << run_.output;                                             \
  } while (false)
