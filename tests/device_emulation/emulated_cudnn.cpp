// An emulation of the cuDNN calls cgdp makes (src/cuda/conv_passes.cpp, src/layers/*_cuda.cpp),
// for tests without a GPU: convolution's three passes and its bias, cudnnAddTensor, ReLU and the
// channel softmax, summed in double and rounded once to the output's type. Each call checks its
// arguments when issued and returns its status then; its computation is queued on the handle's
// stream (emulated_device.hpp), as a kernel is, except the algorithm searches', which block as
// cuDNN's do. It checks what a GPU would trip on: every operand and workspace inside one device
// allocation of the handle's GPU (emulated_device.hpp), descriptors that agree (types, channels and
// groups, the output's dims), and a workspace that covers what the algorithm needs. With beta = 0
// the old output is never read, as cuDNN documents. Anything cgdp does not use (other layouts,
// types, modes, algorithms) is refused as NOT_SUPPORTED, never computed some other way.
// It does not emulate cuDNN's own arithmetic (fp32 or TF32 sums, tensor cores): results are the
// exact sums rounded once. Its two algorithms per pass run the same code; algorithm 1 merely needs
// a workspace (an im2col buffer's size) and reports itself faster, so that cgdp's search takes it
// where its scratch cap allows and the workspace path is exercised. The timings are invented.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "emulated_device.hpp"

namespace emu = cgdp_device_emulation;

namespace {

// A packed 4-d tensor as a descriptor gives it: sizes, element strides (as its format lays it
// out) and element type. A filter is one too, with its K output channels as n.
struct Tensor4d {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t n_stride = 0, c_stride = 0, h_stride = 0, w_stride = 0;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;

  int64_t count() const { return n * c * h * w; }
  int64_t offset(int64_t i, int64_t j, int64_t k, int64_t l) const {
    return i * n_stride + j * c_stride + k * h_stride + l * w_stride;
  }
  size_t bytes() const;
};

// What cudnnSetConvolution2dDescriptor sets.
struct Convolution2d {
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
};

}  // namespace

// The opaque types cudnn.h declares.
struct cudnnContext {
  int device = 0;  // where the handle's work runs: the stream's GPU, or the creating thread's
  cudaStream_t stream = nullptr;  // where its computations run, in issue order
};
struct cudnnTensorStruct {
  std::optional<Tensor4d> layout;  // empty until set
};
struct cudnnFilterStruct {
  std::optional<Tensor4d> layout;
};
struct cudnnConvolutionStruct {
  std::optional<Convolution2d> geometry;
  int64_t groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // recorded and reported by the searches
};
struct cudnnActivationStruct {
  bool set = false;  // set only as ReLU propagating NaN: all cgdp asks for
  double coef = 0;   // unused by ReLU
};

namespace {

// A refused call, its problem recorded: the entry point returns the status.
struct Refusal {
  cudnnStatus_t status;
};

template <typename... Parts>
[[noreturn]] void refuse(cudnnStatus_t status, const Parts&... parts) {
  std::ostringstream what;
  (what << ... << parts);
  emu::report(what.str());
  throw Refusal{status};
}

// Runs an entry point's body; a refusal (or an exception, which must not cross the C boundary)
// becomes its status.
template <typename Body>
cudnnStatus_t guarded(const char* name, Body body) {
  try {
    body();
    return CUDNN_STATUS_SUCCESS;
  } catch (const Refusal& refusal) {
    return refusal.status;
  } catch (const std::bad_alloc&) {
    emu::report(std::string(name) + ": out of host memory");
    return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
  } catch (...) {
    emu::report(std::string(name) + ": unexpected exception in the emulation");
    return CUDNN_STATUS_INTERNAL_ERROR;
  }
}

// The function being emulated and the GPU and stream its handle runs on (-1: it takes no handle).
struct Call {
  std::string name;
  int device = -1;
  cudaStream_t stream = nullptr;
};

Call call_on(const char* name, cudnnHandle_t handle) {
  if (!handle) refuse(CUDNN_STATUS_BAD_PARAM, name, ": null handle");
  return {name, handle->device, handle->stream};
}

// Queues a checked call's computation on the handle's stream, after the work issued there before,
// as a kernel is. It runs after the call returned: `work` holds copies of all it reads but device
// memory (layouts, not descriptors; scalars' values; pointers).
template <typename F>
void run_on(const Call& call, F work) {
  emu::enqueue(call.stream, std::move(work));
}

// How a convolution pass runs: queued, or (an algorithm search's trial, whose output the caller
// reads on return) at once, after the stream's earlier work, as cuDNN's searches block.
enum class Run { queued, blocking };

template <typename F>
void run_pass(const Call& call, Run run, F work) {
  if (run == Run::queued) return run_on(call, std::move(work));
  emu::finish(call.stream);
  work();
}

template <typename Pointer>
void require_pointer(const Call& call, const char* what, Pointer pointer) {
  if (!pointer) refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": null ", what);
}

// ---- Element types ----

bool emulated_type(cudnnDataType_t type) {
  return type == CUDNN_DATA_FLOAT || type == CUDNN_DATA_DOUBLE || type == CUDNN_DATA_HALF ||
         type == CUDNN_DATA_BFLOAT16;
}

size_t element_bytes(cudnnDataType_t type) {
  return type == CUDNN_DATA_DOUBLE ? 8 : type == CUDNN_DATA_FLOAT ? 4 : 2;
}

const char* type_name(cudnnDataType_t type) {
  switch (type) {
    case CUDNN_DATA_FLOAT:
      return "FLOAT";
    case CUDNN_DATA_DOUBLE:
      return "DOUBLE";
    case CUDNN_DATA_HALF:
      return "HALF";
    case CUDNN_DATA_BFLOAT16:
      return "BFLOAT16";
    default:
      return "an unemulated type";
  }
}

std::string format_name(cudnnTensorFormat_t format) {
  if (format == CUDNN_TENSOR_NCHW) return "NCHW";
  if (format == CUDNN_TENSOR_NHWC) return "NHWC";
  return "format " + std::to_string(format);
}

