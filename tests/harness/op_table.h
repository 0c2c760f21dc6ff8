// The op table: one row per op generates its test cases, so a new op gets every check by adding
// a row (see README "Adding an op"):
//   gradcheck/<op>/<sample>  analytic vs numeric gradients in float64
//   noncontig/<op>           non-contiguous inputs give the same values and gradients
//   twice/<op>               forward + backward twice is bit-identical, with 2 and 3 threads
//   errors/<op>              each bad input throws a kiln::Error that names the op
//   parity/<op>              CUDA against CPU (skipped without a device)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tests/harness/gradcheck.h"

namespace kiln::testing {

struct OpSample {
  std::string name;
  // Fresh inputs: floating inputs in `dtype` (float64 for gradcheck), int64 ones unchanged.
  std::function<std::vector<Tensor>(DType dtype, Generator& gen)> inputs;
  std::vector<bool> perturb;  // which inputs get gradients; empty: every floating input
  OpFunction fn;              // a variant of the op for this sample; empty: the row's fn
};

struct ErrorCase {
  std::string what;
  std::function<void()> call;
};

struct OpRow {
  std::string name;
  OpFunction fn;
  std::vector<OpSample> samples;
  std::vector<ErrorCase> errors;
  double parity_tolerance = 1e-5;  // ||gpu - cpu|| / ||cpu||
  GradcheckOptions gradcheck;
};

// Registers the row's Catch2 test cases. Returns true, for use in a static initialiser:
//   const bool registered = register_op({...});
bool register_op(OpRow row);

// A non-contiguous tensor with the same values (a strided view into a larger buffer).
Tensor noncontiguous_copy(const Tensor& t);

// Uniform values of `dtype` in [lo, hi): the operands of the op tables' rows (short, as the rows
// are read as tables).
inline Tensor u(const Shape& shape, DType dtype, Generator& gen, double lo = -2.0,
                double hi = 2.0) {
  return uniform(shape, lo, hi, {dtype}, &gen);
}

// Uniform values in [low, high) whose magnitude is at least `margin` (keeps samples away from
// kinks such as relu at 0).
Tensor away_from_zero(const Shape& shape, DType dtype, Generator& gen, double margin = 1e-2,
                      double low = -2.0, double high = 2.0);

// Registers a Catch2 test case running `body` (names and tags are copied).
void register_test(const std::string& name, const std::string& tags, std::function<void()> body);

// True when a CUDA device is present; otherwise prints "skipped: no CUDA device" for CTest.
bool cuda_available_or_skip();

}  // namespace kiln::testing
