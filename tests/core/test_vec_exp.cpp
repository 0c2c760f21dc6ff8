// The float exp of the row and attention kernels (core/cpu/vec_exp.h) against the C library's
// float64 exp, over every 61st float of its domain (about 36 million values, vectorised as the
// kernels run it), and at the edges: underflow to 0, -inf, NaN, exp(0) = 1.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/cpu/vec_exp.h"

using namespace kiln;

namespace {

// |got - want| in units of the last place of float at want (want a normal float).
double ulp_error(float got, double want) {
  int exponent = 0;
  std::frexp(static_cast<float>(want), &exponent);
  return std::fabs(static_cast<double>(got) - want) / std::ldexp(1.0, exponent - 24);
}

// vec_exp of the floats whose bits run from `first` to `last` in steps of `stride`, computed in
// a loop the compiler vectorises (as the kernels' loops are); returns the largest error in ulp.
double worst_ulp(std::uint32_t first, std::uint32_t last, std::uint32_t stride, float& worst_x) {
  std::vector<float> x, e;
  for (std::uint64_t bits = first; bits <= last; bits += stride)
    x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  e.resize(x.size());
  const float* in = x.data();
  float* out = e.data();
#pragma omp simd
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = vec_exp(in[i]);
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double error = ulp_error(e[i], std::exp(static_cast<double>(x[i])));
    if (error > worst) worst = error, worst_x = x[i];
  }
  return worst;
}

constexpr float kUnderflow = -87.33654f;  // below it the result is 0

}  // namespace

TEST_CASE("vec_exp is within 1.5 ulp of exp on x <= 0 and up to 88.3", "[vec_exp]") {
  float worst_x = 0.0f;
  // -0 up to the underflow threshold (negative floats' bits grow with their magnitude).
  const double negative = worst_ulp(std::bit_cast<std::uint32_t>(-0.0f),
                                    std::bit_cast<std::uint32_t>(kUnderflow), 61, worst_x);
  INFO("worst at x = " << worst_x);
  CHECK(negative <= 1.5);
  const double positive = worst_ulp(0, std::bit_cast<std::uint32_t>(88.3f), 61, worst_x);
  INFO("worst at x = " << worst_x);
  CHECK(positive <= 1.5);
}

TEST_CASE("vec_exp is 0 below the underflow threshold, 1 at 0 and NaN for NaN", "[vec_exp]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float below = std::nextafter(kUnderflow, -inf);
  for (float x : {below, -88.0f, -100.0f, -1e4f, -8.7e6f, -1e30f, -inf}) {
    INFO("x = " << x);
    CHECK(vec_exp(x) == 0.0f);
  }
  CHECK(vec_exp(kUnderflow) > 0.0f);
  CHECK(vec_exp(0.0f) == 1.0f);
  CHECK(vec_exp(-0.0f) == 1.0f);
  CHECK(std::isnan(vec_exp(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(vec_exp(-std::numeric_limits<float>::quiet_NaN())));
  CHECK(vec_exp(-1.0) == std::exp(-1.0));  // float64 is the C library's
}
