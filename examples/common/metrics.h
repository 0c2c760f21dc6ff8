// MetricsLog: train_lm's --metrics file, JSON Lines: one object per line, flushed as written so
// that a live run can be followed and an interrupted one keeps every row.
//
//   {"step": 100, "split": "train", "loss": 5.61, "ppl": 273.1, "lr": 0.001,
//    "tokens_per_s": 5120.4, "elapsed_s": 41.3}
//   {"step": 500, "split": "valid", "loss": 5.32, "ppl": 204.4}
//   {"step": 500, "split": "test", "loss": 5.27, "ppl": 194.4}
//
// loss is in nats per target token and ppl = exp(loss).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kiln {

class MetricsLog {
 public:
  MetricsLog() = default;  // writes nothing
  // Opens path, truncating it, or appending to it (a resumed run continues the file).
  MetricsLog(const std::string& path, bool append);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void train(std::int64_t step, double loss, double lr, double tokens_per_s, double elapsed_s);
  // split: "valid" or "test"
  void eval(std::int64_t step, std::string_view split, double loss);

 private:
  void write(const std::string& line);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace kiln
