// Gradient checks for modules: the analytic gradient of every parameter (and of a floating
// input) against central differences, in float64, with the harness's tolerance. The module's
// parameters are perturbed in place, element by element for small ones and along random
// directions for large ones.
#pragma once

#include <functional>

#include "nn/module.h"
#include "tests/harness/gradcheck.h"

namespace kiln::testing {

// forward(input) must be deterministic (eval mode or fixed dropout masks).
void gradcheck_module(const nn::Module& module, const std::function<Tensor(const Tensor&)>& forward,
                      const Tensor& input, const GradcheckOptions& options = {});

}  // namespace kiln::testing
