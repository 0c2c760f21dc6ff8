// The programs on a Hugging Face GPT-2 folder (tests/golden/hf_gpt2/a, lm/hugging_face.h):
// train_lm --init-from fine-tunes it on a dataset prepared with its tokenizer and refuses one of
// another tokenizer, eval_ppl and generate read the folder as a checkpoint, generate stops at
// n_positions; --preset gpt2; kiln-export writes the committed export byte for byte.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "lm/transformer_checkpoint.h"
#include "programs.h"
#include "tests/harness/paths.h"
#include "tests/lm/tiny_lm.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

namespace {

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

TEST_CASE("generate stops a learned-positions model when the sequence fills n_positions",
          "[apps][huggingface]") {
  // Folder a has n_positions 16: GPT-2's wpe has no row past it, so generate stops there (exit
  // 0, a note on stderr) rather than sliding a window as models with extending positions do.
  TempDir dir;
  const auto generate = [&](const std::string& prompt, std::int64_t tokens,
                            const std::vector<std::string>& more = {}) {
    std::vector<std::string> args{"--checkpoint", folder_a(),  "--prompt",
                                  prompt,         "--tokens",  std::to_string(tokens),
                                  "--greedy",     "--threads", "1"};
    args.insert(args.end(), more.begin(), more.end());
    return run_program(kGenerate, args, dir);
  };
  const std::int64_t prompt_tokens = static_cast<std::int64_t>(
      lm::read_transformer_checkpoint(folder_a()).tokenizer->encode("The quick").size());
  REQUIRE(prompt_tokens < 16);
  const std::int64_t room = 16 - prompt_tokens;

  const ProgramRun over = generate("The quick", 40);
  INFO("stderr: " << over.err);
  REQUIRE(over.exited);
  REQUIRE(over.code == 0);
  CHECK_THAT(over.err, Contains(fmt::format(
                           "stopped after {} of 40 tokens: with the {}-token prompt they fill the "
                           "model's 16 learned positions",
                           room, prompt_tokens)));
  CHECK_THAT(over.err, !Contains("keeps the last"));
  // Exactly the tokens that fit: the same text as asking for them, which does not stop; every
  // token of this byte-level vocabulary prints at least one byte, so one fewer is shorter.
  const ProgramRun fits = generate("The quick", room);
  REQUIRE(fits.code == 0);
  CHECK(fits.out == over.out);
  CHECK_THAT(fits.err, !Contains("stopped"));
  const ProgramRun fewer = generate("The quick", room - 1);
  CHECK(fewer.out.size() < over.out.size());
  CHECK(over.out.starts_with(fewer.out));
  // Without the KV cache, the same.
  const ProgramRun uncached = generate("The quick", 40, {"--no-cache"});
  CHECK(uncached.code == 0);
  CHECK(uncached.out == over.out);

  // A prompt that fills the positions by itself keeps its last 16 tokens and adds none.
  const ProgramRun full = generate(std::string(40, 'x'), 5);
  INFO("stderr: " << full.err);
  REQUIRE(full.code == 0);
  CHECK(full.out.empty());
  CHECK_THAT(full.err, Contains("keeping the last 16"));
  CHECK_THAT(full.err, Contains("stopped after 0 of 5 tokens"));
}

namespace {

std::string export_golden(const std::string& name) {
  return source_path("tests/golden/hf_export/" + name);
}

// A failure the program reported: an exit status in 1-127 and the message on stderr.
void require_refused(const ProgramRun& run, const std::string& message) {
  INFO("stdout: " << run.out << "\nstderr: " << run.err);
  REQUIRE(run.exited);
  CHECK(run.code >= 1);
  CHECK(run.code <= 127);
  CHECK_THAT(run.err, Contains(message));
}

}  // namespace

TEST_CASE("kiln-export --format hf writes the committed export byte for byte",
          "[apps][huggingface]") {
  TempDir dir;
  const std::string out = dir.file("gpt2");
  const ProgramRun exported = run_program(
      kExport,
      {"--format", "hf", "--checkpoint", export_golden("kiln_gpt2.safetensors"), "--out", out},
      dir);
  INFO("stderr: " << exported.err);
  REQUIRE(exported.exited);
  REQUIRE(exported.code == 0);
  CHECK_THAT(exported.out, Contains("wrote " + out +
                                    ": config.json, model.safetensors, "
                                    "tokenizer.json"));
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.json"}) {
    INFO(file);
    CHECK(read_text(out + "/" + file) == read_text(export_golden("gpt2/") + file));
  }
  // Nothing else: the temporary names were renamed into place.
  std::int64_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(out)) ++files;
  CHECK(files == 3);
}

TEST_CASE("kiln-export refuses bad flags and models GPT-2 cannot express, with a message",
          "[apps][huggingface]") {
  TempDir dir;
  const std::string checkpoint = export_golden("kiln_gpt2.safetensors"), out = dir.file("out");
  const auto kiln_export = [&](const std::vector<std::string>& args) {
    return run_program(kExport, args, dir);
  };
  require_refused(kiln_export({"--checkpoint", checkpoint}), "--out");
  require_refused(kiln_export({"--out", out}), "--checkpoint");
  require_refused(kiln_export({"--format", "onnx", "--checkpoint", checkpoint, "--out", out}),
                  "--format");
  require_refused(kiln_export({"--checkpoint", checkpoint, "--out", out, "--dtype", "bf16"}),
                  "--dtype");
  require_refused(kiln_export({"--checkpoint", dir.file("missing.safetensors"), "--out", out}),
                  "missing.safetensors");
  // The tiny word-level model is post-LN: refused with the reason, nothing written.
  const std::string tiny = write_tiny_checkpoint(dir);
  require_refused(kiln_export({"--checkpoint", tiny, "--out", out}),
                  "the model is post-LN; GPT-2 normalises before each sublayer");
  CHECK_FALSE(std::filesystem::exists(out));
  // --out naming a file, not a folder.
  const std::string file = dir.file("a-file");
  { std::ofstream(file) << "x"; }
  require_refused(kiln_export({"--checkpoint", checkpoint, "--out", file}), file);
}
