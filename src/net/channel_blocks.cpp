// Which activations stay channel-blocked (tensor/channel_blocks.hpp). oneDNN's convolutions run
// in blocked layouts (NHWC for the AMX bf16 kernels, nChw16c for AVX-512) and would reorder from
// Caffe's NCHW on every call, four times per layer and iteration. Blobs joined by layers that need
// one block on all their blobs (ReLU, LRN, BatchNorm, Scale, Eltwise, Split, Concat) form a
// group; a group takes the block of a convolution at its edge when every layer on it handles it.
// Net outputs, parameters and anything a layer without blocked code touches stay NCHW.
#include "cgdp/tensor/channel_blocks.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "cgdp/net/net.hpp"

namespace cgdp {

namespace {

struct Groups {
  std::vector<int> parent;
  int find(int i) { return parent[i] == i ? i : parent[i] = find(parent[i]); }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

}  // namespace

template <typename T>
void Net<T>::choose_channel_blocks() {
  if (!channel_blocks_enabled()) return;
  std::map<Blob<T>*, int> id;
  std::vector<Blob<T>*> blobs;
  auto id_of = [&](Blob<T>* b) {
    const auto [at, added] = id.emplace(b, static_cast<int>(blobs.size()));
    if (added) blobs.push_back(b);
    return at->second;
  };
  for (int p = 0; p < num_layers(); ++p)
    for (const BlobVec<T>* side : {&bottoms_[p], &tops_[p]})
      for (Blob<T>* b : *side) id_of(b);
  Groups groups{std::vector<int>(blobs.size())};
  std::iota(groups.parent.begin(), groups.parent.end(), 0);
  std::vector<int> readers(blobs.size(), 0);  // layers that read a blob without writing it
  for (int p = 0; p < num_layers(); ++p) {
    if (absorbed_[p]) continue;  // runs inside the layer before it
    std::vector<int> mine;
    for (Blob<T>* b : bottoms_[p]) {
      mine.push_back(id[b]);
      if (std::find(tops_[p].begin(), tops_[p].end(), b) == tops_[p].end()) ++readers[id[b]];
    }
    for (Blob<T>* b : tops_[p]) mine.push_back(id[b]);
    if (!layers_[p]->blocks_each_blob())
      for (int i : mine) groups.join(i, mine.front());
  }
  // Per group: whether any block but 1 may do, the layers (and sides) that must accept it, and the
  // blocks the convolutions at its edges prefer, in layer order.
  struct Group {
    bool plain_only = false;
    std::vector<std::pair<int, bool>> sides;
    std::vector<int64_t> candidates;
  };
  std::map<int, Group> by_root;
  for (size_t i = 0; i < blobs.size(); ++i) {
    Group& g = by_root[groups.find(static_cast<int>(i))];
    // No reader: a net output, read as Caffe's.
    g.plain_only = g.plain_only || blobs[i]->num_axes() != 4 || readers[i] == 0;
  }
  for (int p = 0; p < num_layers(); ++p) {
    if (absorbed_[p]) continue;
    const bool each = layers_[p]->blocks_each_blob();
    // Such a layer's blocked code reads one bottom and writes one top.
    const bool one_each = bottoms_[p].size() == 1 && tops_[p].size() == 1;
    for (const bool top : {false, true})
      for (Blob<T>* b : top ? tops_[p] : bottoms_[p]) {
        Group& g = by_root[groups.find(id[b])];
        g.sides.push_back({p, top});
        g.plain_only = g.plain_only || (each && !one_each);
        if (each) g.candidates.push_back(layers_[p]->preferred_channel_block(top));
      }
  }
  for (auto& [root, g] : by_root) {
    if (g.plain_only) continue;
    for (int64_t block : g.candidates) {
      bool everyone = block > 1;
      for (size_t i = 0; i < blobs.size() && everyone; ++i)
        everyone = groups.find(static_cast<int>(i)) != root || blobs[i]->shape(1) % block == 0;
      for (const auto& [p, top] : g.sides)
        everyone = everyone && layers_[p]->handles_channel_block(top, block);
      if (!everyone) continue;
      for (size_t i = 0; i < blobs.size(); ++i)
        if (groups.find(static_cast<int>(i)) == root) blobs[i]->set_channel_block(block);
      break;
    }
  }
}

template void Net<float>::choose_channel_blocks();
template void Net<double>::choose_channel_blocks();

}  // namespace cgdp
