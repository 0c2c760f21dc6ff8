// matmul: (.., n, k) @ (.., k, m) on the backend's (strided-batched) GEMM.
#include "core/ops/matmul.h"

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/ops/gemm_operand.h"
#include "core/ops/op_utils.h"
#include "core/ops/reduction.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// out (batch.., n, m) = a (batch.., n, k) @ b (batch.., k, m), operands already broadcast.
void gemm_into(const Tensor& out, const Tensor& a, const Tensor& b) {
  const std::int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  const GemmOperand la = gemm_operand(a), lb = gemm_operand(b);
  GemmArgs args;
  args.op = "matmul";
  args.dtype = out.dtype();
  args.bf16_operands = a.dtype() == DType::bf16;
  args.m = n;
  args.n = m;
  args.k = k;
  args.a = la.tensor.raw_data();
  args.trans_a = la.transposed;
  args.lda = la.ld;
  args.b = lb.tensor.raw_data();
  args.trans_b = lb.transposed;
  args.ldb = lb.ld;
  args.c = out.raw_data();
  args.ldc = std::max<std::int64_t>(m, 1);
  args.batch = numel_of(Shape(out.shape().begin(), out.shape().end() - 2));
  args.stride_a = la.batch_stride;
  args.stride_b = lb.batch_stride;
  args.stride_c = n * m;
  if (args.batch == 0 || n == 0 || m == 0) return;
  backend_of(out).gemm(args);
}

Tensor matmul_2d_or_more(const Tensor& a, const Tensor& b) {
  profile::Scope scope(profile::Family::gemm);
  const std::int64_t n = a.size(-2), k = a.size(-1), kb = b.size(-2), m = b.size(-1);
  KILN_CHECK(k == kb, "matmul: shapes {} and {} do not match ({} != {})", a.shape(), b.shape(), k,
             kb);
  const Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  const Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  Shape out_shape = broadcast_shapes(batch_a, batch_b, "matmul");
  const Shape batch = out_shape;
  out_shape.push_back(n);
  out_shape.push_back(m);
  Tensor out = empty(out_shape, {compute_dtype(a.dtype()), a.device()});
  if (k == 0) {
    out.zero_();
  } else if (b.dim() == 2 && a.dim() > 2 && a.is_contiguous()) {
    // (batch.., n, k) @ (k, m): one GEMM over batch * n rows (counted, not -1: m may be 0).
    const std::int64_t rows = numel_of(batch) * n;
    gemm_into(out.view({rows, m}), a.detach().view({rows, k}), b.detach());
  } else {
    Shape shape_a = batch, shape_b = batch;
    shape_a.insert(shape_a.end(), {n, k});
    shape_b.insert(shape_b.end(), {k, m});
    gemm_into(out, a.detach().expand(shape_a), b.detach().expand(shape_b));
  }
  // dA = dY B^T, dB = A^T dY, summed over broadcast batch dims. With bf16 operands dY is rounded
  // to bf16 too: the backward's products are bf16 products summed in float32, as the forward's.
  record("matmul", out, {a, b}, {a, b}, [](const Tensor& dy, const Saved& s) {
    const Tensor& a = s[0];
    const Tensor& b = s[1];
    const Tensor g = dy.to(a.dtype());
    Tensor grad_a, grad_b;
    if (s.needs_grad(0)) grad_a = sum_to(matmul_2d_or_more(g, b.transpose(-1, -2)), a.shape());
    if (s.needs_grad(1)) {
      if (b.dim() == 2 && a.dim() > 2) {
        const std::int64_t rows = numel_of(Shape(a.shape().begin(), a.shape().end() - 1));
        grad_b =
            matmul_2d_or_more(a.reshape({rows, a.size(-1)}).t(), g.reshape({rows, g.size(-1)}));
      } else {
        grad_b = sum_to(matmul_2d_or_more(a.transpose(-1, -2), g), b.shape());
      }
    }
    return Grads{grad_a, grad_b};
  });
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = checked_operands<2>("matmul", {a_in, b_in}, {.autocast = true});
  KILN_CHECK(a.dim() >= 1 && b.dim() >= 1,
             "matmul: both operands need at least one dim, got shapes {} and {}", a.shape(),
             b.shape());
  const bool a_vector = a.dim() == 1, b_vector = b.dim() == 1;
  Tensor out = matmul_2d_or_more(a_vector ? a.unsqueeze(0) : a, b_vector ? b.unsqueeze(1) : b);
  if (a_vector) out = out.squeeze(-2);
  if (b_vector) out = out.squeeze(-1);
  return autocast_result(out, a.dtype());
}

}  // namespace kiln
