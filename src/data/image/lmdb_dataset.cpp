// Datum records to samples; the class count is read from every record's label at open.
#include "cgdp/data/image/lmdb_dataset.hpp"

#include <algorithm>

#include "cgdp/core/error.hpp"

namespace cgdp {

LmdbDataset::LmdbDataset(const std::string& path, ImageOptions options, std::string description)
    : ImageSourceDataset(std::move(options), std::move(description)), db_(path) {
  if (options_.classes <= 0)
    throw DataError(cat(path, ": no class count for the labels (the model gives it)"));
  try {
    (void)datum(0);  // a database that is not Caffe's fails now, not at the first batch
  } catch (const DataError& e) {
    throw DataError(cat(where(0), ": ", e.what()));
  }
}

proto::Datum LmdbDataset::datum(int64_t index) const {
  return parse_datum(db_.value(static_cast<size_t>(index)));
}

void LmdbDataset::load(int64_t index, int& label, const DecodePlan& plan, Image& out) const {
  const proto::Datum d = datum(index);
  if (d.label() < 0 || d.label() >= options_.classes)
    throw DataError(cat("label ", d.label(), " is outside the model's ", options_.classes, " classes"));
  label = d.label();
  if (!d.encoded()) return datum_image(d, options_.channels, 0, 0, out);
  const std::string& data = d.data();  // Caffe leaves an encoded Datum's sizes unset: read the header
  const auto [stored_height, stored_width] =
      image_size({reinterpret_cast<const uint8_t*>(data.data()), data.size()});
  const DecodeRequest request = plan(stored_height, stored_width);
  decode_image({reinterpret_cast<const uint8_t*>(data.data()), data.size()}, options_.channels,
               request.min_height, request.min_width, out, request.region);
}

}  // namespace cgdp
