// TCP start-up (torchrun-style variables) and the watchdog over its mesh, with three worker
// processes on the loopback (tcp_worker.cpp). NCCL's ranks meet and watch each other this way.
#include <catch2/catch.hpp>

#include <string>

#include "tests/distributed/processes.h"

using Catch::Matchers::Contains;
using kiln::testing::Finished;

namespace {

// Runs 3 workers in `mode` with a collective timeout of timeout_s, killing any still running
// after kill_after_s; rank `wrong` (if any) is given WORLD_SIZE 4.
std::vector<Finished> run_workers(const std::string& mode, double timeout_s,
                                  double kill_after_s = 30, int wrong = -1) {
  const std::string port = std::to_string(kiln::testing::free_tcp_port());
  return kiln::testing::run_ranks(
      {KILN_DIST_TCP_WORKER, mode}, 3,
      [&](int r) {
        return std::map<std::string, std::string>{{"RANK", std::to_string(r)},
                                                  {"WORLD_SIZE", r == wrong ? "4" : "3"},
                                                  {"MASTER_ADDR", "127.0.0.1"},
                                                  {"MASTER_PORT", port},
                                                  {"KILN_DIST_TIMEOUT", std::to_string(timeout_s)}};
      },
      kill_after_s);
}

// Ranks 0 and 2 fail within within_s, naming rank 1: each finds `why` itself, or hears that
// another rank stopped because of rank 1, or that rank 1 found itself at fault.
void check_survivors(const std::vector<Finished>& ranks, const std::string& why, double within_s) {
  for (int r : {0, 2}) {
    INFO("rank " << r << ":\n" << ranks[r].output);
    CHECK(ranks[r].status == 1);
    CHECK_THAT(ranks[r].output, Contains(why) || Contains("stopped because of rank 1") ||
                                    Contains("rank 1 failed (see rank 1's message)"));
    CHECK(ranks[r].seconds < within_s);
  }
}

}  // namespace

TEST_CASE(
    "dist: tcp: start-up gives every rank rank 0's payload, and the shutdown meets everyone") {
  const std::vector<Finished> ranks = run_workers("ok", 20);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << ":\n" << ranks[r].output);
    CHECK(ranks[r].status == 0);
    CHECK_THAT(ranks[r].output,
               Contains("rank " + std::to_string(r) + " payload unique-id-of-rank-0"));
    CHECK_THAT(ranks[r].output, Contains("left cleanly"));
  }
}

TEST_CASE("dist: tcp: a rank whose process ends is named at once by the ranks waiting for it") {
  const std::vector<Finished> ranks = run_workers("exit", 20);
  check_survivors(ranks, "allreduce (collective #1): the connection to rank 1 closed", 10);
}

TEST_CASE("dist: tcp: a rank that hangs is named by a roll call after the timeout") {
  const std::vector<Finished> ranks = run_workers("hang", 1, 8);
  // Within the timeout (1 s) plus the roll call (at most the timeout) plus start-up.
  check_survivors(ranks, "rank 1 did not join it and did not answer a roll call", 8);
  CHECK(ranks[1].status == -9);  // still asleep: killed by the test
}

TEST_CASE("dist: tcp: a rank that shuts down while the others wait is named at once") {
  const std::vector<Finished> ranks = run_workers("leave", 20);
  check_survivors(ranks, "rank 1 left the job after 0 collectives", 10);
}

// Whichever rank's roll call ends first decides: the two in the allreduce blame rank 1, and rank 1,
// outnumbered, blames itself.
TEST_CASE("dist: tcp: ranks in different collectives are told apart by the roll call") {
  const std::vector<Finished> ranks = run_workers("diverge", 1);
  check_survivors(ranks, "rank 1 waits in broadcast (collective #1) instead", 8);
  INFO("rank 1:\n" << ranks[1].output);
  CHECK(ranks[1].status == 1);
  CHECK_THAT(ranks[1].output,
             Contains("rank 0 waits in allreduce (collective #1) instead; rank 2 waits in "
                      "allreduce (collective #1) instead: this rank is the one out of step") ||
                 Contains("stopped because of this rank"));
  CHECK_THAT(ranks[1].output, !Contains("stopped because of rank 0"));
}

TEST_CASE("dist: tcp: start-up refuses ranks that disagree on the world size") {
  const std::vector<Finished> ranks = run_workers("ok", 5, 30, 2);
  INFO("rank 0:\n" << ranks[0].output);
  CHECK(ranks[0].status == 1);
  CHECK_THAT(ranks[0].output, Contains("rank 2 has WORLD_SIZE 4 and rank 0 has 3"));
}
