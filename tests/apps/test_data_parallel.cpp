// Data-parallel train_lm (lm::Trainer over distributed/'s MPI ranks): N ranks train bit for bit
// like one process with --grad-accum N on the same global batch (docs/distributed.md), with dropout
// on, shuffled windows, a resume point and, with 3 ranks, a short last step of each epoch that
// leaves one rank without a window. Each rank and the single process use one thread: the bits
// depend on the thread count. Also what ends a job early: a stop request through
// scripts/kiln-mpirun, a rank killed, a rank that hangs, ranks that disagree.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/safetensors.h"
#include "core/ops/elementwise.h"
#include "distributed/communicator.h"
#include "tests/apps/crafted.h"
#include "tests/apps/programs.h"
#include "tests/harness/paths.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

namespace {

std::string mpirun(int ranks) {
  return std::string("KILN_DIST_TIMEOUT=60 " KILN_MPI_ENV " timeout -s KILL 120 " KILN_MPIRUN
                     " -np ") +
         std::to_string(ranks) + " ";
}

// A 2-rank train_lm job on the tiny corpus that trains for a minute unless stopped, started by
// scripts/kiln-mpirun (the shell execs it, so signals to launcher() reach it), each rank writing
// its pid to rank<r>.pid. Ranks still running at the end are killed: mpirun runs in a session of
// its own, so killing the launcher script alone would leave it training.
class LongJob {
 public:
  explicit LongJob(const std::string& collective_timeout_s)
      : job_(command(dir_, collective_timeout_s)) {}
  ~LongJob() {
    for (int rank = 0; rank < 2; ++rank) {
      const pid_t pid = rank_pid(rank);
      std::ifstream command_line("/proc/" + std::to_string(pid) + "/cmdline");
      std::string program;
      std::getline(command_line, program, '\0');
      if (pid > 0 && program == kTrainLm) ::kill(pid, SIGKILL);
    }
  }
  LongJob(const LongJob&) = delete;
  LongJob& operator=(const LongJob&) = delete;

  const TempDir& dir() const { return dir_; }
  pid_t launcher() const { return job_.pid(); }
  pid_t rank_pid(int rank) const {
    std::ifstream file(dir_.file("rank" + std::to_string(rank) + ".pid"));
    pid_t pid = 0;
    file >> pid;
    return pid;
  }
  // Waits until training has started: rank 0 has logged a step to metrics.jsonl. (Its output
  // cannot tell: under mpirun a rank's stdout is a terminal, so the step lines end in '\r'.)
  void wait_for_training() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::error_code error;
    while (std::chrono::steady_clock::now() < deadline) {
      if (std::filesystem::file_size(dir_.file("metrics.jsonl"), error) > 0 && !error) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(job_.pid(), SIGKILL);
    std::string output;
    job_.wait(&output);
    FAIL("training did not start within 60 s:\n" << output);
  }
  // The job's output and status (as RunResult::status) once it has ended.
  RunResult wait() {
    RunResult result;
    result.status = job_.wait(&result.output);
    return result;
  }

 private:
  static std::vector<std::string> command(const TempDir& dir, const std::string& timeout_s) {
    write_tiny_corpus(dir.path().string());
    const std::string mpirun = KILN_MPIRUN;
    const std::size_t space = mpirun.find(' ');
    const std::string train = kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
                              " --threads 1 --eval-every 0 --log-every 1 --time-budget 60 --save " +
                              dir.file("lm.safetensors") + " --metrics " +
                              dir.file("metrics.jsonl");
    return {"/bin/sh", "-c",
            "KILN_DIST_TIMEOUT=" + timeout_s + " " KILN_MPI_ENV " KILN_MPIRUN_PROGRAM=" +
                mpirun.substr(0, space) + " exec " KILN_TEST_SOURCE_DIR "/scripts/kiln-mpirun " +
                (space == std::string::npos ? std::string() : mpirun.substr(space + 1)) +
                " -np 2 sh -c 'echo $$ > " + dir.path().string() +
                "/rank$OMPI_COMM_WORLD_RANK.pid; exec " + train + "'"};
  }

