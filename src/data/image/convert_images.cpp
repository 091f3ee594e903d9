// Writes one LMDB per split; keys "%08d_<path>" as convert_imageset writes them.
#include "cgdp/data/image/convert_images.hpp"

#include <cstdio>
#include <filesystem>

#include "cgdp/core/counter_rng.hpp"
#include "cgdp/core/error.hpp"
#include "cgdp/data/image/image_list.hpp"
#include "cgdp/data/image/lmdb_database.hpp"
#include "cgdp/data/image/lmdb_dataset.hpp"
#include "cgdp/io/file.hpp"

namespace cgdp {

namespace fs = std::filesystem;

namespace {

void shuffle(std::vector<ImageEntry>& entries, uint64_t seed) {
  const CounterRng rng{seed, hash_name("convert-shuffle")};
  for (size_t i = entries.size(); i > 1; --i)
    std::swap(entries[i - 1], entries[static_cast<size_t>(rng.uniform(i) * static_cast<double>(i))]);
}

std::string record(const ImageEntry& e, const ConvertOptions& o) {
  const std::string bytes = read_file(e.path);  // an IoError names the path itself
  const std::span<const uint8_t> view(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  const bool resize = o.resize_height > 0 && o.resize_width > 0;
  proto::Datum d;
  try {
    if (o.encoded && !resize) {
      (void)image_size(view);  // a file that is no image fails here, not in training
      d.set_data(bytes);
      d.set_encoded(true);
      d.set_label(e.label);
    } else {
      const int channels = o.gray ? 1 : 3;
      Image image = decode_image(view, channels, o.resize_height, o.resize_width);
      if (resize) image = resize_bilinear(image, o.resize_height, o.resize_width);
      if (o.encoded) {
        const std::vector<uint8_t> jpeg = encode_jpeg(image, 95);
        d.set_data(std::string(jpeg.begin(), jpeg.end()));
        d.set_encoded(true);
        d.set_label(e.label);
      } else {
        d = raw_datum(image, e.label);
      }
    }
  } catch (const DataError& err) {
    throw DataError(cat(e.path, ": ", err.what()));
  }
  return d.SerializeAsString();
}

ConvertedDatabase write_database(ImageList list, const std::string& out, const std::string& root,
                                 const ConvertOptions& o) {
  if (o.shuffle) shuffle(list.entries, o.seed);
  LmdbWriter db(out);
  char number[32];
  for (size_t i = 0; i < list.entries.size(); ++i) {
    std::snprintf(number, sizeof number, "%08zu_", i);
    const std::string relative = fs::relative(list.entries[i].path, root).string();
    db.put(number + relative, record(list.entries[i], o));
  }
  db.commit();
  return {out, static_cast<int64_t>(list.entries.size())};
}

std::string after(const std::string& spec, const std::string& scheme, const char* flag) {
  if (spec.rfind(scheme + ":", 0) != 0 || spec.size() == scheme.size() + 1)
    throw UsageError(cat(flag, " '", spec, "': expected ", scheme, ":PATH"));
  return spec.substr(scheme.size() + 1);
}

}  // namespace

std::vector<ConvertedDatabase> convert_images(const ConvertOptions& o) {
  const std::string out = after(o.to, "lmdb", "--to");
  if (o.from.rfind("folder:", 0) == 0) {
    const fs::path dir = after(o.from, "folder", "--from");
    for (const char* name : {"train_lmdb", "val_lmdb"})  // refuse before writing either
      if (std::error_code ec; fs::exists(fs::path(out) / name, ec))
        throw UsageError(cat((fs::path(out) / name).string(), ": already exists; give a new folder"));
    std::vector<ConvertedDatabase> done;
    for (const auto& [split, name] : {std::pair{"train", "train_lmdb"}, std::pair{"val", "val_lmdb"}}) {
      std::error_code ec;
      if (std::string(split) == "val" && !fs::is_directory(dir / split, ec)) continue;
      done.push_back(write_database(scan_image_folder((dir / split).string()),
                                    (fs::path(out) / name).string(), (dir / split).string(), o));
    }
    return done;
  }
  if (o.from.rfind("list:", 0) == 0) {
    const std::string argument = after(o.from, "list", "--from");
    const size_t comma = argument.find(',');
    const std::string file = argument.substr(0, comma);
    const std::string root = comma == std::string::npos ? fs::path(file).parent_path().string()
                                                        : argument.substr(comma + 1);
    return {write_database(read_image_list(file, root), out, root, o)};
  }
  throw UsageError(cat("--from '", o.from, "': expected folder:DIR or list:FILE[,ROOT]"));
}

}  // namespace cgdp
