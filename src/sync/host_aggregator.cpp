// Host aggregator: arrival bookkeeping, fixed-order OpenMP sums on one or more lanes, pushes and
// pulls through a reducer (scale-out), H2D copies of each sum.
#include "cgdp/sync/host_aggregator.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "cgdp/core/error.hpp"
#include "cgdp/sync/exchange_codec.hpp"
#include "cgdp/sync/exchanged_chunks.hpp"
#include "cgdp/sync/host_sum.hpp"
#include "cgdp/trace/stream_trace.hpp"

namespace cgdp {

namespace {

// Each lane's share of the summing threads (threads <= 0: OpenMP's default).
int threads_per_lane(int threads, int lanes) {
  return sum_lane_threads(threads > 0 ? threads : omp_get_max_threads(), std::max(lanes, 1));
}

// Parts lie in order inside their chunk.
void check_chunks(const std::vector<ChunkSpan>& chunks) {
  for (const ChunkSpan& c : chunks) {
    CGDP_ASSERT(!c.parts.empty());
    int64_t end = c.offset;
    for (const ElementRange& p : c.parts) {
      CGDP_ASSERT(p.offset >= end && p.count > 0);
      end = p.offset + p.count;
    }
    CGDP_ASSERT(end <= c.offset + c.count);
  }
}

// What no chunk's parts cover (the weights that travel as factors), in order of offset.
std::vector<ElementRange> left_out(const std::vector<ChunkSpan>& chunks, int64_t total) {
  std::vector<ElementRange> parts;
  for (const ChunkSpan& c : chunks) parts.insert(parts.end(), c.parts.begin(), c.parts.end());
  std::sort(parts.begin(), parts.end(),
            [](const ElementRange& a, const ElementRange& b) { return a.offset < b.offset; });
  std::vector<ElementRange> gaps;
  int64_t at = 0;
  for (const ElementRange& p : parts) {
    CGDP_ASSERT(p.offset >= at);  // parts of different chunks never overlap
    if (p.offset > at) gaps.push_back({at, p.offset - at});
    at = p.offset + p.count;
  }
  if (total > at) gaps.push_back({at, total - at});
  return gaps;
}

}  // namespace

int64_t ChunkSpan::summed_count() const {
  int64_t n = 0;
  for (const ElementRange& p : parts) n += p.count;
  return n;
}

ChunkSpan whole_chunk(int64_t offset, int64_t count) {
  return {offset, count, {{offset, count}}};
}

HostAggregator::HostAggregator(std::vector<AggregatorWorker> workers, std::vector<ChunkSpan> chunks,
                               int threads, Timeline& timeline, ChunkReducer* reducer, CoreSet cpus,
                               int lanes, std::vector<FactorSlot> factors, ExchangeDtype dtype)
    : workers_(std::move(workers)),
      chunks_(std::move(chunks)),
      lane_threads_(threads_per_lane(threads, lanes)),
      timeline_(timeline),
      reducer_(reducer),
      cpus_(std::move(cpus)),
      dtype_(dtype),
      hosts_(reducer ? reducer->host_count() : 1),
      rank_(reducer ? reducer->host_rank() : 0),
      factors_(std::move(factors)),
      arrivals_(chunks_.size() + factors_.size(), 0) {
  CGDP_ASSERT(!workers_.empty() && (!chunks_.empty() || !factors_.empty()) && lanes >= 1 &&
              lanes <= kMaxSumLanes && hosts_ >= 1 && rank_ >= 0 && rank_ < hosts_);
  check_chunks(chunks_);
  for (const AggregatorWorker& w : workers_)
    CGDP_ASSERT(dtype_ == ExchangeDtype::Fp32 ||
                (w.landing && (dtype_ == ExchangeDtype::Bf16 || w.sum_scales)));
  total_ = chunks_.empty() ? 0 : chunks_.back().offset + chunks_.back().count;
  left_out_ = left_out(chunks_, total_);
  left_out_before_.assign(1, 0);
  for (const ElementRange& gap : left_out_)
    left_out_before_.push_back(left_out_before_.back() + gap.count);
  summed_total_ = total_ - left_out_before_.back();
  const size_t elements = static_cast<size_t>(std::max<int64_t>(summed_total_, 1));
  for (const auto& w : workers_) {
    receive_.emplace_back(*w.device, elements * element_bytes(dtype_));
    landed_.push_back(w.device->create_event());
  }
  // The shards sum fp32: with a reducer the local sum stays fp32 and the pulled one is narrowed.
  const bool wide_sums = dtype_ == ExchangeDtype::Fp32 || reducer_;
  global_ = PinnedHostBuffer(*workers_[0].device, elements * (wide_sums ? 4 : 2));
  if (reducer_ && dtype_ != ExchangeDtype::Fp32)
    narrowed_ = PinnedHostBuffer(*workers_[0].device, elements * 2);
  if (dtype_ == ExchangeDtype::Fp16) {
    scale_capacity_ = std::max<int>(num_chunks(), 1);
    scales_ = PinnedHostBuffer(*workers_[0].device,
                               (workers_.size() + 1) * scale_capacity_ * sizeof(float));
  }
  int64_t largest_block = 0;
  for (const FactorSlot& f : factors_) {
    CGDP_ASSERT(f.targets.size() == workers_.size() && f.rebuild);
    CGDP_ASSERT(dtype_ != ExchangeDtype::Fp16 || f.target_scales.size() == workers_.size());
    gathered_.emplace_back(*workers_[0].device, static_cast<size_t>(f.out_count + f.in_count) *
                                                    all_workers() * element_bytes(dtype_));
    if (dtype_ == ExchangeDtype::Fp16)
      gathered_scales_.emplace_back(*workers_[0].device, 2 * all_workers() * sizeof(float));
    if (reducer_) {
      const FactorBlock block = factor_block(f);
      blocks_.emplace_back(*workers_[0].device, static_cast<size_t>(block.floats()) * 4);
      largest_block = std::max(largest_block, block.floats());
    }
  }
  pulled_block_.resize(static_cast<size_t>(largest_block));
  // A CPU device's H2D copy is a memcpy: it reads the pulled sum where ZeroMQ received it.
  copies_from_pulled_ =
      std::all_of(workers_.begin(), workers_.end(),
                  [](const AggregatorWorker& w) { return w.device->kind() == DeviceKind::Cpu; });
  for (int lane = 0; lane < lanes; ++lane)
    sum_threads_.push_back(start_thread([this, lane] { run_sums(lane); }, lane == 0));
  if (reducer_) pull_thread_ = start_thread([this] { run_pulls(); }, false);
}

HostAggregator::~HostAggregator() { stop(); }

void HostAggregator::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : sum_threads_)
    if (t.joinable()) t.join();
  if (pull_thread_.joinable()) pull_thread_.join();
}

