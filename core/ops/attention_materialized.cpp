#include "core/ops/attention_materialized.h"

#include <cmath>

#include "core/autograd.h"
#include "core/ops/factories.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// One (T x cols) matrix per batch element inside a larger buffer: its first element (in
// elements from the buffer's start), leading dimension and stride between batch elements.
struct HeadMatrix {
  std::int64_t offset, ld, batch_stride;
};

// Where each head's matrices live in the projection (B, T, width), the probabilities
// (B, heads, T, T) and the output (B, T, heads d).
struct Geometry {
  std::int64_t batch, time, heads, kv_heads, d;

  std::int64_t width() const { return (heads + 2 * kv_heads) * d; }
  std::int64_t kv_of(std::int64_t head) const { return head * kv_heads / heads; }
  bool first_of_group(std::int64_t head) const {
    return head == 0 || kv_of(head - 1) != kv_of(head);
  }
  HeadMatrix projected(std::int64_t column_block) const {
    return {column_block * d, width(), time * width()};
  }
  HeadMatrix query(std::int64_t head) const { return projected(head); }
  HeadMatrix key(std::int64_t kv) const { return projected(heads + kv); }
  HeadMatrix value(std::int64_t kv) const { return projected(heads + kv_heads + kv); }
  HeadMatrix scores(std::int64_t head) const {
    return {head * time * time, time, heads * time * time};
  }
  HeadMatrix output(std::int64_t head) const { return {head * d, heads * d, time * heads * d}; }
};

// C_b = alpha op(A_b) op(B_b) + beta C_b for every batch element b, as one strided-batched GEMM.
void head_gemm(const Geometry& geo, std::int64_t m, std::int64_t n, std::int64_t k, const Tensor& a,
               HeadMatrix ma, bool trans_a, const Tensor& b, HeadMatrix mb, bool trans_b,
               const Tensor& c, HeadMatrix mc, double alpha, double beta) {
  const std::size_t element = dtype_size(c.dtype());
  GemmArgs g;
  g.op = "causal_attention";
  g.dtype = c.dtype();
  g.m = m, g.n = n, g.k = k;
  g.a = static_cast<const char*>(a.raw_data()) + ma.offset * element;
  g.lda = ma.ld, g.trans_a = trans_a, g.stride_a = ma.batch_stride;
  g.b = static_cast<const char*>(b.raw_data()) + mb.offset * element;
  g.ldb = mb.ld, g.trans_b = trans_b, g.stride_b = mb.batch_stride;
  g.c = static_cast<char*>(c.raw_data()) + mc.offset * element;
  g.ldc = mc.ld, g.stride_c = mc.batch_stride;
  g.alpha = alpha, g.beta = beta;
  g.batch = geo.batch;
  backend_of(c).gemm(g);
}

SoftmaxArgs causal_rows(const Geometry& geo, DType dtype) {
  SoftmaxArgs args;
  args.dtype = dtype;
  args.rows = geo.batch * geo.heads * geo.time;
  args.cols = geo.time;
  args.causal = true;
  args.query_len = geo.time;
  return args;
}

}  // namespace

