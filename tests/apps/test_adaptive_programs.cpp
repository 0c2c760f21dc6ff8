// The adaptive softmax through the programs: train_lm --adaptive-softmax (tied, and with adaptive
// input) learns, saves the frequency order, resumes bit for bit; eval_ppl reproduces its
// perplexity, generate and attention_maps run on its checkpoint; bad flags are refused by name;
// auto, the default, resolves from the vocabulary.
#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

#include "apps/common/options.h"
#include "core/io/safetensors.h"
#include "programs.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

bool has_tensor(const SafetensorsFile& file, const std::string& name) {
  for (const auto& [n, t] : file.tensors)
    if (n == name) return true;
  return false;
}

}  // namespace

TEST_CASE("train_lm --adaptive-softmax trains, resumes exactly, and every program reads it") {
  const std::string input = GENERATE("embedding", "adaptive");
  // bf16 too: its products are bf16 where the embedding and the adaptive input's table are not.
  const std::string precision = GENERATE("f32", "bf16");
  INFO("--input " << input << " --precision " << precision);
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string data = dir.path().string();
  // The tiny corpus has 23 words with <eos> and <unk>: a shortlist of 6, clusters [6, 12), [12,
  // 23).
  const std::string flags = kTrainLm + " --data " + data + " " + kTinyFlags +
                            " --adaptive-softmax 6,12 --adaptive-div 2 --input " + input +
                            " --dropout 0.1 --shuffle --eval-every 10 --log-every 10 --threads 2" +
                            " --precision " + precision;
  const RunResult whole = run(flags + " --steps 30 --save " + dir.file("whole.safetensors"));
  INFO(whole.output);
  REQUIRE(whole.status == 0);
  CHECK_THAT(whole.output, Catch::Contains("adaptive softmax 6,12 div 2 | input " + input));
  const double first = std::stod(logged_loss(whole.lines(), 10).value());
  const double last = std::stod(logged_loss(whole.lines(), 30).value());
  CHECK(last < first);

  const SafetensorsFile saved = load_safetensors(dir.file("whole.safetensors"));
  CHECK(has_tensor(saved, "adaptive.order"));
  CHECK(has_tensor(saved, "adaptive.clusters.1.output"));
  CHECK(has_tensor(saved, "embedding.weight") == (input == "embedding"));
  CHECK(has_tensor(saved, "adaptive.shortlist") == (input == "adaptive"));
  // The order is by training frequency: "the" (two per line) ranks first, and it is not the
  // vocabulary's own order (which lists words as they first appear, after the specials).
  std::vector<std::int64_t> order;
  for (const auto& [n, t] : saved.tensors)
    if (n == "adaptive.order") order = t.to_vector<std::int64_t>();
  REQUIRE(order.size() > 12);
  std::vector<std::int64_t> identity(order.size());
  for (std::size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<std::int64_t>(i);
  CHECK(order != identity);

  const RunResult part = run(flags + " --steps 10 --save " + dir.file("part.safetensors"));
  REQUIRE(part.status == 0);
  const RunResult resumed = run(flags + " --resume " + dir.file("part.safetensors") +
                                " --steps 30 --save " + dir.file("resumed.safetensors"));
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  check_same_tensors(saved, load_safetensors(dir.file("resumed.safetensors")));
  CHECK(line_after(resumed.lines(), "valid ppl ") == line_after(whole.lines(), "valid ppl "));

  const RunResult eval =
      run(kEvalPpl + " --data " + data + " --checkpoint " + dir.file("whole.best.safetensors"));
  INFO(eval.output);
  REQUIRE(eval.status == 0);
  CHECK(line_after(eval.lines(), "valid ppl ") == line_after(whole.lines(), "valid ppl "));
  const RunResult text = run(kGenerate + " --checkpoint " + dir.file("whole.safetensors") +
                             " --prompt 'the big' --tokens 8 --seed 3");
  INFO(text.output);
  CHECK(text.status == 0);
  const RunResult greedy = run(kGenerate + " --checkpoint " + dir.file("whole.safetensors") +
                               " --prompt 'the big' --tokens 8 --greedy");
  INFO(greedy.output);
  CHECK(greedy.status == 0);
  const RunResult maps = run(kAttentionMaps + " --checkpoint " + dir.file("whole.safetensors") +
                             " --text 'the big cat sees the dog .' --out " + dir.file("maps"));
  INFO(maps.output);
  CHECK(maps.status == 0);
}

TEST_CASE("train_lm refuses adaptive-softmax flags it cannot build, naming them") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string flags =
      kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags + " --steps 1";
  const RunResult not_numbers = run(flags + " --adaptive-softmax 6,x");
  CHECK(not_numbers.status != 0);
  CHECK(not_numbers.status < 128);
  CHECK_THAT(not_numbers.output, Catch::Contains("adaptive-softmax: '6,x' is not"));
  const RunResult beyond = run(flags + " --adaptive-softmax 6,5000");
  CHECK(beyond.status != 0);
  CHECK_THAT(beyond.output, Catch::Contains("below vocab"));
  const RunResult backwards = run(flags + " --adaptive-softmax 12,6");
  CHECK(backwards.status != 0);
  CHECK_THAT(backwards.output, Catch::Contains("must increase"));
  const RunResult input_alone = run(flags + " --input adaptive");
  CHECK(input_alone.status != 0);
  CHECK_THAT(input_alone.output, Catch::Contains("input adaptive needs the adaptive softmax"));
}

