#include "tests/harness/gradcheck.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace kiln::testing {

std::vector<Tensor> fresh_leaves(const std::vector<Tensor>& inputs,
                                 const std::vector<bool>& perturb) {
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = inputs[i].detach().clone();
    if (perturb[i] && is_floating(t.dtype())) t.requires_grad_();
    out.push_back(t);
  }
  return out;
}

double weighted_sum(const Tensor& out, const Tensor& v) {
  const std::vector<double> a = out.to_vector<double>(), b = v.to_vector<double>();
  double total = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) total += a[i] * b[i];
  return total;
}

void compare_with_differences(const std::string& what, const Shape& shape,
                              const std::vector<double>& analytic,
                              const std::function<double(const Tensor& u, double step)>& loss_along,
                              const GradcheckOptions& options, Generator& gen) {
  auto check = [&](const Tensor& u, double analytic_value, const std::string& where) {
    const double numeric =
        (loss_along(u, options.eps) - loss_along(u, -options.eps)) / (2 * options.eps);
    INFO(what << " (shape " << fmt::format("{}", shape) << "), " << where << ": analytic "
              << analytic_value << ", numeric " << numeric);
    REQUIRE(std::fabs(analytic_value - numeric) <=
            options.atol + options.rtol * std::fabs(numeric));
  };
  const std::int64_t n = numel_of(shape);
  if (n <= options.full_limit) {
    for (std::int64_t i = 0; i < n; ++i) {
      std::vector<double> unit(n, 0.0);
      unit[i] = 1.0;
      check(from_vector(unit, shape), analytic[i], fmt::format("element {}", i));
    }
    return;
  }
  for (int d = 0; d < options.directions; ++d) {
    const Tensor u = uniform(shape, -1.0, 1.0, {DType::f64}, &gen);
    const std::vector<double> uv = u.to_vector<double>();
    double projected = 0.0;
    for (std::int64_t i = 0; i < n; ++i) projected += analytic[i] * uv[i];
    check(u, projected, fmt::format("direction {}", d));
  }
}

void gradcheck(const OpFunction& fn, const std::vector<Tensor>& inputs,
               const std::vector<bool>& perturb, const GradcheckOptions& options) {
  REQUIRE(inputs.size() == perturb.size());
  std::vector<Tensor> leaves = fresh_leaves(inputs, perturb);
  const Tensor out = fn(leaves);
  REQUIRE(out.requires_grad());
  Generator gen(1234);
  const Tensor v = uniform(out.shape(), -1.0, 1.0, {out.dtype(), out.device()}, &gen);
  out.backward(v);

  const std::vector<Tensor> base = fresh_leaves(inputs, std::vector<bool>(inputs.size(), false));
  for (std::size_t which = 0; which < inputs.size(); ++which) {
    if (!perturb[which] || !is_floating(inputs[which].dtype())) continue;
    const Tensor x0 = leaves[which].detach().contiguous();
    const Tensor grad = leaves[which].grad();
    const std::vector<double> analytic =
        grad.defined() ? grad.to_vector<double>() : std::vector<double>(x0.numel(), 0.0);
    // L with input `which` replaced by x0 + step * u.
    auto loss_along = [&](const Tensor& u, double step) {
      NoGradGuard no_grad;
      std::vector<Tensor> shifted = base;
      shifted[which] = add(x0, mul(u.to(x0.dtype()), step));
      return weighted_sum(fn(shifted), v);
    };
    compare_with_differences(fmt::format("input {}", which), x0.shape(), analytic, loss_along,
                             options, gen);
  }
}

}  // namespace kiln::testing
