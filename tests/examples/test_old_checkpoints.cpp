// Checkpoints in the format train_lm wrote up to commit baed1dc, which saved the model's settings
// twice (in "config" and in the saved flags, "train"): tests/golden/kiln1_train/ holds such a
// run, saved at step 3 and, uninterrupted, at step 6 (make.sh there made them with that commit's
// train_lm). Today's programs must resume, evaluate and sample them, and a resumed run must
// write what the uninterrupted one wrote, bit for bit.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "lm/transformer_checkpoint.h"
#include "tests/examples/programs.h"
#include "tests/harness/paths.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

const std::string kOld = source_path("tests/golden/kiln1_train");

TEST_CASE("an old-format checkpoint resumes to the uninterrupted run's tensors, bit for bit") {
  TempDir dir;
  const std::string out = dir.file("resumed.safetensors");
  const RunResult r = run(kTrainLm + " --data " + kOld + " --resume " + kOld +
                          "/step3.safetensors --steps 6 --save " + out);
  INFO(r.output);
  REQUIRE(r.status == 0);
  check_same_tensors(load_safetensors(out), load_safetensors(kOld + "/step6.safetensors"));
  check_same_tensors(load_safetensors(lm::best_checkpoint_path(out)),
                     load_safetensors(kOld + "/step6.best.safetensors"));

  // The new file stores the model's settings once: in its config, not among the saved flags.
  const lm::TransformerCheckpoint resumed = lm::read_transformer_checkpoint(out);
  const nlohmann::json saved = nlohmann::json::parse(resumed.metadata.at("train"));
  CHECK(resumed.config.d_model == 16);
  for (const char* key : {"d_model", "heads", "kv_heads", "layers", "ff", "max_seq_len", "dropout",
                          "attn_dropout", "activation", "pos", "norm"})
    CHECK_FALSE(saved.contains(key));
  CHECK(saved.at("seq_len") == 8);

  // The old file's model flags still bind a resumed run: a disagreeing one is refused.
  const RunResult wider = run(kTrainLm + " --data " + kOld + " --resume " + kOld +
                              "/step3.safetensors --d-model 32 --steps 6");
  CHECK(wider.status == 1);
  CHECK_THAT(wider.output, Contains("--d-model 32 disagrees with the checkpoint's 16"));
}

TEST_CASE("eval_ppl and generate read an old-format checkpoint") {
  const std::string best = kOld + "/step6.best.safetensors";
  const RunResult trained =
      run(kTrainLm + " --data " + kOld + " --resume " + kOld + "/step3.safetensors --steps 6");
  REQUIRE(trained.status == 0);
  const RunResult eval = run(kEvalPpl + " --data " + kOld + " --checkpoint " + best);
  INFO(eval.output);
  REQUIRE(eval.status == 0);
  // The window length and thread count come from the old file's saved flags.
  CHECK(line_after(eval.lines(), "valid ppl ") == line_after(trained.lines(), "valid ppl "));
  const RunResult text = run(kGenerate + " --checkpoint " + best + " --prompt 'w1 w2' --tokens 5");
  INFO(text.output);
  CHECK(text.status == 0);
}
