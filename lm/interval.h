// IntervalMeter: the steps since the last log_every boundary, summarised as a log line shows them
// (mean loss over the finite steps, tokens/s over the compute time, steps skipped). The
// observers that print or record intervals (train_lm's progress, lm::MetricsLog) and the trainer's
// loss curve each keep one:
//
//   void on_step(const lm::Trainer&, const lm::StepRecord& step) override {
//     interval_.add(step);
//     if (!step.log_due) return;
//     const lm::IntervalSummary summary = interval_.summary();
//     interval_.reset();
//     ...
//   }
#pragma once

#include <cstdint>
#include <limits>

namespace kiln::lm {

struct StepRecord;

struct IntervalSummary {
  double loss = std::numeric_limits<double>::quiet_NaN();  // mean of the finite steps' losses
  double tokens_per_s = 0.0;                               // over the interval's compute time
  std::int64_t skipped = 0;                                // steps with a non-finite loss
  std::int64_t steps = 0;
};

class IntervalMeter {
 public:
  void add(const StepRecord& step);
  IntervalSummary summary() const;
  void reset() { *this = IntervalMeter(); }

 private:
  double loss_sum_ = 0.0, seconds_ = 0.0;
  std::int64_t finite_ = 0, steps_ = 0, tokens_ = 0;
};

}  // namespace kiln::lm
