#include "core/ops/layer_norm.h"

#include "core/autograd.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

// A bf16 x is normalised in float32 (gamma and beta float32) and y is float32, as PyTorch's
// autocast runs layer_norm; x is saved in bf16. Backward (xhat = (x - mean) * rstd, g = dy *
// gamma):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dgamma = sum dy * xhat,  dbeta = sum dy.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  profile::Scope scope(profile::Family::layer_norm);
  check_operands("layer_norm", std::array{x, gamma, beta}, {.same_dtype = false});
  check_same_dtype_device("layer_norm", gamma, beta);
  KILN_CHECK(gamma.dtype() == compute_dtype(x.dtype()),
             "layer_norm: x is {}, so gamma and beta must be {}, got {}", x.dtype(),
             compute_dtype(x.dtype()), gamma.dtype());
  KILN_CHECK(x.dim() >= 1, "layer_norm: expected at least one dim, got a 0-dim tensor");
  const std::int64_t cols = x.size(-1);
  KILN_CHECK(gamma.shape() == Shape{cols} && beta.shape() == Shape{cols},
             "layer_norm: gamma {} and beta {} must both have shape [{}] (the last dim of x {})",
             gamma.shape(), beta.shape(), cols, x.shape());
  KILN_CHECK(eps > 0, "layer_norm: eps must be positive, got {}", eps);
  const Tensor input = x.contiguous().detach();  // saved: bf16 stays bf16
  const Tensor g = gamma.contiguous().detach(), b = beta.contiguous().detach();
  const std::int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const TensorOptions options{gamma.dtype(), x.device()};
  Tensor y = empty(x.shape(), options);
  Tensor mean = empty({rows}, options);
  Tensor rstd = empty({rows}, options);
  const Tensor values = kernel_operand(input);
  const LayerNormArgs args{.dtype = gamma.dtype(),
                           .bf16_input = values.dtype() == DType::bf16,
                           .rows = rows,
                           .cols = cols,
                           .eps = eps};
  if (rows > 0)
    backend_of(x).layer_norm_forward(args, values.raw_data(), g.raw_data(), b.raw_data(),
                                     y.raw_data(), mean.raw_data(), rstd.raw_data());
  record("layer_norm", y, {x, gamma, beta}, {input, g, mean, rstd},
         [args, rows, cols](const Tensor& dy, const Saved& s) {
           const Tensor grad = dy.contiguous();
           const Tensor x = kernel_operand(s[0]);
           Tensor dx = empty(s[0].shape(), {dy.dtype(), dy.device()});
           Tensor dgamma = empty({cols}, {dy.dtype(), dy.device()});
           Tensor dbeta = empty({cols}, {dy.dtype(), dy.device()});
           if (rows > 0) {
             backend_of(dy).layer_norm_backward(args, x.raw_data(), s[1].raw_data(),
                                                s[2].raw_data(), s[3].raw_data(), grad.raw_data(),
                                                dx.raw_data(), dgamma.raw_data(), dbeta.raw_data());
           } else {
             dgamma.zero_();
             dbeta.zero_();
           }
           return Grads{dx, dgamma, dbeta};
         });
  return y;
}

}  // namespace kiln
