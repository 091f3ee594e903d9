// glibc malloc settings for the shard transport's message buffers, and their alignment.
#include "shard/message_memory.hpp"

#include <cstdint>
#include <mutex>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace cgdp {

void keep_message_buffers_in_heap() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  });
#endif
}

zmq::message_t aligned_floats(zmq::message_t message) {
  if (reinterpret_cast<uintptr_t>(message.data()) % alignof(float) == 0) return message;
  return zmq::message_t(message.data(), message.size());
}

}  // namespace cgdp