TEST_CASE("adaptive softmax and input auto: adaptive for a large vocabulary, full below") {
  CHECK(auto_adaptive_cutoffs(kAutoAdaptiveVocab - 1).empty());
  CHECK(auto_adaptive_cutoffs(kAutoAdaptiveVocab) == std::vector<std::int64_t>{2000, 10000});
  CHECK(auto_adaptive_cutoffs(50257) == std::vector<std::int64_t>{2000, 10000});

  // The default resolves in model_config; cutoffs or none on the command line replace it, and a
  // preset's model keeps its own output (GPT-2's full softmax).
  const auto parsed = [](std::vector<std::string> args) {
    CLI::App app{"train_lm"};
    TrainOptions o;
    add_train_flags(app, o);
    args.insert(args.begin(), "train_lm");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    apply_preset(o, [&](std::string_view flag) { return app.count(std::string(flag)) > 0; });
    return o;
  };
  CHECK(model_config(parsed({}), 33278).adaptive_cutoffs == std::vector<std::int64_t>{2000, 10000});
  CHECK(model_config(parsed({}), 97).adaptive_cutoffs.empty());
  CHECK(model_config(parsed({"--adaptive-softmax", "none"}), 33278).adaptive_cutoffs.empty());
  CHECK(model_config(parsed({"--adaptive-softmax", "500,3000"}), 33278).adaptive_cutoffs ==
        std::vector<std::int64_t>{500, 3000});
  CHECK(model_config(parsed({"--adaptive-softmax", "auto"}), 50257).adaptive());
  CHECK(!model_config(parsed({"--preset", "gpt2"}), 50257).adaptive());
  CHECK(model_config(parsed({"--preset", "gpt2", "--adaptive-softmax", "auto"}), 50257).adaptive());
  // --input auto: adaptive input with the adaptive softmax, else the embedding.
  using nn::InputKind;
  CHECK(model_config(parsed({}), 33278).input == InputKind::adaptive);
  CHECK(model_config(parsed({}), 97).input == InputKind::embedding);
  CHECK(model_config(parsed({"--adaptive-softmax", "none"}), 33278).input == InputKind::embedding);
  CHECK(model_config(parsed({"--adaptive-softmax", "6,12"}), 97).input == InputKind::adaptive);
  CHECK(model_config(parsed({"--input", "embedding"}), 33278).input == InputKind::embedding);
  CHECK(model_config(parsed({"--input", "auto"}), 33278).input == InputKind::adaptive);
  CHECK(model_config(parsed({"--preset", "gpt2"}), 50257).input == InputKind::embedding);

  // train_lm says what auto chose and why: the tiny corpus's 25 tokens get the full softmax.
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const RunResult r = run(tiny_train(dir) + " --steps 1 --eval-every 0");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("output: full softmax (--adaptive-softmax auto: a "
                                       "vocabulary of 25 is below 20000)"));
  CHECK_THAT(r.output, Catch::Contains("input: embedding (--input auto: the output is the full "
                                       "softmax)"));
  CHECK_THAT(r.output, !Catch::Contains("| adaptive softmax"));
}
