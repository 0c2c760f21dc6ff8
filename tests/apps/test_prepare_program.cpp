// kiln-prepare and the programs on its datasets, as a user runs them: character and BPE models
// of the default size prepared from a small text, trained, evaluated (bits per byte) and sampled
// to text; and the prepare step's usage errors.
#include <filesystem>
#include <fstream>
#include <iterator>

#include <map>

#include <catch2/catch.hpp>

#include "tests/apps/programs.h"

using namespace kiln::testing;
using Catch::Matchers::Contains;

namespace {

// About 20 KB of varied text with accents, CJK and CRLF line ends.
std::string small_text() {
  std::string text;
  const char* subjects[] = {"the cat", "a dog", "Zoë", "the old king", "中文"};
  const char* verbs[] = {"sees", "likes", "can't find", "writes to", "dreams of"};
  for (int i = 0; i < 400; ++i)
    text += std::string(subjects[i % 5]) + " " + verbs[(i / 5) % 5] + " item " +
            std::to_string(i % 37) + (i % 7 == 0 ? ".\r\n" : ".\n");
  return text;
}

// Every file of a folder, by name, with its bytes.
std::map<std::string, std::string> folder_files(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    files[entry.path().filename().string()] =
        std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return files;
}

}  // namespace

TEST_CASE("char and BPE models of the default size train on a small text and generate text") {
  TempDir dir;
  dir.write("text.txt", small_text());
  for (const std::string tokenizer : {"char", "bpe"}) {
    INFO("tokenizer " << tokenizer);
    const std::string data = dir.file(tokenizer), save = dir.file(tokenizer + ".safetensors");
    const RunResult prepared =
        run(kPrepare + " --input " + dir.file("text.txt") + " --out " + data + " --tokenizer " +
            tokenizer + " --valid-fraction 0.1 --test-fraction 0.1 --threads 2");
    INFO(prepared.output);
    REQUIRE(prepared.status == 0);
    CHECK_THAT(prepared.output, Contains("dataset " + data + ": " + tokenizer + " tokenizer"));
    const RunResult trained =
        run(kTrainLm + " --data " + data +
            " --steps 2 --eval-every 2 --time-budget 0 --threads 2 --save " + save);
    INFO(trained.output);
    REQUIRE(trained.status == 0);
    const std::vector<std::string> lines = trained.lines();
    CHECK(line_after(lines, "valid bpb ").has_value());
    CHECK(line_after(lines, "test bpb ").has_value());
    CHECK(line_after(lines, "valid ppl ").has_value());
    CHECK(line_after(lines, "RESULT train_tokens_per_sec").has_value());
    const RunResult evaluated = run(kEvalPpl + " --data " + data + " --split test --checkpoint " +
                                    dir.file(tokenizer + ".best.safetensors"));
    INFO(evaluated.output);
    REQUIRE(evaluated.status == 0);
    // eval_ppl reproduces train_lm's final line from the best weights.
    CHECK(line_after(evaluated.lines(), "test bpb ") == line_after(lines, "test bpb "));
    const RunResult generated = run(kGenerate + " --checkpoint " + save +
                                    " --prompt 'the cat' --tokens 30 --seed 3 2>/dev/null");
    INFO(generated.output);
    REQUIRE(generated.status == 0);
    CHECK(!generated.output.empty());
    // A text folder is encoded with the checkpoint's tokenizer.
    std::filesystem::create_directories(dir.file("folder"));
    dir.write("folder/valid.txt", "the cat sees item 3.\n");
    const RunResult on_text = run(kEvalPpl + " --data " + dir.file("folder") +
                                  " --split valid --seq-len 4 --batch-size 2 --checkpoint " + save);
    INFO(on_text.output);
    CHECK(on_text.status == 0);
    CHECK_THAT(on_text.output, Contains("valid bpb"));
  }
}

