#include "core/ops/linear.h"

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/ops/matmul.h"
#include "core/ops/op_utils.h"
#include "core/ops/reduction.h"
#include "core/profiler.h"

namespace kiln {

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias) {
  profile::Scope scope(profile::Family::gemm);
  const auto [x, weight] = checked_operands<2>("linear", {x_in, weight_in}, {.autocast = true});
  const DType out_dtype = compute_dtype(x.dtype());
  KILN_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
             "linear: x {} and weight {} must be (N, in) and (out, in)", x.shape(), weight.shape());
  const std::int64_t rows = x.size(0), out_features = weight.size(0);
  if (bias.defined()) {
    KILN_CHECK(bias.dtype() == out_dtype,
               "linear: bias is {}, but x and weight are {}: the bias must be {}, the output's "
               "dtype",
               bias.dtype(), x.dtype(), out_dtype);
    KILN_CHECK(bias.device() == x.device(), "linear: bias on {} and x on {}", bias.device(),
               x.device());
    KILN_CHECK(bias.shape() == Shape{out_features},
               "linear: bias of shape {} does not match weight {} (expected [{}])", bias.shape(),
               weight.shape(), out_features);
  }
  const Tensor input = x.contiguous().detach(), w = weight.contiguous().detach();
  Tensor y = empty({rows, out_features}, {out_dtype, x.device()});
  Backend& backend = backend_of(x);
  if (bias.defined()) backend.copy(arg_of(y), broadcast_arg(bias.detach(), y.shape()));
  GemmArgs g;
  g.op = "linear";
  g.dtype = out_dtype;
  g.bf16_operands = x.dtype() == DType::bf16;
  g.m = rows, g.n = out_features, g.k = x.size(1);
  g.a = input.raw_data(), g.lda = g.k;
  g.b = w.raw_data(), g.ldb = g.k, g.trans_b = true;
  g.c = y.raw_data(), g.ldc = out_features;
  g.beta = bias.defined() ? 1.0 : 0.0;
  if (rows > 0 && out_features > 0) {
    if (g.k > 0) {
      backend.gemm(g);
    } else if (!bias.defined()) {
      y.zero_();
    }
  }
  record("linear", y, {x, weight, bias}, {input, w}, [](const Tensor& dy, const Saved& s) {
    // With bf16 operands the products read dy in bf16 (as matmul's backward); db sums the
    // float32 dy.
    const Tensor g = dy.to(s[0].dtype());
    Tensor dx, dw, db;
    if (s.needs_grad(0)) dx = matmul(g, s[1]);      // (N, out) (out, in)
    if (s.needs_grad(1)) dw = matmul(g.t(), s[0]);  // (out, N) (N, in)
    if (s.needs_grad(2)) db = sum(dy, {0});
    return Grads{dx, dw, db};
  });
  return autocast_result(y, x.dtype());
}

}  // namespace kiln
