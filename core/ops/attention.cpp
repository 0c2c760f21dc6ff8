#include "core/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/ops/attention_materialized.h"
#include "core/ops/factories.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// Whether the kernels can read a 4-D (B, heads, T, d) tensor in place: each row of d elements
// contiguous and rows at least d apart (the row stride is their tile products' leading
// dimension, which BLAS refuses below d). An expanded sequence (row stride 0) is not.
bool heads_readable(const Tensor& t) {
  const std::int64_t d = t.size(3);
  return (t.strides()[3] == 1 || d == 1) && (t.strides()[2] >= d || t.size(2) == 1);
}

// The heads of a 4-D (B, heads, T, d) tensor that heads_readable accepts. A single row's stride
// is never stepped over: it is given as d when smaller (a decoding step's one query may have
// any).
HeadsArg heads_of(const Tensor& t) {
  const std::int64_t row_stride =
      t.size(2) == 1 ? std::max(t.strides()[2], t.size(3)) : t.strides()[2];
  return {t.raw_data(), t.strides()[0], t.strides()[1], row_stride};
}

// Head block `first` (of d columns) of a (B, T, width) buffer: heads first, first + 1, ...
HeadsArg block_of(const Tensor& t, std::int64_t first, std::int64_t d) {
  const std::int64_t T = t.size(1), width = t.size(2);
  return {static_cast<char*>(t.raw_data()) + first * d * dtype_size(t.dtype()), T * width, d,
          width};
}

// The output (B, T_q, heads d): heads concatenated.
HeadsArg concatenated(const Tensor& out, std::int64_t d) { return block_of(out, 0, d); }

void check_dropout(std::string_view op, double p) {
  KILN_CHECK(p >= 0.0 && p < 1.0, "{}: dropout probability must be in [0, 1), got {}", op, p);
}

// The shape-only part of the kernels' arguments; dropout counters reserved from the generator
// when it applies: one per four of the B h T_q T_k probabilities, as dropout() reserves them.
AttentionArgs shape_args(const char* op, DType dtype, std::int64_t batch, std::int64_t heads,
                         std::int64_t kv_heads, std::int64_t queries, std::int64_t keys,
                         std::int64_t d, double dropout_p, bool training, Generator* gen) {
  AttentionArgs a;
  a.op = op;
  a.dtype = dtype;
  a.batch = batch, a.heads = heads, a.kv_heads = kv_heads;
  a.queries = queries, a.keys = keys, a.d = d;
  a.scale = 1.0 / std::sqrt(static_cast<double>(d));
  if (training && dropout_p > 0.0) {
    std::int64_t probabilities = 0;
    KILN_CHECK(!__builtin_mul_overflow(batch * heads, queries, &probabilities) &&
                   !__builtin_mul_overflow(probabilities, keys, &probabilities),
               "{}: {} x {} x {} x {} attention probabilities overflow the dropout counters", op,
               batch, heads, queries, keys);
    Generator& g = gen != nullptr ? *gen : default_generator();
    a.dropout_p = dropout_p;
    a.seed = g.seed();
    a.offset = g.reserve((static_cast<std::uint64_t>(probabilities) + 3) / 4);
  }
  return a;
}

// True when the kernels read bf16 operands themselves: CUDA's tensor-core kernels
// (core/cuda/attention_mma.h). The CPU backend computes in float32 on widened copies.
bool reads_bf16(const Tensor& operand) {
  return operand.dtype() == DType::bf16 && operand.device().is_cuda();
}

// The operand as the kernels read it: itself where they read bf16, else compute_copy.
Tensor attention_operand(const Tensor& t, DType kernel_dtype) {
  return kernel_dtype == DType::bf16 ? t : compute_copy(t);
}

// An empty output whose inputs get zero gradients (no kernels run on empty buffers). `op` is a
// string literal (autograd keeps the view).
Tensor empty_attention(std::string_view op, const Shape& out_shape,
                       const std::vector<Tensor>& inputs) {
  Tensor out = empty(out_shape, {compute_dtype(inputs[0].dtype()), inputs[0].device()});
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  record(op, out, inputs, {}, [shapes](const Tensor& grad, const Saved&) {
    Grads grads;
    for (const Shape& shape : shapes) grads.push_back(zeros(shape, {grad.dtype(), grad.device()}));
    return grads;
  });
  return out;
}

}  // namespace

