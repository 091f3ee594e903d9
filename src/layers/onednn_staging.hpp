// What the oneDNN layers (onednn_convolution.cpp, onednn_inner_product.cpp) share: the CPU engine
// and a tensor staged between the caller's plain fp32 layout and the one a primitive chose.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <optional>

namespace cgdp::onednn {

using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

inline dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

inline memory::desc plain(const memory::dims& dims, Tag tag) {
  return memory::desc(dims, Type::f32, tag);
}
// Lets the primitive choose the layout (oneDNN's blocked ones, NHWC for AMX).
inline memory::desc any(const memory::dims& dims, Type type = Type::f32) {
  return memory::desc(dims, type, Tag::any);
}

// Attributes of a primitive run on the scratchpad its caller passes: oneDNN's cache hands
// identical layers (one per CPU device) the same primitive, which they may run at the same time.
inline dnnl::primitive_attr caller_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Post-ops that add a result to what its destination holds, as Caffe's gradients accumulate.
inline dnnl::post_ops adding() {
  dnnl::post_ops add;
  add.append_sum(1.f);
  return add;
}

// A tensor as the caller holds it (`user`, plain layout, the caller's buffer bound per call) and
// as a primitive wants it (`inner`: the same memory when the layouts agree, else a buffer of its
// own with reorders to and from it). An `accumulate`d result is added to the caller's buffer by
// its reorder (always a buffer of its own then), as Caffe's gradients accumulate.
struct Staged {
  memory user, inner;
  std::optional<dnnl::reorder> to_inner, to_user;

  Staged(const memory::desc& plain, const memory::desc& wanted, bool read, bool written,
         bool accumulate = false)
      : user(plain, cpu_engine(), DNNL_MEMORY_NONE) {
    if (plain == wanted && !accumulate) {
      inner = user;
      return;
    }
    inner = memory(wanted, cpu_engine());
    if (read) to_inner = dnnl::reorder(user, inner);
    if (!written) return;
    dnnl::primitive_attr attr;
    if (accumulate) attr.set_post_ops(adding());
    to_user = dnnl::reorder(inner, user, attr);
  }
  // Binds `data` and brings it into the primitive's layout.
  memory& load(dnnl::stream& s, const void* data) {
    user.set_data_handle(const_cast<void*>(data));
    if (to_inner) to_inner->execute(s, user, inner);
    return inner;
  }
  // Binds `data` as where the result goes; store() puts it there.
  memory& target(void* data) {
    user.set_data_handle(data);
    return inner;
  }
  void store(dnnl::stream& s) {
    if (to_user) to_user->execute(s, inner, user);
  }
};

}  // namespace cgdp::onednn
