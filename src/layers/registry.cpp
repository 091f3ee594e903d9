// Explicit layer registration: one line per type, no static initialisers.
#include "cgdp/layers/registry.hpp"

#include <algorithm>
#include <functional>

#include "cgdp/core/excerpt.hpp"
#include "cgdp/layers/accuracy_layer.hpp"
#include "cgdp/layers/argmax_layer.hpp"
#include "cgdp/layers/batch_norm_layer.hpp"
#include "cgdp/layers/bias_layer.hpp"
#include "cgdp/layers/concat_layer.hpp"
#include "cgdp/layers/convolution_layer.hpp"
#include "cgdp/layers/crop_layer.hpp"
#include "cgdp/layers/deconvolution_layer.hpp"
#include "cgdp/layers/dropout_layer.hpp"
#include "cgdp/layers/eltwise_layer.hpp"
#include "cgdp/layers/inner_product_layer.hpp"
#include "cgdp/layers/input_layer.hpp"
#include "cgdp/layers/loss_layers.hpp"
#include "cgdp/layers/lrn_layer.hpp"
#include "cgdp/layers/mvn_layer.hpp"
#include "cgdp/layers/neuron_layer.hpp"
#include "cgdp/layers/pooling_layer.hpp"
#include "cgdp/layers/prelu_layer.hpp"
#include "cgdp/layers/relu_layer.hpp"
#include "cgdp/layers/reshape_layer.hpp"
#include "cgdp/layers/scale_layer.hpp"
#include "cgdp/layers/silence_layer.hpp"
#include "cgdp/layers/slice_layer.hpp"
#include "cgdp/layers/softmax_layer.hpp"
#include "cgdp/layers/softmax_with_loss_layer.hpp"
#include "cgdp/layers/split_layer.hpp"
#include "cgdp/layers/stochastic_pooling_layer.hpp"

namespace cgdp {

namespace {

template <template <typename> class L>
struct Make {
  static std::unique_ptr<Layer<float>> f(const proto::LayerParameter& p, Device& d) {
    return std::make_unique<L<float>>(p, d);
  }
  static std::unique_ptr<Layer<double>> d(const proto::LayerParameter& p, Device& d) {
    return std::make_unique<L<double>>(p, d);
  }
};

struct Entry {
  const char* type;
  std::unique_ptr<Layer<float>> (*make_float)(const proto::LayerParameter&, Device&);
  std::unique_ptr<Layer<double>> (*make_double)(const proto::LayerParameter&, Device&);
};

template <template <typename> class L>
constexpr Entry entry(const char* type) {
  return {type, &Make<L>::f, &Make<L>::d};
}

const std::vector<Entry>& table() {
  // One entry per line keeps additions from different branches apart.
  // clang-format off
  static const std::vector<Entry> entries = {
      entry<AbsValLayer>("AbsVal"),
      entry<AccuracyLayer>("Accuracy"),
      entry<ArgMaxLayer>("ArgMax"),
      entry<BatchNormLayer>("BatchNorm"),
      entry<BiasLayer>("Bias"),
      entry<BNLLLayer>("BNLL"),
      entry<ConcatLayer>("Concat"),
      entry<ContrastiveLossLayer>("ContrastiveLoss"),
      entry<ConvolutionLayer>("Convolution"),
      entry<CropLayer>("Crop"),
      entry<DeconvolutionLayer>("Deconvolution"),
      entry<DropoutLayer>("Dropout"),
      entry<EltwiseLayer>("Eltwise"),
      entry<ELULayer>("ELU"),
      entry<EuclideanLossLayer>("EuclideanLoss"),
      entry<ExpLayer>("Exp"),
      entry<FlattenLayer>("Flatten"),
      entry<HingeLossLayer>("HingeLoss"),
      entry<InnerProductLayer>("InnerProduct"),
      entry<InputLayer>("Input"),
      entry<LogLayer>("Log"),
      entry<LRNLayer>("LRN"),
      entry<MVNLayer>("MVN"),
      entry<PoolingLayer>("Pooling"),
      entry<PowerLayer>("Power"),
      entry<PReLULayer>("PReLU"),
      entry<ReLULayer>("ReLU"),
      entry<ReshapeLayer>("Reshape"),
      entry<ScaleLayer>("Scale"),
      entry<SigmoidLayer>("Sigmoid"),
      entry<SigmoidCrossEntropyLossLayer>("SigmoidCrossEntropyLoss"),
      entry<SilenceLayer>("Silence"),
      entry<SliceLayer>("Slice"),
      entry<SoftmaxLayer>("Softmax"),
      entry<SoftmaxWithLossLayer>("SoftmaxWithLoss"),
      entry<SplitLayer>("Split"),
      entry<TanHLayer>("TanH"),
      entry<ThresholdLayer>("Threshold"),
  };
  // clang-format on
  return entries;
}

const Entry& find(const std::string& type, const std::string& layer_name) {
  for (const Entry& e : table())
    if (type == e.type) return e;
  if (is_data_layer_type(type))
    throw ModelError(cat("layer '", layer_name, "' (", type, ") reads data: `cgdp train` and `cgdp "
                         "inspect` open data layers; this command needs an Input layer instead"));
  std::string known;
  for (const auto& name : known_layer_types()) known += (known.empty() ? "" : ", ") + name;
  throw ModelError(cat("layer '", excerpt(layer_name), "': unknown type '", excerpt(type),
                       "' (known: ", known, ")"));
}

}  // namespace

// Pooling with pool: STOCHASTIC draws and routes its inputs otherwise than MAX and AVE: its own class.
bool stochastic_pooling(const proto::LayerParameter& param) {
  return param.type() == "Pooling" && param.pooling_param().pool() == proto::PoolingParameter::STOCHASTIC;
}

template <>
std::unique_ptr<Layer<float>> create_layer<float>(const proto::LayerParameter& param,
                                                  Device& device) {
  if (stochastic_pooling(param)) return std::make_unique<StochasticPoolingLayer<float>>(param, device);
  return find(param.type(), param.name()).make_float(param, device);
}

template <>
std::unique_ptr<Layer<double>> create_layer<double>(const proto::LayerParameter& param,
                                                    Device& device) {
  if (stochastic_pooling(param)) return std::make_unique<StochasticPoolingLayer<double>>(param, device);
  return find(param.type(), param.name()).make_double(param, device);
}

bool is_data_layer_type(const std::string& type) {
  return type == "Data" || type == "ImageData" || type == "DummyData" || type == "HDF5Data";
}

std::vector<std::string> known_layer_types() {
  std::vector<std::string> names;
  for (const Entry& e : table()) names.emplace_back(e.type);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace cgdp
