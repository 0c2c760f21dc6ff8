// exp for kernels that take millions of exponentials per step (softmax, cross-entropy,
// attention). Every caller passes x - max <= 0 (or x - logsumexp), which is the domain this is
// written for: x <= 88.3, where 2^n stays finite. For float it is range reduction by ln 2 and a
// degree-6 minimax polynomial (at most 1.01 ulp from the rounded exact value for every x <= 0,
// tests/core/test_vec_exp.cpp), without branches, library calls or float-to-int conversions, so
// that the compiler vectorises loops over it (std::floor and casts would keep them scalar
// without -ffast-math). float64 uses the C library, exactly.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace kiln {

inline float vec_exp(float x) {
  // Below -87.33, exp underflows float's normal range: the result is 0 (expf gives < 1e-38).
  // Such x (and -inf) are computed like the others and their garbage masked at the end: a
  // clamp would cost AVX2 two three-uop vblendvps per vector, as GCC does not emit vminps
  // without -ffinite-math-only. NaN stays NaN.
  const bool underflow = x < -87.33654f;
  // n = round(x / ln 2): adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits.
  constexpr float kShifter = 12582912.0f;
  const float shifted = x * 1.44269504088896341f + kShifter;
  const float n = shifted - kShifter;
  // n's bits, in unsigned arithmetic: the masked inputs' garbage may wrap, never overflow.
  const std::uint32_t exponent =
      std::bit_cast<std::uint32_t>(shifted) - std::bit_cast<std::uint32_t>(kShifter);
  float r = x - n * 0.693359375f;  // x - n ln 2, with ln 2 split in two for an exact product
  r = r - n * -2.12194440e-4f;
  // exp(r) = 1 + r + r^2 p(r) on |r| <= ln 2 / 2: p's coefficients minimise the largest
  // relative error, 3.8e-9 (Lawson's algorithm, float32-rounded); the rest is rounding.
  float p = 1.3814615086e-3f;
  p = p * r + 8.3687100559e-3f;
  p = p * r + 4.1668388993e-2f;
  p = p * r + 1.6666521132e-1f;
  p = p * r + 4.9999994040e-1f;
  p = p * (r * r) + r + 1.0f;
  const float scale = std::bit_cast<float>((exponent + 127u) << 23);  // 2^n
  return underflow ? 0.0f : p * scale;
}

inline double vec_exp(double x) { return std::exp(x); }

}  // namespace kiln
