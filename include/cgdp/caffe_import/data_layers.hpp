// Caffe's data layers (Data, ImageData, HDF5Data, DummyData) as cgdp feeds them: each phase's
// layer becomes a dataset the loader reads (its source, transform_param and batch_size) and, in
// the net, an Input layer of the same name and tops, shaped as Caffe's InferBlobShape would.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cgdp.pb.h"
#include "cgdp/data/dataset.hpp"
#include "cgdp/data/image/image_dataset.hpp"
#include "cgdp/layers/layer.hpp"

namespace cgdp {

// One phase's data layer, read from the model file.
struct DataLayer {
  int index = -1;  // in the unfiltered net
  std::string name, type, where;  // where: "file:line"
  std::vector<std::string> tops;
  std::string source;      // as the file gives it (Data: the LMDB; ImageData, HDF5Data: the list file)
  std::string root;        // ImageData's root_folder
  int64_t batch_size = 0;
  ImageOptions images;     // transform_param, ImageData's resize; channels and size come from probing
  std::string mean_file;   // transform_param's, read by load_layer_mean
  bool force_color = false, force_gray = false, is_color = true;
  bool shuffle = false;    // ImageData's and HDF5Data's shuffle; Data reads in key order, as Caffe
  proto::DummyDataParameter dummy;
};

// The data layers a `phase` net would have but for their rules' stages or levels, which `state`
// does not meet: "'data' (line 12: stage test-on-train)", comma-separated; empty if none.
std::string staged_out_data_layers(const proto::NetParameter& model, Phase phase,
                                   const proto::NetState& state);

// The data layer `phase` builds, if any. Two in one phase, or data tops other than (data) or
// (data, label), throw ModelError naming the file and line.
std::optional<DataLayer> find_data_layer(const proto::NetParameter& net, Phase phase,
                                         const std::string& source);

// The open_dataset spec of `layer`'s source ("lmdb:PATH", "list:FILE,ROOT"), with a source given
// by the user (--data) in its place when not empty. A missing source throws UsageError naming the
// layer, its line, the path and the flag to give.
std::string data_layer_spec(const DataLayer& layer, const std::string& override_spec);

// Reads the layer's mean_file (relative to the working directory, as Caffe) into `images`; a
// missing file throws UsageError naming the layer and what to do.
void load_layer_mean(const DataLayer& layer, ImageOptions& images);

// Fills `images`' channels, height and width from the first sample of `spec` as stored (after
// ImageData's resize): Caffe infers its tops' shapes from it.
void probe_sample_geometry(const DataLayer& layer, const std::string& spec, ImageOptions& images);

// DummyData's sample shape {C, H, W} from its first top's shape.
Shape dummy_sample_shape(const DataLayer& layer);

// DummyData as a dataset: its fillers, `batch` samples per epoch.
std::unique_ptr<Dataset> open_dummy_data(const DataLayer& layer, int64_t batch, int classes, uint64_t seed);

// Replaces the data layer at layer.index by an Input of the same name, rules and tops: data
// [batch x sample] and, with a second top, labels [batch].
void replace_with_input(proto::NetParameter& net, const DataLayer& layer, const Shape& sample, int64_t batch);

}  // namespace cgdp
