// Runs one child process per rank, as horovodrun and mpirun do: every line a rank prints comes out
// prefixed with "[rank] ", and when one rank fails the others are stopped.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace cgdp::cli {

struct RankProcess {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> env;   // NAME=VALUE set on top of this process's environment
  std::string stdin_text;         // written to the child's standard input, which is then closed
  std::string name;               // for messages: "rank 1 (host-b)"
};

// Starts every rank and copies their output, line by line and prefixed, to `out` (their standard
// output) and `err` (their standard error) until all have exited. Returns when every rank exited
// with status 0. When one fails, the others get SIGTERM (SIGKILL if they are still there a few
// seconds later) and RuntimeCheckError names the first rank that failed and how.
void run_ranks(const std::vector<RankProcess>& ranks, FILE* out, FILE* err);

}  // namespace cgdp::cli
