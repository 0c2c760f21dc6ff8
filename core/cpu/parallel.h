// OpenMP helpers for CPU kernels. Work is split into a fixed partition that depends only on the
// problem size, never on timing (schedule(static)), so a kernel whose tasks each write their own
// outputs is deterministic; reductions across tasks combine per-task partials in index order.
#pragma once

#include <cstdint>

namespace kiln {

// Below this many elements of work a kernel runs on one thread.
constexpr std::int64_t kParallelGrain = 32768;

// Runs body(task) for task in [0, tasks); in parallel when `work` (elements) is large enough.
template <typename Body>
void parallel_tasks(std::int64_t tasks, std::int64_t work, Body&& body) {
  if (tasks <= 1 || work < kParallelGrain) {
    for (std::int64_t t = 0; t < tasks; ++t) body(t);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < tasks; ++t) body(t);
}

// Runs body(begin, end) over [0, n) in chunks of `chunk` elements.
template <typename Body>
void parallel_chunks(std::int64_t n, std::int64_t chunk, Body&& body) {
  const std::int64_t tasks = (n + chunk - 1) / chunk;
  parallel_tasks(tasks, n, [&](std::int64_t t) {
    const std::int64_t begin = t * chunk;
    body(begin, begin + chunk < n ? begin + chunk : n);
  });
}

}  // namespace kiln