double widen(float v) {
  return v;
}
double widen(double v) {
  return v;
}
double widen(__half v) {
  return __half2float(v);
}
double widen(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

// Straight from double: through float would round twice.
void narrow_into(float& slot, double v) {
  slot = static_cast<float>(v);
}
void narrow_into(double& slot, double v) {
  slot = v;
}
void narrow_into(__half& slot, double v) {
  slot = __double2half(v);
}
void narrow_into(__nv_bfloat16& slot, double v) {
  slot = __double2bfloat16(v);
}

template <typename V, typename Data>
auto typed(Data* data) {
  if constexpr (std::is_const_v<Data>)
    return static_cast<const V*>(data);
  else
    return static_cast<V*>(data);
}

// Calls f with `data` as a pointer to the elements `type` names (one of the emulated four).
template <typename Data, typename F>
void with_elements(cudnnDataType_t type, Data* data, F f) {
  switch (type) {
    case CUDNN_DATA_DOUBLE:
      return f(typed<double>(data));
    case CUDNN_DATA_HALF:
      return f(typed<__half>(data));
    case CUDNN_DATA_BFLOAT16:
      return f(typed<__nv_bfloat16>(data));
    default:
      return f(typed<float>(data));
  }
}

// A tensor's elements in double, in memory order.
std::vector<double> loaded(const void* data, const Tensor4d& t) {
  std::vector<double> values(static_cast<size_t>(t.count()));
  with_elements(t.type, data, [&](auto* v) {
    for (size_t i = 0; i < values.size(); ++i) values[i] = widen(v[i]);
  });
  return values;
}

// cuDNN's scaling: out = alpha * result + beta * out, read in double for DOUBLE outputs, else
// float.
struct Scaling {
  double alpha = 1, beta = 0;
};

Scaling scaling(const Call& call, const void* alpha, const void* beta, cudnnDataType_t output) {
  require_pointer(call, "alpha", alpha);
  require_pointer(call, "beta", beta);
  if (output == CUDNN_DATA_DOUBLE)
    return {*static_cast<const double*>(alpha), *static_cast<const double*>(beta)};
  return {*static_cast<const float*>(alpha), *static_cast<const float*>(beta)};
}

constexpr Scaling kOverwrite{1, 0};

// out = alpha * result + beta * out over a tensor's memory order; with beta = 0 the old contents
// are not read (they may be NaN).
void store_scaled(void* data, const Tensor4d& t, const std::vector<double>& result, Scaling s) {
  with_elements(t.type, data, [&](auto* v) {
    for (size_t i = 0; i < result.size(); ++i) {
      double out = s.alpha * result[i];
      if (s.beta != 0) out += s.beta * widen(v[i]);
      narrow_into(v[i], out);
    }
  });
}

// ---- Descriptors ----

size_t Tensor4d::bytes() const {
  return static_cast<size_t>(count()) * element_bytes(type);
}

std::string dims(const Tensor4d& t) {
  std::ostringstream s;
  s << t.n << "x" << t.c << "x" << t.h << "x" << t.w << " " << type_name(t.type);
  return s.str();
}

// `t` with the strides its format gives its sizes.
Tensor4d packed(Tensor4d t) {
  const bool channels_last = t.format == CUDNN_TENSOR_NHWC;
  t.w_stride = channels_last ? t.c : 1;
  t.h_stride = t.w_stride * t.w;
  t.c_stride = channels_last ? 1 : t.h_stride * t.h;
  t.n_stride = t.c * t.h * t.w;
  return t;
}

// A packed tensor (or filter) as the Set*4dDescriptor calls describe it.
Tensor4d layout_of(const Call& call, cudnnTensorFormat_t format, cudnnDataType_t type, int n, int c,
                   int h, int w) {
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    refuse(CUDNN_STATUS_NOT_SUPPORTED, call.name, ": ", format_name(format),
           " (only NCHW and NHWC)");
  if (!emulated_type(type))
    refuse(CUDNN_STATUS_NOT_SUPPORTED, call.name, ": data type ", type,
           " (only FLOAT, DOUBLE, HALF and BFLOAT16)");
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": dims ", n, "x", c, "x", h, "x", w);
  Tensor4d t{n, c, h, w};
  t.format = format;
  t.type = type;
  // cuDNN's limit for a tensor descriptor: 2 Giga-elements.
  if (t.count() > std::numeric_limits<int32_t>::max())
    refuse(CUDNN_STATUS_NOT_SUPPORTED, call.name, ": ", dims(t), " exceeds 2^31 elements");
  return packed(t);
}

// The layout a tensor or filter descriptor was set to.
template <typename Descriptor>
const Tensor4d& layout(const Call& call, const char* operand, Descriptor descriptor) {
  if (!descriptor) refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": null descriptor of ", operand);
  if (!descriptor->layout)
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": the descriptor of ", operand, " was never set");
  return *descriptor->layout;
}

template <typename Descriptor>
cudnnStatus_t create(const char* name, Descriptor* descriptor) {
  return guarded(name, [&] {
    require_pointer(Call{name}, "descriptor pointer", descriptor);
    *descriptor = new std::remove_pointer_t<Descriptor>{};
  });
}

// Destroying nothing is allowed, as free(nullptr) is.
template <typename Descriptor>
cudnnStatus_t destroy(Descriptor descriptor) {
  delete descriptor;
  return CUDNN_STATUS_SUCCESS;
}

// ---- Operand checks ----

// That `bytes` from `data` lie in memory of the handle's GPU (the runtime records why not).
void require_range(const Call& call, const char* operand, const void* data, size_t bytes) {
  if (!emu::device_range(data, bytes, call.device, call.name + ": " + operand))
    throw Refusal{CUDNN_STATUS_BAD_PARAM};
}

void require_operand(const Call& call, const char* operand, const void* data, const Tensor4d& t) {
  require_range(call, operand, data, t.bytes());
}

bool same_shape_and_type(const Tensor4d& a, const Tensor4d& b) {
  return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w && a.type == b.type;
}

// That an elementwise operation's operands have one shape and type.
void require_alike(const Call& call, const char* first, const Tensor4d& a, const char* second,
                   const Tensor4d& b) {
  if (!same_shape_and_type(a, b))
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": ", first, " is ", dims(a), ", ", second, " ",
           dims(b));
}

template <typename F>
void for_each_index(const Tensor4d& t, F f) {
  for (int64_t n = 0; n < t.n; ++n)
    for (int64_t c = 0; c < t.c; ++c)
      for (int64_t h = 0; h < t.h; ++h)
        for (int64_t w = 0; w < t.w; ++w) f(n, c, h, w);
}

// ---- Convolution ----

// One convolution as a pass sees it: x convolved with the filter w gives y.
struct ConvProblem {
  Tensor4d x, w, y;
  Convolution2d conv;
  int64_t groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

const cudnnConvolutionStruct& convolution(const Call& call, cudnnConvolutionDescriptor_t conv) {
  if (!conv) refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": null convolution descriptor");
  if (!conv->geometry)
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": the convolution descriptor was never set");
  return *conv;
}

// The output's size along one axis; 0 where the dilated filter outgrows the padded input.
int64_t output_size(int64_t input, int64_t pad, int64_t filter, int64_t dilation, int64_t stride) {
  const int64_t room = input + 2 * pad - ((filter - 1) * dilation + 1);
  return room < 0 ? 0 : room / stride + 1;
}

