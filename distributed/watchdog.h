// Watchdog: the timeout and fault finding every multi-rank collective runs under.
//
// A backend starts a collective with begin(), waits for its requests with wait(done) and closes
// it with end(). While it waits, the watchdog answers other ranks' roll calls and watches for a
// peer that has left: a rank whose program ends sends `leaving` with the number of collectives it
// completed, so a peer still waiting for it in a later collective fails at once, naming it. When
// a collective is not done within the timeout, the watchdog asks every peer where it is (a roll
// call, answered by ranks that are themselves waiting in some collective) and fails with what it
// learnt: the ranks that did not answer (they hang, or died), ranks in another collective (the
// programs diverged), ranks that left.
//
// A failure tells every peer which rank it blames (so that they name that rank too, rather than
// the rank that gave up first), calls on_failure once (the backend's way of bringing the job
// down: MPI_Abort at exit, ncclCommAbort) and throws kiln::Error; every later collective throws
// at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "distributed/control.h"

namespace kiln::dist {

class Watchdog {
 public:
  // who names this rank in messages ("mpi rank 1 of 3").
  Watchdog(std::string who, int rank, int world_size, double timeout_s, ControlChannel& control,
           std::function<void()> on_failure);

  // Starts collective number seq() + 1; its clock starts now.
  void begin(Activity activity);
  // Returns when done() returns true; throws kiln::Error naming the rank at fault otherwise.
  void wait(const std::function<bool()>& done);
  // The collective completed.
  void end() { ++seq_; }
  // The end of the job for this rank: tells every peer, and waits until every peer has said the
  // same after as many collectives (throws if one does not within the timeout, or ran another
  // number of collectives).
  void leave();

  // Fails the communicator with this message (prefixed by who), blaming rank `culprit` (-1:
  // none): tells the peers, calls on_failure, throws kiln::Error.
  [[noreturn]] void fail(const std::string& message, int culprit = -1);
  // Marks the communicator failed without throwing, blaming this rank (a destructor that runs
  // while this rank's program unwinds an error).
  void mark_failed();
  bool failed() const { return failed_; }
  std::uint64_t seq() const { return seq_; }  // collectives completed
  double timeout_s() const { return timeout_s_; }

 private:
  using Clock = std::chrono::steady_clock;

  // Handles every control event that has arrived; throws when one shows a fault.
  void drain();
  void handle(const ControlEvent& event);
  // Asks the peers where they are and fails with what they answer (or do not).
  [[noreturn]] void roll_call();
  std::string current() const;          // "allreduce (collective #4)"
  std::string gave_up(int peer) const;  // "rank 0 stopped because of rank 1"
  void notify_failure(int culprit);
  static void pause(Clock::time_point since);

  std::string who_;
  int rank_, world_size_;
  double timeout_s_;
  ControlChannel& control_;
  std::function<void()> on_failure_;

  std::uint64_t seq_ = 0;
  Activity activity_ = Activity::setup;
  Clock::time_point deadline_;
  bool failed_ = false;
  std::string failure_;
  std::vector<std::optional<std::uint64_t>> left_;     // per peer: collectives done when it left
  std::vector<bool> closed_;                           // per peer: its connection closed
  std::vector<std::optional<std::uint64_t>> gave_up_;  // per peer: the rank it failed because of
  bool collecting_ = false;                            // a roll call is under way
  std::vector<std::optional<ControlMessage>> answers_;
};

}  // namespace kiln::dist