std::thread HostAggregator::start_thread(std::function<void()> body, bool keep_binding) {
  return std::thread([this, body = std::move(body), keep_binding] {
    if (!cpus_.empty()) {
      BindStatus status = bind_current_thread(cpus_);
      std::lock_guard lock(mutex_);
      if (keep_binding) bind_status_ = std::move(status);
    }
    try {
      body();
    } catch (...) {
      abort(std::current_exception());
    }
  });
}

void HostAggregator::set_chunks(std::vector<ChunkSpan> chunks) {
  CGDP_ASSERT(!chunks.empty() && chunks.back().offset + chunks.back().count <= total_);
  std::lock_guard lock(mutex_);  // orders the change before the aggregator thread's next read
  CGDP_ASSERT(issued_ == 0 && ready_.empty() && pushed_.empty());
  for (const int a : arrivals_) CGDP_ASSERT(a == 0);
  check_chunks(chunks);
  CGDP_ASSERT(chunks.empty() || chunks.back().offset + chunks.back().count <= total_);
  CGDP_ASSERT(left_out(chunks, total_) == left_out_);  // the same weights go as factors
  for (const int a : pieces_issued_) CGDP_ASSERT(a == 0);
  chunks_ = std::move(chunks);
  arrivals_.assign(chunks_.size() + factors_.size(), 0);
  if (piece_elements_ > 0) make_pieces();
  if (dtype_ == ExchangeDtype::Fp16 && num_chunks() > scale_capacity_) {  // between iterations
    scale_capacity_ = num_chunks();
    scales_ = PinnedHostBuffer(*workers_[0].device,
                               (workers_.size() + 1) * scale_capacity_ * sizeof(float));
  }
}