// y's layout as cudnnGetConvolution2dForwardOutputDim gives it (in x's format and type).
Tensor4d output_of(const Call& call, const Tensor4d& x, const Tensor4d& w,
                   const cudnnConvolutionStruct& conv) {
  const Convolution2d& g = *conv.geometry;
  if (x.c != w.c * conv.groups)
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": x has ", x.c, " channels, the filter takes ", w.c,
           " in each of ", conv.groups, " groups");
  if (w.n % conv.groups != 0)
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": the filter's ", w.n, " outputs do not split into ",
           conv.groups, " groups");
  Tensor4d y = x;
  y.c = w.n;
  y.h = output_size(x.h, g.pad_h, w.h, g.dilation_h, g.stride_h);
  y.w = output_size(x.w, g.pad_w, w.w, g.dilation_w, g.stride_w);
  if (y.h == 0 || y.w == 0)
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": the dilated ", w.h, "x", w.w,
           " filter does not fit x's padded ", x.h, "x", x.w);
  return packed(y);
}

// Which sums cuDNN runs for which operands: FLOAT and 16-bit data in float, DOUBLE in double.
bool compute_fits(cudnnDataType_t data, cudnnDataType_t compute) {
  return data == CUDNN_DATA_DOUBLE ? compute == CUDNN_DATA_DOUBLE : compute == CUDNN_DATA_FLOAT;
}

void require_one_type(const Call& call, const ConvProblem& p) {
  if (p.w.type != p.x.type || p.y.type != p.x.type)
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": x is ", type_name(p.x.type), ", w ",
           type_name(p.w.type), ", y ", type_name(p.y.type), ": one type for all three");
  if (!compute_fits(p.x.type, p.conv.compute))
    refuse(CUDNN_STATUS_NOT_SUPPORTED, call.name, ": ", type_name(p.x.type), " operands with a ",
           type_name(p.conv.compute), " compute type");
}

// cgdp lays x, w and y out alike; the emulation refuses a mix rather than guess what cuDNN runs.
void require_one_format(const Call& call, const ConvProblem& p) {
  if (p.w.format != p.x.format || p.y.format != p.x.format)
    refuse(CUDNN_STATUS_NOT_SUPPORTED, call.name, ": x ", format_name(p.x.format), ", w ",
           format_name(p.w.format), ", y ", format_name(p.y.format), ": one format for all three");
}

// A pass's descriptors, named as the forward pass's (dx's is x, dy's y), checked as cuDNN checks
// them.
ConvProblem conv_problem(const Call& call, cudnnTensorDescriptor_t x_desc,
                         cudnnFilterDescriptor_t w_desc, cudnnConvolutionDescriptor_t conv_desc,
                         cudnnTensorDescriptor_t y_desc) {
  const cudnnConvolutionStruct& conv = convolution(call, conv_desc);
  ConvProblem p;
  p.x = layout(call, "x", x_desc);
  p.w = layout(call, "w", w_desc);
  p.y = layout(call, "y", y_desc);
  p.conv = *conv.geometry;
  p.groups = conv.groups;
  p.math = conv.math;
  require_one_type(call, p);
  require_one_format(call, p);
  const Tensor4d expected = output_of(call, p.x, p.w, conv);
  if (expected.n != p.y.n || expected.c != p.y.c || expected.h != p.y.h || expected.w != p.y.w)
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": y is ", dims(p.y), ", the convolution of x ",
           dims(p.x), " by w ", dims(p.w), " gives ", dims(expected));
  return p;
}

// One image's input columns for one group (im2col): row (c, r, s) of the filter window, column
// (i, j) of the output, holding x[n, first + c, i*stride - pad + r*dilation, ...] or 0 (padding).
// The three passes then run as row-by-row products over contiguous columns.
struct Columns {
  int64_t rows = 0, cols = 0;
  std::vector<double> values;
  std::vector<int64_t> x_at;  // each entry's offset in x, -1 where it falls in the padding
};

Columns columns_of(const ConvProblem& p, int64_t n, int64_t group) {
  const Convolution2d& g = p.conv;
  Columns m;
  m.rows = p.w.c * p.w.h * p.w.w;
  m.cols = p.y.h * p.y.w;
  m.x_at.assign(static_cast<size_t>(m.rows * m.cols), -1);
  const int64_t first = group * p.w.c;
  for (int64_t c = 0; c < p.w.c; ++c)
    for (int64_t r = 0; r < p.w.h; ++r)
      for (int64_t s = 0; s < p.w.w; ++s) {
        int64_t* row_at = m.x_at.data() + ((c * p.w.h + r) * p.w.w + s) * m.cols;
        for (int64_t i = 0; i < p.y.h; ++i) {
          const int64_t row = i * g.stride_h - g.pad_h + r * g.dilation_h;
          if (row < 0 || row >= p.x.h) continue;
          for (int64_t j = 0; j < p.y.w; ++j) {
            const int64_t column = j * g.stride_w - g.pad_w + s * g.dilation_w;
            if (column >= 0 && column < p.x.w)
              row_at[i * p.y.w + j] = p.x.offset(n, first + c, row, column);
          }
        }
      }
  return m;
}

void gather(Columns& m, const std::vector<double>& x) {
  m.values.resize(m.x_at.size());
  for (size_t e = 0; e < m.x_at.size(); ++e) m.values[e] = m.x_at[e] < 0 ? 0.0 : x[m.x_at[e]];
}

// Filter k's weights in the columns' row order (c, r, s); a true convolution turns them round.
std::vector<double> filter_row(const ConvProblem& p, const std::vector<double>& w, int64_t k) {
  const bool flipped = p.conv.mode == CUDNN_CONVOLUTION;
  std::vector<double> row(static_cast<size_t>(p.w.c * p.w.h * p.w.w));
  size_t e = 0;
  for (int64_t c = 0; c < p.w.c; ++c)
    for (int64_t r = 0; r < p.w.h; ++r)
      for (int64_t s = 0; s < p.w.w; ++s)
        row[e++] = w[p.w.offset(k, c, flipped ? p.w.h - 1 - r : r, flipped ? p.w.w - 1 - s : s)];
  return row;
}

// Every filter's row (filter_row), by output channel.
std::vector<std::vector<double>> filter_rows(const ConvProblem& p, const std::vector<double>& w) {
  std::vector<std::vector<double>> rows;
  for (int64_t k = 0; k < p.w.n; ++k) rows.push_back(filter_row(p, w, k));
  return rows;
}

// Runs f(n, first output channel of the group, columns) for every image and group, the columns
// gathered from x when `x` is given (backward data needs only their offsets).
template <typename F>
void for_each_image_and_group(const ConvProblem& p, const std::vector<double>* x, F f) {
  const int64_t per_group = p.w.n / p.groups;
  for (int64_t n = 0; n < p.y.n; ++n)
    for (int64_t group = 0; group < p.groups; ++group) {
      Columns m = columns_of(p, n, group);
      if (x) gather(m, *x);
      f(n, group * per_group, m);
    }
}

