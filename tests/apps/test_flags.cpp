// Bad flags and bad runs: each ends with a status in [1, 127] (never a signal) and a message
// that names the flag; a non-finite loss stops the run without touching the last checkpoint.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "programs.h"

using namespace kiln::testing;

TEST_CASE("bad flags exit with a status below 128 and a message naming the flag") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string checkpoint = dir.file("lm.safetensors");
  const std::string train = kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
                            " --threads 1 --eval-every 0 --steps 2";
  REQUIRE(run(train + " --save " + checkpoint).status == 0);
  const std::string eval =
      kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + checkpoint;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {train + " --heads 3", "--heads"},
      {train + " --kv-heads 3", "--kv-heads"},
      {train + " --d-model 0", "--d-model"},
      {train + " --layers -1", "--layers"},
      {train + " --batch-size 0", "--batch-size"},
      {train + " --dropout 1.5", "--dropout"},
      {train + " --no-such-flag", "--no-such-flag"},
      {train + " --seq-len 600", "--seq-len"},
      {train + " --seq-len 40 --max-seq-len 32", "--seq-len"},
      {train + " --activation tanh", "--activation"},
      {train + " --device cuda:99", "--device"},
      {train + " --device tpu", "--device"},
      {train + " --steps 0 --time-budget 5 --schedule step", "--decay-steps"},
      {train + " --steps 0 --time-budget 0 --epochs 0 --schedule wsd", "--decay-steps"},
      {train + " --resume " + checkpoint + " --d-model 64", "--d-model"},
      {train + " --resume " + checkpoint + " --pos rope", "--pos"},
      {train + " --resume " + dir.file("missing.safetensors"), "missing.safetensors"},
      {train + " --data " + dir.file("nowhere"), "nowhere"},
      {"KILN_GEMM=avx512 " + train, "KILN_GEMM=avx512: not a GEMM path"},
      {kEvalPpl + " --data " + dir.path().string(), "--checkpoint"},
      // --data to the tiny corpus: without it, where KILN_DATA names no WikiText-2, eval_ppl
      // names --data first and the message under test never shows.
      {eval + " --split train", "--split"},
      {eval + " --stride 17", "--stride"},
  };
  for (const auto& [command, flag] : cases) {
    const RunResult r = run(command);
    INFO(command << "\n" << r.output);
    CHECK(r.status >= 1);
    CHECK(r.status <= 127);
    CHECK(r.output.find(flag) != std::string::npos);
  }
}

TEST_CASE("a non-finite loss stops train_lm without overwriting its checkpoint") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string checkpoint = dir.file("lm.safetensors");
  const std::string train = kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
                            " --threads 1 --eval-every 0 --log-every 1 --steps 10";
  REQUIRE(run(train + " --save " + checkpoint).status == 0);
  const std::string good = file_bytes(checkpoint);

  // An absurd learning rate makes the weights overflow after the first update.
  const RunResult diverged = run(train + " --lr 1e30 --save " + checkpoint);
  INFO(diverged.output);
  CHECK(diverged.status >= 1);
  CHECK(diverged.status <= 127);
  CHECK(diverged.output.find("step 2: the loss is") != std::string::npos);
  CHECK(file_bytes(checkpoint) == good);

  // --skip-nonfinite skips such steps' updates and carries on to the end.
  const RunResult skipping = run(train + " --lr 1e30 --skip-nonfinite");
  INFO(skipping.output);
  CHECK(skipping.status == 0);
  CHECK(skipping.output.find("step 2: skipped") != std::string::npos);
  CHECK(skipping.lines().back().rfind("RESULT train_tokens_per_sec ", 0) == 0);
}
