// Mixed precision for a training or evaluation loop, as PyTorch's autocast: while an Autocast for
// Precision::bf16 is alive on a thread, the matrix products (matmul, linear, attention and the LM
// head's linear_cross_entropy) cast their float32 operands to bf16, sum the products in float32,
// round their float32 results to bf16 (attention too); what they save for backward is bf16, half
// the bytes. The ops downstream read the bf16 activations and compute in float32: elementwise
// ops keep bf16 (a bf16 and a float32 operand give float32), softmax keeps bf16, layer_norm and
// the losses return float32 (docs/mixed-precision.md has the table). The weights, their gradients
// and the optimizer's state stay float32. Where the GEMM rounds a float32 weight as it reads it
// (the CPU's), no bf16 copy of a weight exists; elsewhere (cuBLAS) the products multiply
// autocast_weight's bf16 copy, made once per weight while autocast lasts, and the weight's
// gradient flows back to the float32 weight (a bf16 tensor's gradient is float32, core/dtype.h).
//
//   {
//     kiln::Autocast mixed(kiln::Precision::bf16);
//     loss = model.loss(ids, targets);
//   }
//   loss.backward();   // replays the products on the bf16 operands saved by the forward
//   optimizer.step();  // float32 master weights
//
// backward() runs with autocast off: each product's backward follows the dtypes it saved.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/tensor.h"

namespace kiln {

enum class Precision : std::uint8_t { f32, bf16 };

// "f32" or "bf16" (an error naming the value otherwise), and back.
Precision parse_precision(std::string_view name);
std::string_view precision_name(Precision precision);

// Sets this thread's autocast precision for its lifetime, then restores the previous one.
class Autocast {
 public:
  explicit Autocast(Precision precision);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  Precision previous_;
};

// This thread's autocast precision (Precision::f32 outside any Autocast).
Precision autocast_precision();

// The operand a matrix product uses for t: t cast to bf16 (a differentiable copy) when t is
// float32 and this thread autocasts to bf16, else t itself.
Tensor autocast_operand(const Tensor& t);

// The bf16 copy of a float32 weight (or bias) that a product multiplies under autocast, from this
// thread's cast cache, as PyTorch's autocast keeps one: made on the first use and handed out again
// while the weight's version counter (core/storage.h: bumped by every in-place write and
// optimizer step) is unchanged, so that a step's forward (and, through what the products save,
// its backward) rounds each weight once, not once per product. A stale copy is never returned: a
// changed version makes a new copy. The cache is emptied when the outermost bf16 Autocast ends
// (unless an AutocastWeightCache, below, holds it).
// The copy is detached; the op routes the gradient to `weight` itself. Only ops on backends whose
// GEMM cannot round as it reads (Backend::gemm_rounds_operands) call this.
Tensor autocast_weight(const Tensor& weight);

// Keeps autocast_weight's copies past the end of Autocast scopes while it lives: a training step
// holds one over its gradient-accumulation windows, each forward in an Autocast of its own, so a
// weight is rounded once per step, not once per window. The cache is emptied when the last one
// ends outside any bf16 Autocast.
class AutocastWeightCache {
 public:
  AutocastWeightCache();
  ~AutocastWeightCache();
  AutocastWeightCache(const AutocastWeightCache&) = delete;
  AutocastWeightCache& operator=(const AutocastWeightCache&) = delete;
};

// The bf16 copies autocast_weight has made on this thread (for tests: one per weight per step).
std::int64_t autocast_weight_casts();

// The result a matrix product returns for its float32 sums y: y rounded to bf16 (a
// differentiable copy) when this thread autocasts to bf16 and the product read bf16 operands,
// else y itself.
Tensor autocast_result(const Tensor& y, DType operand_dtype);
// The dtype autocast_result gives a result of dtype `result` (for ops that round on their own).
DType autocast_result_dtype(DType result, DType operand_dtype);

}  // namespace kiln
