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

namespace {

double weighted_sum(const Tensor& out, const Tensor& v) {
  const std::vector<double> a = out.to_vector<double>(), b = v.to_vector<double>();
  double total = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) total += a[i] * b[i];
  return total;
}

// L(inputs with input `which` replaced by x0 + step * direction).
double loss_at(const OpFunction& fn, const std::vector<Tensor>& inputs, std::size_t which,
               const Tensor& x0, const Tensor& direction, double step, const Tensor& v) {
  NoGradGuard no_grad;
  std::vector<Tensor> shifted = inputs;
  shifted[which] = add(x0, mul(direction, step));
  return weighted_sum(fn(shifted), v);
}

}  // namespace

void gradcheck(const OpFunction& fn, const std::vector<Tensor>& inputs,
               const std::vector<bool>& perturb, const GradcheckOptions& options) {
  REQUIRE(inputs.size() == perturb.size());
  std::vector<Tensor> leaves = fresh_leaves(inputs, perturb);
  const Tensor out = fn(leaves);
  REQUIRE(out.requires_grad());
  Generator gen(1234);
  const Tensor v = uniform(out.shape(), -1.0, 1.0, {out.dtype(), out.device()}, &gen);
  out.backward(v);

  for (std::size_t which = 0; which < inputs.size(); ++which) {
    if (!perturb[which] || !is_floating(inputs[which].dtype())) continue;
    const Tensor x0 = leaves[which].detach().contiguous();
    const Tensor analytic = leaves[which].grad().defined() ? leaves[which].grad()
                                                           : zeros_like(x0);
    std::vector<Tensor> base = fresh_leaves(inputs, std::vector<bool>(inputs.size(), false));
    const std::int64_t n = x0.numel();
    const std::vector<double> a = analytic.to_vector<double>();
    auto check = [&](double numeric, double analytic_value, const std::string& where) {
      const double allowed = options.atol + options.rtol * std::fabs(numeric);
      INFO("input " << which << " (shape " << fmt::format("{}", x0.shape()) << "), " << where
                    << ": analytic " << analytic_value << ", numeric " << numeric);
      REQUIRE(std::fabs(analytic_value - numeric) <= allowed);
    };
    if (n <= options.full_limit) {
      for (std::int64_t i = 0; i < n; ++i) {
        std::vector<double> unit(n, 0.0);
        unit[i] = 1.0;
        const Tensor e = from_vector(unit, x0.shape()).to(x0.dtype());
        const double plus = loss_at(fn, base, which, x0, e, options.eps, v);
        const double minus = loss_at(fn, base, which, x0, e, -options.eps, v);
        check((plus - minus) / (2 * options.eps), a[i], fmt::format("element {}", i));
      }
    } else {
      for (int d = 0; d < options.directions; ++d) {
        const Tensor u = uniform(x0.shape(), -1.0, 1.0, {x0.dtype()}, &gen);
        const double plus = loss_at(fn, base, which, x0, u, options.eps, v);
        const double minus = loss_at(fn, base, which, x0, u, -options.eps, v);
        const std::vector<double> uv = u.to_vector<double>();
        double projected = 0.0;
        for (std::int64_t i = 0; i < n; ++i) projected += a[i] * uv[i];
        check((plus - minus) / (2 * options.eps), projected, fmt::format("direction {}", d));
      }
    }
  }
}

}  // namespace kiln::testing
