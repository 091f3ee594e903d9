// Peer access per pair, both directions, summarised in one line.
#include "cgdp/sync/peer_access.hpp"

#include <set>

#include "cgdp/core/error.hpp"

namespace cgdp {

std::string enable_peer_access(const std::vector<std::pair<Device*, Device*>>& pairs) {
  std::set<std::pair<std::string, std::string>> direct, staged;
  for (const auto& [a, b] : pairs) {
    const PeerAccess there = a->enable_peer_access(*b);
    const PeerAccess back = b->enable_peer_access(*a);
    if (there == PeerAccess::NotApplicable && back == PeerAccess::NotApplicable) continue;
    std::string first = a->name(), second = b->name();
    if (second < first) std::swap(first, second);
    const std::pair key{first, second};
    if (there == PeerAccess::Enabled && back == PeerAccess::Enabled)
      direct.insert(key);
    else
      staged.insert(key);
  }
  const auto list = [](const auto& links) {
    std::string s;
    for (const auto& [a, b] : links) s += cat(s.empty() ? "" : ", ", a, "<->", b);
    return s;
  };
  std::string line;
  if (!direct.empty()) line = cat("ps0: peer access on for ", list(direct));
  if (!staged.empty())
    line += cat(line.empty() ? "ps0: " : "; ", "no peer access for ", list(staged),
                " (their copies go through host memory)");
  return line;
}

}  // namespace cgdp
