// The BSP bookkeeping of one shard piece: every host's push of each iteration is kept until all
// H arrived, then summed over hosts 0..H-1 in sum_buffers' fixed order; pulls wait for that sum;
// an iteration is forgotten once every host pulled it. At most two iterations are live (a fast
// host may push t+1 while a slow one still pulls t).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace cgdp {

// A reply that can go out now.
struct ReadyReply {
  zmq::message_t route;  // the ROUTER identity of the pulling connection
  int host = 0;
  int64_t iteration = 0;
  zmq::message_t sum;  // shares the sum's buffer (ZeroMQ reference counting), no copy
};

class PieceState {
 public:
  PieceState(int num_hosts, int64_t count, int sum_threads);

  // Each returns "" when accepted, else why the message was rejected (nothing changed then).
  // `payload` holds count floats, 4-byte aligned. The last push of an iteration sums them.
  std::string push(int64_t iteration, int host, zmq::message_t payload);
  std::string pull(int64_t iteration, int host, zmq::message_t& route);  // moved from if accepted
  // Moves out the replies whose sums are ready, and forgets iterations every host pulled.
  std::vector<ReadyReply> take_ready();
  int64_t sums_done() const { return sums_done_; }

 private:
  struct Slot {
    int64_t iteration = 0;
    std::vector<zmq::message_t> pushes;  // by host, until summed
    std::vector<char> pushed, pulled;    // by host
    int num_pushed = 0, num_answered = 0;
    bool summed = false;
    zmq::message_t sum;
    std::vector<ReadyReply> waiting;  // pulls that came before the sum
  };
  // The slot for `iteration`, created if the BSP window allows; null with `why` set otherwise.
  Slot* slot_for(int64_t iteration, std::string& why);
  void sum(Slot& slot);

  int num_hosts_;
  int64_t count_;
  int sum_threads_;
  std::deque<Slot> slots_;  // by iteration, at most two, consecutive
  int64_t floor_ = 0;       // iterations below this are done
  int64_t sums_done_ = 0;
};

}  // namespace cgdp