  TempDir dir_;  // first: made before the job starts, removed after it has ended
  Child job_;
};

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
  CHECK_THAT(other.output, Contains("run took " + n + " windows (" + n +
                                    " rank(s) x --grad-accum 1) and this run's takes 1 (1 "
                                    "rank(s) x --grad-accum 1)"));
  // One process with --grad-accum N takes the same step as N ranks: it continues the run bit for
  // bit, and nothing says it differs (before: a warning that it did, and a note).
  const RunResult accum = run(kTrainLm + " --data " + dir.path().string() + " --resume " +
                              dir.file("first.safetensors") + " --grad-accum " + n +
                              " --steps 12 --save " + dir.file("accum.safetensors"));
  INFO(accum.output);
  REQUIRE(accum.status == 0);
  CHECK_THAT(accum.output, !Contains("warning") && !Contains("differ"));
  check_same_tensors(load_safetensors(dir.file("accum.safetensors")),
                     load_safetensors(dir.file("single.safetensors")));
}

TEST_CASE("dist: a checkpoint from before keyed dropout masks resumes on 2 ranks with keyed ones") {
  // tests/golden/kiln1_train's files draw their masks from one stream, which only one process
  // can continue; 2 ranks key them by window from the resume point on, and say so.
  const std::string old = source_path("tests/golden/kiln1_train");
  TempDir dir;
  const RunResult r =
      run(mpirun(2) + kTrainLm + " --data " + old + " --resume " + old +
          "/step3.safetensors --steps 6 --threads 1 --save " + dir.file("resumed.safetensors"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("keys them by window from here on"));
  CHECK_THAT(load_safetensors(dir.file("resumed.safetensors")).metadata.at("rng"),
             Contains("\"keyed\":true"));
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
  CHECK_THAT(r.output, Contains("a flag differs between ranks: rank 1 has '--lr 0.002' where "
                                "rank 0 has '--lr 0.001'"));
}

TEST_CASE("dist: a flag that differs between ranks is named with the rank, at start-up") {
  // Before: --steps or --save-every on one rank ended in "MPI_Test failed: MPI_ERR_TRUNCATE"
  // when the ranks' collectives parted, --resume on one rank alike, and --threads silently.
  if (skip_without_mpi()) return;
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string base = " --data " + dir.path().string() + " " + kTinyFlags +
                           " --eval-every 0 --save " + dir.file("lm.safetensors");
  REQUIRE(run(kTrainLm + base + " --threads 1 --steps 2").status == 0);
  // Rank 1's flags, through the shell's $OMPI_COMM_WORLD_RANK: (rank 0's, rank 1's, the line).
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"--threads 1 --steps 10", "--threads 1 --steps 5",
       "'--steps 5' where rank 0 has '--steps 10'"},
      {"--threads 1 --steps 10", "--threads 1 --steps 10 --save-every 2",
       "'--save-every 2' where rank 0 has '--save-every 0'"},
      {"--threads 1 --steps 10", "--threads 1 --steps 10 --resume " + dir.file("lm.safetensors"),
       "'--resume " + dir.file("lm.safetensors") + "' where rank 0 has '--resume '"},
      {"--threads 1 --steps 10", "--threads 2 --steps 10",
       "'--threads 2' where rank 0 has '--threads 1'"},
  };
  for (const auto& [rank0, rank1, named] : cases) {
    const auto start = std::chrono::steady_clock::now();
    const RunResult r =
        run(mpirun(2) + "sh -c 'if [ $OMPI_COMM_WORLD_RANK = 0 ]; then exec " + kTrainLm + base +
            " " + rank0 + "; else exec " + kTrainLm + base + " " + rank1 + "; fi'");
    INFO(rank1 << "\n" << r.output);
    CHECK(r.status != 0);
    CHECK_THAT(r.output, Contains("a flag differs between ranks: rank 1 has " + named));
    CHECK_THAT(r.output, !Contains("MPI_ERR_TRUNCATE") && !Contains("step 1/"));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  }
}

