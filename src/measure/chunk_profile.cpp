// --chunk auto's profile, measured: the profiler with copies up to 16 MiB, enough for the chunk
// sizes of most models.
#include "cgdp/measure/chunk_profile.hpp"

#include "cgdp/measure/profiler.hpp"

namespace cgdp {

Profile measure_chunk_profile(const TrainConfig& config) {
  ProfileOptions options;
  options.max_copy_bytes = int64_t{16} << 20;
  return measure_profile(config, options);
}

}  // namespace cgdp
