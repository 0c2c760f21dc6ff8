// ProgressLog: what train_lm shows while it trains, an observer of lm::Trainer. Every
// --log-every steps a line summarises the interval (mean loss, perplexity, steps skipped as
// non-finite, lr, tokens/s); on a terminal a live line (step/total, epoch %, loss, ppl, lr,
// tokens/s, ETA) is redrawn in place with \r instead, and other messages (validations, notes,
// warnings) print on lines of their own above it. Output is flushed as written, so a pipe sees
// it at once.
//
//   ProgressLog log(isatty(STDOUT_FILENO), trainer.total_steps(), options.time_budget);
//   trainer.add_observer(log);
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "lm/trainer.h"

namespace kiln {

class ProgressLog : public lm::TrainObserver {
 public:
  // total_steps: the step at which training will stop, 0 if unknown; time_budget: 0 if none.
  ProgressLog(bool terminal, std::int64_t total_steps, double time_budget);

  void on_step(const lm::Trainer&, const lm::StepRecord& step) override;
  void on_validation(const lm::Trainer&, const lm::ValidationRecord& validation) override;
  void on_save(const lm::Trainer& trainer, bool final) override;
  void on_message(const lm::Trainer&, const std::string& text) override { message(text); }

  // A line of its own (clearing the live line first).
  void message(std::string_view text);
  // Ends the live line, if one is shown.
  void finish();

 private:
  void draw(const lm::StepRecord& r, const lm::IntervalSummary& recent);

  bool terminal_;
  std::int64_t total_steps_;
  double time_budget_;
  std::int64_t run_steps_ = 0;  // this run's steps, for the ETA
  lm::IntervalMeter interval_;  // the steps since the last log_every boundary
  bool live_line_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace kiln