Tensor causal_attention(const Tensor& projected_in, std::int64_t heads, std::int64_t kv_heads,
                        double dropout_p, bool training, Generator* gen, Tensor* probabilities) {
  profile::Scope scope(profile::Family::attention);
  const auto [projected] =
      checked_operands<1>("causal_attention", {projected_in}, {.autocast = true});
  KILN_CHECK(heads > 0 && kv_heads > 0 && heads % kv_heads == 0,
             "causal_attention: kv_heads ({}) must divide heads ({})", kv_heads, heads);
  KILN_CHECK(projected.dim() == 3 && projected.size(2) % (heads + 2 * kv_heads) == 0 &&
                 projected.size(2) > 0,
             "causal_attention: projected must be (B, T, (heads + 2 kv_heads) d_head) with {} "
             "heads and {} kv heads, got shape {}",
             heads, kv_heads, projected.shape());
  check_dropout("causal_attention", dropout_p);
  const std::int64_t B = projected.size(0), T = projected.size(1);
  const std::int64_t d = projected.size(2) / (heads + 2 * kv_heads);
  const DType dtype = compute_dtype(projected.dtype());
  if (probabilities != nullptr || d > kMaxAttentionHeadDim)
    return autocast_result(materialized_causal_attention(projected.to(dtype), heads, kv_heads,
                                                         dropout_p, training, gen, probabilities),
                           projected.dtype());
  if (B * T == 0)
    return autocast_result(empty_attention("causal_attention", {B, T, heads * d}, {projected}),
                           projected.dtype());

  // The kernels compute in float32: CUDA reads bf16 operands directly (and writes Y in the dtype
  // the op returns), the CPU widens them first. What is saved stays bf16.
  const Tensor qkv = projected.contiguous().detach();
  const DType kernel_dtype = reads_bf16(qkv) ? DType::bf16 : dtype;
  const Tensor qkv_values = attention_operand(qkv, kernel_dtype);
  const DType out_dtype =
      kernel_dtype == DType::bf16 ? autocast_result_dtype(dtype, projected.dtype()) : dtype;
  Tensor out = empty({B, T, heads * d}, {out_dtype, projected.device()});
  Tensor logsumexp = empty({B, heads, T}, {dtype, projected.device()});
  AttentionArgs args = shape_args("causal_attention", kernel_dtype, B, heads, kv_heads, T, T, d,
                                  dropout_p, training, gen);
  args.out_dtype = out_dtype;
  args.q = block_of(qkv_values, 0, d);
  args.k = block_of(qkv_values, heads, d);
  args.v = block_of(qkv_values, heads + kv_heads, d);
  args.out = concatenated(out, d);
  args.logsumexp = logsumexp.raw_data();
  backend_of(projected).attention_forward(args);
  out = stored_as(out, autocast_result_dtype(dtype, projected.dtype()));

  record("causal_attention", out, {projected}, {qkv, out, logsumexp},
         [args](const Tensor& grad, const Saved& s) {
           const Tensor qkv = attention_operand(s[0], args.dtype),
                        out = attention_operand(s[1], args.dtype);
           const Tensor dy = grad.contiguous();
           Tensor dqkv = empty(qkv.shape(), {grad.dtype(), grad.device()});
           AttentionArgs a = args;
           a.q = block_of(qkv, 0, a.d);
           a.k = block_of(qkv, a.heads, a.d);
           a.v = block_of(qkv, a.heads + a.kv_heads, a.d);
           a.out = concatenated(out, a.d);
           a.logsumexp = s[2].raw_data();
           // dQ, dK, dV land in the Q, K and V columns of one gradient.
           backend_of(grad).attention_backward(a,
                                               {.dout = concatenated(dy, a.d),
                                                .dq = block_of(dqkv, 0, a.d),
                                                .dk = block_of(dqkv, a.heads, a.d),
                                                .dv = block_of(dqkv, a.heads + a.kv_heads, a.d)});
           return Grads{dqkv};
         });
  return out;
}

