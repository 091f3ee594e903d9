// Which activations stay channel-blocked (tensor/channel_blocks.hpp). oneDNN's convolutions run
// in blocked layouts (NHWC for the AMX bf16 kernels, nChw16c for AVX-512 fp32) and would reorder
// from Caffe's NCHW on every call, four times per layer and iteration; a blob whose writer and
// readers all handle the convolution's block is kept in it instead. Net outputs, parameters and
// anything a layer without blocked code touches stay NCHW.
#include "cgdp/tensor/channel_blocks.hpp"

#include <algorithm>
#include <vector>

#include "cgdp/net/net.hpp"

namespace cgdp {

template <typename T>
void Net<T>::choose_channel_blocks() {
  if (!channel_blocks_enabled()) return;
  for (int p = 0; p < num_layers(); ++p) {
    if (tops_[p].size() != 1 || absorbed_[p]) continue;
    Blob<T>* blob = tops_[p][0];
    const bool in_place =
        std::find(bottoms_[p].begin(), bottoms_[p].end(), blob) != bottoms_[p].end();
    if (in_place || blob->num_axes() != 4) continue;
    // The blob's readers: layers in place on it must not care about layout; the others read it
    // as their one bottom and must handle the block.
    std::vector<int> readers;
    bool plain_only = false;
    for (int c = p + 1; c < num_layers() && !plain_only; ++c) {
      const bool reads =
          std::find(bottoms_[c].begin(), bottoms_[c].end(), blob) != bottoms_[c].end();
      if (!reads) continue;
      const bool rewrites = std::find(tops_[c].begin(), tops_[c].end(), blob) != tops_[c].end();
      if (rewrites)
        plain_only = !(absorbed_[c] || layers_[c]->elementwise());
      else if (bottoms_[c].size() != 1)
        plain_only = true;
      else
        readers.push_back(c);
    }
    if (plain_only || readers.empty()) continue;  // no readers: a net output, read as Caffe's
    std::vector<int64_t> candidates{layers_[p]->preferred_channel_block(true)};
    for (int c : readers) candidates.push_back(layers_[c]->preferred_channel_block(false));
    for (int64_t block : candidates) {
      if (block <= 1 || blob->shape(1) % block != 0) continue;
      bool everyone = layers_[p]->handles_channel_block(true, block);
      for (int c : readers) everyone = everyone && layers_[c]->handles_channel_block(false, block);
      if (!everyone) continue;
      blob->set_channel_block(block);
      break;
    }
  }
}

template void Net<float>::choose_channel_blocks();
template void Net<double>::choose_channel_blocks();

}  // namespace cgdp
