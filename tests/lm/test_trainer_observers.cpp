// lm::Trainer with an observer that fails, as a --metrics file on a full disk or a loss curve
// that cannot be written does: the run is not lost. Before, the exception left train() at once,
// and a run that had trained for an hour ended without its checkpoint (issue 43). And
// lm::MetricsLog on a disk that fills up mid-row: no row is left cut.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "core/generator.h"
#include "lm/checkpoint.h"
#include "lm/metrics_log.h"
#include "lm/train_state.h"
#include "lm/trainer.h"
#include "nn/transformer_lm.h"
#include "optim/adam.h"
#include "tests/harness/temp_dir.h"

using namespace kiln;
using Catch::Matchers::Contains;
using kiln::testing::TempDir;

namespace {

// A corpus of 40 short lines per split in dir.
void write_corpus(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += i % 2 ? "the cat sat on the mat .\n" : "a dog ran .\n";
  for (const char* split : {"train.txt", "valid.txt", "test.txt"}) dir.write(split, text);
}

// Throws from on_step at step `fail_at` (as MetricsLog does on a full disk), or from on_final.
class FailingObserver : public lm::TrainObserver {
 public:
  explicit FailingObserver(std::int64_t fail_at) : fail_at_(fail_at) {}
  void on_step(const lm::Trainer&, const lm::StepRecord& step) override {
    ++steps_seen;
    if (step.step == fail_at_) fail("--metrics m.jsonl: write failed: No space left on device");
  }
  void on_final(const lm::Trainer&, const lm::FinalResult&) override {
    if (fail_at_ == 0) throw std::runtime_error("the final row could not be written");
  }
  std::int64_t steps_seen = 0;

 private:
  std::int64_t fail_at_;
};

struct Run {
  TempDir dir;
  Corpus corpus;
  std::unique_ptr<nn::TransformerLM> model;
  std::unique_ptr<Adam> optimizer;
  std::unique_ptr<lm::Trainer> trainer;
  std::string save;

  Run() : corpus((write_corpus(dir), dir.path())), save(dir.file("lm.safetensors")) {
    nn::TransformerConfig config;
    config.vocab = corpus.vocabulary().size();
    config.d_model = 16, config.heads = 2, config.layers = 1, config.ff = 32;
    config.max_seq_len = 8;
    manual_seed(5);
    model = std::make_unique<nn::TransformerLM>(config);
    optimizer = std::make_unique<Adam>(model->named_parameters());
    trainer = std::make_unique<lm::Trainer>(
        *model, *optimizer, corpus,
        lm::TrainerOptions{
            .batch_size = 2, .seq_len = 8, .steps = 10, .eval_every = 4, .save = save});
  }
};

}  // namespace

TEST_CASE("an observer that fails mid-run stops it at the step boundary, saved, then an error",
          "[trainer]") {
  Run run;
  FailingObserver observer(3);
  run.trainer->add_observer(observer);
  REQUIRE(run.trainer->train() == lm::StopReason::requested);
  CHECK(observer.steps_seen == 3);  // no step after the failure
  REQUIRE_THROWS_WITH(run.trainer->finish(),
                      Contains("--metrics m.jsonl: write failed: No space left on device") &&
                          Contains("training stopped at step 3") &&
                          Contains("saved its state to " + run.save));
  // The state of step 3 is there, and resumes.
  const lm::Checkpoint saved = lm::read_checkpoint(run.save);
  CHECK(lm::read_train_state(saved).step == 3);
}

TEST_CASE("an observer that fails at the end still leaves the saved run, then an error",
          "[trainer]") {
  Run run;
  FailingObserver observer(0);
  run.trainer->add_observer(observer);
  REQUIRE(run.trainer->train() == lm::StopReason::steps);
  REQUIRE_THROWS_WITH(run.trainer->finish(), Contains("the final row could not be written") &&
                                                 Contains("training stopped at step 10"));
  CHECK(lm::read_train_state(lm::read_checkpoint(run.save)).step == 10);
  CHECK(std::filesystem::exists(lm::best_checkpoint_path(run.save)));
}

TEST_CASE("a metrics row that the disk cuts short is taken back, never left half-written",
          "[trainer]") {
  // A child process whose files may not grow past 120 bytes (RLIMIT_FSIZE, SIGXFSZ ignored):
  // the write that crosses the limit writes part of its row, as a full disk does.
  Run run;
  const std::string path = run.dir.file("metrics.jsonl");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{120, 120};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int status = 3;
    try {
      lm::MetricsLog log(path, false);
      for (std::int64_t step = 1; step <= 10; ++step)
        log.on_validation(*run.trainer, lm::ValidationRecord{.step = step, .loss = 1.25});
    } catch (const Error& e) {
      status = std::string(e.what()).find("--metrics " + path + ": write failed") == 0 ? 0 : 2;
    }
    ::_exit(status);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the write failed, naming --metrics
  std::ifstream in(path);
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  REQUIRE(!text.empty());
  CHECK(text.size() <= 120);
  CHECK(text.back() == '\n');  // whole rows only
  std::size_t rows = 0;
  for (std::size_t at = 0; at < text.size(); at = text.find('\n', at) + 1) {
    CHECK(text.compare(at, 8, "{\"step\":") == 0);
    ++rows;
  }
  CHECK(rows >= 1);
}
