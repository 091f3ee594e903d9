// Data layers or flags to the specs and transforms the loader reads with.
#include "cgdp/train/data_feeds.hpp"

#include "cgdp/core/error.hpp"
#include "cgdp/data/open_dataset.hpp"
#include "cgdp/net/graph_rewrite.hpp"

namespace cgdp {

namespace {

bool decodes_images(const std::string& spec) {
  return spec.starts_with("lmdb:") || spec.starts_with("list:") || spec.starts_with("folder:");
}

// Caffe crops every sample of a layer with crop_size; data held in memory are not transformed, so
// synthetic data are drawn at the crop's size (a crop of random pixels is random pixels) and any
// other source must already have it. Returns the sample shape the net gets.
Shape cropped_in_memory(const DataLayer& layer, int crop, DataFeed& feed) {
  const auto data = open_dataset(feed.spec, Split::Train);
  const Shape sample = data->sample_shape();
  if (crop <= 0 || sample.size() != 3 || (sample[1] == crop && sample[2] == crop)) return sample;
  const std::string layer_crops =
      cat(layer.where, ": layer '", layer.name, "' crops its samples to ", crop, "x", crop,
          " (transform_param crop_size) but ", feed.spec, " gives ", shape_string(sample));
  if (sample[1] < crop || sample[2] < crop)
    throw UsageError(cat(layer_crops, ", smaller than the crop"));
  if (!feed.spec.starts_with("synthetic"))
    throw UsageError(cat(layer_crops, ", which cgdp does not crop in memory: give data of ", crop,
                         "x", crop, " or an image source (lmdb:, list:, folder:)"));
  feed.spec = cat("synthetic:", sample[0], ",", crop, ",", crop, ",", data->num_classes());
  return {sample[0], crop, crop};
}

// A phase fed by the model's data layer: the layer's source (or `override_spec`), its transform
// (or the image flags), and an Input of the sample's shape in the layer's place.
void feed_from_layer(proto::NetParameter& model, const DataLayer& layer, const std::string& override_spec,
                     const TrainConfig& config, DataFeed& feed) {
  feed.layer = layer;
  feed.images = config.images_given ? config.images : layer.images;
  Shape sample;
  if (layer.type == "DummyData" && override_spec.empty()) {
    feed.spec.clear();
    sample = dummy_sample_shape(layer);
  } else {
    feed.spec = data_layer_spec(layer, override_spec);
    if (decodes_images(feed.spec)) {
      if (!config.images_given) load_layer_mean(layer, feed.images);
      probe_sample_geometry(layer, feed.spec, feed.images);
      const auto [height, width] = sample_size(feed.images);
      sample = {feed.images.channels, height, width};
    } else {  // data in memory (idx:, cifar10:, hdf5:, synthetic) keeps its own shape
      sample = cropped_in_memory(layer, feed.images.transform.crop_size, feed);
    }
  }
  replace_with_input(model, layer, sample, layer.batch_size > 0 ? layer.batch_size : 1);
}

}  // namespace

DataFeeds plan_data_feeds(proto::NetParameter& model, const std::string& model_path,
                          const TrainConfig& config, FeedPhases phases) {
  const std::string staged_out[2] = {
      staged_out_data_layers(model, Phase::Train, merged_state(model, config.train_state)),
      staged_out_data_layers(model, Phase::Test, merged_state(model, config.test_state))};
  model = resolve_states(model, config.train_state, config.test_state);
  const std::optional<DataLayer> train_layer = find_data_layer(model, Phase::Train, model_path);
  const std::optional<DataLayer> test_layer = find_data_layer(model, Phase::Test, model_path);
  DataFeeds feeds;
  const std::string train_spec = config.data.empty() ? kDefaultData : config.data;
  feeds.train = {train_spec, config.images, std::nullopt};
  feeds.test = {config.test_data.empty() ? train_spec : config.test_data, config.images, std::nullopt};
  if (phases == FeedPhases::kTestOnly) {  // the file of a solver's test_net
    if (!test_layer && !staged_out[1].empty())
      feeds.test_needs_stage =
          cat("the TEST net has no data layer: ", staged_out[1], "; give its stage");
    if (test_layer)
      feed_from_layer(model, *test_layer, config.test_data.empty() ? config.data : config.test_data,
                      config, feeds.test);
    return feeds;
  }
  if (phases == FeedPhases::kTrainOnly &&
      train_layer) {  // a solver's train_net: its test net is another file
    feed_from_layer(model, *train_layer, config.data, config, feeds.train);
    return feeds;
  }
  if (!train_layer && !staged_out[0].empty())
    throw ModelError(cat(model_path, ": the TRAIN net has no data layer: ", staged_out[0],
                         "; give the stage (--stage, or a solver's train_state)"));
  if (train_layer && !test_layer && !staged_out[1].empty()) {
    feeds.test_needs_stage =
        cat("the TEST net has no data layer: ", staged_out[1],
            "; give its stage (a solver's test_state; --test-stage with train, --stage with "
            "test and inspect)");
    feed_from_layer(model, *train_layer, config.data, config, feeds.train);
    return feeds;
  }
  if (!train_layer && !test_layer) return feeds;
  if (!train_layer || !test_layer)
    throw ModelError(cat(model_path, ": layer '", (train_layer ? *train_layer : *test_layer).name,
                         "' feeds only the ", train_layer ? "TRAIN" : "TEST",
                         " phase: add a data layer for the other phase (or drop the layer's phase rule)"));
  // The TEST layer first: both layers often share a name, and replacing one changes no index.
  feed_from_layer(model, *test_layer, config.test_data.empty() ? config.data : config.test_data, config, feeds.test);
  if (train_layer->index != test_layer->index) feed_from_layer(model, *train_layer, config.data, config, feeds.train);
  else feeds.train = feeds.test;
  return feeds;
}

void require_test_net(const DataFeeds& feeds, const std::string& model_path) {
  if (!feeds.test_needs_stage.empty())
    throw ModelError(cat(model_path, ": ", feeds.test_needs_stage));
}

int64_t test_batch_size(const DataFeeds& feeds, int64_t flag, int64_t batch) {
  if (flag > 0) return flag;
  return feeds.test.layer && feeds.test.layer->batch_size > 0 ? feeds.test.layer->batch_size : batch;
}

Order training_order(const DataFeed& train, const std::string& flag) {
  if (flag == "shuffled") return Order::Shuffled;
  if (flag == "sequential") return Order::Sequential;
  if (!flag.empty()) throw UsageError(cat("--order '", flag, "': expected shuffled or sequential"));
  const bool caffe_reads_in_order = train.layer && train.layer->type != "DummyData" && !train.layer->shuffle;
  return caffe_reads_in_order ? Order::Sequential : Order::Shuffled;
}

std::unique_ptr<Dataset> open_feed(const DataFeed& feed, Split split, const SyntheticSpec& synthetic,
                                   const ImageOptions& images, int64_t batch) {
  if (feed.spec.empty())
    return open_dummy_data(*feed.layer, batch, images.classes, images.seed + (split == Split::Test ? 1 : 0));
  return open_dataset(feed.spec, split, synthetic, images);
}

}  // namespace cgdp