void HostAggregator::sum_in_pieces(int64_t elements) {
  CGDP_ASSERT(elements > 0 && !reducer_);
  std::lock_guard lock(mutex_);
  CGDP_ASSERT(issued_ == 0 && ready_.empty());
  piece_elements_ = elements;
  make_pieces();
}

// Events are only ever added, so switching plans back and forth allocates nothing new.
void HostAggregator::make_pieces() {
  pieces_.clear();
  for (const ChunkSpan& c : chunks_) pieces_.push_back(split_into_pieces(c.parts, piece_elements_));
  pieces_issued_.assign(chunks_.size(), 0);
  piece_events_.resize(workers_.size());
  for (size_t w = 0; w < workers_.size(); ++w) {
    auto& events = piece_events_[w];
    if (events.size() < pieces_.size()) events.resize(pieces_.size());
    for (size_t c = 0; c < pieces_.size(); ++c)
      while (events[c].size() < pieces_[c].size())
        events[c].push_back(workers_[w].device->create_event());
  }
}

int64_t HostAggregator::packed(int64_t element) const {
  // Gaps that start before `element` end at or before it: an element to sum is in no gap.
  const auto after =
      std::lower_bound(left_out_.begin(), left_out_.end(), element,
                       [](const ElementRange& gap, int64_t e) { return gap.offset < e; });
  return element - left_out_before_[after - left_out_.begin()];
}

int64_t HostAggregator::pinned_bytes() const {
  size_t bytes = global_.bytes() + narrowed_.bytes() + scales_.bytes();
  for (const PinnedHostBuffer& b : receive_) bytes += b.bytes();
  for (const PinnedHostBuffer& b : gathered_) bytes += b.bytes();
  for (const PinnedHostBuffer& b : gathered_scales_) bytes += b.bytes();
  for (const PinnedHostBuffer& b : blocks_) bytes += b.bytes();
  return static_cast<int64_t>(bytes);
}

float* HostAggregator::receive_buffer(int worker, int chunk) {
  CGDP_ASSERT(dtype_ == ExchangeDtype::Fp32 &&
              chunks_[chunk].summed_count() == chunks_[chunk].count);
  return static_cast<float*>(receive_[worker].get()) + packed(chunks_[chunk].offset);
}

void* HostAggregator::receive_at(int worker, int64_t element) {
  return static_cast<char*>(receive_[worker].get()) + packed(element) * element_bytes(dtype_);
}

float* HostAggregator::receive_scale(int worker, int chunk) {
  CGDP_ASSERT(dtype_ == ExchangeDtype::Fp16 && chunk < scale_capacity_);
  return static_cast<float*>(scales_.get()) + worker * scale_capacity_ + chunk;
}

FactorBlock HostAggregator::factor_block(const FactorSlot& f) const {
  return {f.out_count, f.in_count, static_cast<int>(workers_.size()), dtype_};
}

// One host: the rows land where the rebuild reads them. Across hosts: in this host's block, which
// is pushed as it is and unpacked beside the other hosts' (unpack_block).
void* HostAggregator::factor_out_buffer(int worker, int slot) {
  char* base = static_cast<char*>(reducer_ ? blocks_[slot].get() : gathered_[slot].get());
  return base + worker * factors_[slot].out_count * element_bytes(dtype_);
}

void* HostAggregator::factor_in_buffer(int worker, int slot) {
  const FactorSlot& f = factors_[slot];
  const int64_t n = static_cast<int64_t>(workers_.size());
  char* base = static_cast<char*>(reducer_ ? blocks_[slot].get() : gathered_[slot].get());
  return base + (n * f.out_count + worker * f.in_count) * element_bytes(dtype_);
}

float* HostAggregator::factor_scales(int worker, int slot) {
  CGDP_ASSERT(dtype_ == ExchangeDtype::Fp16);
  if (reducer_)
    return reinterpret_cast<float*>(static_cast<char*>(blocks_[slot].get()) +
                                    factor_block(factors_[slot]).scales_offset()) +
           2 * worker;
  return static_cast<float*>(gathered_scales_[slot].get()) + 2 * worker;
}

