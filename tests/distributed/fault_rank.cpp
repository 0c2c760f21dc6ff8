// One rank of the MPI fault tests (test_mpi_faults.cpp), started by mpirun with 3 ranks: rank 1
// misbehaves as MODE says while the others run three allreduces.
//   ok     nobody misbehaves
//   exit   rank 1's program ends before the first collective (a clean exit)
//   error  rank 1 fails with a kiln::Error before the first collective
//   kill   rank 1 dies by SIGKILL
//   hang   rank 1 sleeps instead of joining
//   flags  rank 1 was started with another --lr (check_same of the config)
// Prints "rank R done" at the end and "error: ..." on failure (exit status 1).
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "distributed/communicator.h"

using namespace kiln;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ok";
  try {
    const auto comm = dist::make_communicator({.backend = "mpi"});
    const int rank = comm->rank();
    if (rank == 1) {
      if (mode == "exit") return 0;
      if (mode == "error") fail("rank 1 failed on purpose");
      if (mode == "kill") raise(SIGKILL);
      if (mode == "hang") std::this_thread::sleep_for(std::chrono::seconds(60));
    }
    comm->check_same("config",
                     fmt::format("seed 1\nlr {}", mode == "flags" && rank == 1 ? 0.002 : 0.001));
    std::vector<float> values{1.0f, 2.0f, 3.0f};  // each allreduce over 3 ranks triples them
    for (int i = 0; i < 3; ++i) comm->allreduce(std::span<float>(values));
    fmt::print("rank {} done: {}\n", rank, values[0]);
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
