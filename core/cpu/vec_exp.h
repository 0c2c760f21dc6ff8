// exp for kernels that take millions of exponentials per step (softmax, cross-entropy). For
// float it is a branch-free Cephes-style approximation (range reduction by ln 2, a degree-6
// polynomial, the exponent added by bit arithmetic; about 2 ulp) that the compiler vectorises;
// float64 uses the C library, exactly.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln {

inline float vec_exp(float x) {
  // Below -87.33, exp underflows float's normal range: return 0 (as expf does to within 1e-38).
  const bool underflow = x < -87.33654f;
  x = x > 88.72283f ? 88.72283f : x;
  x = underflow ? -87.33654f : x;
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;  // ln 2 split in two for an exact product
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return underflow ? 0.0f : p * scale;
}

inline double vec_exp(double x) { return std::exp(x); }

}  // namespace kiln