// Host h's block into the rebuild's layout, so that global worker h W + w's rows sit where one
// host of H W workers would have them: [out rows of all workers][in rows of all workers].
void HostAggregator::unpack_block(int slot, int host, const char* block) {
  const FactorSlot& f = factors_[slot];
  const FactorBlock b = factor_block(f);
  const int64_t w = b.workers, eb = element_bytes(dtype_);
  char* gathered = static_cast<char*>(gathered_[slot].get());
  std::memcpy(gathered + host * w * f.out_count * eb, block,
              static_cast<size_t>(w * f.out_count * eb));
  std::memcpy(gathered + (all_workers() * f.out_count + host * w * f.in_count) * eb,
              block + w * f.out_count * eb, static_cast<size_t>(w * f.in_count * eb));
  if (dtype_ == ExchangeDtype::Fp16)
    std::memcpy(static_cast<float*>(gathered_scales_[slot].get()) + 2 * host * w,
                block + b.scales_offset(), static_cast<size_t>(2 * w) * sizeof(float));
}

void HostAggregator::begin_iteration(int64_t iteration) {
  std::lock_guard lock(mutex_);
  iteration_ = iteration;
}

void HostAggregator::arrived(int, int chunk) { count_arrival(chunk); }

void HostAggregator::pieces_issued(int, int chunk) {
  {
    std::lock_guard lock(mutex_);
    CGDP_ASSERT(piece_elements_ > 0);
    ++pieces_issued_[chunk];
    make_ready_if_complete(chunk);
  }
  changed_.notify_all();
}

void HostAggregator::factors_arrived(int, int slot) { count_arrival(num_chunks() + slot); }

void HostAggregator::count_arrival(int item) {
  {
    std::lock_guard lock(mutex_);
    ++arrivals_[item];
    make_ready_if_complete(item);
  }
  changed_.notify_all();
}

// In pieces a chunk's first piece may land before its issuing thread has recorded the later
// pieces' events: the chunk waits for both.
void HostAggregator::make_ready_if_complete(int item) {
  const int n = static_cast<int>(workers_.size());
  const bool in_pieces = piece_elements_ > 0 && !is_factor_item(item);
  if (arrivals_[item] < n || (in_pieces && pieces_issued_[item] < n)) return;
  // Cleared here, not once the item is sent: with a reducer the next iteration's copies may
  // land as soon as its pull is done, before the lane that pushed it takes the lock again.
  arrivals_[item] = 0;
  if (in_pieces) pieces_issued_[item] = 0;
  ready_.push_back(item);
}

std::string HostAggregator::binding_note() const {
  std::lock_guard lock(mutex_);
  if (cpus_.empty()) return "not bound";
  return bind_status_.bound ? cat("bound to cpus ", cpus_.to_string()) : bind_status_.note;
}

void HostAggregator::run_sums(int lane) {
  for (;;) {
    int item;
    int64_t iteration, turn = 0;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || error_ || !ready_.empty(); });
      if (stopping_ || error_) return;
      item = ready_.front();
      ready_.pop_front();
      iteration = iteration_;
      turn = taken_++;
    }
    const bool in_pieces = !is_factor_item(item) && piece_elements_ > 0;
    if (in_pieces)
      sum_and_send_pieces(lane, item);  // each piece goes back as soon as it is summed
    else if (!is_factor_item(item))
      sum(lane, item, chunks_[item].parts);
    if (reducer_) {
      push_in_turn(turn, iteration, item);  // a factor item: this host's block, pulled to gather
      continue;
    }
    if (is_factor_item(item))
      send_factors(item - num_chunks());  // gathered already: the D2H copies landed side by side
    else if (!in_pieces && dtype_ != ExchangeDtype::Fp32)
      send_16(item, chunks_[item].parts);
    else if (!in_pieces)
      send(item, chunks_[item].parts);
    {
      std::lock_guard lock(mutex_);
      ++issued_;
    }
    changed_.notify_all();
  }
}

