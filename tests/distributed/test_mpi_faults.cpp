// Faults in an MPI job of 3 ranks on this machine (fault_rank.cpp under mpirun): whatever rank 1
// does wrong, the job ends with a non-zero status and a message naming rank 1, within the
// collective timeout — never a hang.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "distributed/communicator.h"
#include "tests/distributed/processes.h"

using Catch::Matchers::Contains;
using kiln::testing::Finished;

namespace {

// mpirun -np 3 fault_rank MODE with a collective timeout of timeout_s, never longer than 60 s.
Finished run_job(const std::string& mode, double timeout_s) {
  return kiln::testing::run_command("KILN_DIST_TIMEOUT=" + std::to_string(timeout_s) +
                                    " OMP_NUM_THREADS=1 " KILN_MPI_ENV
                                    " timeout -s KILL 60 " KILN_MPIRUN
                                    " -np 3 " KILN_DIST_FAULT_RANK " " +
                                    mode);
}

bool skip_without_mpi() {
  if (kiln::dist::mpi_built()) return false;
  std::puts("skipped: kiln was built without MPI (KILN_MPI=OFF or no libopenmpi-dev)");
  return true;
}

}  // namespace

TEST_CASE("dist: mpi faults: a healthy 3-rank job ends with status 0") {
  if (skip_without_mpi()) return;
  const Finished job = run_job("ok", 20);
  INFO(job.output);
  CHECK(job.status == 0);
  for (const char* line : {"rank 0 done: 27", "rank 1 done: 27", "rank 2 done: 27"})
    CHECK_THAT(job.output, Contains(line));
}

TEST_CASE("dist: mpi faults: a rank whose program ends early is named at once") {
  if (skip_without_mpi()) return;
  const Finished job = run_job("exit", 20);
  INFO(job.output);
  CHECK(job.status != 0);
  CHECK_THAT(job.output, Contains("rank 1 left the job after"));
  CHECK(job.seconds < 15);
}

TEST_CASE("dist: mpi faults: a rank that fails with an error ends the job with its message") {
  if (skip_without_mpi()) return;
  const Finished job = run_job("error", 20);
  INFO(job.output);
  CHECK(job.status != 0);
  CHECK_THAT(job.output, Contains("error: rank 1 failed on purpose"));
  CHECK(job.seconds < 15);
}

TEST_CASE("dist: mpi faults: a rank killed by a signal ends the job, and mpirun names it") {
  if (skip_without_mpi()) return;
  const Finished job = run_job("kill", 20);
  INFO(job.output);
  CHECK(job.status != 0);
  CHECK_THAT(job.output, Contains("rank 1") && Contains("signal 9"));
  CHECK(job.seconds < 15);
}

TEST_CASE("dist: mpi faults: a rank that hangs is named within the timeout and the roll call") {
  if (skip_without_mpi()) return;
  const Finished job = run_job("hang", 2);
  INFO(job.output);
  CHECK(job.status != 0);
  CHECK_THAT(job.output, Contains("rank 1 did not join it and did not answer a roll call"));
  CHECK(job.seconds < 15);  // 2 s timeout + 2 s roll call + start-up, not the 60 s sleep
}

TEST_CASE("dist: mpi faults: ranks started with different flags are a clear error") {
  if (skip_without_mpi()) return;
  const Finished job = run_job("flags", 20);
  INFO(job.output);
  CHECK(job.status != 0);
  CHECK_THAT(job.output, Contains("config differs between ranks: rank 1 has 'lr 0.002' where "
                                  "rank 0 has 'lr 0.001' (line 2)"));
}
