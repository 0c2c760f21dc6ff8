// exp for kernels that take millions of exponentials per step (softmax, cross-entropy). For
// float it is a Cephes-style approximation (range reduction by ln 2, a degree-6 polynomial,
// about 2 ulp) written without branches, library calls or float-to-int conversions, so that the
// compiler vectorises loops over it (std::floor and casts would keep them scalar without
// -ffast-math). float64 uses the C library, exactly.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace kiln {

inline float vec_exp(float x) {
  // Below -87.33, exp underflows float's normal range: the result is 0 (expf gives < 1e-38).
  const bool underflow = x < -87.33654f;
  float c = x > 88.72283f ? 88.72283f : x;
  c = underflow ? -87.33654f : c;
  // n = round(c / ln 2): adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits.
  constexpr float kShifter = 12582912.0f;
  const float shifted = c * 1.44269504088896341f + kShifter;
  const float n = shifted - kShifter;
  const std::int32_t exponent =
      std::bit_cast<std::int32_t>(shifted) - std::bit_cast<std::int32_t>(kShifter);
  float r = c - n * 0.693359375f;  // c - n ln 2, with ln 2 split in two for an exact product
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((exponent + 127) << 23);  // 2^n
  return underflow ? 0.0f : p * scale;
}

inline double vec_exp(double x) { return std::exp(x); }

}  // namespace kiln
