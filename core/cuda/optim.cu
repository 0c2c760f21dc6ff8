// Fused optimizer updates on CUDA: one pass over a parameter, its gradient and its state, with
// the formulas and the order of operations of core/cpu/optim.cpp (PyTorch's torch.optim rules,
// documented in optim/adam.h and optim/sgd.h). The scalars are computed once on the host, in
// double and then rounded, exactly as the CPU backend does. A guarded update reads its gradient
// scale and its go-ahead from the step ledger on the device (StepLedger, core/optimizer_args.h),
// which step_guard_kernel writes with the CPU's arithmetic (core/step_guard_math.h).
#include <cmath>
#include <cstdint>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.h"
#include "core/elementwise_math.h"
#include "core/step_guard_math.h"

namespace kiln {

namespace gpu {
namespace {

template <typename T>
struct AdamScalars {
  T step_size, sqrt_bc2, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, wd, decay, scale;
  bool decoupled;
};

// The gradient scale of an update: the host's, or the ledger's when guarded. False when the
// ledger says to skip the update.
template <typename T>
__device__ inline bool guarded_scale(const double* guard, T& scale) {
  if (guard == nullptr) return true;
  if (guard[StepLedger::apply] == 0.0) return false;
  scale = static_cast<T>(guard[StepLedger::scale]);
  return true;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    adam_kernel(std::int64_t n, T* p, const T* g, T* m, T* v, AdamScalars<T> s,
                const double* guard) {
  if (!guarded_scale(guard, s.scale)) return;
  for (std::int64_t i = thread_index(); i < n; i += thread_count()) {
    T gi = g[i] * s.scale;
    T pi = p[i];
    if (s.decoupled) {
      pi *= s.decay;
    } else {
      gi += s.wd * pi;
    }
    const T mi = s.beta1 * m[i] + s.one_minus_beta1 * gi;
    const T vi = s.beta2 * v[i] + s.one_minus_beta2 * gi * gi;
    const T denom = math::sqrt(vi) / s.sqrt_bc2 + s.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - s.step_size * (mi / denom);
  }
}

template <typename T>
struct SgdScalars {
  T lr, momentum, one_minus_dampening, wd, scale;
  bool use_momentum, nesterov, first_step;
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sgd_kernel(std::int64_t n, T* p, const T* g, T* buf, SgdScalars<T> s, const double* guard) {
  if (!guarded_scale(guard, s.scale)) return;
  for (std::int64_t i = thread_index(); i < n; i += thread_count()) {
    const T pi = p[i];
    T d = g[i] * s.scale + s.wd * pi;
    if (s.use_momentum) {
      const T b = s.first_step ? d : s.momentum * buf[i] + s.one_minus_dampening * d;
      buf[i] = b;
      d = s.nesterov ? d + s.momentum * b : b;
    }
    p[i] = pi - s.lr * d;
  }
}

// One thread: the ledger's sums are added in order, as on the host.
__global__ void step_guard_kernel(StepGuardArgs args, const double* losses, const double* sums,
                                  double* ledger) {
  if (blockIdx.x == 0 && threadIdx.x == 0) step_guard_math::update(args, losses, sums, ledger);
}

}  // namespace
}  // namespace gpu

void CudaBackend::adam_update(DType dtype, std::int64_t n, void* param, const void* grad,
                              void* exp_avg, void* exp_avg_sq, const AdamArgs& a) {
  if (n == 0) return;
  activate();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const double bias_correction1 = 1.0 - std::pow(a.beta1, static_cast<double>(a.step));
    const double bias_correction2 = 1.0 - std::pow(a.beta2, static_cast<double>(a.step));
    const gpu::AdamScalars<T> s{static_cast<T>(a.lr / bias_correction1),
                                static_cast<T>(std::sqrt(bias_correction2)),
                                static_cast<T>(a.beta1),
                                static_cast<T>(a.beta2),
                                static_cast<T>(1.0 - a.beta1),
                                static_cast<T>(1.0 - a.beta2),
                                static_cast<T>(a.eps),
                                static_cast<T>(a.weight_decay),
                                static_cast<T>(1.0 - a.lr * a.weight_decay),
                                static_cast<T>(a.grad_scale),
                                a.decoupled_weight_decay};
    KILN_LAUNCH(gpu::blocks_for(n), gpu::kThreads, stream_, gpu::adam_kernel<T>)
    (n, static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(exp_avg),
     static_cast<T*>(exp_avg_sq), s, a.guard);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::sgd_update(DType dtype, std::int64_t n, void* param, const void* grad,
                             void* momentum_buffer, const SgdArgs& a) {
  if (n == 0) return;
  activate();
  dispatch_floating(dtype, [&](auto tag) {
    using T = decltype(tag);
    const gpu::SgdScalars<T> s{static_cast<T>(a.lr),
                               static_cast<T>(a.momentum),
                               static_cast<T>(1.0 - a.dampening),
                               static_cast<T>(a.weight_decay),
                               static_cast<T>(a.grad_scale),
                               a.momentum != 0.0,
                               a.nesterov,
                               a.first_step};
    KILN_LAUNCH(gpu::blocks_for(n), gpu::kThreads, stream_, gpu::sgd_kernel<T>)
    (n, static_cast<T*>(param), static_cast<const T*>(grad), static_cast<T*>(momentum_buffer), s,
     a.guard);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::step_guard(const StepGuardArgs& args, const double* losses, const double* sums,
                             double* ledger) {
  activate();
  KILN_LAUNCH(1, 1, stream_, gpu::step_guard_kernel)(args, losses, sums, ledger);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln
