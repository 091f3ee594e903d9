// im2col / col2im for 2-D convolution. With padding, the image is first copied into a zero-padded
// buffer (and gradients are gathered in one and cropped), so that every column row is a plain,
// branch-free strided copy: short image rows make per-row bounds handling the dominant cost.
#include "cgdp/layers/im2col.hpp"

#include <algorithm>
#include <cstring>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace cgdp {

namespace {

// The image as im2col reads it: the input itself, or its zero-padded copy.
struct Padded {
  int64_t height, width;
};

Padded padded_size(const ConvGeometry& g) {
  return {g.height + 2 * g.pad_h, g.width + 2 * g.pad_w};
}

// Visits every (kernel tap, output row): fn(col_row, padded_row), where padded_row points at the
// first padded-image pixel the output row reads; consecutive outputs read stride_w apart.
template <typename Im, typename Col, typename Fn>
void for_each_tap_row(Im* image, Col* col, const ConvGeometry& g, Fn&& fn) {
  const Padded p = padded_size(g);
  const int64_t out_h = g.out_h(), out_w = g.out_w();
  for (int64_t c = 0; c < g.channels; ++c) {
    Im* plane = image + c * p.height * p.width;
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        Col* rows = col + ((c * g.kernel_h + i) * g.kernel_w + j) * out_h * out_w;
        Im* first = plane + i * g.dilation_h * p.width + j * g.dilation_w;
        for (int64_t oh = 0; oh < out_h; ++oh)
          fn(rows + oh * out_w, first + oh * g.stride_h * p.width);
      }
    }
  }
}

// A short row copy: whole vectors, the last one overlapping the one before it (rewriting the
// same values) instead of a scalar tail; rows under a vector wide go one element at a time.
template <typename T>
void copy_row(T* __restrict dst, const T* __restrict src, int64_t n) {
  typedef T Chunk __attribute__((vector_size(32)));  // one AVX2 register
  constexpr int64_t kVector = sizeof(Chunk) / sizeof(T);
  if (n < kVector) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
    return;
  }
  for (int64_t i = 0;; i += kVector) {
    const int64_t at = std::min(i, n - kVector);
    Chunk c;
    std::memcpy(&c, src + at, sizeof c);
    std::memcpy(dst + at, &c, sizeof c);
    if (at + kVector >= n) return;
  }
}

// dst[i] += src[i] for the last n < one vector of a row. Under a mask on AVX2: an overlapping
// last vector would add twice, and a scalar loop here cost col2im half its time.
template <typename T>
void add_tail(T* __restrict dst, const T* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}
#if defined(__AVX2__)
inline void add_tail(float* dst, const float* src, int64_t n) {
  alignas(32) static const int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};
  const __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes + 8 - n));
  _mm256_maskstore_ps(dst, m,
                      _mm256_add_ps(_mm256_maskload_ps(dst, m), _mm256_maskload_ps(src, m)));
}
inline void add_tail(double* dst, const double* src, int64_t n) {
  alignas(32) static const int64_t lanes[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
  const __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes + 4 - n));
  _mm256_maskstore_pd(dst, m,
                      _mm256_add_pd(_mm256_maskload_pd(dst, m), _mm256_maskload_pd(src, m)));
}
#endif

// dst[i] += src[i] over a short row: whole vectors, then the tail.
template <typename T>
void add_row(T* __restrict dst, const T* __restrict src, int64_t n) {
  typedef T Chunk __attribute__((vector_size(32)));
  constexpr int64_t kVector = sizeof(Chunk) / sizeof(T);
  int64_t i = 0;
  for (; i + kVector <= n; i += kVector) {
    Chunk a, b;
    std::memcpy(&a, dst + i, sizeof a);
    std::memcpy(&b, src + i, sizeof b);
    a += b;
    std::memcpy(dst + i, &a, sizeof a);
  }
  if (i < n) add_tail(dst + i, src + i, n - i);
}

// One kernel tap at stride 1: `rows` column rows of n values from image rows `pitch` apart.
// (A loop of its own: inside for_each_tap_row's nest the pointers spilled to the stack.)
template <typename T>
void copy_tap(T* __restrict col, const T* __restrict image, int64_t rows, int64_t n,
              int64_t pitch) {
  for (int64_t r = 0; r < rows; ++r, col += n, image += pitch) copy_row(col, image, n);
}

// The adjoint: adds the tap's column rows into the image rows they were read from.
template <typename T>
void add_tap(T* __restrict image, const T* __restrict col, int64_t rows, int64_t n, int64_t pitch) {
  for (int64_t r = 0; r < rows; ++r, col += n, image += pitch) add_row(image, col, n);
}

// Calls fn(col_block, first_image_pixel) for each kernel tap at stride 1, in column-row order.
template <typename Im, typename Col, typename Fn>
void for_each_tap(Im* image, Col* col, const ConvGeometry& g, Fn&& fn) {
  const Padded p = padded_size(g);
  const int64_t block = g.out_h() * g.out_w();
  for (int64_t c = 0; c < g.channels; ++c)
    for (int64_t i = 0; i < g.kernel_h; ++i)
      for (int64_t j = 0; j < g.kernel_w; ++j, col += block)
        fn(col, image + (c * p.height + i * g.dilation_h) * p.width + j * g.dilation_w);
}

template <typename T>
void pad_image(const T* im, const ConvGeometry& g, T* padded) {
  const Padded p = padded_size(g);
  std::fill(padded, padded + g.scratch_count(), T(0));
  for (int64_t c = 0; c < g.channels; ++c)
    for (int64_t h = 0; h < g.height; ++h)
      std::copy(im + (c * g.height + h) * g.width, im + (c * g.height + h + 1) * g.width,
                padded + (c * p.height + h + g.pad_h) * p.width + g.pad_w);
}

template <typename T>
void crop_image(const T* padded, const ConvGeometry& g, T* im) {
  const Padded p = padded_size(g);
  for (int64_t c = 0; c < g.channels; ++c)
    for (int64_t h = 0; h < g.height; ++h) {
      const T* src = padded + (c * p.height + h + g.pad_h) * p.width + g.pad_w;
      std::copy(src, src + g.width, im + (c * g.height + h) * g.width);
    }
}

}  // namespace

template <typename T>
void im2col(const T* im, const ConvGeometry& g, T* col, T* scratch) {
  const T* source = im;
  if (g.padded()) {
    pad_image(im, g, scratch);
    source = scratch;
  }
  const int64_t out_w = g.out_w(), stride = g.stride_w;
  if (stride == 1) {
    const int64_t out_h = g.out_h(), pitch = g.stride_h * padded_size(g).width;
    for_each_tap(source, col, g,
                 [=](T* rows, const T* first) { copy_tap(rows, first, out_h, out_w, pitch); });
  } else {
    // A plain loop: AVX2 gathers measured slower here (microcode mitigations make them slow).
    for_each_tap_row(source, col, g, [out_w, stride](T* __restrict dst, const T* __restrict src) {
      for (int64_t ow = 0; ow < out_w; ++ow) dst[ow] = src[ow * stride];
    });
  }
}

template <typename T>
void col2im(const T* col, const ConvGeometry& g, T* im, T* scratch) {
  T* target = g.padded() ? scratch : im;
  const int64_t count = g.padded() ? g.scratch_count() : g.channels * g.height * g.width;
  std::fill(target, target + count, T(0));
  const int64_t out_w = g.out_w(), stride = g.stride_w;
  if (stride == 1) {
    const int64_t out_h = g.out_h(), pitch = g.stride_h * padded_size(g).width;
    for_each_tap(target, col, g,
                 [=](const T* rows, T* first) { add_tap(first, rows, out_h, out_w, pitch); });
  } else {
    for_each_tap_row(target, col, g, [out_w, stride](const T* __restrict src, T* __restrict dst) {
      for (int64_t ow = 0; ow < out_w; ++ow) dst[ow * stride] += src[ow];
    });
  }
  if (g.padded()) crop_image(scratch, g, im);
}

template void im2col<float>(const float*, const ConvGeometry&, float*, float*);
template void im2col<double>(const double*, const ConvGeometry&, double*, double*);
template void col2im<float>(const float*, const ConvGeometry&, float*, float*);
template void col2im<double>(const double*, const ConvGeometry&, double*, double*);

}  // namespace cgdp
