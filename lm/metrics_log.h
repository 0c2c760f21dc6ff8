// MetricsLog: a training run's metrics as JSON Lines (train_lm's --metrics file), an observer of
// lm::Trainer: one object per line, each written by one write() to a file opened for appending,
// so that a live run can be followed, an interrupted one keeps every row, and no line is ever
// cut: a write that fails part-way (a full disk) is taken back before the error is thrown. A
// data-parallel run writes it on rank 0 alone.
//
//   {"step": 100, "split": "train", "loss": 5.61, "ppl": 273.1, "lr": 0.001,
//    "tokens_per_s": 5120.4, "elapsed_s": 41.3}          every log_every steps (finite loss)
//   {"step": 500, "split": "valid", "loss": 5.32, "ppl": 204.4}    every validation
//   {"step": 500, "split": "test", "loss": 5.27, "ppl": 194.4}     the final weights' test loss
//
// loss is in nats per target token and ppl = exp(loss); a train row's loss and tokens_per_s are
// over the log_every steps it ends (the finite ones: a row whose steps were all skipped is left
// out).
//
//   lm::MetricsLog metrics("runs/lm.metrics.jsonl", /*append=*/resumed);
//   trainer.add_observer(metrics);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lm/trainer.h"

namespace kiln::lm {

class MetricsLog : public TrainObserver {
 public:
  // Opens path, truncating it, or appending to it (a resumed run continues the file); errors
  // name --metrics. A FIFO must have a reader already (opening it would wait for one).
  MetricsLog(const std::string& path, bool append);
  ~MetricsLog() override;
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void on_step(const Trainer&, const StepRecord& step) override;
  void on_validation(const Trainer&, const ValidationRecord& validation) override;
  void on_final(const Trainer&, const FinalResult& result) override;

 private:
  // split: "valid" or "test"
  void eval_row(std::int64_t step, std::string_view split, double loss);
  void write(const std::string& line);

  std::string path_;
  int fd_ = -1;
  IntervalMeter interval_;  // the steps since the last train row
};

}  // namespace kiln::lm
