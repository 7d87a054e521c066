// Runs a tool with stdin text, optionally inside a network namespace, and captures its output.
// fork + setns + execve: the namespace switch happens only in the child, so the caller's (and the
// machine's) network namespace is never touched.
#pragma once

#include <string>
#include <vector>

#include "model/result.h"

namespace ad::lab {

struct Command {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH, /usr/sbin and /sbin
  std::string stdin_text;
  std::string netns_path;  // empty: run in the caller's netns (only for read-only or `ip -n` use)
};

struct CommandOutput {
  int exit_code = -1;  // 128 + signal when killed
  std::string out;
  std::string err;
};

// Runs to completion. Errors are spawn failures only; a non-zero exit is a value.
Result<CommandOutput> RunCommand(const Command& command);

// Runs and treats a non-zero exit as an error that names the command and its stderr.
Result<CommandOutput> RunChecked(const Command& command);

// "ip -n x -batch -" style rendering for messages.
std::string DescribeCommand(const Command& command);

}  // namespace ad::lab
