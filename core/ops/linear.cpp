#include "core/ops/linear.h"

#include <algorithm>
#include <cstdint>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/ops/matmul.h"
#include "core/ops/op_utils.h"
#include "core/ops/reduction.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// dX (N, in) = dY (N, out) W (out, in) for a bf16 dY and the float32 weight the GEMM rounds to
// bf16 as it reads it, as the forward did (checked_weight_operands).
Tensor times_rounded_weight(const Tensor& dy, const Tensor& w) {
  const Tensor g = dy.contiguous();
  Tensor dx = empty({g.size(0), w.size(1)}, {DType::f32, g.device()});
  GemmArgs args;
  args.dtype = DType::f32;
  set_operand_dtypes(args, g.dtype(), w.dtype());
  args.m = g.size(0), args.n = w.size(1), args.k = g.size(1);
  args.a = g.raw_data(), args.lda = args.k;
  args.b = w.raw_data(), args.ldb = args.n;
  args.c = dx.raw_data(), args.ldc = args.n;
  if (args.m > 0 && args.n > 0) {
    if (args.k > 0) {
      backend_of(dx).gemm(args);
    } else {
      dx.zero_();
    }
  }
  return dx;
}

}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias) {
  profile::Scope scope(profile::Family::gemm);
  const auto [x, weight] = checked_weight_operands("linear", x_in, weight_in);
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
  // The bias goes into the GEMM's epilogue. Under autocast, a GEMM that cannot round a float32
  // weight as it reads it (cuBLAS) multiplies autocast's cached bf16 copy and writes the bf16
  // result itself, its bias in bf16 too (the bias has the result's dtype, cuBLASLt's rule: the
  // sum moves by at most half a bf16 ulp of the bias before it is rounded); the CPU's rounds
  // the weight as it reads it, adds the float32 bias and rounds y in autocast_result below.
  Backend& backend = backend_of(x);
  const bool cached_copies =
      x.dtype() == DType::bf16 && weight.dtype() == DType::f32 && !backend.gemm_rounds_operands();
  const Tensor input = x.contiguous().detach();
  const Tensor w = cached_copies ? autocast_weight(weight) : weight.contiguous().detach();
  const bool bf16_result =
      cached_copies && autocast_result_dtype(out_dtype, x.dtype()) != out_dtype;
  const Tensor b = !bias.defined() ? Tensor()
                   : bf16_result   ? autocast_weight(bias)
                                   : bias.contiguous().detach();
  Tensor y = empty({rows, out_features}, {bf16_result ? DType::bf16 : out_dtype, x.device()});
  GemmArgs g;
  g.op = "linear";
  g.dtype = out_dtype;
  set_operand_dtypes(g, x.dtype(), w.dtype());
  g.m = rows, g.n = out_features, g.k = x.size(1);
  g.a = input.raw_data(), g.lda = std::max<std::int64_t>(g.k, 1);
  g.b = w.raw_data(), g.ldb = std::max<std::int64_t>(g.k, 1), g.trans_b = true;
  g.c = y.raw_data(), g.ldc = out_features;
  g.bias = b.defined() ? b.raw_data() : nullptr;
  g.bf16_result = bf16_result;
  if (rows > 0 && out_features > 0) {
    if (g.k > 0 || b.defined()) {
      backend.gemm(g);
    } else {
      y.zero_();
    }
  }
  record("linear", y, {x, weight, bias}, {input, w}, [](const Tensor& dy, const Saved& s) {
    // With bf16 operands the products read dy in bf16 (as matmul's backward), and the weight as
    // the forward read it: a float32 one rounded, or the cached bf16 copy; db sums the float32 dy.
    const Tensor g = dy.to(s[0].dtype());
    Tensor dx, dw, db;
    if (s.needs_grad(0))  // (N, out) (out, in)
      dx = s[1].dtype() == g.dtype() ? matmul(g, s[1]) : times_rounded_weight(g, s[1]);
    if (s.needs_grad(1)) dw = matmul(g.t(), s[0]);  // (out, N) (N, in)
    if (s.needs_grad(2)) db = sum(dy, {0});
    return Grads{dx, dw, db};
  });
  return autocast_result(y, x.dtype());
}

}  // namespace kiln
