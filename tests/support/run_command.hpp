// Runs a shell command and captures its standard output, for tests that drive the real binary.
#pragma once

#include <stdio.h>
#include <sys/wait.h>

#include <stdexcept>
#include <string>

namespace cgdp::testing {

struct CommandResult {
  int exit_code = -1;  // -1 when the command did not exit normally
  std::string output;
};

inline CommandResult run_command(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  CommandResult result;
  char buffer[4096];
  while (size_t n = ::fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  if (status != -1 && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

}  // namespace cgdp::testing
