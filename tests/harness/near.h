// Tensor comparisons with explicit tolerances: |actual - expected| <= atol + rtol * |expected|
// elementwise. On failure the message names the worst element and both values.
#pragma once

#include <string>

#include "core/kiln.h"

namespace kiln::testing {

struct NearResult {
  bool ok = true;
  std::string message;
};

NearResult compare(const Tensor& actual, const Tensor& expected, double rtol, double atol);

// Bit-identical values (same shape and dtype).
NearResult compare_exact(const Tensor& actual, const Tensor& expected);

// |actual - expected| <= atol + rtol * |expected| for scalars.
inline bool near(double actual, double expected, double rtol, double atol) {
  const double diff = actual > expected ? actual - expected : expected - actual;
  return diff <= atol + rtol * (expected < 0 ? -expected : expected);
}

// The bf16 tests' two conversions: to float32 exactly, and to bf16 rounding to nearest even.
inline Tensor widened(const Tensor& t) { return t.to(DType::f32); }
inline Tensor rounded(const Tensor& t) { return t.to(DType::bf16); }

// ||actual - expected|| / ||expected|| (2-norms), for GPU/CPU parity.
double relative_error(const Tensor& actual, const Tensor& expected);

}  // namespace kiln::testing

// Catch2 assertions around compare(): REQUIRE_NEAR(actual, expected, rtol, atol).
#define REQUIRE_NEAR(actual, expected, rtol, atol)                                          \
  do {                                                                                      \
    const auto kiln_near_ = ::kiln::testing::compare((actual), (expected), (rtol), (atol)); \
    INFO(kiln_near_.message);                                                               \
    REQUIRE(kiln_near_.ok);                                                                 \
  } while (0)

#define REQUIRE_EXACT(actual, expected)                                            \
  do {                                                                             \
    const auto kiln_exact_ = ::kiln::testing::compare_exact((actual), (expected)); \
    INFO(kiln_exact_.message);                                                     \
    REQUIRE(kiln_exact_.ok);                                                       \
  } while (0)
