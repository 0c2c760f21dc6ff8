// Checkpoints in the format train_lm wrote up to commit baed1dc, which saved the model's settings
// twice (in "config" and in the saved flags, "train"): tests/golden/kiln1_train/ holds such a
// run, saved at step 3 and, uninterrupted, at step 6 (make.sh there made them with that commit's
// train_lm). Today's programs must resume, evaluate and sample them, and a resumed run must
// continue as the uninterrupted one did: the same training losses at steps 4 to 6 and the same
// validation loss, to 1e-5 (another build or instruction set rounds in its own way: bit for bit
// holds in the build that made the files, checked by hand in the stop's note), when a state
// restored wrongly would show at once (another data position: other windows, a loss off by
// about 0.1; another dropout stream or optimizer state: 1e-3 and more); and tensors within 1e-3
// of the uninterrupted run's (Adam turns the rounding of near-zero gradients into steps of up to
// the learning rate, so closer agreement is not a property of the state).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/io/safetensors.h"
#include "lm/transformer_checkpoint.h"
#include "tests/apps/programs.h"
#include "tests/harness/near.h"
#include "tests/harness/paths.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

namespace {

const std::string kOld = source_path("tests/golden/kiln1_train");

// Every tensor of a and b by name, in dtype and shape, and within 1e-3 (absolute and relative).
void check_close_tensors(const SafetensorsFile& a, const SafetensorsFile& b) {
  check_tensor_pairs(a, b, [](const Tensor& x, const Tensor& y) {
    const std::vector<double> xs = x.to(DType::f64).to_vector<double>();
    const std::vector<double> ys = y.to(DType::f64).to_vector<double>();
    for (std::size_t j = 0; j < xs.size(); ++j) {
      INFO("element " << j << ": " << xs[j] << " vs " << ys[j]);
      CHECK(near(xs[j], ys[j], 1e-3, 1e-3));
    }
  });
}

// The loss history of two training checkpoints: the same steps, losses within 1e-5.
void check_same_history(const SafetensorsFile& a, const SafetensorsFile& b) {
  const nlohmann::json x = nlohmann::json::parse(a.metadata.at("history"));
  const nlohmann::json y = nlohmann::json::parse(b.metadata.at("history"));
  for (const char* split : {"train", "valid"}) {
    INFO(split);
    REQUIRE(x.at(split).size() == y.at(split).size());
    for (std::size_t i = 0; i < x.at(split).size(); ++i) {
      CHECK(x[split][i][0] == y[split][i][0]);
      CHECK(near(x[split][i][1].get<double>(), y[split][i][1].get<double>(), 1e-5, 1e-6));
    }
  }
}

}  // namespace

TEST_CASE("an old-format checkpoint resumes to the uninterrupted run's tensors, bit for bit") {
  TempDir dir;
  const std::string out = dir.file("resumed.safetensors");
  const RunResult r = run(kTrainLm + " --data " + kOld + " --resume " + kOld +
                          "/step3.safetensors --steps 6 --log-every 1 --save " + out);
  INFO(r.output);
  REQUIRE(r.status == 0);
  check_same_history(load_safetensors(out), load_safetensors(kOld + "/step6.safetensors"));
  check_close_tensors(load_safetensors(out), load_safetensors(kOld + "/step6.safetensors"));
  check_close_tensors(load_safetensors(lm::best_checkpoint_path(out)),
                      load_safetensors(kOld + "/step6.best.safetensors"));
  // The old file's masks come from one stream of draws, which one process continues (and saves
  // as such), so that the resumed run is the uninterrupted one.
  CHECK(load_safetensors(out).metadata.at("rng") ==
        load_safetensors(kOld + "/step6.safetensors").metadata.at("rng"));

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
