// `cgdp`: the command-line entry point. Only here do errors become exit codes.
#include <cstdio>
#include <map>
#include <sstream>
#include <string>

#include "cgdp/core/error.hpp"
#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"cgdp: data-parallel training that puts the host's CPU cores to work"};
  app.require_subcommand(1);
  // Flag errors in one line, as every other error (set before the subcommands, which copy it).
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return cgdp::cat("cgdp: error: ", e.what(), " (see --help)\n");
  });
  std::map<CLI::App*, cgdp::cli::Runner> runners;
  auto add = [&](cgdp::cli::Runner (*adder)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    cgdp::cli::Runner run = adder(app);
    runners[app.get_subcommands({})[before]] = std::move(run);
  };
  add(&cgdp::cli::add_train_command);
  add(&cgdp::cli::add_inspect_command);
  add(&cgdp::cli::add_topo_command);
  add(&cgdp::cli::add_profile_command);
  add(&cgdp::cli::add_predict_command);
  add(&cgdp::cli::add_launch_command);
  add(&cgdp::cli::add_convert_command);
  add(&cgdp::cli::add_mean_command);
  add(&cgdp::cli::add_loader_command);
  add(&cgdp::cli::add_export_command);
  add(&cgdp::cli::add_forward_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (105, 106, ...) say nothing a script can use: a flag error is an error.
    return app.exit(e) == 0 ? 0 : 1;  // --help and --version are not
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const cgdp::Error& e) {
    // One line per problem: a file's problems are reported together (caffe_import/problems.hpp).
    std::istringstream lines(e.what());
    for (std::string line; std::getline(lines, line);) std::fprintf(stderr, "cgdp: error: %s\n", line.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cgdp: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
