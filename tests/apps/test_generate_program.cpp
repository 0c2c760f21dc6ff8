// The generate program on a tiny checkpoint: stdout is the generated text only, the same for a
// seed and with --greedy, the same with and without the KV cache; warnings and timing go to
// stderr; errors exit with 1-127, never by a signal.
#include <catch2/catch.hpp>

#include "lm/decoder.h"
#include "lm/transformer_checkpoint.h"
#include "tests/lm/tiny_lm.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

ProgramRun generate(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> all{"--checkpoint", dir.file("tiny.safetensors"), "--threads", "2"};
  all.insert(all.end(), args.begin(), args.end());
  return run_program(kGenerate, all, dir);
}

void require_success(const ProgramRun& run) {
  INFO("stderr: " << run.err);
  REQUIRE(run.exited);
  REQUIRE(run.code == 0);
}

// A failure the program reported: an exit status in 1-127 and a message on stderr.
void require_failure(const ProgramRun& run, const std::string& message) {
  INFO("stdout: " << run.out << "\nstderr: " << run.err);
  REQUIRE(run.exited);
  REQUIRE(run.code >= 1);
  REQUIRE(run.code <= 127);
  REQUIRE_THAT(run.err, Catch::Contains(message));
}

}  // namespace

TEST_CASE("generate prints the decoder's tokens as words, <eos> as a newline") {
  TempDir dir;
  write_tiny_checkpoint(dir);
  const ProgramRun run = generate(dir, {"--prompt", "the cat", "--tokens", "40", "--seed", "4"});
  require_success(run);

  const lm::TransformerCheckpoint ckpt =
      lm::read_transformer_checkpoint(dir.file("tiny.safetensors"));
  const auto model = lm::load_model(ckpt, Device::cpu());
  lm::Decoder decoder(*model, lm::DecodeMode::cached);
  kiln::Generator gen(4);
  std::string expected;
  bool line_empty = true;
  for (std::int64_t token : decoder.generate(std::vector<std::int64_t>{1, 2}, 40, {}, gen)) {
    const std::string& word = ckpt.vocabulary.word(token);
    if (word == "<eos>") {
      expected += "\n";
      line_empty = true;
    } else {
      expected += (line_empty ? "" : " ") + word;
      line_empty = false;
    }
  }
  if (!line_empty) expected += "\n";
  REQUIRE(run.out == expected);
  REQUIRE_THAT(run.err, Catch::Contains("40 tokens in"));
  REQUIRE_THAT(run.err, Catch::Contains("tokens/s"));
}

TEST_CASE("generate prints the same text twice for a seed, another for another seed") {
  TempDir dir;
  write_tiny_checkpoint(dir);
  const std::vector<std::string> args{"--prompt",      "the cat sat", "--tokens", "40",
                                      "--temperature", "1.2",         "--top-p",  "0.95",
                                      "--seed",        "21"};
  const ProgramRun first = generate(dir, args), second = generate(dir, args);
  require_success(first);
  require_success(second);
  REQUIRE(!first.out.empty());
  REQUIRE(first.out == second.out);
  std::vector<std::string> other = args;
  other.back() = "22";
  REQUIRE(generate(dir, other).out != first.out);
}

TEST_CASE("generate --greedy is deterministic and equals --top-k 1") {
  TempDir dir;
  write_tiny_checkpoint(dir);
  const ProgramRun a = generate(dir, {"--prompt", "a dog", "--tokens", "25", "--greedy"});
  const ProgramRun b =
      generate(dir, {"--prompt", "a dog", "--tokens", "25", "--greedy", "--seed", "9"});
  const ProgramRun k1 = generate(dir, {"--prompt", "a dog", "--tokens", "25", "--top-k", "1"});
  require_success(a);
  require_success(k1);
  REQUIRE(a.out == b.out);
  REQUIRE(a.out == k1.out);
}

TEST_CASE("generate prints the same text with and without the KV cache, past max_seq_len") {
  TempDir dir;
  write_tiny_checkpoint(dir);
  for (const std::vector<std::string>& sampling :
       {std::vector<std::string>{"--greedy"}, std::vector<std::string>{"--seed", "3"}}) {
    std::vector<std::string> args{"--prompt", "the cat sat", "--tokens", "30"};
    args.insert(args.end(), sampling.begin(), sampling.end());
    const ProgramRun cached = generate(dir, args);
    args.push_back("--no-cache");
    const ProgramRun uncached = generate(dir, args);
    require_success(cached);
    require_success(uncached);
    REQUIRE(cached.out == uncached.out);
    // 3 + 30 tokens pass max_seq_len 12: the context slides and says so.
    REQUIRE_THAT(cached.err, Catch::Contains("max_seq_len 12"));
  }
}

