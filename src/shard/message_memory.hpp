// The shard transport's message buffers: kept in malloc's heap, where freed ones are reused
// instead of fresh mappings that the kernel must fault in and zero for every message; and read
// as floats only where aligned.
#pragma once

#include <zmq.hpp>

namespace cgdp {

// Process-wide, once: glibc's mmap threshold is fixed at 4 MiB (so every piece, 1 MiB by
// default, comes from the heap) and its trim threshold at 256 MiB (so a freed piece's memory is
// kept for the next one, not returned to the kernel). Without it about a quarter of the
// transport's CPU time went to page faults and zeroing. No-op on other C libraries.
void keep_message_buffers_in_heap();

// `message` itself when its data may be read as floats; else an aligned copy. Small frames may
// sit unaligned inside ZeroMQ's receive batch; large ones have buffers of their own.
zmq::message_t aligned_floats(zmq::message_t message);

}  // namespace cgdp
