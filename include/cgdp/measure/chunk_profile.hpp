// The profile `--chunk auto` predicts from when no --profile is given: measured with the profiler
// on the run's own model, data and devices, before the trainer builds its workers. Passed to the
// Trainer as its ChunkProfileSource (train/trainer.hpp), which cannot run a trainer itself.
#pragma once

#include "cgdp/cost/profile.hpp"
#include "cgdp/train/train_config.hpp"

namespace cgdp {

Profile measure_chunk_profile(const TrainConfig& config);

}  // namespace cgdp
