// A chunk's global sum as the transport received it: each piece's floats stay in the buffer they
// were received into, and are read from there (no copy into a caller's buffer on the way).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace cgdp {

class PulledChunk {
 public:
  struct Piece {
    int64_t offset = 0;  // elements into the chunk
    const float* data = nullptr;
    int64_t count = 0;
  };
  PulledChunk() = default;
  // `owner` keeps the pieces' memory alive; copies of a PulledChunk share it.
  PulledChunk(std::vector<Piece> pieces, std::shared_ptr<const void> owner)
      : pieces_(std::move(pieces)), owner_(std::move(owner)) {}

  const std::vector<Piece>& pieces() const { return pieces_; }
  // Writes the whole chunk to `out`.
  void copy_to(float* out) const;

 private:
  std::vector<Piece> pieces_;
  std::shared_ptr<const void> owner_;
};

}  // namespace cgdp
