// Pooling: MAX or AVE over 2-D windows of N x C x H x W blobs, with Caffe's output-shape rule
// (rounding up) and Caffe's AVE divisor; MAX remembers each output's argmax for backward, as its
// place in the window in a byte or two (in the activation arena when the net plans one:
// kept_indices).
#pragma once

#include <cstdint>
#include <vector>

#include "cgdp/layers/layer.hpp"
#include "cgdp/layers/pool_window_code.hpp"

namespace cgdp {

template <typename T>
class PoolingLayer final : public Layer<T> {
 public:
  using Layer<T>::Layer;
  void reshape(const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  // Its backward reads no values: MAX routes by the argmax it kept, AVE spreads evenly.
  bool backward_reads(const Blob<T>&, const BlobVec<T>&, const BlobVec<T>&) const override {
    return false;
  }
  // On the CPU, any block of its channels on either side (pooling_blocked.cpp).
  bool blocks_each_blob() const override { return true; }
  bool handles_channel_block(bool top, int64_t block) const override;
  // MAX's argmax (AVE's stays empty, so the net plans no bytes for it).
  const Blob<T>* kept_indices() const override { return this->forward_only_ ? nullptr : &argmax_; }

 protected:
  void layer_setup(const BlobVec<T>& bottom, const BlobVec<T>& top, Rng& rng) override;
  void forward_cpu(const RunContext& ctx, const BlobVec<T>& bottom, const BlobVec<T>& top) override;
  void backward_cpu(const RunContext& ctx, const BlobVec<T>& top,
                    const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#ifdef CGDP_HAVE_CUDA
  void forward_cuda(const RunContext& ctx, const BlobVec<T>& bottom,
                    const BlobVec<T>& top) override;
  void backward_cuda(const RunContext& ctx, const BlobVec<T>& top,
                     const std::vector<bool>& propagate_down, const BlobVec<T>& bottom) override;
#endif

 private:
  // One output's window: rows [h0, h1) x columns [w0, w1) of the input, and AVE's divisor.
  struct Window {
    int64_t h0, h1, w0, w1, divisor;
  };
  Window window(int64_t ph, int64_t pw) const;
  void max_plane(const T* in, T* out, int32_t* argmax) const;
  // The common 2x2, stride-2, unpadded grid, vectorised along rows; false if not that grid. Its
  // kernel known at compile time, it loads each row of a window once for both columns: 20% faster
  // than max_inside_rows on fashion_cnn's poolings.
  bool max_2x2_plane(const T* in, T* out, int32_t* argmax) const;
  // Any window at stride 1 or 2 along rows: the outputs whose windows need no clipping in runs of
  // 8, the rest one by one; false where rows hold too few of them.
  bool max_inside_rows(const T* in, T* out, int32_t* argmax) const;
  void average_plane(const T* in, T* out) const;
  // Either blob channel-blocked (pooling_blocked.cpp), an image at a time, kLanes channels at a
  // time through a tile of one plane per channel. `in_base`/`out_base`: where channel c's first
  // element lies in the bottom's and the top's image.
  void forward_blocked(const Blob<T>& bottom, Blob<T>& top);
  void backward_blocked(const Blob<T>& top, Blob<T>& bottom) const;
  // From a blocked bottom, MAX's codes (null: none kept) straight from the tile.
  template <int kLanes, typename Code>
  void forward_blocked_image(const T* in, int64_t in_block, const int64_t* in_base, T* out,
                             int64_t out_block, const int64_t* out_base, Code* codes, T* tile,
                             int32_t* tile_code) const;
  template <int kLanes>
  void forward_planes_to_blocks(const T* in, T* out, int64_t out_block, const int64_t* out_base,
                                int32_t* argmax, T* tile) const;

  bool max_ = true;
  bool global_ = false;
  int64_t kernel_h_ = 0, kernel_w_ = 0, pad_h_ = 0, pad_w_ = 0, stride_h_ = 1, stride_w_ = 1;
  int64_t channels_ = 0, height_ = 0, width_ = 0, pooled_h_ = 0, pooled_w_ = 0;
  // MAX, kept from forward for backward on either backend: each output's code
  // (pool_window_code.hpp, code_bytes_ each), in NCHW order whatever the layouts, in the bytes of a
  // blob that the net's arena can hold.
  Blob<T> argmax_{this->device(), Shape{0}, Diff::None};
  int code_bytes_ = 1;
  void* codes() {
    return argmax_.mutable_data();
  }
  const void* codes() const {
    return argmax_.data();
  }
  pool::CodeGeometry code_geometry() const {
    return {width_, kernel_h_, kernel_w_, stride_h_, stride_w_, pad_h_, pad_w_};
  }
  // Calls f.template operator()<Code>() with the code's type.
  template <typename F>
  void with_code(F&& f) const {
    if (code_bytes_ == 1) return f.template operator()<uint8_t>();
    if (code_bytes_ == 2) return f.template operator()<uint16_t>();
    return f.template operator()<uint32_t>();
  }
  // One plane's positions as the compute writes them, into codes.
  template <typename Code>
  void encode_plane(const int32_t* positions, Code* codes) const {
    const pool::CodeGeometry g = code_geometry();
    for (int64_t ph = 0; ph < pooled_h_; ++ph)
      for (int64_t pw = 0; pw < pooled_w_; ++pw) {
        const int64_t o = ph * pooled_w_ + pw;
        codes[o] = pool::encode_position<Code>(positions[o], ph, pw, g);
      }
  }
  std::vector<T> tiles_;  // forward_blocked's: 16 planes per thread
  std::vector<int32_t> tile_codes_;
  // forward_blocked's from a plain bottom: MAX's positions h * W + w in their planes as max_plane
  // writes them, before they are coded, an image per thread in NCHW order.
  std::vector<int32_t> positions_;
};

}  // namespace cgdp
