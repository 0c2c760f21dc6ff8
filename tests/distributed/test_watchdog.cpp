// The watchdog's roll call, driven through a control channel of the test's own: what a rank that
// timed out says about a peer from the answer the peer gives. A peer still completing the
// previous collective runs late; before, it was reported as if it ran another program ("waits
// in allreduce (collective #1) instead").
#include <catch2/catch.hpp>

#include <deque>
#include <optional>
#include <vector>

#include "core/error.h"
#include "distributed/watchdog.h"

using namespace kiln;
using namespace kiln::dist;
using Catch::Matchers::Contains;

namespace {

// Rank 1 of a job of two, as rank 0 sees it: it answers each roll call with `answer`.
class OnePeer : public ControlChannel {
 public:
  explicit OnePeer(ControlMessage answer) : answer_(answer) {}
  void send(int peer, const ControlMessage& message) override {
    REQUIRE(peer == 1);
    if (message.kind == ControlMessage::Kind::roll_call) inbox_.push_back({1, false, answer_});
  }
  std::optional<ControlEvent> poll() override {
    if (inbox_.empty()) return std::nullopt;
    const ControlEvent event = inbox_.front();
    inbox_.pop_front();
    return event;
  }

 private:
  ControlMessage answer_;
  std::deque<ControlEvent> inbox_;
};

// The error of rank 0 timing out in its second collective, an allreduce, with this peer.
std::string timeout_message(const ControlMessage& answer) {
  OnePeer peer(answer);
  Watchdog watchdog("test rank 0 of 2", 0, 2, 0.05, peer, nullptr);
  watchdog.begin(Activity::allreduce);
  watchdog.end();
  watchdog.begin(Activity::allreduce);
  try {
    watchdog.wait([] { return false; });
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("the wait did not time out");
  return {};
}

}  // namespace

TEST_CASE("dist: a peer still in the previous collective is named late, not out of step") {
  const std::string message = timeout_message(
      {.kind = ControlMessage::Kind::answer, .activity = Activity::allreduce, .seq = 0});
  CHECK_THAT(message, Contains("allreduce (collective #2) did not complete within 0.05 s") &&
                          Contains("rank 1 is still completing allreduce (collective #1), "
                                   "which this rank has completed: it runs late") &&
                          Contains("raise KILN_DIST_TIMEOUT") && !Contains("instead"));
}

TEST_CASE("dist: a peer in another collective at the same point is named as out of step") {
  const std::string message = timeout_message(
      {.kind = ControlMessage::Kind::answer, .activity = Activity::broadcast, .seq = 1});
  CHECK_THAT(message,
             Contains("rank 1 waits in broadcast (collective #2) instead") && !Contains("late"));
}
