// Every numeric flag of the four programs follows one rule with one message (apps/common/
// flags.h): an empty value, text, a negative number, a number beyond its type, and 0 where 0 means
// nothing, are refused with "<flag> <value>: expected <rule>" and a status in [1, 127]. Before,
// 21 of train_lm's 34 numeric flags read '' as 0 (--steps '' ran without a limit, --lr '' trained
// at lr 0), eval_ppl's --seq-len 0 and --stride 0 silently meant the default, and --threads
// 100000 crashed OpenMP (SIGSEGV).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "programs.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

namespace {

struct Flag {
  std::string name;
  bool real;     // takes a fraction
  bool zero_ok;  // 0 is in its range
};

// train_lm's 36 numeric flags.
const std::vector<Flag> kTrainFlags = {
    {"--steps", false, true},
    {"--epochs", false, true},
    {"--time-budget", true, true},
    {"--decay-steps", false, true},
    {"--log-every", false, false},
    {"--save-every", false, true},
    {"--threads", false, true},
    {"--d-model", false, false},
    {"--heads", false, false},
    {"--kv-heads", false, true},
    {"--layers", false, false},
    {"--ff", false, false},
    {"--max-seq-len", false, false},
    {"--dropout", true, true},
    {"--attn-dropout", true, true},
    {"--seq-len", false, false},
    {"--batch-size", false, false},
    {"--seed", false, true},
    {"--momentum", true, true},
    {"--lr", true, false},
    {"--beta1", true, true},
    {"--beta2", true, true},
    {"--eps", true, false},
    {"--weight-decay", true, true},
    {"--clip", true, true},
    {"--grad-accum", false, false},
    {"--warmup", false, true},
    {"--step-size", false, true},
    {"--gamma", true, false},
    {"--min-lr", true, true},
    {"--factor", true, false},
    {"--patience", false, true},
    {"--eval-every", false, true},
    {"--eval-batch-size", false, false},
    {"--decay-fraction", true, false},
    {"--word-dropout", true, true},
};

// Values no numeric flag takes (empty, negative, beyond its type), and 0 for the flags whose
// range leaves it out. Other malformed text goes through the same parser: malformed_values.
std::vector<std::string> refused_values(const Flag& flag) {
  std::vector<std::string> values = {"''", "-1", flag.real ? "1e400" : "99999999999999999999"};
  if (flag.real) values.push_back("nan");
  if (!flag.zero_ok) values.push_back("0");
  return values;
}

std::vector<std::string> malformed_values(const Flag& flag) {
  std::vector<std::string> values = {"abc", "0x10", "' 5'", "5x"};
  values.push_back(flag.real ? "inf" : "1.5");
  return values;
}

void check_refused(const std::string& command, const std::string& flag) {
  const RunResult r = run(command);
  INFO(command << "\n" << r.output);
  CHECK(r.status >= 1);
  CHECK(r.status <= 127);
  CHECK_THAT(r.output, Contains(flag + " ") && Contains(": expected "));
}

}  // namespace

TEST_CASE(
    "train_lm refuses an empty, malformed, negative, overflowing or meaningless zero value "
    "of each numeric flag",
    "[examples][hostile][flags]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string train = kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
                            " --threads 1 --eval-every 0 --steps 2";
  REQUIRE(kTrainFlags.size() == 36);
  for (const Flag& flag : kTrainFlags)
    for (const std::string& value : refused_values(flag))
      check_refused(train + " " + flag.name + " " + value, flag.name);
  for (const Flag& flag : {kTrainFlags[0], kTrainFlags[2], kTrainFlags[19], kTrainFlags[17]})
    for (const std::string& value : malformed_values(flag))
      check_refused(train + " " + flag.name + " " + value, flag.name);
  // One message states the rule and what 0 means.
  const RunResult r = run(train + " --steps ''");
  CHECK_THAT(r.output, Contains("--steps '': expected an integer >= 0 (0: no limit)"));
  CHECK_THAT(run(train + " --beta2 1").output, Contains("--beta2 1: expected a number in [0, 1)"));
  // --eps 0 divides by zero in Adam: refused as a value, not reported later as "lower --lr".
  const RunResult eps = run(train + " --eps 0");
  CHECK_THAT(eps.output, Contains("--eps 0: expected a number > 0"));
  CHECK_THAT(eps.output, !Contains("--lr"));
}

