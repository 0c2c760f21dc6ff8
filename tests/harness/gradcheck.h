// The gradient-check harness: analytic gradients from backward against central differences in
// float64 (eps 1e-6), passing when |analytic - numeric| <= 1e-5 + 1e-3 |numeric|.
//
// The function's output is reduced to the scalar L = sum(f(x) * v) with a fixed random v, so
// backward(v) yields v^T J. For inputs of at most `full_limit` elements every element is
// perturbed (all of v^T J is checked); larger inputs are checked along random directions u:
// <v^T J, u> against (L(x + eps u) - L(x - eps u)) / 2 eps.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/kiln.h"

namespace kiln::testing {

using OpFunction = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  std::int64_t full_limit = 400;  // inputs with more elements use random directions
  int directions = 4;
};

// Checks every input whose `perturb` flag is set (floating inputs only). Fails the current
// Catch2 test with both values and the position on the first mismatch.
void gradcheck(const OpFunction& fn, const std::vector<Tensor>& inputs,
               const std::vector<bool>& perturb, const GradcheckOptions& options = {});

// The comparison both checks share: `analytic` (d L / d t, flattened) against central
// differences (L(t + eps u) - L(t - eps u)) / 2 eps, where loss_along(u, step) is L at t + step u;
// u runs over unit vectors when t has at most full_limit elements, else over random directions.
// `what` names t in failure messages.
void compare_with_differences(const std::string& what, const Shape& shape,
                              const std::vector<double>& analytic,
                              const std::function<double(const Tensor& u, double step)>& loss_along,
                              const GradcheckOptions& options, Generator& gen);

// sum(out * v) in float64.
double weighted_sum(const Tensor& out, const Tensor& v);

// Inputs as fresh leaves: detached copies, floating ones requiring grad where `perturb` says.
std::vector<Tensor> fresh_leaves(const std::vector<Tensor>& inputs,
                                 const std::vector<bool>& perturb);

}  // namespace kiln::testing