Tensor causal_attention_heads(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                              double dropout_p, bool training, Generator* gen) {
  profile::Scope scope(profile::Family::attention);
  const auto [q, k, v] =
      checked_operands<3>("causal_attention_heads", {q_in, k_in, v_in}, {.autocast = true});
  KILN_CHECK(
      q.dim() == 4 && k.dim() == 4 && k.shape() == v.shape() && q.size(0) == k.size(0) &&
          q.size(3) == k.size(3) && k.size(1) > 0 && q.size(1) % k.size(1) == 0 &&
          q.size(2) <= k.size(2),
      "causal_attention_heads: expected q (B, heads, T_q, d_head) and k, v (B, kv_heads, T_k, "
      "d_head) with kv_heads dividing heads and T_k >= T_q, got shapes {}, {} and {}",
      q.shape(), k.shape(), v.shape());
  KILN_CHECK(q.size(3) <= kMaxAttentionHeadDim,
             "causal_attention_heads: d_head {} exceeds the tiled kernels' limit of {}", q.size(3),
             kMaxAttentionHeadDim);
  check_dropout("causal_attention_heads", dropout_p);
  const std::int64_t B = q.size(0), heads = q.size(1), kv_heads = k.size(1);
  const std::int64_t queries = q.size(2), keys = k.size(2), d = q.size(3);
  if (B * heads * queries * d == 0)
    return autocast_result(
        empty_attention("causal_attention_heads", {B, queries, heads * d}, {q, k, v}), q.dtype());

  // Operands the kernels cannot read in place (heads_readable) are copied; any other strides
  // are taken as they are. The kernels compute in float32: CUDA reads bf16 operands directly (and
  // writes Y in the dtype the op returns), the CPU widens them first. What is saved stays bf16.
  const auto readable = [](const Tensor& t) {
    return (heads_readable(t) ? t : t.contiguous()).detach();
  };
  const Tensor qr = readable(q), kr = readable(k), vr = readable(v);
  const DType dtype = compute_dtype(q.dtype());
  const DType kernel_dtype = reads_bf16(qr) ? DType::bf16 : dtype;
  const Tensor q_values = attention_operand(qr, kernel_dtype),
               k_values = attention_operand(kr, kernel_dtype),
               v_values = attention_operand(vr, kernel_dtype);
  const DType out_dtype =
      kernel_dtype == DType::bf16 ? autocast_result_dtype(dtype, q.dtype()) : dtype;
  Tensor out = empty({B, queries, heads * d}, {out_dtype, q.device()});
  Tensor logsumexp = empty({B, heads, queries}, {dtype, q.device()});
  AttentionArgs args = shape_args("causal_attention_heads", kernel_dtype, B, heads, kv_heads,
                                  queries, keys, d, dropout_p, training, gen);
  args.out_dtype = out_dtype;
  args.q = heads_of(q_values), args.k = heads_of(k_values), args.v = heads_of(v_values);
  args.out = concatenated(out, d);
  args.logsumexp = logsumexp.raw_data();
  backend_of(q).attention_forward(args);
  out = stored_as(out, autocast_result_dtype(dtype, q.dtype()));

  record("causal_attention_heads", out, {q, k, v}, {qr, kr, vr, out, logsumexp},
         [args](const Tensor& grad, const Saved& s) {
           const TensorOptions options{grad.dtype(), grad.device()};
           const Tensor dy = grad.contiguous();
           Tensor dq = empty(s[0].shape(), options), dk = empty(s[1].shape(), options),
                  dv = empty(s[2].shape(), options);
           const Tensor q = attention_operand(s[0], args.dtype),
                        k = attention_operand(s[1], args.dtype),
                        v = attention_operand(s[2], args.dtype),
                        out = attention_operand(s[3], args.dtype);
           AttentionArgs a = args;
           a.q = heads_of(q), a.k = heads_of(k), a.v = heads_of(v);
           a.out = concatenated(out, a.d);
           a.logsumexp = s[4].raw_data();
           backend_of(grad).attention_backward(a, {.dout = concatenated(dy, a.d),
                                                   .dq = heads_of(dq),
                                                   .dk = heads_of(dk),
                                                   .dv = heads_of(dv)});
           return Grads{dq, dk, dv};
         });
  return out;
}

}  // namespace kiln
