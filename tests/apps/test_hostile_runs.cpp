// Runs a careless or hostile user starts (issue 22): save targets that are not files, a FIFO
// where a checkpoint should be, a learning rate that blows the weights up, a resumed run beside
// a better .best, a stdout that cannot take the result, a corpus without words. Each ended, before
// its fix, in a replaced device node, a hang, a NaN checkpoint over a good one, lost best weights,
// exit 0 without output, or a perplexity of 1.00.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "core/io/safetensors.h"
#include "core/ops/factories.h"
#include "programs.h"
#include "tests/apps/crafted.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

TEST_CASE("train_lm refuses a --save target that exists and is not a regular file",
          "[examples][hostile]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string train = tiny_train(dir) + " --eval-every 0 --steps 2";
  const std::string real = dir.file("real.safetensors");
  REQUIRE(run(train + " --save " + real).status == 0);
  const std::string fifo = dir.file("fifo.safetensors"), link = dir.file("link.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::filesystem::create_symlink(real, link);
  // The loss curve's path next to a regular --save: a FIFO there too.
  const std::string curve_fifo = dir.file("other.curve.svg");
  REQUIRE(::mkfifo(curve_fifo.c_str(), 0600) == 0);
  for (const auto& [save, shown] :
       {std::pair{fifo, fifo + ": it is a FIFO"},
        {link, link + ": it is a symbolic link"},
        {dir.file("other.safetensors"), curve_fifo + ": it is a FIFO"}}) {
    const RunResult r = run(train + " --save " + save);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Contains("--save") && Contains(shown));
    CHECK_THAT(r.output, !Contains("step 1"));  // refused before training
  }
  CHECK(std::filesystem::is_fifo(fifo));
  CHECK(std::filesystem::is_symlink(link));
  CHECK(std::filesystem::is_fifo(curve_fifo));
  CHECK(!std::filesystem::exists(dir.file("other.safetensors")));
}

TEST_CASE("a FIFO given as --checkpoint or --resume is an error at once, not a hang",
          "[examples][hostile]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string fifo = dir.file("ckpt.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // timeout(1) turns the old hang into status 124 (or 137: train_lm takes SIGTERM as a request to
  // stop at the next step, which a process stuck in open() never reaches).
  for (const std::string& command :
       {kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + fifo,
        tiny_train(dir) + " --steps 2 --resume " + fifo,
        kGenerate + " --prompt the --tokens 2 --checkpoint " + fifo}) {
    const RunResult r = run("timeout -k 5 20 " + command);
    INFO(command << "\n" << r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Contains(fifo) && Contains("not a regular file"));
  }
}

TEST_CASE("a FIFO or a folder given as a token shard is an error at once, not a hang",
          "[examples][hostile]") {
  // Found by a probe: a FIFO as valid.bin blocked train_lm, eval_ppl and --resume forever.
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string data = dir.file("ds"), save = dir.file("lm.safetensors");
  REQUIRE(run(std::string(KILN_PREPARE) + " --input " + dir.path().string() + " --out " + data +
              " --tokenizer char")
              .status == 0);
  const std::string train = kTrainLm + " --data " + data + " " + kTinyFlags + " --threads 1";
  REQUIRE(run(train + " --steps 2 --eval-every 0 --save " + save).status == 0);
  const std::string shard = data + "/valid.bin";
  for (const bool fifo : {true, false}) {
    std::filesystem::remove(shard);
    if (fifo) {
      REQUIRE(::mkfifo(shard.c_str(), 0600) == 0);
    } else {
      std::filesystem::create_directory(shard);
    }
    // timeout(1) turns a hang into status 124 (or 137).
    for (const std::string& command :
         {train + " --steps 2", train + " --steps 4 --resume " + save,
          kEvalPpl + " --data " + data + " --split valid --checkpoint " + save}) {
      const RunResult r = run("timeout -k 5 20 " + command);
      INFO(command << "\n" << r.output);
      CHECK(r.status == 1);
      CHECK_THAT(r.output,
                 Contains(shard) && Contains(fifo ? "it is a FIFO, not a regular file"
                                                  : "it is a folder, not a regular file"));
    }
  }
}

TEST_CASE("weights that overflow are never saved over a good checkpoint", "[examples][hostile]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string checkpoint = dir.file("lm.safetensors");
  const std::string train = tiny_train(dir) + " --eval-every 0 --log-every 1 --steps 10";
  REQUIRE(run(train + " --save " + checkpoint).status == 0);
  const std::string good = file_bytes(checkpoint);
  // One step at lr 1e30 has a finite loss and gradients and gives weights of about 1e30: finite,
  // but the next forward pass overflows. --save-every 1 used to save them after that step.
  const RunResult r = run(train + " --lr 1e30 --save-every 1 --save " + checkpoint);
  INFO(r.output);
  CHECK(r.status >= 1);
  CHECK(r.status <= 127);
  CHECK_THAT(r.output, Contains("step 1: the weights give a loss of") &&
                           Contains(checkpoint + " keeps its last good state"));
  CHECK(file_bytes(checkpoint) == good);
}

