// Data-parallel training on N workers (N = 1 included): data -> forward -> backward -> exchange
// -> update, with tests, progress, checkpoints, resume, timeline and a per-phase table.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cgdp/caffe_import/weights.hpp"
#include "cgdp/data/batch_loader.hpp"
#include "cgdp/device/layer_precision.hpp"
#include "cgdp/solver/loss_scale.hpp"
#include "cgdp/sync/cluster.hpp"
#include "cgdp/sync/sync_scheme.hpp"
#include "cgdp/sync/topology.hpp"
#include "cgdp/trace/timeline.hpp"
#include "cgdp/train/chunk_autotuner.hpp"
#include "cgdp/train/data_feeds.hpp"
#include "cgdp/train/issue_threads.hpp"
#include "cgdp/train/memory_estimate.hpp"
#include "cgdp/train/phase_table.hpp"
#include "cgdp/train/progress.hpp"
#include "cgdp/train/train_config.hpp"
#include "cgdp/train/worker.hpp"

namespace cgdp {

// Measures the profile --chunk auto predicts from when config.profile_path is empty, before the
// trainer builds its workers. It runs a trainer of its own (measure/chunk_profile.hpp), which is
// why the trainer takes it from its caller rather than calling it.
using ChunkProfileSource = std::function<Profile(const TrainConfig& config)>;

class Trainer {
 public:
  // Loads the model and data, checks every option, and sets up workers; throws before any
  // training starts. `measure_profile`: for --chunk auto without --profile (none: refused).
  Trainer(const TrainConfig& config, FILE* out = stdout, ChunkProfileSource measure_profile = {});
  ~Trainer();
  TrainResult run();
  // The param layers chunk plans group (backward order).
  const std::vector<ParamLayer>& param_layers() const { return param_layers_; }
  // cgdp only, between iterations: later iterations exchange chunks as `plan` groups them. The
  // parameters stay the same bits whatever the plan.
  void set_chunk_plan(const ChunkPlan& plan);

  // Worker 0's net and solver: the parameters every worker holds after an iteration.
  // Loss scaling's state (--loss-scale): the scale, the steps skipped so far.
  const LossScale& loss_scale() const { return loss_scale_; }
  // What was added to a deploy net to score it (config score_deploy_net), else "".
  const std::string& scoring_note() const { return scoring_note_; }
  Net<float>& net() { return *workers_[0].net; }
  // This host's workers, and the workers of all hosts together.
  int num_workers() const { return static_cast<int>(workers_.size()); }
  // The training split and the loader threads it is read with (the profiler times the loader).
  std::shared_ptr<const Dataset> train_data() const { return train_data_; }
  int train_loader_threads() const { return loader_threads(*train_data_); }
  // Threads that sum on the host: --host-threads, or the placement's default (one per worker).
  int sum_threads() const { return static_cast<int>(placement_.aggregator_threads.size()); }
  std::function<void()> loader_binding() const;
  int total_workers() const { return config_.devices * num_hosts(); }  // known before the workers
  int num_hosts() const { return config_.hosts.empty() ? 1 : static_cast<int>(config_.hosts.size()); }
  int rank() const { return config_.rank; }
  Net<float>& worker_net(int w) { return *workers_[w].net; }
  SyncKind sync_kind() const { return scheme_->kind(); }
  const PhaseTable& phase_table() const { return phases_; }
  const Timeline& timeline() const { return timeline_; }
  int64_t iteration() const { return workers_[0].solver->iteration(); }

  struct Evaluation {
    std::string net;                 // "#1 (stage test-on-test)" with several test nets, else ""
    std::optional<double> accuracy;  // none without an Accuracy layer
    std::optional<double> loss;      // none without a loss layer
    std::vector<std::pair<std::string, double>> outputs;  // the other scalar outputs, by top name
    int64_t samples = 0;                                  // test samples they average over
  };
  // The first test net, and every test net in order (a solver's test_state, repeated).
  Evaluation evaluate();
  std::vector<Evaluation> evaluate_all();
  // One iteration (load, forward, backward, exchange, update) on every worker; returns the loss.
  // run() calls it; the profiler drives it directly.
  double train_iteration();
  // The workers, for measurements on their devices and streams between iterations.
  std::vector<Worker>& workers() { return workers_; }
  // The memory estimate the run was fitted to its budget with (the plan, if it offloads).
  const MemoryEstimate& memory_estimate() const { return memory_; }
  // What --weights filled (empty without --weights).
  const WeightsReport& weights_report() const { return weights_report_; }

 private:
  int loader_threads(const Dataset& data) const;  // --loader-threads, the topology's, or 1
  void bind_issuing_thread(int worker);           // on its issuing thread, when it starts
  // `profile`: --chunk auto's, else null.
  void make_scheme(SyncKind kind, const Profile* profile);
  void join_cluster(const ChunkPlan& plan, const std::vector<bool>& factored);
  void agree_with_other_hosts();
  void inject_fault(int worker, int64_t after_copies);
  void check_memory(SyncKind sync, DeviceKind kind, const Profile* chunk_profile);

