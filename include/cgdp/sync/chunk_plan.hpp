// Chunk plans: how the layers with parameters are grouped into chunks whose gradients leave the
// device together, are summed on the host together and come back together (CGDP paper, sec. 4).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cgdp/device/device.hpp"
#include "cgdp/layers/sufficient_factors.hpp"

namespace cgdp {

template <typename T>
class Net;

// One layer with learnable parameters, where its gradients sit in Net::flat_diff().
struct ParamLayer {
  int layer = 0;  // index into Net::layer()
  std::string name;
  int64_t offset = 0;  // first element in the flat buffers
  int64_t count = 0;   // elements
  // A layer whose weight gradient may travel as sufficient factors (an InnerProduct whose weight,
  // the first weight_count() elements of its range, is its own): their shape for ONE sample
  // (rows per sample; 1 for an InnerProduct on axis 1). factors.rows == 0 for every other layer.
  FactorShape factors;
  bool factorable() const { return factors.rows > 0; }
  int64_t weight_count() const { return factors.outputs * factors.inputs; }
};

// The net's layers that have parameters, in backward order (last layer first), as the flat
// buffers lay them out: offsets are contiguous and increasing.
template <typename T>
std::vector<ParamLayer> param_layers(const Net<T>& net);

// A run of consecutive param layers in backward order: one contiguous range of the flat buffers.
struct Chunk {
  int first = 0;       // index into the ParamLayer list of the chunk's first layer (backward order)
  int last = 0;        // same, of its last layer (inclusive)
  int64_t offset = 0;  // first element in the flat buffers
  int64_t count = 0;   // elements
  // Net layer whose backward completes the chunk: its lowest layer in forward order. Once that
  // layer's backward has run, the chunk's gradients are final and can be exchanged.
  int completing_layer = 0;
};

struct ChunkPlan {
  std::vector<Chunk> chunks;  // in backward order; together they cover every parameter once
};

// The plan for `spec`, the value of --chunk (a net without parameters gets an empty plan):
//   layer      one chunk per param layer;
//   all        one chunk: the classic exchange after the whole backward;
//   K          the CGDP paper's equal-size rule (sec. 4.2), K a positive integer;
//   bytes:MB   chunks filled in backward order up to MB MiB of float gradients;
//   b1,b2,...  chunk starts: strictly increasing param-layer indices in (0, L), backward order;
//              "b1," (trailing comma) is the one-boundary list, since "b1" alone means K.
// Throws UsageError naming --chunk and what was expected.
ChunkPlan make_chunk_plan(std::span<const ParamLayer> layers, const std::string& spec);

// The --chunk a run takes when none is given: one chunk per layer on the CPU backend, where a
// chunk's copy is a memcpy; on CUDA, chunks of up to kDefaultCudaChunkMiB, since every chunk costs
// an event, a cudaMemcpyAsync and a host callback (tens of µs) whatever its size, and ResNet-152
// per layer would be 311 chunks, half of them under 16 KiB. 8 rather than 4: with the H200
// profiles (docs/results.md) the model puts 4 H200s' T(1)/T(4) at 0.965 instead of 0.937 for
// ResNet-152 (34 chunks, not 77), higher for AlexNet and GoogLeNet, within 0.003 for VGG-16.
inline constexpr int kDefaultCudaChunkMiB = 8;
std::string default_chunk_spec(DeviceKind kind);

// The same plans from values, for code that builds them (e.g. a chunk-size search).
ChunkPlan per_layer_plan(std::span<const ParamLayer> layers);
ChunkPlan single_chunk_plan(std::span<const ParamLayer> layers);
// Paper's rule with L layers: floor((L-1)/K) chunks of K layers from the start of the backward
// pass, then the remaining layers (the first ones in forward order) one per chunk; when K divides
// L that leaves K single-layer chunks, so K >= L gives one chunk per layer. K > 0.
ChunkPlan equal_size_plan(std::span<const ParamLayer> layers, int64_t k);
// Greedy: a chunk takes the next layer while it stays within `cap_bytes` (4-byte gradients); a
// layer larger than the cap is a chunk of its own. cap_bytes > 0.
ChunkPlan byte_capped_plan(std::span<const ParamLayer> layers, double cap_bytes);
// Chunks start at 0 and at each of `starts` (strictly increasing, each in [1, L-1]).
ChunkPlan plan_from_starts(std::span<const ParamLayer> layers, std::span<const int64_t> starts);

// Short text for logs, e.g. "3 chunks: [fc8 fc7] [fc6] [conv5..conv1]"; a chunk of more than two
// layers shows its first..last, and a plan of more than `max_shown` (>= 3) chunks elides its
// middle, keeping the last two.
std::string describe(const ChunkPlan& plan, std::span<const ParamLayer> layers, int max_shown = 8);

}  // namespace cgdp
