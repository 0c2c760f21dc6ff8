// Sums in float64 with 8 independent accumulators: the compiler vectorises them, and the order of
// additions is fixed by n alone (deterministic). A single accumulator would serialise the row on
// the latency of one add (4 cycles per element).
#pragma once

#include <cstdint>

namespace kiln {

// sum_{j < n} term(j), term returning double.
template <typename F>
double lane_sum(std::int64_t n, F&& term) {
  double acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += term(i + j);
  for (; i < n; ++i) acc[i % 8] += term(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <typename T>
double row_sum(const T* x, std::int64_t n) {
  return lane_sum(n, [x](std::int64_t j) { return static_cast<double>(x[j]); });
}

template <typename T>
double row_sum_squares(const T* x, std::int64_t n) {
  return lane_sum(n, [x](std::int64_t j) {
    const double v = x[j];
    return v * v;
  });
}

}  // namespace kiln