  void load_initial_weights();
  void check_data_fits_model();
  void build_more_test_nets();
  // Scores `net` on `data` in batches of `batch`, `iterations` of them (0: config_'s samples).
  Evaluation evaluate(Net<float>& net, const std::shared_ptr<const Dataset>& data, int64_t batch,
                      int64_t iterations);
  std::string test_net_name(int k) const;  // "" with one test net
  void announce(ProgressReporter& progress, int64_t batch, double epoch_iters);
  void test_point(ProgressReporter& progress, ProgressPoint p, TrainResult& result);
  void finish(ProgressReporter& progress, const TrainResult& result);
  // --cudnn-algorithms: its choices into the process's table (before any forward), and the
  // table back to the file at the end (rank 0; returns the line to print, or "").
  void load_cudnn_algorithms();
  std::string save_cudnn_algorithms() const;
  const ConvAlgorithmTable* stored_cudnn_choices(DeviceKind kind) const;
  void issue_micro_batch(Worker& w, const Batch& batch, int micro, int64_t it);
  Profile chunk_profile(const TrainConfig& config, const ChunkProfileSource& measure);
  // Per param layer of the estimate's net: whether its weight travels as sufficient factors
  // (--fc-exchange); `profile`: --chunk auto's, else null. Sets factors_reason_.
  std::vector<bool> choose_factored_layers(const MemoryEstimate& m, DeviceKind kind,
                                           const Profile* profile);
  void check_loss(double loss, int64_t iteration);
  // Loss scaling (--loss-scale): turns the solvers' check on and seeds every net's backward.
  void start_loss_scale(Precision precision);
  // After iteration `iteration` (counted from 1): records whether its step ran, and re-seeds the
  // nets when the scale changed; returns the line to print then, else "".
  std::string record_loss_scale(int64_t iteration);
  void average_state();
  // Every file the run will write is checked before any work: a bad path fails now, not after
  // the training. Also removes what a killed snapshot left (stale .tmp files of the prefix).
  void check_outputs();
  void check_outputs_apart(const std::string& first_snapshot) const;
  std::string snapshot_path(int64_t iteration) const;  // <prefix>_iter_<N>.ckpt
  std::string write_snapshot();  // returns the path written ("" on ranks > 0, which only take part)
  void resume(const std::string& path);
  void save_parameters(const std::string& path);
  std::string memory_report() const;

  TrainConfig config_;
  FILE* out_;
  std::string model_path_;
  proto::NetParameter model_;  // data layers replaced by Inputs
  // A solver's test_net file (config test_model), as model_; unused without one.
  std::string test_model_path_;
  proto::NetParameter test_model_;
  DataFeeds feeds_;
  Order train_order_ = Order::Shuffled;  // training_order(feeds_.train, --order)
  std::string weights_note_;  // what --weights loaded, for the first lines
  WeightsReport weights_report_;
  Timeline timeline_;
  std::vector<Worker> workers_;
  SyncWorkers sync_workers() { return {workers_.begin(), workers_.end()}; }  // the scheme's view
  std::unique_ptr<IssueThreads> issuers_;  // one per worker; stopped before the workers go
  std::unique_ptr<Cluster> cluster_;  // with --hosts; outlives the scheme that pushes through it
  std::unique_ptr<SyncScheme> scheme_;
  std::unique_ptr<ChunkAutoTuner> chunk_tuner_;  // --chunk auto
  std::string profile_note_;
  std::unique_ptr<Net<float>> test_net_;
  // A solver's second and later test nets, each with its own data (config_.more_test_nets).
  struct MoreTest {
    std::string name;
    DataFeed feed;
    int64_t batch = 0;
    int64_t iterations = 0;
    std::unique_ptr<Net<float>> net;
    std::shared_ptr<const Dataset> data;
  };
  std::vector<MoreTest> more_tests_;
  std::shared_ptr<const Dataset> train_data_;
  std::shared_ptr<const Dataset> test_data_;
  std::unique_ptr<BatchLoader> loader_;
  SamplerPosition start_position_;
  PhaseTable phases_;
  std::vector<ParamLayer> param_layers_;
  std::string plan_description_;
  std::vector<bool> factored_;       // cgdp, per param layer: its weight travels as factors
  std::string factors_reason_;       // why: the flag, the cost model or the byte rule
  std::string factors_description_;  // cgdp: which weights travel as factors, and why
  Placement placement_;
  std::string placement_summary_;
  int64_t per_worker_batch_ = 0;
  int64_t max_iterations_ = 0;
  int64_t test_batch_ = 100;
  MemoryEstimate memory_;  // measured before the workers were built
  // Planned in 16 bits, or when the run did not fit (--offload auto).
  ActivationMemoryPlan activation_memory_;
  std::string offload_note_;                // what the plan moves to the host, for the start
  int64_t state_averaged_at_ = -1;  // the iteration whose statistics were last averaged
  LossScale loss_scale_;
  std::string loss_scale_line_;
  std::string scoring_note_;  // what record_loss_scale said after the last iteration
};

}  // namespace cgdp
