// An LMDB value as the Data layer reads it: a Datum record, its shape as the model's input is
// inferred from it, and its picture (raw bytes, or a JPEG/PNG decoded whole and, as a crop asks,
// over a region at a DCT-reduced scale).
#include "cgdp/data/image/datum.hpp"
#include "fuzz_support.hpp"

namespace {

// As LmdbDataset::load with a centre crop of half the stored size, decoded at a quarter of it.
void decode_region(const cgdp::proto::Datum& d, int channels) {
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(d.data().data()),
                                       d.data().size());
  const auto [height, width] = cgdp::image_size(bytes);
  const cgdp::CropBox centre{height / 4, width / 4, height / 2, width / 2};
  cgdp::Image out;
  cgdp::decode_image(bytes, channels, height / 4, width / 4, out, centre);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cgdp::fuzz::expect_cgdp_errors_only([&] {
    const cgdp::proto::Datum d = cgdp::parse_datum(cgdp::fuzz::bytes_of(data, size));
    cgdp::fuzz::expect_cgdp_errors_only([&] { (void)cgdp::datum_shape(d); });
    // RGB, gray, and the record's own count (planes kept in order, as the Siamese example's).
    for (int channels : {3, 1, d.channels()}) {
      cgdp::fuzz::expect_cgdp_errors_only([&] { (void)cgdp::datum_image(d, channels); });
      if (d.encoded()) cgdp::fuzz::expect_cgdp_errors_only([&] { decode_region(d, channels); });
    }
  });
  return 0;
}
