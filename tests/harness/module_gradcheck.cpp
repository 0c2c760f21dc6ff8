#include "tests/harness/module_gradcheck.h"

#include <catch2/catch.hpp>

namespace kiln::testing {

namespace {

// Checks d L / d t for one tensor t that `loss` reads, perturbing t in place.
void check_tensor(const std::string& name, const Tensor& t, const Tensor& analytic,
                  const std::function<double()>& loss, const GradcheckOptions& options,
                  Generator& gen) {
  const Tensor original = t.detach().clone();
  const std::vector<double> a =
      analytic.defined() ? analytic.to_vector<double>() : std::vector<double>(t.numel(), 0.0);
  auto loss_along = [&](const Tensor& u, double step) {
    NoGradGuard no_grad;
    t.detach().copy_(original).add_(u, step);
    const double value = loss();
    t.detach().copy_(original);
    return value;
  };
  compare_with_differences(name, t.shape(), a, loss_along, options, gen);
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
