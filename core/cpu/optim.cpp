// Fused optimizer updates: one pass over a parameter, its gradient and its state. The update
// rules (those of PyTorch's torch.optim) are documented in optim/adam.h and optim/sgd.h.
#include <cmath>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/parallel.h"

namespace kiln {

void CpuBackend::adam_update(DType dtype, std::int64_t n, void* param, const void* grad,
                             void* exp_avg, void* exp_avg_sq, const AdamArgs& a) {
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(param);
    const T* g = static_cast<const T*>(grad);
    T* m = static_cast<T*>(exp_avg);
    T* v = static_cast<T*>(exp_avg_sq);
    const double bias_correction1 = 1.0 - std::pow(a.beta1, static_cast<double>(a.step));
    const double bias_correction2 = 1.0 - std::pow(a.beta2, static_cast<double>(a.step));
    const T step_size = static_cast<T>(a.lr / bias_correction1);
    const T sqrt_bc2 = static_cast<T>(std::sqrt(bias_correction2));
    const T beta1 = static_cast<T>(a.beta1), beta2 = static_cast<T>(a.beta2);
    const T one_minus_beta1 = static_cast<T>(1.0 - a.beta1);
    const T one_minus_beta2 = static_cast<T>(1.0 - a.beta2);
    const T eps = static_cast<T>(a.eps), wd = static_cast<T>(a.weight_decay);
    const T decay = static_cast<T>(1.0 - a.lr * a.weight_decay);
    const T scale = static_cast<T>(a.grad_scale);
    const bool decoupled = a.decoupled_weight_decay;
    parallel_chunks(n, 16384, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        T gi = g[i] * scale;
        if (decoupled) {
          p[i] *= decay;
        } else {
          gi += wd * p[i];
        }
        m[i] = beta1 * m[i] + one_minus_beta1 * gi;
        v[i] = beta2 * v[i] + one_minus_beta2 * gi * gi;
        const T denom = std::sqrt(v[i]) / sqrt_bc2 + eps;
        p[i] -= step_size * (m[i] / denom);
      }
    });
  });
}

void CpuBackend::sgd_update(DType dtype, std::int64_t n, void* param, const void* grad,
                            void* momentum_buffer, const SgdArgs& a) {
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(param);
    const T* g = static_cast<const T*>(grad);
    T* buf = static_cast<T*>(momentum_buffer);
    const T lr = static_cast<T>(a.lr), momentum = static_cast<T>(a.momentum);
    const T one_minus_dampening = static_cast<T>(1.0 - a.dampening);
    const T wd = static_cast<T>(a.weight_decay);
    const T scale = static_cast<T>(a.grad_scale);
    parallel_chunks(n, 16384, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        T d = g[i] * scale + wd * p[i];
        if (a.momentum != 0.0) {
          buf[i] = a.first_step ? d : momentum * buf[i] + one_minus_dampening * d;
          d = a.nesterov ? d + momentum * buf[i] : buf[i];
        }
        p[i] -= lr * d;
      }
    });
  });
}

}  // namespace kiln
