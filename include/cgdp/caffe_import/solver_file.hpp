// A Caffe solver file as a training run: the net it names, and each of its fields mapped to the
// setting of cgdp's that does the same (the flag named beside it in docs/caffe.md). A field the
// user also gave as a flag keeps the flag's value.
#pragma once

#include <set>
#include <string>

#include "cgdp.pb.h"
#include "cgdp/train/train_config.hpp"

namespace cgdp {

// `net:` (or train_net:) resolved as Caffe users expect: relative to the working directory, then
// to the solver file's folder. Throws UsageError naming the solver file when neither exists.
std::string solver_net_path(const proto::SolverParameter& solver, const std::string& solver_path);

// Sets `config` from the solver's fields, except those whose flag is in `given_flags` ("--lr",
// "--model", ...). `solver_path` names the file in errors.
void apply_solver_file(const proto::SolverParameter& solver, const std::string& solver_path,
                       const std::set<std::string>& given_flags, TrainConfig& config);

}  // namespace cgdp
