// Data-parallel train_lm (lm::Trainer over dist/'s MPI ranks): N ranks train bit for bit like one
// process with --grad-accum N on the same global batch (docs/distributed.md), with dropout on,
// shuffled windows, a resume point and, with 3 ranks, a short last step of each epoch that
// leaves one rank without a window. Each rank and the single process use one thread: the bits
// depend on the thread count.
#include <catch2/catch.hpp>

#include "dist/communicator.h"
#include "tests/examples/programs.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

namespace {

std::string mpirun(int ranks) {
  return std::string("KILN_DIST_TIMEOUT=60 " KILN_MPI_ENV " timeout -s KILL 120 " KILN_MPIRUN
                     " -np ") +
         std::to_string(ranks) + " ";
}

bool skip_without_mpi() {
  if (dist::mpi_built()) return false;
  std::puts("skipped: kiln was built without MPI (KILN_MPI=OFF or no libopenmpi-dev)");
  return true;
}

}  // namespace

TEST_CASE("dist: train_lm on N ranks equals one process with --grad-accum N, bit for bit") {
  if (skip_without_mpi()) return;
  const int ranks = GENERATE(2, 3);
  INFO(ranks << " ranks");
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  // 14 windows per epoch: with 3 ranks, steps of 3, 3, 3, 3 and 2 windows.
  const std::string flags = " --data " + dir.path().string() + " " + kTinyFlags +
                            " --dropout 0.1 --attn-dropout 0.1 --shuffle --threads 1 "
                            "--eval-every 5 --log-every 1";
  const std::string n = std::to_string(ranks);
  const RunResult parallel =
      run(mpirun(ranks) + kTrainLm + flags + " --steps 12 --save " + dir.file("ranks.safetensors"));
  INFO(parallel.output);
  REQUIRE(parallel.status == 0);
  CHECK_THAT(parallel.output, Contains("data parallel: " + n + " ranks"));
  const RunResult single = run(kTrainLm + flags + " --grad-accum " + n + " --steps 12 --save " +
                               dir.file("single.safetensors"));
  INFO(single.output);
  REQUIRE(single.status == 0);
  check_same_tensors(load_safetensors(dir.file("ranks.safetensors")),
                     load_safetensors(dir.file("single.safetensors")));
  check_same_tensors(load_safetensors(dir.file("ranks.best.safetensors")),
                     load_safetensors(dir.file("single.best.safetensors")));
  CHECK(line_after(parallel.lines(), "test ppl ") == line_after(single.lines(), "test ppl "));

  // Resumed on as many ranks, the run continues as the single process's does.
  const RunResult first =
      run(mpirun(ranks) + kTrainLm + flags + " --steps 5 --save " + dir.file("first.safetensors"));
  REQUIRE(first.status == 0);
  const RunResult resumed =
      run(mpirun(ranks) + kTrainLm + " --data " + dir.path().string() + " --resume " +
          dir.file("first.safetensors") + " --steps 12 --save " + dir.file("resumed.safetensors"));
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.output, !Contains("warning"));
  check_same_tensors(load_safetensors(dir.file("resumed.safetensors")),
                     load_safetensors(dir.file("single.safetensors")));

  // On another number of ranks the global batch changes: a warning says so.
  const RunResult other = run(kTrainLm + " --data " + dir.path().string() + " --resume " +
                              dir.file("first.safetensors") + " --steps 6");
  CHECK(other.status == 0);
  CHECK_THAT(other.output, Contains("was trained with " + n + " rank(s) and this run has 1"));
}

TEST_CASE("dist: ranks started with other flags stop with a message naming the difference") {
  if (skip_without_mpi()) return;
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  // Every rank reads the same command line; --lr from the environment differs per rank.
  const RunResult r =
      run(mpirun(2) + "sh -c '" + kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
          " --threads 1 --steps 2 --lr $((OMPI_COMM_WORLD_RANK + 1))e-3'");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("differs between ranks") && Contains("rank 1"));
}