TEST_CASE("eval_ppl, generate and attention_maps follow the same rule for their numeric flags",
          "[examples][hostile][flags]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string checkpoint = dir.file("lm.safetensors");
  REQUIRE(run(kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
              " --threads 1 --eval-every 0 --steps 2 --save " + checkpoint)
              .status == 0);
  const std::string eval =
      kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + checkpoint;
  const std::string generate = kGenerate + " --checkpoint " + checkpoint + " --prompt 'the cat'";
  const std::string maps =
      kAttentionMaps + " --checkpoint " + checkpoint + " --text 'the cat' --out " + dir.file("m");
  const std::vector<std::pair<std::string, Flag>> flags = {
      {eval, {"--batch-size", false, false}},
      {eval, {"--seq-len", false, false}},
      {eval, {"--stride", false, false}},
      {eval, {"--threads", false, true}},
      {generate + " --tokens 2", {"--temperature", true, false}},
      {generate + " --tokens 2", {"--top-k", false, true}},
      {generate + " --tokens 2", {"--top-p", true, false}},
      {generate + " --tokens 2", {"--seed", false, true}},
      {generate + " --tokens 2", {"--threads", false, true}},
      {generate, {"--tokens", false, true}},
      {maps, {"--threads", false, true}},
  };
  for (const auto& [command, flag] : flags)
    for (const std::string& value : refused_values(flag))
      check_refused(command + " " + flag.name + " " + value, flag.name);
  for (const auto& [command, flag] : {flags[1], flags[4]})
    for (const std::string& value : malformed_values(flag))
      check_refused(command + " " + flag.name + " " + value, flag.name);
  // 0 used to mean "the default" for these two, while -1 was refused.
  CHECK_THAT(run(eval + " --seq-len 0").output, Contains("--seq-len 0: expected an integer >= 1"));
  CHECK_THAT(run(eval + " --stride 0").output, Contains("--stride 0: expected an integer >= 1"));
  // --greedy ignores the temperature: the message must not tell the user to use --greedy.
  const RunResult greedy = run(generate + " --tokens 2 --greedy --temperature 0");
  CHECK(greedy.status != 0);
  CHECK_THAT(greedy.output,
             Contains("--temperature 0: expected a number > 0") && !Contains("use --greedy"));
}

TEST_CASE("no program takes more threads than OpenMP can run", "[examples][hostile][flags]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string checkpoint = dir.file("lm.safetensors");
  const std::string train =
      kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags + " --eval-every 0 --steps 2";
  REQUIRE(run(train + " --threads 1 --save " + checkpoint).status == 0);
  for (const std::string& command :
       {train, kEvalPpl + " --data " + dir.path().string() + " --checkpoint " + checkpoint,
        kGenerate + " --checkpoint " + checkpoint + " --prompt the --tokens 2",
        kAttentionMaps + " --checkpoint " + checkpoint + " --text the --out " + dir.file("m")}) {
    for (const char* threads : {"100000", "1025"}) {
      const RunResult r = run(command + " --threads " + threads);
      INFO(command << " --threads " << threads << "\n" << r.output);
      CHECK(r.status >= 1);
      CHECK(r.status <= 127);
      CHECK_THAT(r.output, Contains(std::string("--threads ") + threads +
                                    ": expected an integer in [0, 1024]"));
    }
    const RunResult three = run(command + " --threads 3");
    INFO(three.output);
    CHECK(three.status == 0);
  }
}

TEST_CASE("flags that point at the wrong kind of file get a message saying what is wrong",
          "[examples][hostile][flags]") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string train = kTrainLm + " " + kTinyFlags + " --threads 1 --eval-every 0 --steps 2";
  const std::string file = dir.file("train.txt");
  // --data naming a file, not the folder: not "folder not found".
  const RunResult data = run(train + " --data " + file);
  CHECK(data.status == 1);
  CHECK_THAT(data.output, Contains(file) && Contains("is a file, not a folder"));
  REQUIRE(run(train + " --data " + dir.path().string() + " --save " + dir.file("lm.safetensors"))
              .status == 0);
  const RunResult eval =
      run(kEvalPpl + " --checkpoint " + dir.file("lm.safetensors") + " --data " + file);
  CHECK(eval.status == 1);
  CHECK_THAT(eval.output, Contains("--data " + file) && Contains("a file, not a folder"));
  // A --save whose folder is a file: not "internal error: filesystem error".
  const RunResult save =
      run(train + " --data " + dir.path().string() + " --save " + file + "/lm.safetensors");
  CHECK(save.status == 1);
  CHECK_THAT(save.output, Contains("--save") && Contains(file + " is a file, not a folder"));
  CHECK_THAT(save.output, !Contains("internal error"));
  // --grad-accum beyond an epoch's 14 windows: not a step silently cut to the epoch.
  const RunResult accum =
      run(train + " --data " + dir.path().string() + " --grad-accum 1000000000000000000");
  CHECK(accum.status == 1);
  CHECK_THAT(accum.output, Contains("--grad-accum 1000000000000000000 exceeds the 14 windows"));
}

