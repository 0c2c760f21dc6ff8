// Sums of a contiguous row in float64 with 8 independent accumulators: the compiler vectorises
// it, and the order of additions is fixed by n alone (deterministic).
#pragma once

#include <cstdint>

namespace kiln {

template <typename T, typename F>
double row_accumulate(const T* x, std::int64_t n, F&& term) {
  double acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += term(static_cast<double>(x[i + j]));
  for (; i < n; ++i) acc[i % 8] += term(static_cast<double>(x[i]));
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <typename T>
double row_sum(const T* x, std::int64_t n) {
  return row_accumulate(x, n, [](double v) { return v; });
}

template <typename T>
double row_sum_squares(const T* x, std::int64_t n) {
  return row_accumulate(x, n, [](double v) { return v * v; });
}

}  // namespace kiln
