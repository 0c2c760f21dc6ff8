#include "lm/metrics_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln::lm {

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  // O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of blocking the program.
  fd_ =
      ::open(path.c_str(),
             O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK | (append ? 0 : O_TRUNC), 0666);
  KILN_CHECK(fd_ >= 0, "--metrics {}: cannot open it for writing: {}", path,
             errno == ENXIO ? std::string("a FIFO with no reader") : std::strerror(errno));
  if (::fcntl(fd_, F_SETFL, O_APPEND) != 0) {  // blocking writes from here on
    const std::string reason = std::strerror(errno);
    ::close(fd_);
    fail("--metrics {}: cannot write to it: {}", path, reason);
  }
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
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
  const std::string row = line + "\n";
  // Where the row starts, to take back a part of it (lseek fails, harmlessly, on a pipe).
  const off_t start = ::lseek(fd_, 0, SEEK_END);
  ssize_t written;
  do {
    written = ::write(fd_, row.data(), row.size());
  } while (written < 0 && errno == EINTR);
  if (written == static_cast<ssize_t>(row.size())) return;
  const std::string reason =
      written < 0 ? std::strerror(errno)
                  : fmt::format("only {} of the row's {} bytes were written (is the disk full?)",
                                written, row.size());
  const bool taken_back = written <= 0 || (start >= 0 && ::ftruncate(fd_, start) == 0);
  fail("--metrics {}: write failed: {}{}", path_, reason,
       taken_back ? "" : " (the cut row stays in the file)");
}

}  // namespace kiln::lm
