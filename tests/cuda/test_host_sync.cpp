// A training step on the GPU waits for nothing: between log intervals lm::Trainer makes no host
// synchronisation (the loss, the gradient norm, the clip and the non-finite rule stay on the
// device: core/ops/optimizer_update.h step_guard_), counted both by the CUDA backend
// (cuda_host_synchronizations) and by the emulator's runtime, which counts every blocking call
// whoever makes it. The interval means it reads at the log steps are the CPU run's.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/generator.h"
#include "data/corpus.h"
#include "lm/interval.h"
#include "lm/trainer.h"
#include "nn/transformer_lm.h"
#include "optim/adam.h"
#include "tests/cuda/cuda_testing.h"
#include "tests/harness/temp_dir.h"

#if defined(KILN_CUDA_EMULATE)
#include "cuda_emulator/emulator.h"
#endif

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr std::int64_t kLogEvery = 5, kSyncSteps = 10;

// Both counters of waits: the backend's and the emulated runtime's (on a real GPU, the backend's
// twice: the driver keeps no such count).
struct Waits {
  std::int64_t backend = 0, runtime = 0;
};
Waits waits() {
#if defined(KILN_CUDA_EMULATE)
  return {.backend = cuda_host_synchronizations(), .runtime = emulator::host_synchronizations()};
#else
  return {.backend = cuda_host_synchronizations(), .runtime = cuda_host_synchronizations()};
#endif
}

// Notes the waits after every step and the interval means at the log steps.
class WaitCounter : public lm::TrainObserver {
 public:
  void on_step(const lm::Trainer&, const lm::StepRecord& step) override {
    after_step.push_back(waits());
    read.push_back(step.read);
    interval_.add(step);
    if (!step.log_due) return;
    interval_losses.push_back(interval_.summary().loss);
    interval_.reset();
  }
  std::vector<Waits> after_step;
  std::vector<bool> read;
  std::vector<double> interval_losses;

 private:
  lm::IntervalMeter interval_;
};

void write_corpus(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 60; ++i)
    text += i % 3 ? "the cat sat on the mat .\n" : "a dog ran to the red ball .\n";
  for (const char* split : {"train.txt", "valid.txt", "test.txt"}) dir.write(split, text);
}

// The default model's architecture (post-LN, ReLU, sinusoids, dropout 0.1) at a size the
// emulator runs in seconds, trained kSyncSteps steps with AdamW and clipping on `device`; with
// `poisoned`, one weight is NaN, so every step's loss is.
struct Outcome {
  WaitCounter counter;
  std::string error;            // what train() threw ("" when it did not)
  std::int64_t adam_steps = 0;  // the optimizer's count of applied updates
  lm::StopReason reason = lm::StopReason::requested;
};

Outcome train_on(Device device, bool poisoned = false) {
  TempDir dir;
  write_corpus(dir);
  const Corpus corpus(dir.path());
  nn::TransformerConfig config;
  config.vocab = corpus.vocabulary().size();
  config.d_model = 32, config.heads = 2, config.layers = 2, config.ff = 64, config.max_seq_len = 16;
  manual_seed(11);
  nn::TransformerLM model(config);
  if (poisoned) {
    NoGradGuard no_grad;
    model.parameters()[0].fill_(NAN);
  }
  model.to(device);
  AdamW optimizer(weight_decay_groups(model.named_parameters(), 0.1), {.lr = 3e-3});
  lm::Trainer trainer(model, optimizer, corpus,
                      {.batch_size = 2,
                       .seq_len = 8,
                       .clip = 1.0,
                       .steps = kSyncSteps,
                       .log_every = kLogEvery,
                       .eval_every = 0,
                       .device = device});
  Outcome outcome;
  trainer.add_observer(outcome.counter);
  try {
    outcome.reason = trainer.train();
  } catch (const Error& e) {
    outcome.error = e.what();
  }
  outcome.adam_steps = optimizer.step_count();
  return outcome;
}

}  // namespace

TEST_CASE("cuda/a training step makes no host synchronisation between log intervals",
          "[cuda][trainer]") {
  if (!cuda_available_or_skip()) return;
  const Outcome gpu_run = train_on(Device::cuda());
  REQUIRE(gpu_run.error.empty());
  REQUIRE(gpu_run.reason == lm::StopReason::steps);
  const WaitCounter& gpu = gpu_run.counter;
  REQUIRE(gpu.after_step.size() == static_cast<std::size_t>(kSyncSteps));
  for (std::int64_t step = 2; step <= kSyncSteps; ++step) {
    const Waits before = gpu.after_step[step - 2], after = gpu.after_step[step - 1];
    const bool log_step = step % kLogEvery == 0;
    INFO("step " << step);
    CHECK(gpu.read[step - 1] == log_step);
    if (log_step) {
      CHECK(after.backend > before.backend);  // the ledger's read
      CHECK(after.runtime > before.runtime);
    } else {
      CHECK(after.backend == before.backend);
      CHECK(after.runtime == before.runtime);
    }
  }
  // The log lines' losses are the CPU run's (the device sums them in the host's order).
  const Outcome cpu_run = train_on(Device::cpu());
  REQUIRE(cpu_run.error.empty());
  REQUIRE(cpu_run.reason == lm::StopReason::steps);
  const WaitCounter& cpu = cpu_run.counter;
  REQUIRE(cpu.interval_losses.size() == 2);
  REQUIRE(gpu.interval_losses.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(std::isfinite(gpu.interval_losses[i]));
    CHECK(near(gpu.interval_losses[i], cpu.interval_losses[i], 1e-4, 1e-4));
  }
  CHECK(cpu.read == std::vector<bool>(kSyncSteps, true));
}

TEST_CASE("cuda/a non-finite step stops the run at the next log step, naming it",
          "[cuda][trainer]") {
  if (!cuda_available_or_skip()) return;
  // On the CPU the stop comes at step 1; on the GPU the steps up to the log step ran with their
  // updates skipped on the device, and the error names step 1 all the same.
  const Outcome cpu = train_on(Device::cpu(), true);
  const Outcome gpu = train_on(Device::cuda(), true);
  const std::string expected = "step 1: the loss is nan and the gradient norm nan; stopping";
  CHECK_THAT(cpu.error, Catch::Matchers::Contains(expected));
  CHECK_THAT(gpu.error, Catch::Matchers::Contains(expected));
  CHECK(cpu.counter.after_step.empty());
  CHECK(gpu.counter.after_step.size() == static_cast<std::size_t>(kLogEvery - 1));
  CHECK(cpu.adam_steps == 0);  // no update counts
  CHECK(gpu.adam_steps == 0);
}