// dy[n, k, :] as one contiguous row.
std::vector<double> output_row(const ConvProblem& p, const std::vector<double>& dy, int64_t n,
                               int64_t k) {
  std::vector<double> row(static_cast<size_t>(p.y.h * p.y.w));
  for (int64_t col = 0; col < p.y.h * p.y.w; ++col)
    row[col] = dy[p.y.offset(n, k, col / p.y.w, col % p.y.w)];
  return row;
}

// out[:] += a * in[:] (the passes' inner loop, over contiguous columns).
void add_scaled(double* out, double a, const double* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += a * in[i];
}

// y[n, k, :] = sum over rows of w_k[row] * columns[row, :].
std::vector<double> forward_sums(const ConvProblem& p, const std::vector<double>& x,
                                 const std::vector<double>& w) {
  std::vector<double> y(static_cast<size_t>(p.y.count()));
  const std::vector<std::vector<double>> rows = filter_rows(p, w);
  std::vector<double> out;
  for_each_image_and_group(p, &x, [&](int64_t n, int64_t first, const Columns& m) {
    for (int64_t k = first; k < first + p.w.n / p.groups; ++k) {
      out.assign(static_cast<size_t>(m.cols), 0.0);
      for (int64_t row = 0; row < m.rows; ++row)
        add_scaled(out.data(), rows[k][row], m.values.data() + row * m.cols, m.cols);
      for (int64_t col = 0; col < m.cols; ++col)
        y[p.y.offset(n, k, col / p.y.w, col % p.y.w)] = out[col];
    }
  });
  return y;
}

// The columns' gradient, sum over k of w_k[row] * dy[n, k, :], added into dx where each entry
// came from (col2im).
std::vector<double> backward_data_sums(const ConvProblem& p, const std::vector<double>& w,
                                       const std::vector<double>& dy) {
  std::vector<double> dx(static_cast<size_t>(p.x.count()));
  const std::vector<std::vector<double>> rows = filter_rows(p, w);
  std::vector<double> gradient;
  for_each_image_and_group(p, nullptr, [&](int64_t n, int64_t first, const Columns& m) {
    gradient.assign(m.x_at.size(), 0.0);
    for (int64_t k = first; k < first + p.w.n / p.groups; ++k) {
      const std::vector<double> g = output_row(p, dy, n, k);
      for (int64_t row = 0; row < m.rows; ++row)
        add_scaled(gradient.data() + row * m.cols, rows[k][row], g.data(), m.cols);
    }
    for (size_t e = 0; e < m.x_at.size(); ++e)
      if (m.x_at[e] >= 0) dx[m.x_at[e]] += gradient[e];
  });
  return dx;
}

// dw_k[row] = sum over images and columns of dy[n, k, col] * columns[row, col].
std::vector<double> backward_filter_sums(const ConvProblem& p, const std::vector<double>& x,
                                         const std::vector<double>& dy) {
  std::vector<double> dw(static_cast<size_t>(p.w.count()));
  const bool flipped = p.conv.mode == CUDNN_CONVOLUTION;
  for_each_image_and_group(p, &x, [&](int64_t n, int64_t first, const Columns& m) {
    for (int64_t k = first; k < first + p.w.n / p.groups; ++k) {
      const std::vector<double> g = output_row(p, dy, n, k);
      int64_t row = 0;
      for (int64_t c = 0; c < p.w.c; ++c)
        for (int64_t r = 0; r < p.w.h; ++r)
          for (int64_t s = 0; s < p.w.w; ++s, ++row) {
            const double* in = m.values.data() + row * m.cols;
            double sum = 0;
#pragma omp simd reduction(+ : sum)
            for (int64_t col = 0; col < m.cols; ++col) sum += g[col] * in[col];
            const int64_t fr = flipped ? p.w.h - 1 - r : r, fs = flipped ? p.w.w - 1 - s : s;
            dw[p.w.offset(k, c, fr, fs)] += sum;
          }
    }
  });
  return dw;
}

// ---- Algorithms ----

constexpr int kAlgorithms = 2;
// Invented timings: the algorithm with a workspace is the faster, as on a GPU it usually is.
constexpr float kMilliseconds[kAlgorithms] = {2.0f, 1.0f};

// Algorithm 0 needs no workspace; algorithm 1 one image's im2col columns.
size_t workspace_bytes(const Call& call, const ConvProblem& p, int algo) {
  if (algo == 0) return 0;
  if (algo == 1)
    return static_cast<size_t>(p.x.c * p.w.h * p.w.w * p.y.h * p.y.w) * element_bytes(p.x.type);
  refuse(CUDNN_STATUS_NOT_SUPPORTED, call.name, ": algorithm ", algo,
         " is not emulated (only 0 and 1)");
}

// That the workspace offered covers what `algo` needs, in memory of the handle's GPU.
void require_workspace(const Call& call, const ConvProblem& p, int algo, const void* workspace,
                       size_t offered) {
  const size_t needed = workspace_bytes(call, p, algo);
  if (needed == 0) return;
  if (offered < needed)
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": algorithm ", algo, " needs ", needed,
           " bytes of workspace, given ", offered);
  require_range(call, "workspace", workspace, offered);
}

void require_search(const Call& call, int requested, const int* returned, const void* results,
                    const void* workspace, size_t offered) {
  if (requested < 1) refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": requestedAlgoCount ", requested);
  require_pointer(call, "returnedAlgoCount", returned);
  require_pointer(call, "perfResults", results);
  if (offered > 0) require_range(call, "workspace", workspace, offered);
}

// One algorithm's entry in a search's results: it ran if the search's workspace covered it.
template <typename Perf>
Perf searched(const Call& call, const ConvProblem& p, int algo, size_t offered) {
  Perf r{};
  r.algo = static_cast<decltype(r.algo)>(algo);
  r.memory = workspace_bytes(call, p, algo);
  const bool ran = r.memory <= offered;
  r.status = ran ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
  r.time = ran ? kMilliseconds[algo] : -1.0f;
  r.determinism = CUDNN_DETERMINISTIC;
  r.mathType = p.math;
  return r;
}

// The search's results as cuDNN orders them (those that ran, fastest first; then the others),
// at most `requested` of them.
template <typename Perf>
void report_search(const Call& call, const ConvProblem& p, size_t offered, int requested,
                   int* returned, Perf* results) {
  const Perf plain = searched<Perf>(call, p, 0, offered);
  const Perf columns = searched<Perf>(call, p, 1, offered);
  const bool columns_ran = columns.status == CUDNN_STATUS_SUCCESS;
  const Perf ranked[kAlgorithms] = {columns_ran ? columns : plain, columns_ran ? plain : columns};
  *returned = std::min(requested, kAlgorithms);
  std::copy_n(ranked, *returned, results);
}

