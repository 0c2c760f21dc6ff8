// One rank of the TCP start-up tests (test_tcp_faults.cpp): meets the others over TCP from
// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, then plays its part of MODE under the watchdog.
//   ok       every rank leaves cleanly (the shutdown is a barrier over the mesh)
//   exit     rank 1 ends right after start-up; the others wait in a collective
//   hang     rank 1 sleeps; the others wait in a collective that cannot complete
//   leave    rank 1 shuts down while the others wait in a collective
//   diverge  rank 1 waits in a broadcast while the others wait in an allreduce
// Prints "rank R payload P" after start-up and "error: ..." on failure (exit status 1).
#include <chrono>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/bootstrap.h"
#include "distributed/watchdog.h"

using namespace kiln;
using namespace kiln::dist;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ok";
  try {
    const Launch launch = detect_launch();
    const std::unique_ptr<Bootstrap> boot = tcp_bootstrap(
        launch, default_timeout_s(), [] { return std::string("unique-id-of-rank-0"); });
    const int rank = boot->rank();
    fmt::print("rank {} payload {}\n", rank, boot->payload());
    std::fflush(stdout);
    Watchdog watchdog(fmt::format("tcp rank {} of {}", rank, boot->world_size()), rank,
                      boot->world_size(), default_timeout_s(), boot->control(), nullptr);
    if (mode == "ok") {
      watchdog.leave();
      fmt::print("rank {} left cleanly\n", rank);
      return 0;
    }
    if (rank == 1) {
      if (mode == "exit") return 0;
      if (mode == "hang") std::this_thread::sleep_for(std::chrono::seconds(60));
      if (mode == "leave") {
        watchdog.leave();
        return 0;
      }
    }
    watchdog.begin(rank == 1 && mode == "diverge" ? Activity::broadcast : Activity::allreduce);
    watchdog.wait([] { return false; });  // a collective that never completes
    return 0;
  } catch (const Error& e) {
    fmt::print("error: {}\n", e.what());
    return 1;
  }
}
