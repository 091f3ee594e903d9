// What a run prints at its start (announce: the data, the model, the devices, the plan) and at its
// end (finish: what it wrote, its phases and memory, the loss scale, the last test figure).
#include <omp.h>

#include <cmath>
#include <map>

#include "cgdp/train/run_notes.hpp"
#include "cgdp/train/trainer.hpp"

namespace cgdp {

std::string Trainer::memory_report() const {
  std::string out = cat("memory (", to_string(scheme_->kind()), "):");
  for (const Worker& w : workers_) {
    const MemoryStats m = w.device->memory_stats();
    out += cat(" worker ", w.index, " ", m.device_bytes / 1048576.0, " MiB device (peak ",
               m.device_peak_bytes / 1048576.0, ")");
  }
  return out + cat("; host aggregator ", scheme_->host_bytes() / 1048576.0, " MiB pinned");
}

void Trainer::announce(ProgressReporter& progress, int64_t batch, double epoch_iters) {
  progress.message(cat(
      "cgdp: training ", net().name(), net().name().empty() ? "" : " ", "(", model_path_, ", ",
      net().learnable_count(), " parameters) on ", train_data_->describe(), ": ",
      train_data_->size(), " train / ", test_data_->size(), " test samples",
      train_order_ == Order::Sequential ? " (train in file order)" : "", ", batch ", batch, ", ",
      max_iterations_, " iterations (", static_cast<double>(max_iterations_) / epoch_iters,
      " epochs), ", omp_get_max_threads(), " threads"));
  for (const std::string& note : device_notes(workers_)) progress.message("cgdp: " + note);
  if (!weights_note_.empty()) progress.message(weights_note_);
  if (const std::string note = precision_note(net()); !note.empty()) progress.message(note);
  if (const std::string note = layout_note(net()); !note.empty()) progress.message(note);
  if (loss_scale_.active())
    progress.message(
        cat("cgdp: loss scale ", loss_scale_text(loss_scale_.value()),
            loss_scale_.dynamic()
                ? cat(", dynamic: a step with a non-finite gradient is skipped and halves it, ",
                      config_.loss_scale_growth_interval, " finite steps in a row double it")
                : ", fixed: a step with a non-finite gradient is skipped"));
  if (cluster_)
    progress.message(cat("cgdp: ", cluster_->host_name(rank()), " of ", num_hosts(), " hosts, ",
                         total_workers(), " workers in all; rows ",
                         rank() * num_workers() * per_worker_batch_, "..",
                         (rank() + 1) * num_workers() * per_worker_batch_ - 1,
                         " of each global batch are computed here"));
  if (num_workers() > 1 || cluster_)
    progress.message(
        cat("cgdp: ", num_workers(), " workers (", workers_[0].device->name(), "..",
            workers_.back().device->name(), "), batch ", per_worker_batch_, " each, sync ",
            to_string(scheme_->kind()),
            plan_description_.empty() ? std::string() : ", chunks: " + plan_description_));
  if (!factors_description_.empty())
    progress.message(cat("cgdp: fully-connected exchange: ", factors_description_,
                         "; summed chunks travel as ", config_.exchange_dtype));
  if (!placement_summary_.empty()) progress.message(cat("cgdp: placement: ", placement_summary_));
  if (!offload_note_.empty()) progress.message(cat("cgdp: ", offload_note_));
  if (chunk_tuner_) {
    progress.message(chunk_tuner_->describe_start(profile_note_));
    if (chunk_tuner_->settled())
      for (const std::string& line : chunk_tuner_->outcome()) progress.message(line);
  }
}

void Trainer::finish(ProgressReporter& progress, const TrainResult& result) {
  average_state();  // on every host, --save or not: the last exchange
  if (!config_.save_path.empty()) {
    save_parameters(config_.save_path);
    if (rank() == 0) progress.message(cat("cgdp: wrote parameters to ", config_.save_path));
  }
  if (cluster_) cluster_->finish();  // every exchange is done
  if (const std::string line = save_cudnn_algorithms(); !line.empty()) progress.message(line);
  if (!config_.timeline_path.empty()) {
    timeline_.write(config_.timeline_path);
    progress.message(cat("cgdp: wrote timeline ", config_.timeline_path, " (open it in Perfetto)"));
  }
  if (config_.phase_table || num_workers() > 1)
    progress.message(phases_.format(
        cat("phases (", to_string(scheme_->kind()), ", ", num_workers(), " workers)")));
  if (config_.phase_table || num_workers() > 1) progress.message(memory_report());
  if (config_.device_memory_gb > 0) {  // what the accounting devices saw, against the budget
    // Workers sharing a GPU share its budget: their peaks summed bound the GPU's (as the
    // estimate's fullest_gpu sums them).
    std::string peaks;
    std::map<int, std::pair<int64_t, int>> gpus;  // GPU -> the peaks summed, workers
    int64_t highest = 0;
    for (const Worker& w : workers_) {
      const int64_t peak = w.device->memory_stats().device_peak_bytes;
      peaks += cat(peaks.empty() ? "" : ", ", "worker ", w.index, " ", format_bytes(peak));
      highest = std::max(highest, peak);
      if (w.device->kind() == DeviceKind::Cuda) {
        auto& [sum, workers] = gpus[w.device->index()];
        sum += peak;
        ++workers;
      }
    }
    for (const auto& [gpu, sum_and_workers] : gpus)
      if (const auto [sum, workers] = sum_and_workers; workers > 1) {
        peaks += cat("; GPU ", gpu, "'s ", workers, " workers together ", format_bytes(sum));
        highest = std::max(highest, sum);
      }
    const int64_t budget = static_cast<int64_t>(config_.device_memory_gb * (1LL << 30));
    progress.message(cat("cgdp: device memory at its peak: ", peaks, " (--device-memory-gb ",
                         config_.device_memory_gb, " is ", format_bytes(budget), "): ",
                         highest <= budget ? cat(budget - highest, " bytes to spare")
                                           : cat("OVER it by ", highest - budget, " bytes")));
  }
  if (const std::string note = scheme_->placement_note(); !note.empty())
    progress.message(cat("cgdp: ", note));
  for (const Dataset* data : {train_data_.get(), test_data_.get()})
    if (const std::string skipped = data->skipped_summary(); !skipped.empty())
      progress.message(cat("cgdp: ", skipped));
  if (loss_scale_.active())
    progress.message(cat("cgdp: loss scale ", loss_scale_text(loss_scale_.value()), " at the end; ",
                         loss_scale_.skipped_steps(),
                         " step(s) skipped for a non-finite gradient"));
  const std::string figure =
      !std::isnan(result.test_accuracy) ? cat("test accuracy ", result.test_accuracy)
      : !std::isnan(result.test_loss) ? cat("test loss ", result.test_loss, " (no Accuracy layer)")
                                      : std::string("no test figures (no Accuracy or loss layer)");
  progress.message(cat("cgdp: done: ", result.iterations, " iterations in ",
                       format_duration(result.train_seconds), ", ", figure));
}

}  // namespace cgdp