TEST_CASE("errors/kiln-prepare: bad inputs exit 1 with a message naming them") {
  TempDir dir;
  dir.write("empty.txt", "");
  RunResult r = run(kPrepare + " --input " + dir.file("empty.txt") + " --out " + dir.file("o"));
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("no text"));
  dir.write("long.txt", std::string(100, 'x') + "\n" + std::string(20, 'y') + "\n");
  r = run(kPrepare + " --train " + dir.file("long.txt") + " --valid " + dir.file("long.txt") +
          " --test " + dir.file("long.txt") + " --max-line-bytes 50 --out " + dir.file("o"));
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("long.txt:1") && Contains("--max-line-bytes"));
  // An empty --tokenizer-file once trained a fresh BPE and exited 0.
  dir.write("text.txt", small_text());
  r = run(kPrepare + " --input " + dir.file("text.txt") + " --tokenizer-file '' --out " +
          dir.file("o"));
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("--tokenizer-file: the path is empty"));
  CHECK_FALSE(std::filesystem::exists(dir.file("o")));
  r = run(kPrepare + " --out " + dir.file("o") + " --tokenizer sentencepiece --input x");
  CHECK(r.status != 0);
  r = run(kPrepare + " --help");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("--valid-fraction") && Contains("--tokenizer-file") &&
                           Contains("--max-line-bytes"));
}

TEST_CASE("a kiln-prepare stopped part way leaves the old dataset whole, or none") {
  // Found by a probe: on a full disk, re-preparing replaced tokenizer.json and then failed, so the
  // old dataset no longer loaded; a fresh --out was left with a lone tokenizer.json. Here a file
  // size limit (prlimit) stops the run at its largest file: prepare.json, which lists 1,500
  // sources, comes after the tokenizer and the shards.
  TempDir dir;
  dir.write("old.txt", small_text());
  const std::string out = dir.file("ds");
  REQUIRE(run(kPrepare + " --input " + dir.file("old.txt") + " --out " + out +
              " --tokenizer char --valid-fraction 0.1 --test-fraction 0.1")
              .status == 0);
  const std::map<std::string, std::string> old = folder_files(out);
  REQUIRE(old.size() == 5);
  std::filesystem::create_directories(dir.path() / "many");
  for (int i = 0; i < 1500; ++i)
    dir.write("many/a-text-file-with-a-rather-long-name-" + std::to_string(i) + ".txt", "ab\n");
  dir.write("valid.txt", "ab\n");
  const std::string prepare = kPrepare + " --train " + dir.file("many") + " --valid " +
                              dir.file("valid.txt") + " --test " + dir.file("valid.txt") +
                              " --tokenizer char --out ";
  // Without the limit the new dataset is written, and its manifest is the largest file.
  const std::string fresh = dir.file("fresh");
  REQUIRE(run(prepare + fresh).status == 0);
  const std::map<std::string, std::string> written = folder_files(fresh);
  for (const auto& [name, bytes] : written) {
    CAPTURE(name);
    if (name != "prepare.json") CHECK(bytes.size() < 30000);
  }
  REQUIRE(written.at("prepare.json").size() > 60000);
  std::filesystem::remove_all(fresh);
  for (const std::string stop : {"", "trap '' XFSZ; "}) {  // killed by SIGXFSZ, or EFBIG
    CAPTURE(stop);
    const std::string limit = stop + "prlimit --fsize=40000 ";
    RunResult r = run(limit + prepare + out);
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK(folder_files(out) == old);
    r = run(limit + prepare + fresh);
    CHECK(r.status != 0);
    CHECK_FALSE(std::filesystem::exists(fresh));
  }
  // What the killed runs left beside --out (hidden, never the dataset) the next run removes.
  REQUIRE(run(prepare + out).status == 0);
  REQUIRE(run(prepare + fresh).status == 0);
  CHECK(folder_files(out) == written);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    CHECK(entry.path().filename().string().find("kiln-prepare") == std::string::npos);
  // Anything but a dataset's files in --out is refused: the whole folder is replaced.
  dir.write("ds/notes.txt", "mine");
  const RunResult r = run(prepare + out);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("notes.txt") && Contains("give a folder of its own"));
  CHECK(std::filesystem::exists(dir.file("ds/notes.txt")));
}
