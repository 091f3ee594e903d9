// The BSP bookkeeping of one shard piece: every host's push of each iteration is kept until all
// H arrived, then summed over hosts 0..H-1 in sum_buffers' fixed order and handed out once, to be
// sent to every host; the iteration is then done. At most two iterations are open (a fast host
// may push t+1 while a slow one has not pushed t yet). A gathered piece (an owner) takes one push,
// its owner's, and hands it out as it came.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "cgdp/shard/shard_layout.hpp"

namespace cgdp {

// A finished sum, ready to go to every host.
struct ReadySum {
  int64_t iteration = 0;
  zmq::message_t sum;  // count floats
};

class PieceState {
 public:
  // owner: kSummed (shard_layout.hpp), or the one host that pushes this piece.
  PieceState(int num_hosts, int64_t count, int sum_threads, int owner = kSummed);

  // Returns "" when accepted, else why the push was rejected (nothing changed then). `payload`
  // holds count floats, 4-byte aligned. The last push of an iteration sums them; a gathered
  // piece's one push is handed out as it is.
  std::string push(int64_t iteration, int host, zmq::message_t payload);
  // The sum the last accepted push completed, once; nothing otherwise.
  std::optional<ReadySum> take_sum();
  int64_t sums_done() const { return sums_done_; }

 private:
  struct Slot {
    int64_t iteration = 0;
    std::vector<zmq::message_t> pushes;  // by host
    std::vector<char> pushed;            // by host
    int num_pushed = 0;
  };
  // The open slot for `iteration`, created if the BSP window allows; null with `why` otherwise.
  Slot* slot_for(int64_t iteration, std::string& why);
  zmq::message_t sum(Slot& slot) const;

  int num_hosts_;
  int pushers_;  // pushes that complete an iteration: num_hosts_, or 1 when gathered
  int owner_;
  int64_t count_;
  int sum_threads_;
  std::deque<Slot> slots_;  // open iterations, at most two, consecutive
  int64_t floor_ = 0;       // iterations below this are done
  std::optional<ReadySum> ready_;
  int64_t sums_done_ = 0;
};

}  // namespace cgdp
