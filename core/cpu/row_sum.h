// Sums in float64 with 8 independent accumulators: the compiler vectorises them (`omp simd`:
// without it GCC 12 left lane_sum_pair's lanes scalar, spilled to the stack, in layer-norm
// backward), and the order of additions is fixed by n alone (deterministic). A single
// accumulator would serialise the row on the latency of one add (4 cycles per element).
#pragma once

#include <cstdint>
#include <utility>

namespace kiln {

// The 8 accumulators of a row, in a fixed order.
inline double combine_lanes(const double (&acc)[8]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// sum_{j < n} term(j), term returning double.
template <typename F>
double lane_sum(std::int64_t n, F&& term) {
  double acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
#pragma omp simd
    for (int j = 0; j < 8; ++j) acc[j] += term(i + j);
  for (; i < n; ++i) acc[i % 8] += term(i);
  return combine_lanes(acc);
}

// Two sums in one pass over a row, each added as lane_sum adds it: term(j) returns the pair of
// terms {a_j, b_j}; the result is {sum a_j, sum b_j}.
template <typename F>
std::pair<double, double> lane_sum_pair(std::int64_t n, F&& term) {
  double acc_a[8] = {}, acc_b[8] = {};
  const auto add = [&](std::int64_t j, int lane) {
    const auto [a, b] = term(j);
    acc_a[lane] += a;
    acc_b[lane] += b;
  };
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
#pragma omp simd
    for (int j = 0; j < 8; ++j) add(i + j, j);
  for (; i < n; ++i) add(i, static_cast<int>(i % 8));
  return {combine_lanes(acc_a), combine_lanes(acc_b)};
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