TEST_CASE("dist: ranks resumed from different checkpoints stop at start-up") {
  // Before: the same step and flags with other weights trained silently, exit 0.
  if (skip_without_mpi()) return;
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string checkpoint = dir.file("lm.safetensors");
  REQUIRE(run(kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
              " --threads 1 --eval-every 0 --steps 4 --save " + checkpoint)
              .status == 0);
  // Each rank resumes "lm.safetensors" in a folder of its own: the same flags, and in r1 either a
  // copy of the same file or the same state with one weight changed.
  std::filesystem::create_directories(dir.path() / "r0");
  std::filesystem::create_directories(dir.path() / "r1");
  std::filesystem::copy_file(checkpoint, dir.path() / "r0" / "lm.safetensors");
  const std::string job = mpirun(2) + "sh -c 'cd " + dir.path().string() +
                          "/r$OMPI_COMM_WORLD_RANK && exec " + kTrainLm + " --data " +
                          dir.path().string() + " --resume lm.safetensors --steps 6'";
  std::filesystem::copy_file(checkpoint, dir.path() / "r1" / "lm.safetensors");
  const RunResult same = run(job);
  INFO(same.output);
  CHECK(same.status == 0);
  std::filesystem::remove(dir.path() / "r1" / "lm.safetensors");
  rewrite_checkpoint(checkpoint, (dir.path() / "r1" / "lm.safetensors").string(),
                     [](Metadata&, NamedTensors& tensors) {
                       for (auto& [name, tensor] : tensors)
                         if (name == "embedding.weight") tensor = tensor * 1.5;
                     });
  const RunResult r = run(job);
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output,
             Contains("the run's state differs between ranks: rank 1 has 'model weights:") &&
                 Contains("the same --resume checkpoint"));
  CHECK_THAT(r.output, !Contains("step 5/"));
}

TEST_CASE("dist: ranks given different corpora stop at start-up, naming the split") {
  // Before: two lines swapped on one rank trained silently; a train.txt twice as long stalled
  // the job at the epoch's end until the watchdog blamed the network.
  if (skip_without_mpi()) return;
  TempDir dir;
  for (const char* rank : {"c0", "c1"}) {
    std::filesystem::create_directories(dir.path() / rank);
    write_tiny_corpus((dir.path() / rank).string());
  }
  const std::filesystem::path train = dir.path() / "c1" / "train.txt";
  std::vector<std::string> lines;
  {
    std::ifstream in(train);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  const std::string job = mpirun(2) + "sh -c 'cd " + dir.path().string() +
                          "/c$OMPI_COMM_WORLD_RANK && exec " + kTrainLm + " --data . " +
                          kTinyFlags + " --threads 1 --eval-every 0 --steps 20'";
  const auto write_train = [&](int copies, bool swap) {
    std::vector<std::string> text = lines;
    if (swap) std::swap(text[3], text[4]);
    std::ofstream out(train);
    for (int c = 0; c < copies; ++c)
      for (const std::string& line : text) out << line << "\n";
  };
  for (const auto& [copies, swap, named] :
       {std::tuple{1, true, "train split: 1760 tokens"}, {2, false, "train split: 3520 tokens"}}) {
    write_train(copies, swap);
    const auto start = std::chrono::steady_clock::now();
    const RunResult r = run(job);
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK_THAT(r.output, Contains("the corpus differs between ranks: rank 1 has '") &&
                             Contains(named) && Contains("every rank must read the same corpus"));
    CHECK_THAT(r.output, !Contains("KILN_DIST_TIMEOUT") && !Contains("step 1/"));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  }
}

TEST_CASE("dist: --metrics of a 2-rank run holds whole JSON lines, written by rank 0") {
  // Before: both ranks appended to the file, and in 3 of 3 runs 2-4 lines were not JSON.
  if (skip_without_mpi()) return;
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string metrics = dir.file("metrics.jsonl");
  const RunResult r =
      run(mpirun(2) + kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
          " --threads 1 --log-every 1 --eval-every 5 --steps 12 " + "--metrics " + metrics);
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(metrics);
  int train = 0, valid = 0, test = 0;
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    REQUIRE(row.is_object());
    const std::string split = row.at("split");
    train += split == "train", valid += split == "valid", test += split == "test";
  }
  CHECK(train == 12);
  CHECK(valid == 3);  // steps 5, 10 and the final 12
  CHECK(test == 1);
}

