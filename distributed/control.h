// The control channel: small messages between ranks beside the data path, which the watchdog
// (distributed/watchdog.h) uses to find a rank at fault. MPI sends them with their own tag; a
// torchrun-style NCCL job sends them over its TCP mesh (distributed/tcp_mesh.h), which also reports
// a peer whose connection closed.
#pragma once

#include <cstdint>
#include <optional>

namespace kiln::dist {

// What a rank is doing, for roll calls and error messages.
enum class Activity : std::uint32_t { allreduce, broadcast, allgather, barrier, setup, shutdown };
const char* activity_name(Activity activity);

struct ControlMessage {
  enum class Kind : std::uint32_t {
    leaving = 1,    // the sender's program is ending after `seq` collectives
    roll_call = 2,  // the sender timed out in collective `seq`: who is there?
    answer = 3,     // the sender is waiting in collective `seq`, doing `activity`
    failed = 4,     // the sender's collective failed because of rank `seq` (kNobody: no rank)
  };
  static constexpr std::uint64_t kNobody = ~std::uint64_t{0};
  Kind kind = Kind::answer;
  Activity activity = Activity::setup;
  std::uint64_t seq = 0;
};
static_assert(sizeof(ControlMessage) == 16);

struct ControlEvent {
  int peer = -1;
  bool closed = false;  // the peer's connection closed (TCP only); message is then unset
  ControlMessage message;
};

class ControlChannel {
 public:
  virtual ~ControlChannel() = default;
  // Queues a message to peer; never blocks for long, never waits for the peer to read it.
  virtual void send(int peer, const ControlMessage& message) = 0;
  // The next message that has arrived (or closed connection), if any; never blocks.
  virtual std::optional<ControlEvent> poll() = 0;
};

}  // namespace kiln::dist
