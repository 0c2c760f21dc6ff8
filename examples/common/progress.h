// ProgressLog: what train_lm shows while it trains. Every --log-every steps it summarises the
// interval (mean loss, perplexity, lr, tokens/s); on a terminal a live line (step/total, epoch %,
// loss, ppl, lr, tokens/s, ETA) is redrawn in place with \r instead, and other messages print
// on lines of their own above it. Output is flushed as written, so a pipe sees it at once.
//
//   ProgressLog log(isatty(STDOUT_FILENO), options.log_every, total_steps, options.time_budget);
//   if (auto interval = log.step({...}))  metrics.train(step, interval->loss, ...);
//   log.message("validation at step 500: ...");
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

struct StepRecord {
  std::int64_t step;   // the global step just finished (1-based)
  std::int64_t epoch;  // 1-based epoch of the step's windows
  double epoch_done;   // fraction of that epoch done after the step, in [0, 1]
  double loss;         // mean loss of the step; NaN for a skipped (non-finite) step
  double lr;
  std::int64_t tokens;  // target tokens of the step
  double seconds;       // the step's compute time
  double clock;         // this run's budgeted seconds so far (training steps only)
  double elapsed;       // budgeted seconds over every run so far
};

struct IntervalSummary {
  double loss;          // mean over the interval's finite steps (NaN if none)
  double tokens_per_s;  // over the interval's compute time
};

class ProgressLog {
 public:
  // total_steps: the step at which training will stop, 0 if unknown; time_budget: 0 if none.
  ProgressLog(bool terminal, std::int64_t log_every, std::int64_t total_steps, double time_budget);

  // Records a finished step; returns the interval's summary when a log line is due (every
  // log_every global steps).
  std::optional<IntervalSummary> step(const StepRecord& record);
  // A line of its own (clearing the live line first).
  void message(std::string_view text);
  // Ends the live line, if one is shown.
  void finish();

 private:
  void draw(const StepRecord& r, const IntervalSummary& recent);

  bool terminal_;
  std::int64_t log_every_, total_steps_;
  double time_budget_;
  // The current interval, and the run's steps for the ETA.
  double loss_sum_ = 0.0, seconds_ = 0.0;
  std::int64_t finite_steps_ = 0, tokens_ = 0, run_steps_ = 0;
  bool live_line_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace kiln