// Every host pushes in the order its chunks became ready, whichever lane summed first, so that
// the shards (and run_pulls) see one order.
void HostAggregator::push_in_turn(int64_t turn, int64_t iteration, int item) {
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return stopping_ || error_ || pushed_turns_ == turn; });
    if (stopping_ || error_) return;
  }
  if (is_factor_item(item)) {
    const int slot = item - num_chunks();
    const int64_t floats = factor_block(factors_[slot]).floats();
    Timeline::Scope push(timeline_, Timeline::kAggregatorPid, "push", {"push factors ", slot},
                         "push",
                         {{"factors", slot}, {"bytes", floats * 4}, {"iteration", iteration}});
    reducer_->push(iteration, factor_chunk(num_chunks(), slot, hosts_, rank_),
                   static_cast<const float*>(blocks_[slot].get()), floats);
  } else {
    const ChunkSpan& span = chunks_[item];
    const int64_t count = span.summed_count();  // contiguous in the sum buffer: no gaps there
    Timeline::Scope push(timeline_, Timeline::kAggregatorPid, "push", {"push chunk ", item}, "push",
                         {{"chunk", item}, {"bytes", count * 4}, {"iteration", iteration}});
    reducer_->push(iteration, item, global_sum(span.parts[0].offset), count);
  }
  {
    std::lock_guard lock(mutex_);
    ++pushed_turns_;
    pushed_.push_back({iteration, item});
  }
  changed_.notify_all();
}

// Pulls in push order: the shards answer in that order too, as every host pushes alike.
void HostAggregator::run_pulls() {
  for (;;) {
    std::pair<int64_t, int> next;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || error_ || !pushed_.empty(); });
      if (stopping_ || error_) return;
      next = pushed_.front();
      pushed_.pop_front();
    }
    const auto [iteration, chunk] = next;
    if (is_factor_item(chunk)) {
      gather_factors(iteration, chunk - num_chunks());
      send_factors(chunk - num_chunks());
      {
        std::lock_guard lock(mutex_);
        ++issued_;
      }
      changed_.notify_all();
      continue;
    }
    const ChunkSpan& span = chunks_[chunk];
    const int64_t count = span.summed_count();
    // In place only where the H2D copies can read it as it lies: a whole fp32 chunk.
    const bool in_place =
        copies_from_pulled_ && dtype_ == ExchangeDtype::Fp32 && count == span.count;
    PulledChunk sum;
    {
      Timeline::Scope pull(timeline_, Timeline::kAggregatorPid, "pull", {"pull chunk ", chunk},
                           "pull",
                           {{"chunk", chunk}, {"bytes", count * 4}, {"iteration", iteration}});
      sum = reducer_->pull(iteration, chunk);
      if (!in_place) sum.copy_to(static_cast<float*>(global_.get()) + packed(span.parts[0].offset));
    }
    if (dtype_ != ExchangeDtype::Fp32) {
      narrow_pulled(chunk);
      send_16(chunk, span.parts);
    } else if (in_place) {
      send(chunk, sum);
    } else {
      send(chunk, span.parts);
    }
    {
      std::lock_guard lock(mutex_);
      ++issued_;
    }
    changed_.notify_all();
  }
}

void HostAggregator::sum_and_send_pieces(int lane, int chunk) {
  const std::vector<ElementRange>& pieces = pieces_[chunk];
  for (size_t p = 0; p < pieces.size(); ++p) {
    for (size_t w = 0; w < workers_.size(); ++w) piece_events_[w][chunk][p]->synchronize();
    const std::span<const ElementRange> piece(&pieces[p], 1);
    sum(lane, chunk, piece, p == 0);
    if (dtype_ != ExchangeDtype::Fp32)
      send_16(chunk, piece, p == 0);
    else
      send(chunk, piece);
  }
}

void HostAggregator::sum(int lane, int chunk, std::span<const ElementRange> parts, bool first) {
  std::vector<const float*> sources(workers_.size());
  const int64_t begin = summing(+1);
  int64_t count = 0;
  for (const ElementRange& part : parts) count += part.count;
  if (dtype_ != ExchangeDtype::Fp32) {
    sum_16(chunk, parts, first);
  } else {
    for (const ElementRange& part : parts) {
      for (size_t w = 0; w < workers_.size(); ++w)
        sources[w] = static_cast<const float*>(receive_at(static_cast<int>(w), part.offset));
      sum_buffers(static_cast<float*>(global_.get()) + packed(part.offset), sources, part.count,
                  lane_threads_);
    }
  }
  const int64_t end = summing(-1);
  if (timeline_.enabled())
    timeline_.add(Timeline::kAggregatorPid, lane == 0 ? std::string("sum") : cat("sum lane ", lane),
                  cat("sum chunk ", chunk), "sum", begin, end,
                  {{"chunk", chunk}, {"bytes", count * element_bytes(dtype_)}, {"lane", lane}});
}