Tensor materialized_causal_attention(const Tensor& projected, std::int64_t heads,
                                     std::int64_t kv_heads, double dropout_p, bool training,
                                     Generator* gen, Tensor* probabilities) {
  const Geometry geo{projected.size(0), projected.size(1), heads, kv_heads,
                     projected.size(2) / (heads + 2 * kv_heads)};
  const TensorOptions options{projected.dtype(), projected.device()};
  const Tensor qkv = projected.contiguous().detach();
  const double scale = 1.0 / std::sqrt(static_cast<double>(geo.d));
  const std::int64_t T = geo.time;
  Backend& backend = backend_of(projected);

  // S_i = Q_i K_g^T / sqrt(d), then A = causal softmax(S) in place.
  Tensor probs = empty({geo.batch, heads, T, T}, options);
  Tensor out = empty({geo.batch, T, heads * geo.d}, options);
  if (out.numel() == 0) {  // no GEMMs on empty buffers; the gradient is all zeros
    if (probabilities != nullptr) *probabilities = probs;
    record("causal_attention", out, {projected}, {},
           [shape = qkv.shape()](const Tensor& grad, const Saved&) {
             return Grads{zeros(shape, {grad.dtype(), grad.device()})};
           });
    return out;
  }
  for (std::int64_t i = 0; i < heads; ++i)
    head_gemm(geo, T, T, geo.d, qkv, geo.query(i), false, qkv, geo.key(geo.kv_of(i)), true, probs,
              geo.scores(i), scale, 0.0);
  const SoftmaxArgs rows = causal_rows(geo, projected.dtype());
  backend.softmax_forward(rows, probs.raw_data(), probs.raw_data());
  if (probabilities != nullptr) *probabilities = probs;

  // A' = A * D (the same mask, from the same counters, as dropout(A)).
  Tensor mask, dropped = probs;
  if (training && dropout_p > 0.0) {
    Generator& g = gen != nullptr ? *gen : default_generator();
    const std::uint64_t offset = g.reserve((probs.numel() + 3) / 4);
    mask = dropout_mask(probs.shape(), options, dropout_p, g.seed(), offset);
    dropped = empty(probs.shape(), options);
    backend.binary(BinaryOp::mul, arg_of(dropped), arg_of(probs), arg_of(mask));
  }

  // Y_i = A'_i V_g, written into its columns of the concatenation.
  for (std::int64_t i = 0; i < heads; ++i)
    head_gemm(geo, T, geo.d, T, dropped, geo.scores(i), false, qkv, geo.value(geo.kv_of(i)), false,
              out, geo.output(i), 1.0, 0.0);

  record("causal_attention", out, {projected}, {qkv, probs, mask, dropped},
         [geo, scale, rows](const Tensor& grad, const Saved& s) {
           const Tensor& qkv = s[0];
           const Tensor& probs = s[1];
           const Tensor& mask = s[2];
           const Tensor& dropped = s[3];
           const Tensor dy = grad.contiguous();
           const TensorOptions options{grad.dtype(), grad.device()};
           const std::int64_t T = geo.time;
           Backend& backend = backend_of(grad);
           Tensor dqkv = empty(qkv.shape(), options);
           Tensor dscores = empty(probs.shape(), options);
           // dV_g = sum_i A'_i^T dY_i (the group's first head overwrites, the rest add in head
           // order); dA'_i = dY_i V_g^T.
           for (std::int64_t i = 0; i < geo.heads; ++i) {
             const std::int64_t g = geo.kv_of(i);
             head_gemm(geo, T, geo.d, T, dropped, geo.scores(i), true, dy, geo.output(i), false,
                       dqkv, geo.value(g), 1.0, geo.first_of_group(i) ? 0.0 : 1.0);
             head_gemm(geo, T, T, geo.d, dy, geo.output(i), false, qkv, geo.value(g), true, dscores,
                       geo.scores(i), 1.0, 0.0);
           }
           if (mask.defined())
             backend.binary(BinaryOp::mul, arg_of(dscores), arg_of(dscores), arg_of(mask));
           // dS = A * (dA - rowsum(dA * A)), in place; masked keys get 0.
           backend.softmax_backward(rows, probs.raw_data(), dscores.raw_data(), dscores.raw_data());
           // dQ_i = dS_i K_g / sqrt(d), dK_g = sum_i dS_i^T Q_i / sqrt(d).
           for (std::int64_t i = 0; i < geo.heads; ++i) {
             const std::int64_t g = geo.kv_of(i);
             head_gemm(geo, T, geo.d, T, dscores, geo.scores(i), false, qkv, geo.key(g), false,
                       dqkv, geo.query(i), scale, 0.0);
             head_gemm(geo, T, geo.d, T, dscores, geo.scores(i), true, qkv, geo.query(i), false,
                       dqkv, geo.key(g), scale, geo.first_of_group(i) ? 0.0 : 1.0);
           }
           return Grads{dqkv};
         });
  return out;
}

}  // namespace kiln
