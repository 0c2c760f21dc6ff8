// Exact resume: train_lm --steps 30 in one go, and --steps 10 --save C then --resume C --steps 30,
// end with bit-identical weights, optimizer state, losses and perplexities — with dropout on,
// shuffled windows, warm-up + cosine, a resume point inside an epoch, and 2 or 3 threads.
#include <catch2/catch.hpp>

#include "core/io/safetensors.h"
#include "programs.h"

using namespace kiln;
using namespace kiln::testing;

TEST_CASE("a resumed run matches an uninterrupted one bit for bit") {
  const std::string threads = GENERATE("2", "3");
  INFO("threads " << threads);
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  // 14 windows per epoch: step 10 is inside the first, step 30 in the third.
  const std::string flags = kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
                            " --dropout 0.1 --shuffle --schedule cosine --warmup 5 "
                            "--decay-steps 30 --eval-every 10 --log-every 10 --threads " +
                            threads;
  const RunResult whole = run(flags + " --steps 30 --save " + dir.file("whole.safetensors"));
  INFO(whole.output);
  REQUIRE(whole.status == 0);
  const RunResult first = run(flags + " --steps 10 --save " + dir.file("first.safetensors"));
  INFO(first.output);
  REQUIRE(first.status == 0);
  const SafetensorsFile saved = load_safetensors(dir.file("first.safetensors"));
  REQUIRE(saved.metadata.at("data_position").find("\"index\":10") != std::string::npos);
  const RunResult resumed = run(flags + " --resume " + dir.file("first.safetensors") +
                                " --steps 30 --save " + dir.file("resumed.safetensors"));
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.output.find("resumed from") != std::string::npos);
  CHECK(resumed.output.find("warning") == std::string::npos);

  // The same losses after the resume point, and the same final perplexities.
  for (long step : {20L, 30L}) {
    INFO("step " << step);
    REQUIRE(logged_loss(resumed.lines(), step).has_value());
    CHECK(logged_loss(resumed.lines(), step) == logged_loss(whole.lines(), step));
  }
  // "loss 2.7362 | ppl 15.43 | 0.3s | ...": everything up to the seconds.
  const auto loss_and_ppl = [](const std::string& text) {
    return text.substr(0, text.find(" | ", text.find("ppl ")));
  };
  for (const std::string prefix : {"validation at step 20: ", "validation at step 30: "})
    CHECK(loss_and_ppl(line_after(resumed.lines(), prefix).value()) ==
          loss_and_ppl(line_after(whole.lines(), prefix).value()));
  CHECK(line_after(resumed.lines(), "valid ppl ") == line_after(whole.lines(), "valid ppl "));
  CHECK(line_after(resumed.lines(), "test ppl ") == line_after(whole.lines(), "test ppl "));

  // The same weights and optimizer state, and the same position, RNG and schedule state.
  const SafetensorsFile a = load_safetensors(dir.file("whole.safetensors"));
  const SafetensorsFile b = load_safetensors(dir.file("resumed.safetensors"));
  check_same_tensors(a, b);
  for (const char* key : {"step", "decay_steps", "rng", "data_position", "optimizer", "schedule",
                          "threads", "gemm", "train", "config"})
    CHECK(a.metadata.at(key) == b.metadata.at(key));
  // Dropout masks are keyed by window: the file holds the seed of the keys, no stream offset.
  CHECK(a.metadata.at("rng").find("\"keyed\":true") != std::string::npos);
  CHECK(a.metadata.at("rng").find("offset") == std::string::npos);
  check_same_tensors(load_safetensors(dir.file("whole.best.safetensors")),
                     load_safetensors(dir.file("resumed.best.safetensors")));
}

TEST_CASE("a resumed run carries the best weights over to its own .best file") {
  TempDir dir;
  write_tiny_corpus(dir.path().string());
  const std::string flags = kTrainLm + " --data " + dir.path().string() + " " + kTinyFlags +
                            " --eval-every 10 --threads 1";
  const RunResult first = run(flags + " --steps 10 --save " + dir.file("first.safetensors"));
  INFO(first.output);
  REQUIRE(first.status == 0);
  // No further steps: the final lines come from first.best, recomputed, and land in second.best.
  const RunResult second = run(flags + " --resume " + dir.file("first.safetensors") +
                               " --steps 10 --save " + dir.file("second.safetensors"));
  INFO(second.output);
  REQUIRE(second.status == 0);
  for (const std::string split : {"valid", "test"}) {
    const auto expected = line_after(first.lines(), split + " ppl ");
    REQUIRE(expected.has_value());
    CHECK(line_after(second.lines(), split + " ppl ") == expected);
    const RunResult eval = run(kEvalPpl + " --checkpoint " + dir.file("second.best.safetensors") +
                               " --data " + dir.path().string() + " --split " + split);
    INFO(eval.output);
    CHECK(line_after(eval.lines(), split + " ppl ") == expected);
  }
}
