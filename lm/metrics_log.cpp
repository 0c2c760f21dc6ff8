#include "lm/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln::lm {

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  KILN_CHECK(file_ != nullptr, "--metrics {}: cannot open it for writing: {}", path,
             std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::on_step(const Trainer&, const StepRecord& step) {
  interval_.add(step);
  if (!step.log_due) return;
  const IntervalSummary interval = interval_.summary();
  interval_.reset();
  if (!std::isfinite(interval.loss)) return;
  const nlohmann::ordered_json row = {{"step", step.step},
                                      {"split", "train"},
                                      {"loss", interval.loss},
                                      {"ppl", std::exp(interval.loss)},
                                      {"lr", step.lr},
                                      {"tokens_per_s", interval.tokens_per_s},
                                      {"elapsed_s", step.elapsed}};
  write(row.dump());
}

void MetricsLog::on_validation(const Trainer&, const ValidationRecord& validation) {
  eval_row(validation.step, "valid", validation.loss);
}

void MetricsLog::on_final(const Trainer&, const FinalResult& result) {
  eval_row(result.step, "test", result.test.loss);
}

void MetricsLog::eval_row(std::int64_t step, std::string_view split, double loss) {
  const nlohmann::ordered_json row = {
      {"step", step}, {"split", split}, {"loss", loss}, {"ppl", std::exp(loss)}};
  write(row.dump());
}

void MetricsLog::write(const std::string& line) {
  const bool ok = std::fputs(line.c_str(), file_) >= 0 && std::fputc('\n', file_) != EOF &&
                  std::fflush(file_) == 0;
  KILN_CHECK(ok, "--metrics {}: write failed: {}", path_, std::strerror(errno));
}

}  // namespace kiln::lm
