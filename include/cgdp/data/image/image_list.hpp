// Which image files a split holds, with their labels: a class-per-folder tree (torchvision's
// ImageFolder) or a Caffe ImageData list file ("relative/path label" per line).
#pragma once

#include <string>
#include <vector>

namespace cgdp {

struct ImageEntry {
  std::string path;
  int label = 0;
};

struct ImageList {
  std::vector<ImageEntry> entries;
  std::vector<std::string> classes;  // folder names by label; empty for a list file
  int num_classes = 0;               // classes.size(), or the largest label + 1
  std::string source;                // for messages: the folder or list file
};

// DIR/<class>/<file> for every class folder, classes sorted by name (byte order, as Python's
// sorted()) and files sorted within each; .jpg/.jpeg/.png in any case. An empty class folder or
// no class folder at all is a DataError naming it.
ImageList scan_image_folder(const std::string& dir);

// Lines "path label" (the path may hold spaces: the label is after the last one), paths relative
// to `root` (default: the list file's folder). Blank lines are skipped; anything else that is not
// "path label" with a label in [0, 2^31) is a DataError naming file:line.
ImageList read_image_list(const std::string& file, const std::string& root = "");

}  // namespace cgdp