TEST_CASE("eval_ppl never prints a NaN perplexity with exit 0", "[examples][hostile]") {
  TempDir dir;
  const std::string base = train_base_checkpoint(dir);
  const std::string blown = dir.file("blown.safetensors");
  rewrite_checkpoint(base, blown, [](Metadata&, NamedTensors& tensors) {
    for (auto& [name, tensor] : tensors)
      if (name.rfind("optim.", 0) != 0) tensor = full(tensor.shape(), 1e30);
  });
  const RunResult r = run(kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + blown);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains(blown) && Contains("no usable perplexity"));
  CHECK_THAT(r.output, !Contains("ppl -nan") && !Contains("ppl nan"));
}

TEST_CASE("skipped steps are counted in the log line, not hidden behind the finite ones' loss",
          "[examples][hostile]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const RunResult r =
      run(tiny_train(dir) + " --eval-every 0 --log-every 10 --steps 10 --lr 1e30 --skip-nonfinite");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::smatch match;
  const std::string output = r.output;
  REQUIRE(std::regex_search(output, match,
                            std::regex(R"(step 10/10 [^\n]*\| ([0-9]+) of 10 steps skipped)")));
  CHECK(std::stoi(match[1]) >= 8);
  CHECK_THAT(r.output, Contains(match[1].str() + " skipped as non-finite"));
}

TEST_CASE("a resumed run never replaces a better .best beside its --save", "[examples][hostile]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string flags = tiny_train(dir) + " --eval-every 10 --log-every 10";
  const std::string run_path = dir.file("run.safetensors"), best = dir.file("run.best.safetensors");
  // The run to step 10, a copy of that state, and the run on to step 20 (a better .best).
  REQUIRE(run(flags + " --steps 10 --save " + run_path).status == 0);
  std::filesystem::copy_file(run_path, dir.file("at10.safetensors"));
  std::filesystem::copy_file(best, dir.file("at10.best.safetensors"));
  const RunResult on = run(flags + " --steps 20 --resume " + run_path + " --save " + run_path);
  INFO(on.output);
  REQUIRE(on.status == 0);
  REQUIRE_THAT(on.output, Contains("validation at step 20") && Contains("new best"));
  const std::string best_at_20 = file_bytes(best);
  // The step-10 state resumed into the same --save, at a lower lr: its step 20 is better than
  // step 10 but worse than the first run's step 20. Before, it was saved as the "new best".
  const RunResult again = run(flags + " --steps 20 --lr 3e-4 --resume " +
                              dir.file("at10.safetensors") + " --save " + run_path);
  INFO(again.output);
  REQUIRE(again.status == 0);
  CHECK_THAT(again.output, Contains("the best weights so far are " + best));
  CHECK_THAT(again.output, !Contains("new best"));
  CHECK(file_bytes(best) == best_at_20);
  // The final lines come from those best weights, as eval_ppl on the file reproduces.
  const RunResult eval = run(kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + best);
  REQUIRE(eval.status == 0);
  CHECK(line_after(eval.lines(), "valid ppl ") == line_after(again.lines(), "valid ppl "));
}

TEST_CASE("train_lm and eval_ppl fail when stdout cannot take their result",
          "[examples][hostile]") {
  TempDir dir;
  const std::string base = train_base_checkpoint(dir);
  const std::string eval = kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + base;
  const std::string train = tiny_train(dir) + " --eval-every 0 --steps 2";
  for (const std::string& command : {eval, train}) {
    // sh -c: the program's stdout goes to /dev/full or is closed, its stderr to the test.
    for (const char* redirect : {" > /dev/full", " >&-"}) {
      const RunResult r = run("sh -c '" + command + redirect + "'");
      INFO(command << redirect << "\n" << r.output);
      CHECK(r.status == 1);
      CHECK_THAT(r.output, Contains("writing to stdout failed"));
    }
  }
}

TEST_CASE("a corpus of blank lines is an error, not a model of ppl 1.00", "[examples][hostile]") {
  TempDir dir;
  for (const char* split : {"train.txt", "valid.txt", "test.txt"})
    std::ofstream(dir.path() / split) << std::string(400, '\n');
  const RunResult r = run(tiny_train(dir) + " --steps 2");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("train.txt has 400 lines but no words"));
}
