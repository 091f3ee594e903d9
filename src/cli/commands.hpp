// The subcommands of the `cgdp` binary; each registers its flags and returns its runner.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace cgdp::cli {

using Runner = std::function<int()>;

Runner add_train_command(CLI::App& app);
Runner add_inspect_command(CLI::App& app);
Runner add_topo_command(CLI::App& app);
Runner add_profile_command(CLI::App& app);
Runner add_time_command(CLI::App& app);
Runner add_test_command(CLI::App& app);
Runner add_predict_command(CLI::App& app);
Runner add_launch_command(CLI::App& app);
Runner add_convert_command(CLI::App& app);
Runner add_mean_command(CLI::App& app);
Runner add_loader_command(CLI::App& app);
Runner add_export_command(CLI::App& app);
Runner add_forward_command(CLI::App& app);

}  // namespace cgdp::cli
