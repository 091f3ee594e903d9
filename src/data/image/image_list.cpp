// Folder scans and list files: every problem names the folder or file:line.
#include "cgdp/data/image/image_list.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>

#include "cgdp/core/error.hpp"
#include "cgdp/io/file.hpp"

namespace cgdp {

namespace fs = std::filesystem;

namespace {

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

std::vector<fs::path> sorted_children(const fs::path& dir, bool directories) {
  std::vector<fs::path> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw DataError(cat(dir.string(), ": cannot list the folder (", ec.message(), ")"));
  for (const fs::directory_entry& e : it) {
    const bool is_dir = e.is_directory(ec);
    if (directories ? is_dir : (!is_dir && is_image_name(e.path()))) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    return a.filename().string() < b.filename().string();
  });
  return out;
}

}  // namespace

ImageList scan_image_folder(const std::string& dir) {
  ImageList list;
  list.source = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw DataError(cat(dir, ": no such folder (expected DIR/<class>/<image> files)"));
  for (const fs::path& class_dir : sorted_children(dir, true)) {
    const int label = static_cast<int>(list.classes.size());
    const std::vector<fs::path> files = sorted_children(class_dir, false);
    if (files.empty())
      throw DataError(cat(class_dir.string(), ": class folder without .jpg, .jpeg or .png files"));
    list.classes.push_back(class_dir.filename().string());
    for (const fs::path& f : files) list.entries.push_back({f.string(), label});
  }
  if (list.classes.empty())
    throw DataError(cat(dir, ": no class folders (expected DIR/<class>/<image> files)"));
  list.num_classes = static_cast<int>(list.classes.size());
  return list;
}

ImageList read_image_list(const std::string& file, const std::string& root) {
  check_regular_input(file);
  std::ifstream in(file);
  if (!in) throw DataError(cat(file, ": cannot open the image list"));
  const fs::path base = root.empty() ? fs::path(file).parent_path() : fs::path(root);
  ImageList list;
  list.source = file;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    const size_t space = line.find_last_of(' ');
    int label = -1;
    const char* first = line.data() + (space == std::string::npos ? 0 : space + 1);
    const char* last = line.data() + line.size();
    const auto [end, error] = std::from_chars(first, last, label);
    if (space == std::string::npos || space == 0 || error != std::errc() || end != last || label < 0)
      throw DataError(cat(file, ":", number, ": expected 'relative/path label' with a label >= 0, got '",
                          line.substr(0, 120), "'"));
    list.entries.push_back({(base / line.substr(0, space)).string(), label});
    list.num_classes = std::max(list.num_classes, label + 1);
  }
  if (list.entries.empty()) throw DataError(cat(file, ": the image list has no entries"));
  return list;
}

}  // namespace cgdp
