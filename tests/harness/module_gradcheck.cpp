#include "tests/harness/module_gradcheck.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace kiln::testing {

namespace {

double weighted_sum(const Tensor& out, const Tensor& v) {
  const std::vector<double> a = out.to_vector<double>(), b = v.to_vector<double>();
  double total = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) total += a[i] * b[i];
  return total;
}

// Checks d L / d t for one tensor t that `loss` reads, perturbing t in place.
void check_tensor(const std::string& name, const Tensor& t, const Tensor& analytic,
                  const std::function<double()>& loss, const GradcheckOptions& options,
                  Generator& gen) {
  const Tensor original = t.detach().clone();
  const std::vector<double> a =
      analytic.defined() ? analytic.to_vector<double>() : std::vector<double>(t.numel(), 0.0);
  auto numeric_along = [&](const Tensor& direction) {
    NoGradGuard no_grad;
    t.detach().copy_(original).add_(direction, options.eps);
    const double plus = loss();
    t.detach().copy_(original).add_(direction, -options.eps);
    const double minus = loss();
    t.detach().copy_(original);
    return (plus - minus) / (2 * options.eps);
  };
  auto check = [&](double numeric, double analytic_value, const std::string& where) {
    INFO(name << " (shape " << fmt::format("{}", t.shape()) << "), " << where << ": analytic "
              << analytic_value << ", numeric " << numeric);
    REQUIRE(std::fabs(analytic_value - numeric) <= options.atol + options.rtol * std::fabs(numeric));
  };
  if (t.numel() <= options.full_limit) {
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      std::vector<double> unit(t.numel(), 0.0);
      unit[i] = 1.0;
      check(numeric_along(from_vector(unit, t.shape())), a[i], fmt::format("element {}", i));
    }
  } else {
    for (int d = 0; d < options.directions; ++d) {
      const Tensor u = uniform(t.shape(), -1.0, 1.0, {DType::f64}, &gen);
      const std::vector<double> uv = u.to_vector<double>();
      double projected = 0.0;
      for (std::size_t i = 0; i < uv.size(); ++i) projected += a[i] * uv[i];
      check(numeric_along(u), projected, fmt::format("direction {}", d));
    }
  }
}

}  // namespace

void gradcheck_module(const nn::Module& module, const std::function<Tensor(const Tensor&)>& forward,
                      const Tensor& input, const GradcheckOptions& options) {
  Tensor x = input.detach().clone();
  const bool input_differentiable = is_floating(x.dtype());
  if (input_differentiable) x.requires_grad_();
  const NamedTensors params = module.named_parameters();
  for (const auto& [name, p] : params) {
    REQUIRE(p.dtype() == DType::f64);
    p.set_grad(Tensor());
  }
  const Tensor out = forward(x);
  Generator gen(2024);
  const Tensor v = uniform(out.shape(), -1.0, 1.0, {DType::f64}, &gen);
  out.backward(v);
  auto loss = [&] {
    NoGradGuard no_grad;
    return weighted_sum(forward(x.detach()), v);
  };
  for (const auto& [name, p] : params) check_tensor(name, p, p.grad(), loss, options, gen);
  if (input_differentiable) check_tensor("input", x.detach(), x.grad(), loss, options, gen);
}

}  // namespace kiln::testing