TEST_CASE("an empty path is a usage error naming its flag, never the flag left out",
          "[examples][hostile][flags]") {
  // Before: --resume '' trained a fresh model and saved it over --save's run; --save '' saved
  // nothing and exited 0; --data '' looked for the default folder.
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string data = " --data " + dir.path().string();
  const std::string save = dir.file("run.safetensors");
  const std::string train = kTrainLm + data + " " + kTinyFlags + " --threads 1 --eval-every 0";
  REQUIRE(run(train + " --steps 2 --save " + save).status == 0);
  const SafetensorsFile before = load_safetensors(save);
  const std::string checkpoint = " --checkpoint " + save;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {train + " --steps 4 --save " + save + " --resume ''", "--resume"},
      {train + " --steps 2 --save ''", "--save"},
      {train + " --steps 2 --metrics ''", "--metrics"},
      {kTrainLm + " " + kTinyFlags + " --steps 2 --data ''", "--data"},
      {kTrainCustom + data + " --steps 2 --resume ''", "--resume"},
      {kTrainCustom + data + " --steps 2 --save ''", "--save"},
      {kTrainCustom + " --steps 2 --data ''", "--data"},
      {kEvalPpl + data + " --checkpoint ''", "--checkpoint"},
      {kEvalPpl + checkpoint + " --data ''", "--data"},
      {kGenerate + " --prompt the --tokens 2 --checkpoint ''", "--checkpoint"},
      {kAttentionMaps + " --text the --out " + dir.file("m") + " --checkpoint ''", "--checkpoint"},
      {kAttentionMaps + " --text the" + checkpoint + " --out ''", "--out"},
  };
  for (const auto& [command, flag] : cases) {
    const RunResult r = run(command);
    INFO(command << "\n" << r.output);
    CHECK(r.status >= 1);
    CHECK(r.status <= 127);
    CHECK_THAT(r.output, Contains(flag + " '': expected a path"));
    CHECK_THAT(r.output, !Contains("step 1"));
  }
  check_same_tensors(before, load_safetensors(save));  // the run given as --save is untouched
}

TEST_CASE("train_custom's flags follow train_lm's rules", "[examples][hostile][flags]") {
  // Before: --steps '', 0 and 99999999999999999999 ran with no limit; --save /dev/null wrote a
  // real /dev/null.best, then failed; a FIFO or a symbolic link was replaced.
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string custom = kTrainCustom + " --data " + dir.path().string();
  for (const std::string value : {"''", "0", "-1", "99999999999999999999", "1.5", "abc"})
    check_refused(custom + " --steps " + value, "--steps");
  CHECK_THAT(run(custom + " --steps 0").output, Contains("--steps 0: expected an integer >= 1"));
  const std::string real = dir.file("real.safetensors");
  REQUIRE(run(custom + " --steps 2 --save " + real).status == 0);
  const std::string fifo = dir.file("fifo.safetensors"), link = dir.file("link.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::filesystem::create_symlink(real, link);
  for (const auto& [save, shown] :
       {std::pair{std::string("/dev/null"), std::string("/dev/null: it is a "
                                                        "character device")},
        {fifo, fifo + ": it is a FIFO"},
        {link, link + ": it is a symbolic link"}}) {
    const RunResult r = run(custom + " --steps 2 --save " + save);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Contains("--save") && Contains(shown));
    CHECK_THAT(r.output, !Contains("step 1") && !Contains("valid ppl"));
  }
  CHECK(std::filesystem::is_fifo(fifo));
  CHECK(std::filesystem::is_symlink(link));
  CHECK(std::filesystem::is_character_file("/dev/null"));
}