// fp16: each worker's copy arrives scaled by its own power of two; the sum is bounded by the
// scaled-back bounds of the inputs (each below 2^15 / its scale), and its scale follows from that
// bound, so the narrowed sum never overflows.
void HostAggregator::sum_16(int chunk, std::span<const ElementRange> parts, bool first) {
  const size_t n = workers_.size();
  std::vector<float> unscale;
  float scale_out = 1.f;
  if (dtype_ == ExchangeDtype::Fp16) {
    float bound = 0.f;
    for (size_t w = 0; w < n; ++w) {
      unscale.push_back(1.f / *receive_scale(static_cast<int>(w), chunk));
      bound += 32768.f * unscale.back();
    }
    if (!reducer_) {  // with a reducer the pulled global sum gets its own scale (narrow_pulled)
      scale_out = fp16_scale_for(bound);
      // Later pieces leave it alone: the first piece's H2D copy may be reading it.
      if (first) static_cast<float*>(scales_.get())[n * scale_capacity_ + chunk] = scale_out;
    }
  }
  std::vector<const uint16_t*> sources(n);
  for (const ElementRange& part : parts) {
    for (size_t w = 0; w < n; ++w)
      sources[w] = static_cast<const uint16_t*>(receive_at(static_cast<int>(w), part.offset));
    if (reducer_)
      sum_buffers_16_to_fp32(static_cast<float*>(global_.get()) + packed(part.offset), sources,
                             unscale, dtype_, part.count, lane_threads_);
    else
      sum_buffers_16(static_cast<uint16_t*>(global_.get()) + packed(part.offset), sources, unscale,
                     scale_out, dtype_, part.count, lane_threads_);
  }
}

// Every host pulled the same fp32 bits, so every host narrows them to the same 16-bit sum (and
// fp16 to the same scale, from the sum's own largest magnitude).
void HostAggregator::narrow_pulled(int chunk) {
  const ChunkSpan& span = chunks_[chunk];
  const int64_t first = packed(span.parts[0].offset), count = span.summed_count();  // no gaps
  const float* sum = static_cast<const float*>(global_.get()) + first;
  float scale = 1.f;
  if (dtype_ == ExchangeDtype::Fp16) {
    scale = fp16_scale_for(max_abs(sum, count));
    static_cast<float*>(scales_.get())[workers_.size() * scale_capacity_ + chunk] = scale;
  }
  narrow_buffer(static_cast<uint16_t*>(narrowed_.get()) + first, sum, scale, dtype_, count,
                lane_threads_);
}

// Every host's block of factor slot s, in host order, into the rebuild's layout: this host's from
// where its workers' rows landed (once the shards no longer read it), the others' as pulled.
void HostAggregator::gather_factors(int64_t iteration, int slot) {
  const int64_t floats = factor_block(factors_[slot]).floats();
  for (int h = 0; h < hosts_; ++h) {
    const int chunk = factor_chunk(num_chunks(), slot, hosts_, h);
    Timeline::Scope pull(timeline_, Timeline::kAggregatorPid, "pull", {"pull factors ", slot},
                         "pull",
                         {{"factors", slot},
                          {"host", h},
                          {"bytes", h == rank_ ? 0 : floats * 4},
                          {"iteration", iteration}});
    const PulledChunk rows = reducer_->pull(iteration, chunk);
    if (h == rank_) {
      unpack_block(slot, h, static_cast<const char*>(blocks_[slot].get()));
    } else {
      rows.copy_to(pulled_block_.data());
      unpack_block(slot, h, reinterpret_cast<const char*>(pulled_block_.data()));
    }
  }
}

// Counts the time any lane sums (overlapping sums once): a sum starts (+1) or ends (-1).
int64_t HostAggregator::summing(int change) {
  const int64_t now = timeline_.now_us();
  std::lock_guard lock(mutex_);
  if (change > 0 && sums_running_++ == 0) summing_since_ = now;
  if (change < 0 && --sums_running_ == 0) sum_us_ += now - summing_since_;
  return now;
}