void report_workspace(const Call& call, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                      cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, int algo,
                      size_t* bytes) {
  const ConvProblem p = conv_problem(call, x, w, conv, y);
  require_pointer(call, "sizeInBytes", bytes);
  *bytes = workspace_bytes(call, p, algo);
}

// ---- The passes, each as cuDNN runs it after its checks ----

void run_forward(const Call& call, Run run, const ConvProblem& p, const void* x, const void* w,
                 void* y, Scaling s) {
  require_operand(call, "x", x, p.x);
  require_operand(call, "w", w, p.w);
  require_operand(call, "y", y, p.y);
  run_pass(call, run, [p, x, w, y, s] {
    store_scaled(y, p.y, forward_sums(p, loaded(x, p.x), loaded(w, p.w)), s);
  });
}

void run_backward_data(const Call& call, Run run, const ConvProblem& p, const void* w,
                       const void* dy, void* dx, Scaling s) {
  require_operand(call, "w", w, p.w);
  require_operand(call, "dy", dy, p.y);
  require_operand(call, "dx", dx, p.x);
  run_pass(call, run, [p, w, dy, dx, s] {
    store_scaled(dx, p.x, backward_data_sums(p, loaded(w, p.w), loaded(dy, p.y)), s);
  });
}

void run_backward_filter(const Call& call, Run run, const ConvProblem& p, const void* x,
                         const void* dy, void* dw, Scaling s) {
  require_operand(call, "x", x, p.x);
  require_operand(call, "dy", dy, p.y);
  require_operand(call, "dw", dw, p.w);
  run_pass(call, run, [p, x, dy, dw, s] {
    store_scaled(dw, p.w, backward_filter_sums(p, loaded(x, p.x), loaded(dy, p.y)), s);
  });
}

// ---- Bias, activation, softmax ----

// A where its dims are 1 broadcast over C: a bias of 1xCx1x1 onto NxCxHxW.
std::vector<double> broadcast(const Tensor4d& a, const std::vector<double>& values,
                              const Tensor4d& c) {
  std::vector<double> out(static_cast<size_t>(c.count()));
  for_each_index(c, [&](int64_t n, int64_t ch, int64_t h, int64_t w) {
    out[c.offset(n, ch, h, w)] =
        values[a.offset(a.n == 1 ? 0 : n, a.c == 1 ? 0 : ch, a.h == 1 ? 0 : h, a.w == 1 ? 0 : w)];
  });
  return out;
}

void require_broadcastable(const Call& call, const Tensor4d& a, const Tensor4d& c) {
  const auto fits = [](int64_t from, int64_t to) { return from == 1 || from == to; };
  if (a.type != c.type || !fits(a.n, c.n) || !fits(a.c, c.c) || !fits(a.h, c.h) || !fits(a.w, c.w))
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": A ", dims(a), " does not broadcast onto C ",
           dims(c));
}

// db[c] = the sum of dy over images and positions, at db's 1xCx1x1 offsets.
std::vector<double> bias_sums(const Tensor4d& dy, const std::vector<double>& values,
                              const Tensor4d& db) {
  std::vector<double> out(static_cast<size_t>(db.count()));
  for_each_index(dy, [&](int64_t n, int64_t c, int64_t h, int64_t w) {
    out[db.offset(0, c, 0, 0)] += values[dy.offset(n, c, h, w)];
  });
  return out;
}

void require_bias_of(const Call& call, const Tensor4d& dy, const Tensor4d& db) {
  if (db.type != dy.type || db.n != 1 || db.c != dy.c || db.h != 1 || db.w != 1)
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": db is ", dims(db), ", not the 1x", dy.c, "x1x1 ",
           type_name(dy.type), " bias of dy ", dims(dy));
}

// ReLU propagating NaN, as the only descriptor cgdp sets asks.
double relu(double v) {
  return std::isnan(v) || v > 0 ? v : 0.0;
}

std::vector<double> relu_values(const Tensor4d& x, const std::vector<double>& values,
                                const Tensor4d& y) {
  std::vector<double> out(static_cast<size_t>(y.count()));
  for_each_index(y, [&](int64_t n, int64_t c, int64_t h, int64_t w) {
    out[y.offset(n, c, h, w)] = relu(values[x.offset(n, c, h, w)]);
  });
  return out;
}

// The gradient passes where x > 0 (where y > 0: the same for ReLU, x NaN aside).
std::vector<double> relu_gradient(const Tensor4d& x, const std::vector<double>& x_values,
                                  const Tensor4d& dy, const std::vector<double>& dy_values,
                                  const Tensor4d& dx) {
  std::vector<double> out(static_cast<size_t>(dx.count()));
  for_each_index(dx, [&](int64_t n, int64_t c, int64_t h, int64_t w) {
    const bool passes = x_values[x.offset(n, c, h, w)] > 0;
    out[dx.offset(n, c, h, w)] = passes ? dy_values[dy.offset(n, c, h, w)] : 0.0;
  });
  return out;
}

void require_relu(const Call& call, cudnnActivationDescriptor_t activation) {
  if (!activation || !activation->set)
    refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": the activation descriptor was never set");
}

// The softmax over the channels at each (image, row, column), max-subtracted (ACCURATE).
std::vector<double> softmax_values(const Tensor4d& x, const std::vector<double>& values,
                                   const Tensor4d& y) {
  std::vector<double> out(static_cast<size_t>(y.count()));
  for (int64_t n = 0; n < x.n; ++n)
    for (int64_t h = 0; h < x.h; ++h)
      for (int64_t w = 0; w < x.w; ++w) {
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t c = 0; c < x.c; ++c) top = std::max(top, values[x.offset(n, c, h, w)]);
        double total = 0;
        for (int64_t c = 0; c < x.c; ++c) total += std::exp(values[x.offset(n, c, h, w)] - top);
        for (int64_t c = 0; c < x.c; ++c)
          out[y.offset(n, c, h, w)] = std::exp(values[x.offset(n, c, h, w)] - top) / total;
      }
  return out;
}

