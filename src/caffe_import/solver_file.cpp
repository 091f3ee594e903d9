// Solver fields to TrainConfig: one line per field, the flag that overrides it beside it.
#include "cgdp/caffe_import/solver_file.hpp"

#include <filesystem>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

// A file a solver field names (net, train_net, test_net): as given from the working directory,
// else beside the solver file, as Caffe users run it from either.
std::string solver_file_path(const std::string& file, const std::string& field,
                             const std::string& solver_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(file, ec)) return file;
  const fs::path beside = fs::path(solver_path).parent_path() / file;
  if (fs::exists(beside, ec)) return beside.string();
  throw UsageError(cat(solver_path, ": ", field, " \"", file,
                       "\" is neither in the working directory (", fs::current_path(ec).string(),
                       ") nor beside the solver file; run from the "
                       "folder it is relative to, or give --model"));
}

}  // namespace

std::string solver_net_path(const proto::SolverParameter& solver, const std::string& solver_path) {
  const std::string& net = solver.has_net() ? solver.net() : solver.train_net();
  if (net.empty())
    throw UsageError(cat(solver_path, ": names no net (net: \"path\"); give --model"));
  return solver_file_path(net, solver.has_net() ? "net" : "train_net", solver_path);
}

namespace {

// Counts that are no counts (max_iter: 0 had trained 8 epochs, iter_size: 0 was blamed on
// --accumulate, a negative test_iter tested anyway) are named with their file and field.
void check_solver_counts(const proto::SolverParameter& s, const std::string& path) {
  auto positive = [&](bool set, int64_t value, const char* field) {
    if (set && value <= 0)
      throw UsageError(cat(path, ": ", field, ": ", value, ": expected a count > 0"));
  };
  positive(s.has_max_iter(), s.max_iter(), "max_iter");
  positive(s.has_iter_size(), s.iter_size(), "iter_size");
  for (const int32_t v : s.test_iter()) positive(true, v, "test_iter");
  if (s.has_snapshot() && s.snapshot() < 0)
    throw UsageError(cat(path, ": snapshot: ", s.snapshot(), ": expected >= 0 (0: no snapshots)"));
}

}  // namespace

void apply_solver_file(const proto::SolverParameter& s, const std::string& path,
                       const std::set<std::string>& given_flags, TrainConfig& c) {
  check_solver_counts(s, path);
  auto unless = [&](const char* flag) { return !given_flags.count(flag); };
  if (unless("--model")) c.model = solver_net_path(s, path);
  if (s.has_max_iter() && unless("--iterations") && unless("--epochs")) c.iterations = s.max_iter();
  if (s.has_display() && unless("--display")) c.display = s.display() > 0 ? s.display() : -1;
  if (s.has_average_loss() && unless("--average-loss")) c.average_loss = s.average_loss();
  // Caffe tests only when test_interval is set; cgdp then still tests once at the end.
  if (unless("--test-interval")) c.test_interval = s.test_interval() > 0 ? s.test_interval() : -1;
  if (s.test_iter_size() > 0 && unless("--test-samples") && unless("--test-iter")) c.test_iter = s.test_iter(0);
  // Caffe: one test net per test_net file (train_net and test_net), else one per test_state (one
  // without), each with its own test_iter. With --model, that file's TEST phase is the test net.
  const bool test_files = s.test_net_size() > 0 && unless("--model");
  const int test_nets = test_files ? s.test_net_size() : std::max(s.test_state_size(), 1);
  const char* one_per = test_files ? "test_net" : "test_state";
  if (test_files && s.test_state_size() > test_nets)
    throw UsageError(cat(path, ": test_state is given ", s.test_state_size(), " times for ",
                         test_nets, " test_net file(s): give at most one per test net"));
  if (s.test_iter_size() > 0 && s.test_iter_size() != test_nets)
    throw UsageError(cat(path, ": test_iter is given ", s.test_iter_size(), " times for ",
                         test_nets, " test net", test_nets == 1 ? "" : "s", " (one per ", one_per,
                         "): give one test_iter per test net"));
  c.train_state.MergeFrom(s.train_state());
  if (s.test_state_size() > 0) c.test_state.MergeFrom(s.test_state(0));
  if (test_files) c.test_model = solver_file_path(s.test_net(0), "test_net", path);
  // --test-iter and --test-samples hold for every test net.
  const bool sized_by_flag = !unless("--test-iter") || !unless("--test-samples");
  for (int k = 1; k < test_nets; ++k)
    c.more_test_nets.push_back(
        {k < s.test_state_size() ? s.test_state(k) : proto::NetState(),
         sized_by_flag            ? c.test_iter
         : s.test_iter_size() > k ? s.test_iter(k)
                                  : 0,
         test_files ? solver_file_path(s.test_net(k), "test_net", path) : std::string()});
  if (unless("--test-initialization")) c.test_initialization = s.test_initialization();
  if (s.has_snapshot() && unless("--snapshot-every")) c.snapshot_every = s.snapshot();
  if (s.has_snapshot_prefix() && unless("--snapshot-prefix")) c.snapshot_prefix = s.snapshot_prefix();
  c.snapshot_after_train = s.snapshot_after_train() && (s.snapshot() > 0 || s.has_snapshot_prefix());
  if (s.has_iter_size() && unless("--accumulate")) c.accumulate = s.iter_size();
  if (s.has_random_seed() && s.random_seed() >= 0 && unless("--seed")) c.seed = static_cast<uint64_t>(s.random_seed());
  if (unless("--device-kind")) {
    c.device_kind = s.solver_mode() == proto::SolverParameter::CPU ? "cpu" : "cuda";
    c.device_kind_from =
        cat(path, ": solver_mode: ", s.solver_mode() == proto::SolverParameter::CPU ? "CPU" : "GPU",
            s.has_solver_mode() ? ""
                                : " (Caffe's default; --device-kind cpu, or "
                                  "solver_mode: CPU, for the CPU)");
  }
  if (s.has_layer_wise_reduce() && !s.layer_wise_reduce() && unless("--chunk")) c.chunk = "all";
  if (s.weights_size() > 0 && unless("--weights") && unless("--resume"))
    c.weights.assign(s.weights().begin(), s.weights().end());
}

}  // namespace cgdp