void HostAggregator::send(int chunk, std::span<const ElementRange> parts) {
  const ChunkSpan& span = chunks_[chunk];
  std::vector<PulledChunk::Piece> pieces;
  for (const ElementRange& part : parts)
    pieces.push_back({part.offset - span.offset, global_sum(part.offset), part.count});
  issue_h2d(chunk, pieces);
}

void HostAggregator::send_16(int chunk, std::span<const ElementRange> parts, bool with_scale) {
  const auto* global = static_cast<const uint16_t*>(reducer_ ? narrowed_.get() : global_.get());
  int64_t count = 0;
  for (const ElementRange& p : parts) count += p.count;
  const float* sum_scale =
      dtype_ == ExchangeDtype::Fp16
          ? static_cast<const float*>(scales_.get()) + workers_.size() * scale_capacity_ + chunk
          : nullptr;
  std::lock_guard issuing(issue_mutex_);
  for (size_t i = 0; i < workers_.size(); ++i) {
    const AggregatorWorker& w = workers_[i];
    traced(*w.h2d, timeline_, static_cast<int>(i), "h2d", {"h2d chunk ", chunk}, "h2d",
           [&] {
             for (const ElementRange& p : parts)
               w.h2d->copy_async(w.landing + p.offset, global + packed(p.offset),
                                 static_cast<size_t>(p.count) * sizeof(uint16_t));
             if (sum_scale && with_scale)
               w.h2d->copy_async(w.sum_scales + chunk, sum_scale, sizeof(float));
             issue_widen(*w.h2d, w.device->kind(), dtype_, w.landing, w.device_grads,
                         std::vector<ElementRange>(parts.begin(), parts.end()),
                         sum_scale ? w.sum_scales + chunk : nullptr);
           },
           {{"chunk", chunk}, {"bytes", count * 2}});
  }
}

void HostAggregator::send_factors(int slot) {
  const FactorSlot& f = factors_[slot];
  const int64_t bytes = (f.out_count + f.in_count) * all_workers() * element_bytes(dtype_);
  std::lock_guard issuing(issue_mutex_);
  for (size_t i = 0; i < workers_.size(); ++i) {
    const AggregatorWorker& w = workers_[i];
    traced(*w.h2d, timeline_, static_cast<int>(i), "h2d", {"h2d factors ", slot}, "h2d",
           [&] {
             w.h2d->copy_async(f.targets[i], gathered_[slot].get(), static_cast<size_t>(bytes));
             if (dtype_ == ExchangeDtype::Fp16)
               w.h2d->copy_async(f.target_scales[i], gathered_scales_[slot].get(),
                                 2 * all_workers() * sizeof(float));
           },
           {{"factors", slot}, {"bytes", bytes}});
    f.rebuild(static_cast<int>(i));
  }
}

void HostAggregator::send(int chunk, const PulledChunk& sum) {
  issue_h2d(chunk, sum.pieces());
  for (const AggregatorWorker& w : workers_)
    w.h2d->launch_host_func([sum] {});  // the received buffers live until every copy ran
}

void HostAggregator::issue_h2d(int chunk, std::span<const PulledChunk::Piece> pieces) {
  const ChunkSpan& span = chunks_[chunk];
  std::lock_guard issuing(issue_mutex_);  // lanes finish in any order; one issues at a time
  for (size_t i = 0; i < workers_.size(); ++i) {
    const AggregatorWorker& w = workers_[i];
    traced(*w.h2d, timeline_, static_cast<int>(i), "h2d", {"h2d chunk ", chunk}, "h2d",
           [&] {
             for (const PulledChunk::Piece& p : pieces)
               w.h2d->copy_async(w.device_grads + span.offset + p.offset, p.data,
                                 static_cast<size_t>(p.count) * sizeof(float));
           },
           {{"chunk", chunk}, {"bytes", span.summed_count() * 4}});
  }
}

void HostAggregator::wait_all_issued() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return error_ || issued_ == num_chunks() + num_factor_slots(); });
  if (error_) std::rethrow_exception(error_);
  issued_ = 0;
  last_sum_us_ = sum_us_;
  sum_us_ = 0;
  for (size_t w = 0; w < workers_.size(); ++w) workers_[w].h2d->record(*landed_[w]);
}

void HostAggregator::abort(std::exception_ptr why) {
  {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = why;
  }
  changed_.notify_all();
}

}  // namespace cgdp
