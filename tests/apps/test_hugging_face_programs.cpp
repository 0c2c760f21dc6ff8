// The programs on a Hugging Face GPT-2 folder (tests/golden/hf_gpt2/a, lm/hugging_face.h):
// train_lm --init-from fine-tunes it on a dataset prepared with its tokenizer and refuses one of
// another tokenizer, eval_ppl and generate read the folder as a checkpoint; --preset gpt2.
#include <catch2/catch.hpp>

#include <string>

#include "programs.h"
#include "tests/harness/paths.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

namespace {

const std::string kPrepare = KILN_PREPARE;

std::string folder_a() { return source_path("tests/golden/hf_gpt2/a"); }

}  // namespace

TEST_CASE("train_lm --init-from a Hugging Face folder fine-tunes it, eval_ppl and generate read it",
          "[apps][huggingface]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string data = dir.file("data-gpt2"), other = dir.file("data-other");
  REQUIRE(run(kPrepare + " --input " + dir.path().string() + " --out " + data +
              " --tokenizer-file " + folder_a() + "/tokenizer.json")
              .status == 0);
  REQUIRE(
      run(kPrepare + " --input " + dir.path().string() + " --out " + other + " --tokenizer char")
          .status == 0);
  const std::string common = " --data " + data +
                             " --batch-size 2 --seq-len 8 --time-budget 0 --eval-every 0 "
                             "--lr 1e-3 --threads 1 --log-every 1";

  const RunResult trained = run(kTrainLm + " --init-from " + folder_a() + common +
                                " --steps 3 --save " + dir.file("ft.safetensors"));
  INFO(trained.output);
  REQUIRE(trained.status == 0);
  CHECK_THAT(trained.output, Contains("pre-LN | learned | gelu_tanh"));
  CHECK_THAT(trained.output, Contains("step 3/3"));

  const RunResult eval = run(kEvalPpl + " --checkpoint " + folder_a() + " --data " + data +
                             " --seq-len 8 --split valid");
  INFO(eval.output);
  CHECK(eval.status == 0);
  CHECK_THAT(eval.output, Contains("valid bpb"));
  CHECK_THAT(eval.output, Contains("ppl"));
  const RunResult sample = run(kGenerate + " --checkpoint " + dir.file("ft.safetensors") +
                               " --prompt 'The quick' --tokens 20 --greedy");
  INFO(sample.output);
  CHECK(sample.status == 0);

  SECTION("refusals") {
    const RunResult wrong_tokenizer =
        run(kTrainLm + " --init-from " + folder_a() + " --data " + other +
            " --batch-size 2 --seq-len 8 --time-budget 0 --steps 1");
    CHECK(wrong_tokenizer.status != 0);
    CHECK_THAT(wrong_tokenizer.output, Contains("prepared with tokenizer"));
    const RunResult model_flag =
        run(kTrainLm + " --init-from " + folder_a() + common + " --steps 1 --d-model 32");
    CHECK(model_flag.status != 0);
    CHECK_THAT(model_flag.output, Contains("--d-model cannot change it"));
    const RunResult both = run(kTrainLm + " --init-from " + folder_a() + common +
                               " --steps 1 --resume " + dir.file("ft.safetensors"));
    CHECK(both.status != 0);
    CHECK_THAT(both.output, Contains("--init-from and --resume exclude each other"));
  }
}

TEST_CASE("train_lm --preset gpt2 sets GPT-2's architecture, given model flags override it",
          "[apps][huggingface]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const RunResult r = run(kTrainLm + " --data " + dir.path().string() +
                          " --preset gpt2 --d-model 16 --heads 2 --layers 1 --ff 32 "
                          "--max-seq-len 16 --seq-len 8 --batch-size 2 --steps 2 --time-budget 0 "
                          "--eval-every 0 --threads 1");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("d_model 16 | heads 2 (kv 2) | layers 1 | ff 32 | pre-LN | "
                                "learned | gelu_tanh | dropout 0.1"));
}
