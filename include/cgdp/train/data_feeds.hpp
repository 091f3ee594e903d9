// What feeds the train and the test net: --data and --test-data with the image flags, or the
// model's own data layers (caffe_import/data_layers.hpp), which --data overrides.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cgdp.pb.h"
#include "cgdp/caffe_import/data_layers.hpp"
#include "cgdp/data/dataset.hpp"
#include "cgdp/data/sampler.hpp"
#include "cgdp/data/synthetic_dataset.hpp"
#include "cgdp/train/train_config.hpp"

namespace cgdp {

// Where a run reads when neither the command line nor the model names data.
inline constexpr const char* kDefaultData = "idx:/usr/share/datasets/fashion-mnist";

struct DataFeed {
  std::string spec;                 // for open_dataset; empty: the layer is DummyData
  ImageOptions images;              // the layer's transform_param, or the image flags
  std::optional<DataLayer> layer;   // the model's data layer of this phase, if any
};

struct DataFeeds {
  DataFeed train, test;
  // Set when the model has a TRAIN data layer and its TEST ones need a stage or level the test
  // state lacks (staged_out_data_layers): the TEST net cannot be built; the TRAIN net can.
  std::string test_needs_stage;
};

// Resolves the model's stages for each phase (resolve_states, with config's train_state and
// test_state), finds its data layers and puts an Input in each one's place, shaped from its data
// (the first record, as Caffe infers it) and its batch_size; returns what feeds each phase. A
// model without data layers is fed --data (default kDefaultData), its test split --test-data.
// `phases`: which nets the file is for: both, or the train (test) net alone when the test net has
// its own file (a solver's train_net and test_net); the other feed is then left as it is.
enum class FeedPhases { kBoth, kTrainOnly, kTestOnly };
DataFeeds plan_data_feeds(proto::NetParameter& model, const std::string& model_path,
                          const TrainConfig& config, FeedPhases phases = FeedPhases::kBoth);

// Throws ModelError naming the TEST data layers' stages when feeds.test_needs_stage is set.
void require_test_net(const DataFeeds& feeds, const std::string& model_path);

// The test net's batch: `flag` when > 0, else the TEST data layer's batch_size, else the train
// `batch` (the test net is then no larger than the train net beside it on worker 0).
int64_t test_batch_size(const DataFeeds& feeds, int64_t flag, int64_t batch);

// The order training visits `train`'s samples in: `flag` ("shuffled", "sequential"), else the
// feed's data layer as Caffe reads it, else shuffled. An unknown `flag` throws UsageError.
Order training_order(const DataFeed& train, const std::string& flag);

// Opens a feed's dataset. `images` is the feed's, completed with the model's input (channels,
// size, classes, seed); DummyData makes `batch` samples an epoch.
std::unique_ptr<Dataset> open_feed(const DataFeed& feed, Split split, const SyntheticSpec& synthetic,
                                   const ImageOptions& images, int64_t batch);

}  // namespace cgdp
