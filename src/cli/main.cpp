// `cgdp`: the command-line entry point. Only here do errors become exit codes.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cgdp/core/error.hpp"
#include "cli/commands.hpp"

namespace {

// Letters to change, add or remove to turn a into b (for "did you mean").
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// A first word that is no command (`cgdp trian`): CLI11 said only "A subcommand is required".
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string word = argv[1];
  std::string names, closest;
  size_t best = 3;  // suggest only within two edits
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == word) return "";
    names += cgdp::cat(names.empty() ? "" : ", ", sub->get_name());
    if (const size_t d = edit_distance(word, sub->get_name()); d < best) {
      best = d;
      closest = sub->get_name();
    }
  }
  return cgdp::cat("unknown command '", word, "'",
                   closest.empty() ? "" : cgdp::cat(" (did you mean '", closest, "'?)"),
                   "; the commands are ", names);
}

}  // namespace

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
  add(&cgdp::cli::add_time_command);
  add(&cgdp::cli::add_test_command);
  add(&cgdp::cli::add_predict_command);
  add(&cgdp::cli::add_launch_command);
  add(&cgdp::cli::add_convert_command);
  add(&cgdp::cli::add_mean_command);
  add(&cgdp::cli::add_loader_command);
  add(&cgdp::cli::add_export_command);
  add(&cgdp::cli::add_forward_command);
  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "cgdp: error: %s\n", unknown.c_str());
    return 1;
  }
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
