// Closed-form optimizer updates in double, written from the textbook equations (bias-corrected
// moments m̂ and v̂, not the kernels' operation order), and the known gradient sequence the tests
// feed. Shared by the optimizer tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/kiln.h"

namespace kiln::testing {

// The gradient at step t (1-based) of an n-element parameter: magnitudes in [0.1, 0.5], signs
// varying with the element and the step, so no element sits near 0 (Adam's ε would dominate).
inline std::vector<double> gradient_at(int t, std::int64_t n) {
  std::vector<double> g(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const double sign = ((i + t) % 3 == 0) ? -1.0 : 1.0;
    g[i] = sign * (0.3 + 0.2 * std::sin(0.9 * static_cast<double>(i) + 1.7 * t));
  }
  return g;
}

// Initial parameter values, exact in float32 (multiples of 1/16) so both dtypes start equal.
inline std::vector<double> initial_values(std::int64_t n) {
  std::vector<double> p(n);
  for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<double>((i * 7) % 11 - 5) / 16.0;
  return p;
}

// `values` rounded to T and back: what a T tensor holds.
template <typename T>
std::vector<double> rounded(const std::vector<double>& values) {
  std::vector<double> out;
  for (double v : values) out.push_back(static_cast<double>(static_cast<T>(v)));
  return out;
}

template <typename T>
Tensor tensor_of(const std::vector<double>& values, const Shape& shape) {
  return from_vector<T>(std::vector<T>(values.begin(), values.end()), shape);
}

struct SgdReference {
  double lr = 0.1, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  std::vector<double> buffer;

  // One step at t (1-based) with gradient g.
  void step(std::vector<double>& p, const std::vector<double>& g, int t) {
    buffer.resize(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + weight_decay * p[i];
      if (momentum != 0.0) {
        buffer[i] = t == 1 ? d : momentum * buffer[i] + (1.0 - dampening) * d;
        d = nesterov ? d + momentum * buffer[i] : buffer[i];
      }
      p[i] -= lr * d;
    }
  }
};

struct AdamReference {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false;  // AdamW
  std::vector<double> m, v;

  void step(std::vector<double>& p, const std::vector<double>& g, int t) {
    m.resize(p.size());
    v.resize(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      double gi = g[i];
      if (decoupled)
        p[i] -= lr * weight_decay * p[i];
      else
        gi += weight_decay * p[i];
      m[i] = beta1 * m[i] + (1.0 - beta1) * gi;
      v[i] = beta2 * v[i] + (1.0 - beta2) * gi * gi;
      const double m_hat = m[i] / (1.0 - std::pow(beta1, t));
      const double v_hat = v[i] / (1.0 - std::pow(beta2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
};

// Tolerances for kiln's update against the double reference.
template <typename T>
constexpr double optim_rtol = sizeof(T) == 8 ? 1e-12 : 1e-6;
template <typename T>
constexpr double optim_atol = sizeof(T) == 8 ? 1e-12 : 1e-6;

}  // namespace kiln::testing
