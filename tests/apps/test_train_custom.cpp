// examples/train_custom: a user's own nn::LanguageModel trained by lm::Trainer. Checkpointed at
// step 6 and resumed to step 12, it must end with the tensors of an uninterrupted 12-step run
// (dropout on: the trainer carries the model's dropout stream), and report perplexities.
#include <catch2/catch.hpp>

#include "core/io/safetensors.h"
#include "tests/apps/programs.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

TEST_CASE("train_custom trains, checkpoints, resumes bit for bit and evaluates its own model") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string program = kTrainCustom + " --data " + dir.path().string();
  const RunResult whole = run(program + " --steps 12 --save " + dir.file("whole.safetensors"));
  INFO(whole.output);
  REQUIRE(whole.status == 0);
  CHECK_THAT(whole.output, Contains("valid ppl ") && Contains("test ppl "));
  const RunResult first = run(program + " --steps 6 --save " + dir.file("first.safetensors"));
  REQUIRE(first.status == 0);
  const RunResult resumed = run(program + " --resume " + dir.file("first.safetensors") +
                                " --steps 12 --save " + dir.file("resumed.safetensors"));
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);

  const SafetensorsFile a = load_safetensors(dir.file("whole.safetensors"));
  const SafetensorsFile b = load_safetensors(dir.file("resumed.safetensors"));
  // The model's three tensors and Adam's two moments of each.
  CHECK(a.tensors.size() == 3 + 2 * 3);
  check_same_tensors(a, b);
  CHECK(a.metadata.at("step") == "12");
  CHECK(a.metadata.count("config") == 0);  // the model has no config_json
  CHECK(line_after(resumed.lines(), "test ppl ") == line_after(whole.lines(), "test ppl "));
}