TEST_CASE("dist: SIGINT or SIGTERM to kiln-mpirun makes the ranks save once and the job exit 0") {
  if (skip_without_mpi()) return;
  const auto [signal, name] = GENERATE(std::pair{SIGTERM, "SIGTERM"}, std::pair{SIGINT, "SIGINT"});
  INFO(name);
  LongJob job("60");
  job.wait_for_training();
  REQUIRE(::kill(job.launcher(), signal) == 0);
  const RunResult r = job.wait();
  INFO(r.output);
  CHECK(r.status == 0);
  // Rank 0 alone prints, once; the ranks stopped at the same step (a collective decides).
  std::smatch match;
  REQUIRE(std::regex_search(
      r.output, match, std::regex("interrupted by SIGUSR1 at step ([0-9]+): saved the state")));
  CHECK(match.suffix().str().find("interrupted by") == std::string::npos);
  const std::string step = match[1];
  const RunResult resumed = run(mpirun(2) + kTrainLm + " --data " + job.dir().path().string() +
                                " --resume " + job.dir().file("lm.safetensors") + " --steps " +
                                std::to_string(std::stol(step) + 2) + " --time-budget 0");
  INFO(resumed.output);
  CHECK(resumed.status == 0);
  CHECK_THAT(resumed.output, Contains("at step " + step) && !Contains("warning"));
}

TEST_CASE("dist: a rank killed mid-run ends the job with a non-zero status naming it") {
  if (skip_without_mpi()) return;
  LongJob job("60");
  job.wait_for_training();
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(::kill(job.rank_pid(1), SIGKILL) == 0);
  const RunResult r = job.wait();
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("rank 1"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
}

TEST_CASE("dist: a rank that hangs mid-run is named within the collective timeout") {
  if (skip_without_mpi()) return;
  LongJob job("3");
  job.wait_for_training();
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(::kill(job.rank_pid(1), SIGSTOP) == 0);  // alive, never joining the next collective
  const RunResult r = job.wait();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("did not complete within 3 s") && Contains("rank 1"));
  // The timeout, the roll call's min(timeout, 5 s), and the job's end: not the minute it trains.
  CHECK(seconds < 30);
}

TEST_CASE("dist: ranks stop together at the time budget, which any rank's clock can end") {
  if (skip_without_mpi()) return;
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  // Each rank measures its own time; they must still stop at one step, or the first to stop
  // would leave the other waiting in a collective.
  const RunResult r =
      run(mpirun(2) + "sh -c '" + kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
          " --threads 1 --time-budget 1 "
          "--eval-every 0 --save " +
          dir.file("lm.safetensors") + "'");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("stopped by --time-budget"));
  // A schedule fitted to the budget takes rank 0's length on every rank (a collective every rank
  // joins at the same step): the run ends, and the checkpoint holds the length rank 0 printed.
  const RunResult fitted =
      run(mpirun(2) + "sh -c '" + kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
          " --threads 1 --time-budget 1 --schedule wsd --eval-every 0 --save " +
          dir.file("wsd.safetensors") + "'");
  INFO(fitted.output);
  CHECK(fitted.status == 0);
  const std::size_t at = fitted.output.find("schedule: wsd over ");
  REQUIRE(at != std::string::npos);
  const std::string length = std::to_string(std::stoll(fitted.output.substr(at + 19)));
  CHECK(load_safetensors(dir.file("wsd.safetensors")).metadata.at("decay_steps") == length);
}
