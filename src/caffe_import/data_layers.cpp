// Data layers to datasets: the source and transform each names, the shape Caffe infers from the
// first record, and the Input that takes the layer's place in the net.
#include "cgdp/caffe_import/data_layers.hpp"

#include <filesystem>

#include "cgdp/core/error.hpp"
#include "cgdp/data/filler_dataset.hpp"
#include "cgdp/data/image/datum.hpp"
#include "cgdp/data/image/image.hpp"
#include "cgdp/data/image/image_list.hpp"
#include "cgdp/data/image/lmdb_database.hpp"
#include "cgdp/data/image/mean_file.hpp"
#include "cgdp/io/file.hpp"
#include "cgdp/layers/registry.hpp"
#include "cgdp/net/graph_rewrite.hpp"
#include "cgdp/net/model_file.hpp"

namespace cgdp {

namespace {

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

CaffeTransform transform_of(const proto::TransformationParameter& p) {
  CaffeTransform t;
  t.scale = p.scale();
  t.mirror = p.mirror();
  t.crop_size = static_cast<int>(p.crop_size());
  t.mean_values.assign(p.mean_value().begin(), p.mean_value().end());
  return t;
}

DataLayer read_layer(const proto::LayerParameter& lp, int index, const std::string& source) {
  DataLayer d;
  d.index = index;
  d.name = lp.name();
  d.type = lp.type();
  d.where = located(source, lp);
  d.tops.assign(lp.top().begin(), lp.top().end());
  const auto& t = lp.transform_param();
  d.images.transform = transform_of(t);
  d.force_color = t.force_color();
  d.force_gray = t.force_gray();
  if (d.force_color && d.force_gray)
    throw ModelError(cat(d.where, ": layer '", d.name, "': transform_param gives both force_color and "
                                                       "force_gray; give one"));
  if (d.type == "Data") {
    d.source = lp.data_param().source();
    d.batch_size = lp.data_param().batch_size();
  } else if (d.type == "ImageData") {
    const auto& p = lp.image_data_param();
    d.source = p.source();
    d.root = p.root_folder();
    d.batch_size = p.batch_size();
    d.is_color = p.is_color();
    d.shuffle = p.shuffle();
    d.images.resize_height = static_cast<int>(p.new_height());
    d.images.resize_width = static_cast<int>(p.new_width());
    if ((p.new_height() == 0) != (p.new_width() == 0))
      throw ModelError(cat(d.where, ": layer '", d.name, "': give both new_height and new_width, or neither"));
    if (p.new_height() > 0)
      if (const std::string problem = image_size_problem(p.new_height(), p.new_width());
          !problem.empty())
        throw ModelError(cat(d.where, ": layer '", d.name, "': new_height x new_width ", problem));
  } else if (d.type == "HDF5Data") {
    d.source = lp.hdf5_data_param().source();
    d.batch_size = lp.hdf5_data_param().batch_size();
    d.shuffle = lp.hdf5_data_param().shuffle();
  } else {  // DummyData
    d.dummy = lp.dummy_data_param();
    const auto& p = d.dummy;
    d.batch_size = p.shape_size() > 0 && p.shape(0).dim_size() > 0 ? p.shape(0).dim(0)
                   : p.num_size() > 0                                ? p.num(0)
                                                                     : 0;
  }
  d.mean_file = t.mean_file();
  if (d.tops.empty() || d.tops.size() > 2)
    throw ModelError(cat(d.where, ": layer '", d.name, "' (", d.type, ") has ", d.tops.size(),
                         " tops; cgdp feeds a data top and, optionally, a label top"));
  if (d.batch_size <= 0 && d.type != "DummyData")
    throw ModelError(cat(d.where, ": layer '", d.name, "' (", d.type, ") has no batch_size"));
  return d;
}

// The first record of an LMDB as Caffe's InferBlobShape reads it: channels, height, width.
void probe_lmdb(const std::string& path, const DataLayer& layer, ImageOptions& images) {
  const LmdbReader db(path);
  if (db.keys().empty()) throw DataError(cat(path, ": the database holds no records"));
  DatumShape shape;
  try {
    shape = datum_shape(parse_datum(db.value(0)));
  } catch (const DataError& e) {
    throw DataError(cat(path, ": key '", db.keys()[0], "': ", e.what()));
  }
  images.channels = layer.force_color ? 3 : layer.force_gray ? 1 : shape.channels;
  images.height = shape.height;
  images.width = shape.width;
}

// The first image of a list file (ImageData), after its resize.
void probe_list(const std::string& file, const std::string& root, const DataLayer& layer, ImageOptions& images) {
  const ImageList list = read_image_list(file, root);
  if (list.entries.empty()) throw DataError(cat(file, ": the list names no images"));
  const std::string& path = list.entries[0].path;
  const std::string bytes = read_file(path);
  try {
    std::tie(images.height, images.width) = image_size(bytes_of(bytes));
  } catch (const DataError& e) {
    throw DataError(cat(path, ": ", e.what()));
  }
  images.channels = layer.force_color || (layer.is_color && !layer.force_gray) ? 3 : 1;
}

// What a rule asks of the state beyond the phase: "stage a, not_stage b, level >= 1".
std::string rule_needs(const proto::NetStateRule& rule) {
  std::string needs;
  auto add = [&](const std::string& part) { needs += (needs.empty() ? "" : ", ") + part; };
  for (const auto& stage : rule.stage()) add(cat("stage ", stage));
  for (const auto& stage : rule.not_stage()) add(cat("no stage ", stage));
  if (rule.has_min_level()) add(cat("level >= ", rule.min_level()));
  if (rule.has_max_level()) add(cat("level <= ", rule.max_level()));
  return needs;
}

bool rule_names_phase(const proto::NetStateRule& rule, Phase phase) {
  return !rule.has_phase() || (rule.phase() == proto::TEST) == (phase == Phase::Test);
}

}  // namespace

std::string staged_out_data_layers(const proto::NetParameter& model, Phase phase,
                                   const proto::NetState& state) {
  std::string out;
  for (const auto& lp : model.layer()) {
    if (!is_data_layer_type(lp.type()) || layer_in_phase(lp, phase, state)) continue;
    std::string needs;
    for (const auto& rule : lp.include())
      if (rule_names_phase(rule, phase) && !rule_needs(rule).empty())
        needs += (needs.empty() ? "" : " or ") + rule_needs(rule);
    for (const auto& rule : lp.exclude())
      if (rule_names_phase(rule, phase) && !rule_needs(rule).empty())
        needs += (needs.empty() ? "" : " or ") + cat("not ", rule_needs(rule));
    if (needs.empty()) continue;  // left out by its phase alone
    const std::string line = lp.has_source_line() ? cat("line ", lp.source_line(), ": ") : "";
    out += cat(out.empty() ? "" : ", ", "'", lp.name(), "' (", line, needs, ")");
  }
  return out;
}

std::optional<DataLayer> find_data_layer(const proto::NetParameter& net, Phase phase, const std::string& source) {
  std::optional<DataLayer> found;
  for (int i = 0; i < net.layer_size(); ++i) {
    const auto& lp = net.layer(i);
    if (!is_data_layer_type(lp.type())) continue;
    if (!layer_in_phase(lp, phase, net.state())) continue;
    if (found)
      throw ModelError(cat(located(source, lp), ": layer '", lp.name(), "' is a second data layer in the ",
                           phase == Phase::Train ? "TRAIN" : "TEST", " phase (the first is '", found->name,
                           "'); cgdp feeds one per phase"));
    found = read_layer(lp, i, source);
  }
  return found;
}

std::string data_layer_spec(const DataLayer& layer, const std::string& override_spec) {
  if (!override_spec.empty()) return override_spec;
  const std::string flag = cat(layer.type == "Data"       ? "--data lmdb:DIR"
                               : layer.type == "HDF5Data" ? "--data hdf5:LIST"
                                                          : "--data list:FILE[,ROOT]",
                              " (or, for a shape without data, --data synthetic:C,H,W,CLASSES)");
  if (layer.source.empty())
    throw UsageError(cat(layer.where, ": layer '", layer.name, "' (", layer.type, ") names no source: give ", flag));
  std::error_code ec;
  if (!std::filesystem::exists(layer.source, ec))
    throw UsageError(cat(layer.where, ": layer '", layer.name, "' reads '", layer.source,
                         "', which does not exist (relative to ", std::filesystem::current_path(ec).string(),
                         "): give ", flag, ", or run from the folder it is relative to"));
  if (layer.type == "Data") return cat("lmdb:", layer.source, ",", layer.source);
  if (layer.type == "HDF5Data")  // its datasets are named as its tops
    return cat("hdf5:", layer.source, ",", layer.tops[0], ",", layer.tops.size() > 1 ? layer.tops[1] : "label");
  return cat("list:", layer.source, ",", layer.root.empty() ? "." : layer.root);
}

void load_layer_mean(const DataLayer& layer, ImageOptions& images) {
  if (layer.mean_file.empty()) return;
  std::error_code ec;
  if (!std::filesystem::exists(layer.mean_file, ec))
    throw UsageError(cat(layer.where, ": layer '", layer.name, "': mean_file '", layer.mean_file,
                         "' does not exist (relative to ", std::filesystem::current_path(ec).string(),
                         "): make it with `cgdp mean`, or give --mean-file"));
  load_mean_file(layer.mean_file, images.transform);
}

void probe_sample_geometry(const DataLayer& layer, const std::string& spec, ImageOptions& images) {
  const size_t colon = spec.find(':');
  const std::string scheme = spec.substr(0, colon), argument = spec.substr(colon + 1);
  if (scheme == "lmdb") {
    std::string path = argument.substr(0, argument.find(','));
    std::error_code ec;
    if (const auto side = std::filesystem::path(path) / "train_lmdb"; std::filesystem::is_directory(side, ec))
      path = side.string();  // lmdb:DIR with train_lmdb and val_lmdb: both hold the same shapes
    return probe_lmdb(path, layer, images);
  }
  if (scheme == "list") {
    const size_t comma = argument.find(',');
    return probe_list(argument.substr(0, comma), comma == std::string::npos ? "" : argument.substr(comma + 1),
                      layer, images);
  }
  if (scheme == "folder") {
    const ImageList list = scan_image_folder((std::filesystem::path(argument) / "train").string());
    const std::string bytes = read_file(list.entries.at(0).path);
    std::tie(images.height, images.width) = image_size(bytes_of(bytes));
    images.channels = layer.force_color ? 3 : layer.force_gray ? 1 : image_channels(bytes_of(bytes));
    return;
  }
  throw UsageError(cat(layer.where, ": layer '", layer.name, "' (", layer.type, "): --data ", spec,
                       " is not an image source (give lmdb:, list: or folder:)"));
}

Shape dummy_sample_shape(const DataLayer& layer) {
  const auto& p = layer.dummy;
  Shape shape;
  if (p.shape_size() > 0) {
    for (int d = 1; d < p.shape(0).dim_size(); ++d) shape.push_back(p.shape(0).dim(d));
  } else if (p.num_size() > 0 && p.channels_size() > 0 && p.height_size() > 0 && p.width_size() > 0) {
    shape = {p.channels(0), p.height(0), p.width(0)};
  }
  if (shape.size() != 3 || layer.batch_size <= 0)
    throw ModelError(cat(layer.where, ": layer '", layer.name, "' (DummyData): its first top must be "
                                                              "N x C x H x W (shape, or num/channels/height/width)"));
  return shape;
}

std::unique_ptr<Dataset> open_dummy_data(const DataLayer& layer, int64_t batch, int classes, uint64_t seed) {
  auto filler = [](const proto::FillerParameter& f) {
    return ValueFiller{f.type(), f.value(), f.min(), f.max(), f.mean(), f.std()};
  };
  FillerDatasetSpec spec;
  spec.sample = dummy_sample_shape(layer);
  const auto& p = layer.dummy;
  // Caffe: one filler for all tops, or one per top; none is constant 0.
  if (p.data_filler_size() > 0) spec.data = filler(p.data_filler(0));
  if (p.data_filler_size() > 1) spec.label = filler(p.data_filler(1));
  else if (p.data_filler_size() == 1) spec.label = spec.data;
  spec.size = batch;
  spec.num_classes = classes;
  spec.seed = seed;
  spec.description = cat(layer.where, ": DummyData '", layer.name, "'");
  return std::make_unique<FillerDataset>(spec);
}

void replace_with_input(proto::NetParameter& net, const DataLayer& layer, const Shape& sample, int64_t batch) {
  proto::LayerParameter& lp = *net.mutable_layer(layer.index);
  proto::LayerParameter input;
  input.set_name(lp.name());
  input.set_type("Input");
  input.mutable_top()->CopyFrom(lp.top());
  input.mutable_include()->CopyFrom(lp.include());
  input.mutable_exclude()->CopyFrom(lp.exclude());
  if (lp.has_source_line()) input.set_source_line(lp.source_line());
  auto& data = *input.mutable_input_param()->add_shape();
  data.add_dim(batch);
  for (int64_t d : sample) data.add_dim(d);
  if (lp.top_size() > 1) input.mutable_input_param()->add_shape()->add_dim(batch);
  lp = std::move(input);
}

}  // namespace cgdp
