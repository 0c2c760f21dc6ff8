#include "lm/interval.h"

#include <cmath>

#include "lm/trainer.h"

namespace kiln::lm {

void IntervalMeter::add(const StepRecord& step) {
  ++steps_;
  loss_sum_ += step.loss_sum;
  finite_ += step.finite_steps;
  tokens_ += step.tokens;
  seconds_ += step.seconds;
}

IntervalSummary IntervalMeter::summary() const {
  IntervalSummary summary{.skipped = steps_ - finite_, .steps = steps_};
  if (finite_ > 0) summary.loss = loss_sum_ / static_cast<double>(finite_);
  if (seconds_ > 0) summary.tokens_per_s = static_cast<double>(tokens_) / seconds_;
  return summary;
}

}  // namespace kiln::lm
