// A JSON library error as a user reads it: nlohmann's message without its
// "[json.exception.parse_error.101] " tag, which names the library's internals, not the file.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace cgdp {

inline std::string json_message(const std::exception& e) {
  std::string_view message = e.what();
  if (message.starts_with("[json.exception."))
    if (const size_t end = message.find("] "); end != std::string_view::npos)
      message.remove_prefix(end + 2);
  return std::string(message);
}

}  // namespace cgdp
