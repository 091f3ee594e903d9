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

// The net's activations, numbered in the order layers name them, in groups that must share one
// block (a union-find over the blobs of each layer that needs one block on all of them).
template <typename T>
struct BlobGroups {
  std::vector<Blob<T>*> blobs;
  std::map<const Blob<T>*, int> id;
  std::vector<int> parent;
  std::vector<int> readers;  // per blob, layers that read it without writing it

  int find(int i) { return parent[i] == i ? i : parent[i] = find(parent[i]); }
  void join(int a, int b) { parent[find(a)] = find(b); }
  int number(Blob<T>* b) {
    const auto [at, added] = id.emplace(b, static_cast<int>(blobs.size()));
    if (added) blobs.push_back(b);
    return at->second;
  }
};

template <typename T>
BlobGroups<T> group_blobs(const Net<T>& net) {
  BlobGroups<T> g;
  for (int p = 0; p < net.num_layers(); ++p)
    for (const BlobVec<T>* side : {&net.bottoms(p), &net.tops(p)})
      for (Blob<T>* b : *side) g.number(b);
  g.parent.resize(g.blobs.size());
  std::iota(g.parent.begin(), g.parent.end(), 0);
  g.readers.assign(g.blobs.size(), 0);
  for (int p = 0; p < net.num_layers(); ++p) {
    if (net.absorbed(p)) continue;  // runs inside the layer before it
    const BlobVec<T>& tops = net.tops(p);
    std::vector<int> mine;
    for (Blob<T>* b : net.bottoms(p)) {
      mine.push_back(g.id[b]);
      if (std::find(tops.begin(), tops.end(), b) == tops.end()) ++g.readers[g.id[b]];
    }
    for (Blob<T>* b : tops) mine.push_back(g.id[b]);
    if (!net.layer(p).blocks_each_blob())
      for (int i : mine) g.join(i, mine.front());
  }
  return g;
}

// What a group's block must satisfy: whether any block but 1 may do, its blobs, the layers (and
// sides) that must accept the block, and the blocks the convolutions at its edges prefer, in
// layer order.
struct GroupNeeds {
  bool plain_only = false;
  std::vector<int> members;
  std::vector<std::pair<int, bool>> sides;
  std::vector<int64_t> candidates;
};

template <typename T>
std::map<int, GroupNeeds> group_needs(const Net<T>& net, BlobGroups<T>& g) {
  std::map<int, GroupNeeds> by_root;
  for (size_t i = 0; i < g.blobs.size(); ++i) {
    GroupNeeds& needs = by_root[g.find(static_cast<int>(i))];
    needs.members.push_back(static_cast<int>(i));
    // No reader: a net output, read as Caffe's.
    needs.plain_only = needs.plain_only || g.blobs[i]->num_axes() != 4 || g.readers[i] == 0;
  }
  for (int p = 0; p < net.num_layers(); ++p) {
    if (net.absorbed(p)) continue;
    const bool each = net.layer(p).blocks_each_blob();
    // Such a layer's blocked code reads one bottom and writes one top.
    const bool one_each = net.bottoms(p).size() == 1 && net.tops(p).size() == 1;
    for (const bool top : {false, true})
      for (Blob<T>* b : top ? net.tops(p) : net.bottoms(p)) {
        GroupNeeds& needs = by_root[g.find(g.id[b])];
        needs.sides.push_back({p, top});
        needs.plain_only = needs.plain_only || (each && !one_each);
        if (each) needs.candidates.push_back(net.layer(p).preferred_channel_block(top));
      }
  }
  return by_root;
}

// The first candidate above 1 that divides every member's channels and that every layer on the
// group handles; 1 when none does.
template <typename T>
int64_t group_block(const Net<T>& net, const BlobGroups<T>& g, const GroupNeeds& needs) {
  if (needs.plain_only) return 1;
  for (int64_t block : needs.candidates) {
    if (block <= 1) continue;
    const bool divides = std::all_of(needs.members.begin(), needs.members.end(),
                                     [&](int i) { return g.blobs[i]->shape(1) % block == 0; });
    const bool handled =
        std::all_of(needs.sides.begin(), needs.sides.end(), [&](const std::pair<int, bool>& s) {
          return net.layer(s.first).handles_channel_block(s.second, block);
        });
    if (divides && handled) return block;
  }
  return 1;
}

}  // namespace

template <typename T>
void Net<T>::choose_channel_blocks() {
  if (!channel_blocks_enabled()) return;
  BlobGroups<T> groups = group_blobs(*this);
  for (const auto& [root, needs] : group_needs(*this, groups)) {
    const int64_t block = group_block(*this, groups, needs);
    if (block > 1)
      for (int i : needs.members) groups.blobs[i]->set_channel_block(block);
  }
}

template void Net<float>::choose_channel_blocks();
template void Net<double>::choose_channel_blocks();

}  // namespace cgdp
