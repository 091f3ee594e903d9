// The lines a run prints about itself (run_notes.hpp).
#include "cgdp/train/run_notes.hpp"

#include <cmath>

#include "cgdp/device/layer_precision.hpp"
#include "cgdp/layers/bf16_kernel_isa.hpp"
#include "cgdp/layers/convolution_layer.hpp"
#include "cgdp/layers/inner_product_layer.hpp"

namespace cgdp {

std::string precision_note(Net<float>& net) {
  const Precision p = layer_precision();
  if (p == Precision::kFp32) return "";
  int multiplying = 0, native = 0, convolutions = 0, channels_last = 0;
  for (int i = 0; i < net.num_layers(); ++i) {
    const std::string type = net.layer(i).type();
    if (type != "Convolution" && type != "Deconvolution" && type != "InnerProduct") continue;
    ++multiplying;
    const auto* conv = dynamic_cast<const ConvolutionLayer<float>*>(&net.layer(i));
    if (conv) {
      ++convolutions;
      channels_last += conv->cuda_channels_last();
    }
    if (p != Precision::kBf16 || !cpu_has_bf16()) continue;
    if (conv)
      native += conv->uses_onednn();
    else if (auto* ip = dynamic_cast<InnerProductLayer<float>*>(&net.layer(i)))
      native += ip->runs_bf16_kernels();
  }
  const int packed = net.activation_plan().packed_count();
  const std::string rest =
      packed > 0 ? cat("; sums, activations (", packed,
                       " of them waiting in 16 bits between forward and backward), the update and "
                       "the exchange in fp32")
                 : "; sums, activations, the update and the exchange in fp32";
  if (net.device().kind() == DeviceKind::Cuda)
    return cat("cgdp: precision ", to_string(p), ": ", multiplying,
               " multiplying layers on cuDNN's and cuBLAS's tensor cores, their operands narrowed "
               "to ",
               to_string(p), " at each call",
               convolutions > 0
                   ? cat(" (", channels_last, " of ", convolutions, " convolutions' channels last)")
                   : std::string(),
               rest);
  const std::string rounded =
      cat(multiplying - native, " on fp32 kernels with their operands rounded to ", to_string(p));
  const std::string kernels =
      native > 0
          ? cat(native, " of ", multiplying, " multiplying layers on oneDNN's bf16 kernels (",
                bf16_kernel_isa(), "), ", rounded)
          : cat(multiplying, " multiplying layers", rounded.substr(rounded.find(" on ")),
                " (this CPU has no ", to_string(p),
                " kernels: a 16-bit run's numbers, not its speed)");
  return cat("cgdp: precision ", to_string(p), ": ", kernels, rest);
}

std::string layout_note(const Net<float>& net) {
  constexpr int kNamed = 4;
  std::string named;
  int blocked = 0, activations = 0;
  for (int i = 0; i < net.num_layers(); ++i) {
    if (net.tops(i).size() != 1 ||
        (net.bottoms(i).size() == 1 && net.bottoms(i)[0] == net.tops(i)[0]))
      continue;  // in place: counted at its writer
    const Blob<float>& top = *net.tops(i)[0];
    ++activations;
    if (top.channel_block() == 1) continue;
    if (++blocked > kNamed) continue;
    const std::string block =
        top.channel_block() == top.shape(1) ? "NHWC" : cat(top.channel_block(), "-channel blocks");
    named += cat(named.empty() ? "" : ", ", net.top_names(i)[0], " (", block, ")");
  }
  if (blocked == 0) return "";
  return cat("cgdp: layout: ", blocked, " of ", activations, " activations (", named,
             blocked > kNamed ? cat(", ", blocked - kNamed, " more") : std::string(),
             ") stay in oneDNN's layouts between its convolutions; the rest NCHW (--layout nchw: "
             "Caffe's everywhere)");
}

std::string loss_scale_text(double scale) {
  if (scale < 1e15 && scale == std::floor(scale)) return cat(static_cast<int64_t>(scale));
  return cat(scale);
}

std::optional<std::string> non_finite_output(Net<float>& net, const std::string& suffix) {
  if (auto layer = net.first_non_finite_layer())
    return cat("first non-finite output in layer '", *layer, "'", suffix);
  return std::nullopt;
}

}  // namespace cgdp
