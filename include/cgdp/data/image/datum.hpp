// Caffe's Datum records, the values of its image LMDBs: raw C x H x W BGR bytes, or an encoded
// JPEG/PNG. Decoding one needs no database (lmdb_dataset.hpp reads them from one).
#pragma once

#include <string>

#include "cgdp.pb.h"
#include "cgdp/data/image/image.hpp"

namespace cgdp {

// The Datum an LMDB value holds; DataError when the bytes are not one (or one holding no data).
proto::Datum parse_datum(const std::string& value);

// What a Datum holds, as Caffe's InferBlobShape reads it: a raw one's fields, an encoded one's
// image header. DataError when an encoded one's bytes are no JPEG or PNG.
struct DatumShape {
  int channels = 0, height = 0, width = 0;
};
DatumShape datum_shape(const proto::Datum& datum);

// A Datum's picture as decode_image gives it (HWC, RGB or gray), to `channels`; DataError when
// its sizes disagree with its bytes.
Image datum_image(const proto::Datum& datum, int channels, int min_height = 0, int min_width = 0);
void datum_image(const proto::Datum& datum, int channels, int min_height, int min_width,
                 Image& out);

// Raw pixels of `image` (HWC RGB or gray) as Caffe stores them: C x H x W, BGR.
proto::Datum raw_datum(const Image& image, int label);

}  // namespace cgdp
