// Single-device training: data -> forward -> backward -> SGD step, with tests, progress,
// checkpoints and resume.
#pragma once

#include <cstdio>
#include <memory>

#include "cgdp/data/batch_loader.hpp"
#include "cgdp/net/net.hpp"
#include "cgdp/solver/solver.hpp"
#include "cgdp/train/progress.hpp"
#include "cgdp/train/train_config.hpp"

namespace cgdp {

class Trainer {
 public:
  // Loads the model and data and checks they fit together; throws before any training starts.
  Trainer(const TrainConfig& config, FILE* out = stdout);
  TrainResult run();

  Net<float>& net() { return *net_; }
  Solver<float>& solver() { return *solver_; }

  struct Evaluation {
    double accuracy = 0;
    double loss = 0;
  };
  Evaluation evaluate();

 private:
  void check_data_fits_model();
  double train_iteration();
  void load_batch(const Batch& batch);
  std::string write_snapshot();  // returns the path written
  void resume(const std::string& path);
  void save_parameters(const std::string& path);

  TrainConfig config_;
  FILE* out_;
  std::string model_path_;
  proto::NetParameter model_;
  Device* device_;
  std::unique_ptr<Net<float>> net_;
  std::unique_ptr<Net<float>> test_net_;
  std::unique_ptr<Solver<float>> solver_;
  std::shared_ptr<const Dataset> train_data_;
  std::shared_ptr<const Dataset> test_data_;
  std::unique_ptr<BatchLoader> loader_;
  SamplerPosition start_position_;
  int64_t max_iterations_ = 0;
  int64_t test_batch_ = 100;
};

}  // namespace cgdp
