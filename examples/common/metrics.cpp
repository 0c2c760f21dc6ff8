#include "examples/common/metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln {

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  KILN_CHECK(file_ != nullptr, "--metrics {}: cannot open it for writing: {}", path,
             std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::train(std::int64_t step, double loss, double lr, double tokens_per_s,
                       double elapsed_s) {
  if (file_ == nullptr) return;
  const nlohmann::ordered_json row = {
      {"step", step},          {"split", "train"}, {"loss", loss},
      {"ppl", std::exp(loss)}, {"lr", lr},         {"tokens_per_s", tokens_per_s},
      {"elapsed_s", elapsed_s}};
  write(row.dump());
}

void MetricsLog::eval(std::int64_t step, std::string_view split, double loss) {
  if (file_ == nullptr) return;
  const nlohmann::ordered_json row = {
      {"step", step}, {"split", split}, {"loss", loss}, {"ppl", std::exp(loss)}};
  write(row.dump());
}

void MetricsLog::write(const std::string& line) {
  const bool ok = std::fputs(line.c_str(), file_) >= 0 && std::fputc('\n', file_) != EOF &&
                  std::fflush(file_) == 0;
  KILN_CHECK(ok, "--metrics {}: write failed: {}", path_, std::strerror(errno));
}

}  // namespace kiln
