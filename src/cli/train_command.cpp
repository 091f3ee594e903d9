// `cgdp train` (placeholder until the trainer lands).
#include "cli/commands.hpp"

namespace cgdp::cli {

Runner add_train_command(CLI::App& app) {
  app.add_subcommand("train", "Train a model");
  return [] { return 0; };
}

}  // namespace cgdp::cli
