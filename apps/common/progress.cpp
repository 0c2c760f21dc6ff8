#include "apps/common/progress.h"

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

ProgressLog::ProgressLog(bool terminal, std::int64_t total_steps, double time_budget)
    : terminal_(terminal), total_steps_(total_steps), time_budget_(time_budget) {}

void ProgressLog::on_step(const lm::Trainer&, const lm::StepRecord& r) {
  ++run_steps_;
  interval_.add(r);
  const bool due = r.log_due;
  const lm::IntervalSummary summary = interval_.summary();
  if (due) interval_.reset();
  if (terminal_) {
    const auto now = std::chrono::steady_clock::now();
    // An unread step (a GPU between log lines: lm::StepRecord) has no loss to show yet.
    if (due || (r.read && now - last_draw_ > std::chrono::milliseconds(100))) {
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
}

void ProgressLog::on_validation(const lm::Trainer&, const lm::ValidationRecord& v) {
  std::string note;
  if (v.new_best)
    note = v.best_path.empty() ? " | new best" : fmt::format(" | new best, saved {}", v.best_path);
  if (v.lr_cut) note += fmt::format(" | plateau: lr now {:.3g}", v.lr);
  message(fmt::format("validation at step {}: loss {:.4f} | ppl {:.2f} | {:.1f}s{}", v.step, v.loss,
                      std::exp(v.loss), v.seconds, note));
}

void ProgressLog::on_save(const lm::Trainer& trainer, bool final) {
  if (!final) return;
  message(fmt::format("saved {}{}", trainer.options().save,
                      trainer.has_best() ? fmt::format(" and {}", trainer.best_path()) : ""));
}

void ProgressLog::draw(const lm::StepRecord& r, const lm::IntervalSummary& recent) {
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
