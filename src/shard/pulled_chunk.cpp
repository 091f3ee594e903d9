// Copying a pulled chunk out of the buffers it was received into.
#include "cgdp/shard/pulled_chunk.hpp"

#include <cstring>

namespace cgdp {

void PulledChunk::copy_to(float* out) const {
  for (const Piece& p : pieces_)
    std::memcpy(out + p.offset, p.data, static_cast<size_t>(p.count) * sizeof(float));
}

}  // namespace cgdp