TEST_CASE("generate --bench reports tokens/s with and without the cache") {
  TempDir dir;
  write_tiny_checkpoint(dir);
  const ProgramRun run = generate(dir, {"--prompt", "the", "--tokens", "10", "--bench"});
  require_success(run);
  REQUIRE_THAT(run.err, Catch::Contains("bench: 10 tokens"));
  REQUIRE_THAT(run.err, Catch::Contains("KV cache"));
  REQUIRE_THAT(run.err, Catch::Contains("no cache"));
  REQUIRE_THAT(run.err, Catch::Contains("same tokens: yes"));
  REQUIRE(run.out.find("bench") == std::string::npos);
}

TEST_CASE("unknown prompt words become <unk> with a warning on stderr") {
  TempDir dir;
  write_tiny_checkpoint(dir);
  const ProgramRun unknown = generate(dir, {"--prompt", "the zebra", "--tokens", "8", "--greedy"});
  const ProgramRun unk = generate(dir, {"--prompt", "the <unk>", "--tokens", "8", "--greedy"});
  require_success(unknown);
  REQUIRE_THAT(unknown.err, Catch::Contains("warning") && Catch::Contains("'zebra'") &&
                                Catch::Contains("<unk>"));
  REQUIRE(unknown.out == unk.out);
  REQUIRE(unk.err.find("warning") == std::string::npos);
}

TEST_CASE("an empty prompt starts a new line, a long one keeps the last max_seq_len tokens") {
  TempDir dir;
  write_tiny_checkpoint(dir);
  require_success(generate(dir, {"--prompt", "", "--tokens", "5"}));
  REQUIRE(generate(dir, {"--prompt", "", "--tokens", "5", "--greedy"}).out ==
          generate(dir, {"--prompt", "<eos>", "--tokens", "5", "--greedy"}).out);
  const std::string words = "a dog ran to the house and it was big and the cat sat on";  // 15
  const ProgramRun run = generate(dir, {"--prompt", words, "--tokens", "5", "--greedy"});
  require_success(run);
  REQUIRE_THAT(run.err, Catch::Contains("the prompt has 15 tokens; keeping the last 12"));
  REQUIRE(run.out == generate(dir, {"--prompt", "to the house and it was big and the cat sat on",
                                    "--tokens", "5", "--greedy"})
                         .out);
}

TEST_CASE("errors/generate: usage and kiln errors exit 1-127 with a message") {
  TempDir dir;
  write_tiny_checkpoint(dir);
  require_failure(run_program(kGenerate, {"--prompt", "the", "--tokens", "3"}, dir),
                  "--checkpoint");
  require_failure(generate(dir, {"--prompt", "the"}), "--tokens");
  require_failure(generate(dir, {"--prompt", "the", "--tokens", "many"}), "--tokens");
  require_failure(generate(dir, {"--prompt", "the", "--tokens", "-1"}), "--tokens");
  require_failure(generate(dir, {"--prompt", "the", "--tokens", "3", "--temperature", "0"}),
                  "--temperature");
  require_failure(generate(dir, {"--prompt", "the", "--tokens", "3", "--top-p", "1.5"}), "--top-p");
  require_failure(generate(dir, {"--prompt", "the", "--tokens", "3", "--top-k", "-2"}), "--top-k");
  require_failure(generate(dir, {"--prompt", "the", "--tokens", "3", "--device", "tpu"}), "tpu");
  require_failure(generate(dir, {"--prompt", "the", "--tokens", "3", "--threads", "-1"}),
                  "--threads");
  require_failure(run_program(kGenerate,
                              {"--checkpoint", dir.file("missing.safetensors"), "--prompt", "the",
                               "--tokens", "3"},
                              dir),
                  "missing.safetensors");
}

TEST_CASE("generate exits 1, not by SIGPIPE, when stdout is a closed pipe") {
  TempDir dir;
  write_tiny_checkpoint(dir);
  const ProgramRun run = run_with_closed_stdout(
      kGenerate,
      {"--checkpoint", dir.file("tiny.safetensors"), "--prompt", "the", "--tokens", "50"}, dir);
  INFO("stderr: " << run.err);
  REQUIRE(run.exited);
  REQUIRE(run.code == 1);
  REQUIRE_THAT(run.err, Catch::Contains("stdout"));
}

TEST_CASE("generate --help documents every flag with its default") {
  TempDir dir;
  const ProgramRun run = run_program(kGenerate, {"--help"}, dir);
  require_success(run);
  for (const char* flag :
       {"--checkpoint", "--prompt", "--tokens", "--temperature", "--top-k", "--top-p", "--seed",
        "--greedy", "--device", "--threads", "--no-cache", "--bench"})
    REQUIRE_THAT(run.out, Catch::Contains(flag));
  REQUIRE_THAT(run.out, Catch::Contains("=1") && Catch::Contains("=cpu"));
}
