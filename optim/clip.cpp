// Gradient clipping by global norm (rule and determinism in optim/clip.h).
#include "optim/clip.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/autograd.h"
#include "core/error.h"
#include "core/ops/factories.h"
#include "core/ops/optimizer_update.h"
#include "core/profiler.h"

namespace kiln {

Tensor grad_sums_of_squares(std::span<const Tensor> params, Device device) {
  profile::Scope scope(profile::Family::optimizer);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;  // in parameter order
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    KILN_CHECK(p.defined(), "grad_norm: parameter {} is undefined", i);
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!grads.empty())
      KILN_CHECK(g.dtype() == grads[0].dtype() && g.device() == grads[0].device(),
                 "grad_norm: gradients must share one dtype and device: {} on {} and {} on {}",
                 grads[0].dtype(), grads[0].device(), g.dtype(), g.device());
    grads.push_back(g);
  }
  if (grads.empty()) return empty({0}, {.dtype = DType::f64, .device = device});
  return sums_of_squares(grads);
}

double grad_norm(std::span<const Tensor> params) {
  const Tensor sums =
      grad_sums_of_squares(params, params.empty() ? Device::cpu() : params[0].device());
  double total = 0.0;
  for (double s : sums.to_vector<double>()) total += s;
  return std::sqrt(total);
}

double clip_scale(double norm, double max_norm) {
  KILN_CHECK(std::isfinite(max_norm) && max_norm > 0.0,
             "clip_grad_norm: max_norm {} must be a positive finite number", max_norm);
  return std::min(1.0, max_norm / (norm + 1e-6));
}

double clip_grad_norm(std::span<const Tensor> params, double max_norm) {
  const double norm = grad_norm(params);
  const double scale = clip_scale(norm, max_norm);
  if (scale < 1.0) {
    NoGradGuard no_grad;
    for (const Tensor& p : params)
      if (p.grad().defined()) p.grad().mul_(scale);
  }
  return norm;
}

}  // namespace kiln
