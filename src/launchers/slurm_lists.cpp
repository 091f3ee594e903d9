// Slurm list expansion: split at the commas outside brackets, then expand each name's brackets.
#include "cgdp/launchers/slurm_lists.hpp"

#include <charconv>

#include "cgdp/core/error.hpp"

namespace cgdp {

namespace {

[[noreturn]] void bad(std::string_view what, std::string_view list, const std::string& why) {
  throw UsageError(cat(what, "='", list, "': ", why));
}

// Splits at the commas that are not inside brackets.
std::vector<std::string_view> top_level_items(std::string_view list, std::string_view what) {
  std::vector<std::string_view> items;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[' && ++depth > 1) bad(what, list, "a bracket inside a bracket");
    if (c == ']' && --depth < 0) bad(what, list, "a ']' without its '['");
    if (c == ',' && depth == 0) {
      if (i == start) bad(what, list, "an empty name");
      items.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) bad(what, list, "a '[' without its ']'");
  return items;
}

int64_t number(std::string_view text, std::string_view what, std::string_view list) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    bad(what, list, cat("'", text, "' is not a number"));
  return value;
}

// The numbers a bracket's body stands for, as text with their padding: "01-03,7".
std::vector<std::string> bracket_values(std::string_view body, std::string_view what, std::string_view list) {
  std::vector<std::string> values;
  size_t start = 0;
  for (size_t i = 0; i <= body.size(); ++i) {
    if (i < body.size() && body[i] != ',') continue;
    const std::string_view part = body.substr(start, i - start);
    start = i + 1;
    const size_t dash = part.find('-');
    const std::string_view low = part.substr(0, dash);
    const int64_t from = number(low, what, list);
    const int64_t to = dash == std::string_view::npos ? from : number(part.substr(dash + 1), what, list);
    if (to < from) bad(what, list, cat("the range ", part, " runs backwards"));
    if (to - from > 1'000'000) bad(what, list, cat("the range ", part, " is too long"));
    for (int64_t v = from; v <= to; ++v) {
      std::string text = std::to_string(v);
      if (text.size() < low.size()) text.insert(0, low.size() - text.size(), '0');
      values.push_back(std::move(text));
    }
  }
  return values;
}

// One name with any number of brackets, multiplied out left to right.
void expand_name(std::string_view name, std::string_view what, std::string_view list,
                 std::vector<std::string>& out) {
  std::vector<std::string> partial{""};
  size_t i = 0;
  while (i < name.size()) {
    const size_t open = name.find('[', i);
    const std::string_view text = name.substr(i, open == std::string_view::npos ? name.npos : open - i);
    for (std::string& p : partial) p += text;
    if (open == std::string_view::npos) break;
    const size_t close = name.find(']', open);
    std::vector<std::string> next;
    for (const std::string& value : bracket_values(name.substr(open + 1, close - open - 1), what, list))
      for (const std::string& p : partial) next.push_back(p + value);
    // Keep the left part's order outermost: a[1-2]b[1-2] is a1b1 a1b2 a2b1 a2b2.
    std::vector<std::string> ordered;
    const size_t values = next.size() / partial.size();
    for (size_t p = 0; p < partial.size(); ++p)
      for (size_t v = 0; v < values; ++v) ordered.push_back(next[v * partial.size() + p]);
    partial = std::move(ordered);
    i = close + 1;
  }
  out.insert(out.end(), partial.begin(), partial.end());
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(std::string_view list, std::string_view what) {
  std::vector<std::string> names;
  for (std::string_view item : top_level_items(list, what)) expand_name(item, what, list, names);
  return names;
}

std::vector<int> expand_slurm_tasks_per_node(std::string_view list, std::string_view what) {
  std::vector<int> tasks;
  for (std::string_view item : top_level_items(list, what)) {
    const size_t paren = item.find("(x");
    const int64_t count = number(item.substr(0, paren), what, list);
    int64_t repeat = 1;
    if (paren != std::string_view::npos) {
      if (item.back() != ')') bad(what, list, cat("'", item, "' is not N or N(xM)"));
      repeat = number(item.substr(paren + 2, item.size() - paren - 3), what, list);
    }
    if (count < 1 || repeat < 1) bad(what, list, cat("'", item, "' counts no tasks"));
    tasks.insert(tasks.end(), static_cast<size_t>(repeat), static_cast<int>(count));
  }
  return tasks;
}

}  // namespace cgdp