// dx = y * (dy - sum over channels of y * dy), at each (image, row, column).
std::vector<double> softmax_gradient(const Tensor4d& y, const std::vector<double>& y_values,
                                     const Tensor4d& dy, const std::vector<double>& dy_values,
                                     const Tensor4d& dx) {
  std::vector<double> out(static_cast<size_t>(dx.count()));
  for (int64_t n = 0; n < y.n; ++n)
    for (int64_t h = 0; h < y.h; ++h)
      for (int64_t w = 0; w < y.w; ++w) {
        double dot = 0;
        for (int64_t c = 0; c < y.c; ++c)
          dot += y_values[y.offset(n, c, h, w)] * dy_values[dy.offset(n, c, h, w)];
        for (int64_t c = 0; c < y.c; ++c)
          out[dx.offset(n, c, h, w)] =
              y_values[y.offset(n, c, h, w)] * (dy_values[dy.offset(n, c, h, w)] - dot);
      }
  return out;
}

void require_channel_softmax(const Call& call, cudnnSoftmaxAlgorithm_t algo,
                             cudnnSoftmaxMode_t mode) {
  if (algo != CUDNN_SOFTMAX_ACCURATE || mode != CUDNN_SOFTMAX_MODE_CHANNEL)
    refuse(CUDNN_STATUS_NOT_SUPPORTED, call.name, ": algorithm ", algo, ", mode ", mode,
           " (only ACCURATE over CHANNEL)");
}

// ---- Error strings ----

#define CGDP_STATUS_NAME(status) \
  case status:                   \
    return #status;

const char* status_name(cudnnStatus_t status) {
  switch (static_cast<int>(status)) {
    CGDP_STATUS_NAME(CUDNN_STATUS_SUCCESS)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_INITIALIZED)
    CGDP_STATUS_NAME(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
    CGDP_STATUS_NAME(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
    CGDP_STATUS_NAME(CUDNN_STATUS_DEPRECATED)
    CGDP_STATUS_NAME(CUDNN_STATUS_LICENSE_ERROR)
    CGDP_STATUS_NAME(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
    CGDP_STATUS_NAME(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
    CGDP_STATUS_NAME(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
    CGDP_STATUS_NAME(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
    CGDP_STATUS_NAME(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE)
    CGDP_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR)
    CGDP_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
    CGDP_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
    CGDP_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    CGDP_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    CGDP_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
    CGDP_STATUS_NAME(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
    CGDP_STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED)
    CGDP_STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
    CGDP_STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
    CGDP_STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
    CGDP_STATUS_NAME(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
    case 2001:
      return "CUDNN_STATUS_INVALID_VALUE";  // deprecated, but a value of its own
    default:
      return "CUDNN_UNKNOWN_STATUS";
  }
}

#undef CGDP_STATUS_NAME

}  // namespace

extern "C" {

// ---- Library, handle, errors ----

size_t cudnnGetVersion(void) {
  return CUDNN_VERSION;
}

// The status's name, and for a failure the problem the emulation recorded with it. The text
// stays valid until the thread's next call.
const char* cudnnGetErrorString(cudnnStatus_t status) {
  const char* name = status_name(status);
  if (status == CUDNN_STATUS_SUCCESS || emu::problem().empty()) return name;
  try {
    thread_local std::string message;
    message = std::string(name) + ": " + emu::problem();
    return message.c_str();
  } catch (...) {
    return name;
  }
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  return guarded("cudnnCreate", [&] {
    require_pointer(Call{"cudnnCreate"}, "handle pointer", handle);
    *handle = new cudnnContext{emu::current_device(), nullptr};
  });
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  return guarded("cudnnDestroy", [&] {
    call_on("cudnnDestroy", handle);
    delete handle;
  });
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  return guarded("cudnnSetStream", [&] {
    call_on("cudnnSetStream", handle);
    handle->device = emu::device_of(streamId);
    handle->stream = streamId;
  });
}

// ---- Descriptors ----

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc) {
  return create("cudnnCreateTensorDescriptor", tensorDesc);
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  return destroy(tensorDesc);
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                         cudnnTensorFormat_t format, cudnnDataType_t dataType,
                                         int n, int c, int h, int w) {
  return guarded("cudnnSetTensor4dDescriptor", [&] {
    const Call call{"cudnnSetTensor4dDescriptor"};
    require_pointer(call, "descriptor", tensorDesc);
    tensorDesc->layout = layout_of(call, format, dataType, n, c, h, w);
  });
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* filterDesc) {
  return create("cudnnCreateFilterDescriptor", filterDesc);
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  return destroy(filterDesc);
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc,
                                         cudnnDataType_t dataType, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
  return guarded("cudnnSetFilter4dDescriptor", [&] {
    const Call call{"cudnnSetFilter4dDescriptor"};
    require_pointer(call, "descriptor", filterDesc);
    filterDesc->layout = layout_of(call, format, dataType, k, c, h, w);
  });
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* convDesc) {
  return create("cudnnCreateConvolutionDescriptor", convDesc);
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  return destroy(convDesc);
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
  return guarded("cudnnSetConvolution2dDescriptor", [&] {
    const Call call{"cudnnSetConvolution2dDescriptor"};
    require_pointer(call, "descriptor", convDesc);
    if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0)
      refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": pad ", pad_h, ",", pad_w, " stride ", u, ",", v,
             " dilation ", dilation_h, ",", dilation_w);
    if (mode != CUDNN_CROSS_CORRELATION && mode != CUDNN_CONVOLUTION)
      refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": mode ", mode);
    if (computeType != CUDNN_DATA_FLOAT && computeType != CUDNN_DATA_DOUBLE)
      refuse(CUDNN_STATUS_NOT_SUPPORTED, call.name, ": compute type ", computeType,
             " (only FLOAT and DOUBLE)");
    convDesc->geometry =
        Convolution2d{pad_h, pad_w, u, v, dilation_h, dilation_w, mode, computeType};
  });
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int groupCount) {
  return guarded("cudnnSetConvolutionGroupCount", [&] {
    const Call call{"cudnnSetConvolutionGroupCount"};
    require_pointer(call, "descriptor", convDesc);
    if (groupCount < 1) refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": ", groupCount, " groups");
    convDesc->groups = groupCount;
  });
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t mathType) {
  return guarded("cudnnSetConvolutionMathType", [&] {
    const Call call{"cudnnSetConvolutionMathType"};
    require_pointer(call, "descriptor", convDesc);
    if (mathType != CUDNN_DEFAULT_MATH && mathType != CUDNN_TENSOR_OP_MATH &&
        mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && mathType != CUDNN_FMA_MATH)
      refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": math type ", mathType);
    convDesc->math = mathType;
  });
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc,
                                                    int* n, int* c, int* h, int* w) {
  return guarded("cudnnGetConvolution2dForwardOutputDim", [&] {
    const Call call{"cudnnGetConvolution2dForwardOutputDim"};
    const Tensor4d y = output_of(call, layout(call, "x", inputTensorDesc),
                                 layout(call, "w", filterDesc), convolution(call, convDesc));
    if (!n || !c || !h || !w) refuse(CUDNN_STATUS_BAD_PARAM, call.name, ": null output dim");
    *n = static_cast<int>(y.n), *c = static_cast<int>(y.c);
    *h = static_cast<int>(y.h), *w = static_cast<int>(y.w);
  });
}

cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* activationDesc) {
  return create("cudnnCreateActivationDescriptor", activationDesc);
}

cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t activationDesc) {
  return destroy(activationDesc);
}

cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t activationDesc,
                                           cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t reluNanOpt, double coef) {
  return guarded("cudnnSetActivationDescriptor", [&] {
    const Call call{"cudnnSetActivationDescriptor"};
    require_pointer(call, "descriptor", activationDesc);
    if (mode != CUDNN_ACTIVATION_RELU || reluNanOpt != CUDNN_PROPAGATE_NAN)
      refuse(CUDNN_STATUS_NOT_SUPPORTED, call.name, ": mode ", mode, ", NaN option ", reluNanOpt,
             " (only RELU propagating NaN)");
    activationDesc->set = true;
    activationDesc->coef = coef;
  });
}

// ---- Convolution ----

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    cudnnConvolutionFwdAlgo_t algo, size_t* sizeInBytes) {
  return guarded("cudnnGetConvolutionForwardWorkspaceSize", [&] {
    const Call call = call_on("cudnnGetConvolutionForwardWorkspaceSize", handle);
    report_workspace(call, xDesc, wDesc, convDesc, yDesc, algo, sizeInBytes);
  });
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
    cudnnConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes) {
  return guarded("cudnnGetConvolutionBackwardDataWorkspaceSize", [&] {
    const Call call = call_on("cudnnGetConvolutionBackwardDataWorkspaceSize", handle);
    report_workspace(call, dxDesc, wDesc, convDesc, dyDesc, algo, sizeInBytes);
  });
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t* sizeInBytes) {
  return guarded("cudnnGetConvolutionBackwardFilterWorkspaceSize", [&] {
    const Call call = call_on("cudnnGetConvolutionBackwardFilterWorkspaceSize", handle);
    report_workspace(call, xDesc, gradDesc, convDesc, dyDesc, algo, sizeInBytes);
  });
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t yDesc, void* y, const int requestedAlgoCount,
    int* returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t* perfResults, void* workSpace,
    size_t workSpaceSizeInBytes) {
  return guarded("cudnnFindConvolutionForwardAlgorithmEx", [&] {
    const Call call = call_on("cudnnFindConvolutionForwardAlgorithmEx", handle);
    const ConvProblem p = conv_problem(call, xDesc, wDesc, convDesc, yDesc);
    require_search(call, requestedAlgoCount, returnedAlgoCount, perfResults, workSpace,
                   workSpaceSizeInBytes);
    run_forward(call, Run::blocking, p, x, w, y, kOverwrite);
    report_search(call, p, workSpaceSizeInBytes, requestedAlgoCount, returnedAlgoCount,
                  perfResults);
  });
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const void* w,
    const cudnnTensorDescriptor_t dyDesc, const void* dy,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc, void* dx,
    const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t* perfResults, void* workSpace, size_t workSpaceSizeInBytes) {
  return guarded("cudnnFindConvolutionBackwardDataAlgorithmEx", [&] {
    const Call call = call_on("cudnnFindConvolutionBackwardDataAlgorithmEx", handle);
    const ConvProblem p = conv_problem(call, dxDesc, wDesc, convDesc, dyDesc);
    require_search(call, requestedAlgoCount, returnedAlgoCount, perfResults, workSpace,
                   workSpaceSizeInBytes);
    run_backward_data(call, Run::blocking, p, w, dy, dx, kOverwrite);
    report_search(call, p, workSpaceSizeInBytes, requestedAlgoCount, returnedAlgoCount,
                  perfResults);
  });
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnTensorDescriptor_t dyDesc, const void* y,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc, void* dw,
    const int requestedAlgoCount, int* returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t* perfResults, void* workSpace,
    size_t workSpaceSizeInBytes) {
  return guarded("cudnnFindConvolutionBackwardFilterAlgorithmEx", [&] {
    const Call call = call_on("cudnnFindConvolutionBackwardFilterAlgorithmEx", handle);
    const ConvProblem p = conv_problem(call, xDesc, dwDesc, convDesc, dyDesc);
    require_search(call, requestedAlgoCount, returnedAlgoCount, perfResults, workSpace,
                   workSpaceSizeInBytes);
    // `y` is dy (the header's name).
    run_backward_filter(call, Run::blocking, p, x, y, dw, kOverwrite);
    report_search(call, p, workSpaceSizeInBytes, requestedAlgoCount, returnedAlgoCount,
                  perfResults);
  });
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void* x,
                                      const cudnnFilterDescriptor_t wDesc, const void* w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void* workSpace,
                                      size_t workSpaceSizeInBytes, const void* beta,
                                      const cudnnTensorDescriptor_t yDesc, void* y) {
  return guarded("cudnnConvolutionForward", [&] {
    const Call call = call_on("cudnnConvolutionForward", handle);
    const ConvProblem p = conv_problem(call, xDesc, wDesc, convDesc, yDesc);
    require_workspace(call, p, algo, workSpace, workSpaceSizeInBytes);
    run_forward(call, Run::queued, p, x, w, y, scaling(call, alpha, beta, p.y.type));
  });
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void* w,
                                           const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workSpace,
                                           size_t workSpaceSizeInBytes, const void* beta,
                                           const cudnnTensorDescriptor_t dxDesc, void* dx) {
  return guarded("cudnnConvolutionBackwardData", [&] {
    const Call call = call_on("cudnnConvolutionBackwardData", handle);
    const ConvProblem p = conv_problem(call, dxDesc, wDesc, convDesc, dyDesc);
    require_workspace(call, p, algo, workSpace, workSpaceSizeInBytes);
    run_backward_data(call, Run::queued, p, w, dy, dx, scaling(call, alpha, beta, p.x.type));
  });
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void* x,
                                             const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void* workSpace,
                                             size_t workSpaceSizeInBytes, const void* beta,
                                             const cudnnFilterDescriptor_t dwDesc, void* dw) {
  return guarded("cudnnConvolutionBackwardFilter", [&] {
    const Call call = call_on("cudnnConvolutionBackwardFilter", handle);
    const ConvProblem p = conv_problem(call, xDesc, dwDesc, convDesc, dyDesc);
    require_workspace(call, p, algo, workSpace, workSpaceSizeInBytes);
    run_backward_filter(call, Run::queued, p, x, dy, dw, scaling(call, alpha, beta, p.w.type));
  });
}

cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t handle, const void* alpha,
                                           const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const void* beta, const cudnnTensorDescriptor_t dbDesc,
                                           void* db) {
  return guarded("cudnnConvolutionBackwardBias", [&] {
    const Call call = call_on("cudnnConvolutionBackwardBias", handle);
    const Tensor4d dy_layout = layout(call, "dy", dyDesc);
    const Tensor4d db_layout = layout(call, "db", dbDesc);
    require_bias_of(call, dy_layout, db_layout);
    const Scaling s = scaling(call, alpha, beta, db_layout.type);
    require_operand(call, "dy", dy, dy_layout);
    require_operand(call, "db", db, db_layout);
    run_on(call, [dy_layout, dy, db_layout, db, s] {
      store_scaled(db, db_layout, bias_sums(dy_layout, loaded(dy, dy_layout), db_layout), s);
    });
  });
}

// ---- Tensors, activation, softmax ----

cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void* alpha,
                             const cudnnTensorDescriptor_t aDesc, const void* A, const void* beta,
                             const cudnnTensorDescriptor_t cDesc, void* C) {
  return guarded("cudnnAddTensor", [&] {
    const Call call = call_on("cudnnAddTensor", handle);
    const Tensor4d a = layout(call, "A", aDesc);
    const Tensor4d c = layout(call, "C", cDesc);
    require_broadcastable(call, a, c);
    const Scaling s = scaling(call, alpha, beta, c.type);
    require_operand(call, "A", A, a);
    require_operand(call, "C", C, c);
    run_on(call, [a, A, c, C, s] { store_scaled(C, c, broadcast(a, loaded(A, a), c), s); });
  });
}

cudnnStatus_t cudnnActivationForward(cudnnHandle_t handle,
                                     cudnnActivationDescriptor_t activationDesc, const void* alpha,
                                     const cudnnTensorDescriptor_t xDesc, const void* x,
                                     const void* beta, const cudnnTensorDescriptor_t yDesc,
                                     void* y) {
  return guarded("cudnnActivationForward", [&] {
    const Call call = call_on("cudnnActivationForward", handle);
    require_relu(call, activationDesc);
    const Tensor4d x_layout = layout(call, "x", xDesc);
    const Tensor4d y_layout = layout(call, "y", yDesc);
    require_alike(call, "x", x_layout, "y", y_layout);
    const Scaling s = scaling(call, alpha, beta, y_layout.type);
    require_operand(call, "x", x, x_layout);
    require_operand(call, "y", y, y_layout);
    run_on(call, [x_layout, x, y_layout, y, s] {
      store_scaled(y, y_layout, relu_values(x_layout, loaded(x, x_layout), y_layout), s);
    });
  });
}

cudnnStatus_t cudnnActivationBackward(cudnnHandle_t handle,
                                      cudnnActivationDescriptor_t activationDesc, const void* alpha,
                                      const cudnnTensorDescriptor_t yDesc, const void* y,
                                      const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                      const cudnnTensorDescriptor_t xDesc, const void* x,
                                      const void* beta, const cudnnTensorDescriptor_t dxDesc,
                                      void* dx) {
  return guarded("cudnnActivationBackward", [&] {
    const Call call = call_on("cudnnActivationBackward", handle);
    require_relu(call, activationDesc);
    const Tensor4d y_layout = layout(call, "y", yDesc);
    const Tensor4d dy_layout = layout(call, "dy", dyDesc);
    const Tensor4d x_layout = layout(call, "x", xDesc);
    const Tensor4d dx_layout = layout(call, "dx", dxDesc);
    require_alike(call, "y", y_layout, "dy", dy_layout);
    require_alike(call, "y", y_layout, "x", x_layout);
    require_alike(call, "y", y_layout, "dx", dx_layout);
    const Scaling s = scaling(call, alpha, beta, dx_layout.type);
    require_operand(call, "y", y, y_layout);
    require_operand(call, "dy", dy, dy_layout);
    require_operand(call, "x", x, x_layout);
    require_operand(call, "dx", dx, dx_layout);
    // y is checked but not read: ReLU's gradient follows x.
    run_on(call, [x_layout, x, dy_layout, dy, dx_layout, dx, s] {
      store_scaled(
          dx, dx_layout,
          relu_gradient(x_layout, loaded(x, x_layout), dy_layout, loaded(dy, dy_layout), dx_layout),
          s);
    });
  });
}

cudnnStatus_t cudnnSoftmaxForward(cudnnHandle_t handle, cudnnSoftmaxAlgorithm_t algo,
                                  cudnnSoftmaxMode_t mode, const void* alpha,
                                  const cudnnTensorDescriptor_t xDesc, const void* x,
                                  const void* beta, const cudnnTensorDescriptor_t yDesc, void* y) {
  return guarded("cudnnSoftmaxForward", [&] {
    const Call call = call_on("cudnnSoftmaxForward", handle);
    require_channel_softmax(call, algo, mode);
    const Tensor4d x_layout = layout(call, "x", xDesc);
    const Tensor4d y_layout = layout(call, "y", yDesc);
    require_alike(call, "x", x_layout, "y", y_layout);
    const Scaling s = scaling(call, alpha, beta, y_layout.type);
    require_operand(call, "x", x, x_layout);
    require_operand(call, "y", y, y_layout);
    run_on(call, [x_layout, x, y_layout, y, s] {
      store_scaled(y, y_layout, softmax_values(x_layout, loaded(x, x_layout), y_layout), s);
    });
  });
}

cudnnStatus_t cudnnSoftmaxBackward(cudnnHandle_t handle, cudnnSoftmaxAlgorithm_t algo,
                                   cudnnSoftmaxMode_t mode, const void* alpha,
                                   const cudnnTensorDescriptor_t yDesc, const void* y,
                                   const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                   const void* beta, const cudnnTensorDescriptor_t dxDesc,
                                   void* dx) {
  return guarded("cudnnSoftmaxBackward", [&] {
    const Call call = call_on("cudnnSoftmaxBackward", handle);
    require_channel_softmax(call, algo, mode);
    const Tensor4d y_layout = layout(call, "y", yDesc);
    const Tensor4d dy_layout = layout(call, "dy", dyDesc);
    const Tensor4d dx_layout = layout(call, "dx", dxDesc);
    require_alike(call, "y", y_layout, "dy", dy_layout);
    require_alike(call, "y", y_layout, "dx", dx_layout);
    const Scaling s = scaling(call, alpha, beta, dx_layout.type);
    require_operand(call, "y", y, y_layout);
    require_operand(call, "dy", dy, dy_layout);
    require_operand(call, "dx", dx, dx_layout);
    run_on(call, [y_layout, y, dy_layout, dy, dx_layout, dx, s] {
      store_scaled(dx, dx_layout,
                   softmax_gradient(y_layout, loaded(y, y_layout), dy_layout, loaded(dy, dy_layout),
                                    dx_layout),
                   s);
    });
  });
}

}  // extern "C"
