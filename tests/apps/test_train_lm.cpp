// train_lm and eval_ppl end to end on a tiny corpus: the loss falls, the output, metrics and
// files are those README.md documents, and eval_ppl reproduces train_lm's final lines.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "core/io/safetensors.h"
#include "programs.h"
#include "tests/harness/paths.h"

using namespace kiln;
using namespace kiln::testing;
using Catch::Contains;

namespace {

// A 30-step run validated every 10 steps, saved to <dir>/runs/lm.safetensors.
RunResult train_tiny(const TempDir& dir, const std::string& extra = "") {
  write_tiny_corpus(dir.path().string());
  return run(kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
             " --steps 30 --eval-every 10 --log-every 5 --save " + dir.file("runs/lm.safetensors") +
             " --metrics " + dir.file("runs/lm.metrics.jsonl") + " " + extra);
}

bool python_has(const std::string& module) {
  return run("/usr/bin/python3 -c 'import " + module + "'").status == 0;
}

}  // namespace

TEST_CASE("train_lm trains a tiny model and ends with the contract's lines") {
  TempDir dir;
  const RunResult r = train_tiny(dir, "--threads 1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::vector<std::string> lines = r.lines();
  REQUIRE(lines.size() >= 3);
  const std::size_t n = lines.size();
  CHECK(std::regex_match(lines[n - 3], std::regex(R"(valid ppl [0-9]+\.[0-9]{2})")));
  CHECK(std::regex_match(lines[n - 2], std::regex(R"(test ppl [0-9]+\.[0-9]{2})")));
  CHECK(std::regex_match(lines[n - 1], std::regex(R"(RESULT train_tokens_per_sec [0-9]+\.[0-9] )"
                                                  R"(steps 30 seconds [0-9]+\.[0-9])")));
  // The environment comes first, with the model's size and the data's.
  CHECK(lines[0].rfind("kiln ", 0) == 0);
  CHECK(r.output.find("parameters") != std::string::npos);
  CHECK(r.output.find("train 1760 valid 400 test 400 tokens") != std::string::npos);

  // The loss falls: the mean train loss of steps 26-30 is well below that of steps 1-5.
  const double first = std::stod(logged_loss(lines, 5).value());
  const double last = std::stod(logged_loss(lines, 30).value());
  CHECK(last < first - 0.3);

  // Files: the latest state, the best weights and the loss curve, next to --save.
  CHECK(std::filesystem::exists(dir.file("runs/lm.safetensors")));
  CHECK(std::filesystem::exists(dir.file("runs/lm.best.safetensors")));
  CHECK(std::filesystem::exists(dir.file("runs/lm.curve.svg")));
  const SafetensorsFile state = load_safetensors(dir.file("runs/lm.safetensors"));
  for (const char* key :
       {"format", "config", "step", "decay_steps", "vocab", "rng", "data_position", "threads",
        "gemm", "git", "train", "optimizer", "schedule"})
    CHECK(state.metadata.count(key) == 1);
  CHECK(state.metadata.at("step") == "30");
  CHECK(state.metadata.at("threads") == "1");
  bool has_optimizer_state = false;
  for (const auto& [name, tensor] : state.tensors)
    has_optimizer_state |= name.rfind("optim.", 0) == 0;
  CHECK(has_optimizer_state);
}

TEST_CASE("train_lm's metrics are JSON Lines with the contract's schema") {
  TempDir dir;
  const RunResult r = train_tiny(dir, "--threads 1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(dir.file("runs/lm.metrics.jsonl"));
  std::vector<std::int64_t> train_steps, valid_steps, test_steps;
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    const nlohmann::json row = nlohmann::json::parse(line);
    REQUIRE(row.is_object());
    REQUIRE(row["step"].is_number_integer());
    REQUIRE(row["loss"].is_number());
    REQUIRE(row["ppl"].is_number());
    CHECK(std::abs(row["ppl"].get<double>() - std::exp(row["loss"].get<double>())) <
          1e-9 * row["ppl"].get<double>());
    const std::string split = row["split"].get<std::string>();
    const std::int64_t step = row["step"].get<std::int64_t>();
    if (split == "train") {
      for (const char* key : {"lr", "tokens_per_s", "elapsed_s"}) CHECK(row[key].is_number());
      CHECK(row.size() == 7);
      train_steps.push_back(step);
    } else {
      CHECK(row.size() == 4);
      (split == "valid" ? valid_steps : test_steps).push_back(step);
      CHECK((split == "valid" || split == "test"));
    }
  }
  CHECK(train_steps == std::vector<std::int64_t>{5, 10, 15, 20, 25, 30});
  CHECK(valid_steps == std::vector<std::int64_t>{10, 20, 30});
  CHECK(test_steps.size() == 1);
}

TEST_CASE("eval_ppl on the best checkpoint reproduces train_lm's final lines exactly") {
  TempDir dir;
  const RunResult train = train_tiny(dir, "--threads 1");
  INFO(train.output);
  REQUIRE(train.status == 0);
  const std::string best = dir.file("runs/lm.best.safetensors");
  for (const std::string split : {"valid", "test"}) {
    const RunResult eval = run(kEvalPpl + " --checkpoint " + best + " --data " +
                               dir.path().string() + " --split " + split);
    INFO(eval.output);
    REQUIRE(eval.status == 0);
    const auto trained = line_after(train.lines(), split + " ppl ");
    const auto evaluated = line_after(eval.lines(), split + " ppl ");
    REQUIRE(trained.has_value());
    CHECK(evaluated == trained);
    // Loss in nats, tokens scored (B 10 columns of 40 rows: 10 × 39 targets) and speed.
    CHECK(eval.output.find(split + " loss ") != std::string::npos);
    CHECK(eval.output.find("390 tokens scored") != std::string::npos);
    CHECK(eval.output.find("tokens/s") != std::string::npos);
  }
  // A stride below T adds a separately labelled line after the headline.
  const RunResult sliding = run(kEvalPpl + " --checkpoint " + best + " --data " +
                                dir.path().string() + " --split valid --stride 4");
  INFO(sliding.output);
  REQUIRE(sliding.status == 0);
  CHECK(line_after(sliding.lines(), "valid ppl ") == line_after(train.lines(), "valid ppl "));
  const auto strided = line_after(sliding.lines(), "valid ppl (stride 4) ");
  REQUIRE(strided.has_value());
  CHECK(std::regex_match(*strided, std::regex(R"([0-9]+\.[0-9]{2})")));
}

TEST_CASE("train_lm's checkpoint passes tools/check_safetensors.py") {
  if (!python_has("zlib")) {
    std::puts("skipped: /usr/bin/python3 is needed for tools/check_safetensors.py");
    return;
  }
  TempDir dir;
  const RunResult train = train_tiny(dir, "--threads 1");
  INFO(train.output);
  REQUIRE(train.status == 0);
  for (const char* file : {"runs/lm.safetensors", "runs/lm.best.safetensors"}) {
    const RunResult check =
        run("/usr/bin/python3 " + source_path("tools/check_safetensors.py") + " " + dir.file(file));
    INFO(check.output);
    CHECK(check.status == 0);
  }
}

TEST_CASE("train_lm's loss curve is well-formed SVG") {
  if (!python_has("xml.dom.minidom")) {
    std::puts("skipped: /usr/bin/python3 is needed to parse the SVG");
    return;
  }
  TempDir dir;
  const RunResult train = train_tiny(dir, "--threads 1");
  INFO(train.output);
  REQUIRE(train.status == 0);
  const RunResult parse =
      run("/usr/bin/python3 -c 'import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
          "e = d.documentElement; assert e.tagName == \"svg\", e.tagName; "
          "assert len(e.getElementsByTagName(\"polyline\")) == 2; "
          "print(\" \".join(t.firstChild.data for t in e.getElementsByTagName(\"text\")))' " +
          dir.file("runs/lm.curve.svg"));
  INFO(parse.output);
  CHECK(parse.status == 0);
  CHECK(parse.output.find("perplexity (log scale)") != std::string::npos);
  CHECK(parse.output.find("step") != std::string::npos);
  CHECK(parse.output.find("train_lm on") != std::string::npos);
}

TEST_CASE("train_lm learns on WikiText-2") {
  const char* data = std::getenv("KILN_DATA");
  if (data == nullptr || *data == '\0') {
    std::puts("skipped: no WikiText-2 data (set KILN_DATA)");
    return;
  }
  const RunResult r = run(kTrainLm + " --data " + data + " " + kTinyFlags +
                          " --steps 20 --eval-every 0 --log-every 10 --threads 1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::vector<std::string> lines = r.lines();
  CHECK(r.output.find("vocab 33278 | train 2088628 valid 217646 test 245569 tokens") !=
        std::string::npos);
  CHECK(std::stod(logged_loss(lines, 20).value()) < std::stod(logged_loss(lines, 10).value()));
  // --eval-every 0: no evaluation at all, so RESULT is the last line.
  CHECK(!line_after(lines, "valid ppl ").has_value());
  CHECK(lines.back().rfind("RESULT train_tokens_per_sec ", 0) == 0);
}

// The schedule's length D of a run bounded only by --time-budget: "--decay-steps D reproduces
// this run" in the output, and the checkpoint's decay_steps.
namespace {

std::int64_t fitted_length(const RunResult& r, const std::string& kind) {
  const std::string marker = "schedule: " + kind + " over ";
  const std::size_t at = r.output.find(marker);
  REQUIRE(at != std::string::npos);
  return std::stoll(r.output.substr(at + marker.size()));
}

}  // namespace

TEST_CASE("a cosine or wsd run bounded by --time-budget alone fits its length to the budget") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string train = tiny_train(dir) + " --eval-every 0 --log-every 1 --time-budget 1.5";
  for (const std::string kind : {"wsd", "cosine"}) {
    INFO(kind);
    const std::string checkpoint = dir.file(kind + ".safetensors");
    const RunResult fitted =
        run(train + " --schedule " + kind + " --warmup 12 --min-lr 1e-4 --save " + checkpoint);
    INFO(fitted.output);
    REQUIRE(fitted.status == 0);
    CHECK_THAT(fitted.output, Contains("stopped by --time-budget"));
    const std::int64_t length = fitted_length(fitted, kind);
    const SafetensorsFile saved = load_safetensors(checkpoint);
    CHECK(saved.metadata.at("decay_steps") == std::to_string(length));
    // Timed over the steps after the first: the budget's end is the length's, give or take the
    // clock's noise (the run stops at the budget, wherever the schedule then is).
    const long steps = std::stol(saved.metadata.at("step"));
    CHECK(length > 12);
    // wsd fixes it as late as it can, right before its decay (the last 20% of the length), so
    // the rate is timed over most of the run; cosine right after its warm-up.
    const std::string timed = "timed over ";
    const long timed_steps =
        std::stol(fitted.output.substr(fitted.output.find(timed) + timed.size()));
    if (kind == "wsd")
      CHECK(timed_steps + 2 >= length - std::llround(0.2 * static_cast<double>(length)));
    if (kind == "cosine") CHECK(timed_steps == 11);
    CHECK(static_cast<double>(length) > 0.5 * static_cast<double>(steps));
    CHECK(static_cast<double>(length) < 2.0 * static_cast<double>(steps));
    // The printed length reproduces the run's losses bit for bit, fixed from the start.
    const RunResult again = run(tiny_train(dir) + " --eval-every 0 --log-every 1 --schedule " +
                                kind + " --warmup 12 --min-lr 1e-4 --decay-steps " +
                                std::to_string(length) + " --steps " + std::to_string(steps));
    INFO(again.output);
    REQUIRE(again.status == 0);
    CHECK(again.output.find("schedule: " + kind + " over") == std::string::npos);
    for (long step = 1; step <= steps; step += std::max(1L, steps / 7))
      CHECK(logged_loss(again.lines(), step) == logged_loss(fitted.lines(), step));
    CHECK(logged_loss(again.lines(), steps) == logged_loss(fitted.lines(), steps));
  }
}
