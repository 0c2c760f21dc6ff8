#include "examples/common/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include <fmt/format.h>

namespace kiln {

namespace {

std::string duration_text(double seconds) {
  const auto s = static_cast<std::int64_t>(std::max(0.0, seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
  return fmt::format("{}m{:02}s", s / 60, s % 60);
}

// " | 9 of 10 steps skipped": a mean over the finite steps alone would look like a normal loss.
std::string skipped_text(std::int64_t skipped, std::int64_t steps) {
  return skipped > 0 ? fmt::format(" | {} of {} steps skipped (non-finite)", skipped, steps) : "";
}

}  // namespace

ProgressLog::ProgressLog(bool terminal, std::int64_t log_every, std::int64_t total_steps,
                         double time_budget)
    : terminal_(terminal),
      log_every_(log_every),
      total_steps_(total_steps),
      time_budget_(time_budget) {}

std::optional<IntervalSummary> ProgressLog::step(const StepRecord& r) {
  ++run_steps_;
  ++interval_steps_;
  if (std::isfinite(r.loss)) {
    loss_sum_ += r.loss;
    ++finite_steps_;
  }
  tokens_ += r.tokens;
  seconds_ += r.seconds;
  const IntervalSummary summary{finite_steps_ > 0 ? loss_sum_ / static_cast<double>(finite_steps_)
                                                  : std::numeric_limits<double>::quiet_NaN(),
                                seconds_ > 0 ? static_cast<double>(tokens_) / seconds_ : 0.0,
                                interval_steps_ - finite_steps_, interval_steps_};
  const bool due = r.step % log_every_ == 0;
  if (terminal_) {
    const auto now = std::chrono::steady_clock::now();
    if (due || now - last_draw_ > std::chrono::milliseconds(100)) {
      draw(r, summary);
      last_draw_ = now;
    }
  } else if (due) {
    fmt::print(
        "step {}{} | epoch {} ({:.0f}%) | loss {:.4f} | ppl {:.2f}{} | lr {:.3g} | {:.0f} tok/s "
        "| {:.1f}s\n",
        r.step, total_steps_ > 0 ? fmt::format("/{}", total_steps_) : "", r.epoch,
        100 * r.epoch_done, summary.loss, std::exp(summary.loss),
        skipped_text(summary.skipped, summary.steps), r.lr, summary.tokens_per_s, r.elapsed);
    std::fflush(stdout);
  }
  if (!due) return std::nullopt;
  loss_sum_ = seconds_ = 0.0;
  finite_steps_ = tokens_ = interval_steps_ = 0;
  return summary;
}

void ProgressLog::draw(const StepRecord& r, const IntervalSummary& recent) {
  // Time left: the remaining steps at this run's pace, capped by the budget.
  double eta = std::numeric_limits<double>::infinity();
  if (total_steps_ > 0)
    eta = static_cast<double>(total_steps_ - r.step) * r.clock / static_cast<double>(run_steps_);
  if (time_budget_ > 0) eta = std::min(eta, time_budget_ - r.clock);
  fmt::print(
      "\r\033[Kstep {}{} | epoch {} {:.0f}% | loss {:.4f} | ppl {:.2f}{} | lr {:.3g} | "
      "{:.0f} tok/s | ETA {}",
      r.step, total_steps_ > 0 ? fmt::format("/{}", total_steps_) : "", r.epoch, 100 * r.epoch_done,
      recent.loss, std::exp(recent.loss), skipped_text(recent.skipped, recent.steps), r.lr,
      recent.tokens_per_s, std::isfinite(eta) ? duration_text(eta) : "?");
  std::fflush(stdout);
  live_line_ = true;
}

void ProgressLog::message(std::string_view text) {
  finish();
  fmt::print("{}\n", text);
  std::fflush(stdout);
}

void ProgressLog::finish() {
  if (!live_line_) return;
  fmt::print("\n");
  std::fflush(stdout);
  live_line_ = false;
}

}  // namespace kiln
