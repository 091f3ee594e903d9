// Building and checking the shard protocol's fixed header frame.
#include "cgdp/shard/protocol.hpp"

#include <cstring>

#include "cgdp/core/error.hpp"

namespace cgdp {

MessageHeader make_header(MessageKind kind, int sender, int range, int64_t iteration,
                          int64_t offset, int64_t count) {
  MessageHeader h;
  h.kind = static_cast<uint16_t>(kind);
  h.sender = sender;
  h.range = range;
  h.iteration = iteration;
  h.offset = offset;
  h.count = count;
  return h;
}

std::string parse_header(const void* frame, size_t size, MessageHeader& header) {
  if (size != sizeof(MessageHeader))
    return cat("header frame of ", size, " bytes; expected ", sizeof(MessageHeader));
  std::memcpy(&header, frame, sizeof header);  // the frame may be unaligned
  if (header.magic != kShardMagic) return cat("bad magic 0x", std::hex, header.magic);
  if (header.version != kProtocolVersion)
    return cat("protocol version ", header.version, "; this build speaks ", kProtocolVersion);
  if (header.kind < 1 || header.kind > kLastKind) return cat("unknown ", kind_name(header.kind));
  return "";
}

std::string kind_name(uint16_t kind) {
  switch (static_cast<MessageKind>(kind)) {
    case MessageKind::kHello:
      return "hello";
    case MessageKind::kWelcome:
      return "welcome";
    case MessageKind::kPush:
      return "push";
    case MessageKind::kSum:
      return "sum";
    case MessageKind::kError:
      return "error";
    case MessageKind::kBye:
      return "bye";
    case MessageKind::kChallenge:
      return "challenge";
    case MessageKind::kProof:
      return "proof";
  }
  return cat("kind ", kind);
}

}  // namespace cgdp
