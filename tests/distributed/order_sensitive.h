// Values whose floating-point sum over ranks depends on the order of the terms, for the tests of
// SumOrder::rank: a test that passes with them could not pass with another order.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln::testing {

// Rank `rank`'s n values: both signs, magnitudes from 2^-12 to 2^12, and every seventh element
// a cancellation (2^24, 1, -2^24 across ranks 0, 1, 2) that only the left-to-right order keeps.
template <typename T>
std::vector<T> order_sensitive(int rank, std::int64_t n) {
  std::vector<T> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t z = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ULL +
                      static_cast<std::uint64_t>(rank + 1) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    const double mantissa = 1.0 + static_cast<double>(z >> 11) * 0x1p-53;
    const int exponent = static_cast<int>((z >> 3) % 25) - 12;
    double v = std::ldexp(z & 1 ? -mantissa : mantissa, exponent);
    if (i % 7 == 0) v = rank == 0 ? 0x1p24 : rank == 1 ? 1.0 : rank == 2 ? -0x1p24 : v;
    out[static_cast<std::size_t>(i)] = static_cast<T>(v);
  }
  return out;
}

// ((x_0 + x_1) + x_2) + ... elementwise, in rank order (or in reverse order).
template <typename T>
std::vector<T> sum_over_ranks(int world_size, std::int64_t n, bool reverse = false) {
  std::vector<T> sum = order_sensitive<T>(reverse ? world_size - 1 : 0, n);
  for (int k = 1; k < world_size; ++k) {
    const std::vector<T> x = order_sensitive<T>(reverse ? world_size - 1 - k : k, n);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = sum[i] + x[i];
  }
  return sum;
}

}  // namespace kiln::testing
