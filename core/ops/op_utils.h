// Helpers shared by the op implementations (not part of the public API).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/autocast.h"
#include "core/backend.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "core/tensor_impl.h"

namespace kiln {

// The kernel view of a tensor: first element, dtype, sizes and strides.
inline TensorArg arg_of(const Tensor& t) {
  return TensorArg{t.raw_data(), t.dtype(), t.shape(), t.strides()};
}

// The kernel view of `t` read as `target` shape (broadcast: stretched dims get stride 0).
inline TensorArg broadcast_arg(const Tensor& t, const Shape& target) {
  return TensorArg{t.raw_data(), t.dtype(), target,
                   broadcast_strides(t.shape(), t.strides(), target)};
}

inline Backend& backend_of(const Tensor& t) { return t.storage()->backend(); }

// Errors unless t is defined (ops check their operands with check_operands).
void check_defined(std::string_view op, const Tensor& t);

// What an op accepts as the dtype of its operands (OperandRules).
enum class Accepts : std::uint8_t {
  floating,          // float32 or float64: what the kernels compute in
  floating_or_bf16,  // also bfloat16, read in float32 (docs/mixed-precision.md)
  any,               // any dtype, int64 included
};

struct OperandRules {
  Accepts accepts = Accepts::floating_or_bf16;
  bool same_dtype = true;  // every operand has the first one's dtype
  bool autocast = false;   // checked_operands: autocast_operand (core/autocast.h) first
};

// The checks an op opens with, in one place: every operand defined, the first one's dtype one
// that rules.accepts allows, with rules.same_dtype every other operand of that dtype, all on one
// device. Errors name op.
//
//   check_operands("softmax", std::array{x});
void check_operands(std::string_view op, std::span<const Tensor> operands, OperandRules rules = {});
// The same for an op that computes on its operands as autocast gives them (rules.autocast):
// returns what the op computes on.
//
//   const auto [a, b] = checked_operands<2>("matmul", {a_in, b_in}, {.autocast = true});
template <std::size_t N>
std::array<Tensor, N> checked_operands(std::string_view op, std::array<Tensor, N> operands,
                                       OperandRules rules = {}) {
  for (Tensor& t : operands) {
    check_defined(op, t);
    if (rules.autocast) t = autocast_operand(t);
  }
  check_operands(op, operands, rules);
  return operands;
}
// The operands of a product with a weight (linear, linear_cross_entropy), checked as
// checked_operands checks them with autocast, except that under autocast a float32 weight beside
// a bf16 x stays float32: the GEMM rounds it to bf16 as it reads it (GemmArgs::round_b), the
// values autocast's bf16 copy would hold, without the copy (a pass over the weight each step, and
// the copy's bytes kept for backward). The weight's gradient then flows to it directly.
//
//   const auto [x, weight] = checked_weight_operands("linear", x_in, weight_in);
std::array<Tensor, 2> checked_weight_operands(std::string_view op, const Tensor& x,
                                              const Tensor& weight);
// A GEMM's operand dtypes: a product with a bf16 operand multiplies bf16 values (bf16_operands),
// rounding a float32 operand as it reads it.
inline void set_operand_dtypes(GemmArgs& g, DType a, DType b) {
  g.bf16_operands = a == DType::bf16 || b == DType::bf16;
  g.round_a = g.bf16_operands && a == DType::f32;
  g.round_b = g.bf16_operands && b == DType::f32;
}
// Errors unless `ids` (the op's operand called `name`) is defined, int64 and on `device`.
void check_ids_operand(std::string_view op, std::string_view name, const Tensor& ids,
                       Device device);

// Errors unless a and b have the same dtype and device.
void check_same_dtype_device(std::string_view op, const Tensor& a, const Tensor& b);
void check_same_device(std::string_view op, const Tensor& a, const Tensor& b);
// Errors unless t has a floating dtype that kernels compute in (float32 or float64).
void check_floating(std::string_view op, const Tensor& t);
// Errors unless t is float32, float64 or bfloat16: what the ops that read bf16 take (matrix
// products, attention, elementwise ops, softmax, layer_norm, cross-entropy).
void check_floating_or_bf16(std::string_view op, const Tensor& t);
// Errors when no compute kernel supports dtype yet (bfloat16, a storage type).
void check_computable(std::string_view op, DType dtype);
// Mixed precision's rule for the ops that read bf16 without bf16 arithmetic
// (docs/mixed-precision.md): the kernel computes in float32 on compute_copy(t), and the op converts
// its result back with stored_as. Both are copies autograd does not see; the op records its own
// backward and saves the bf16 tensors, so what stays alive for backward is half the bytes.
//
// t's values as a contiguous float32 scratch copy when t is bf16 (exact), else t itself.
Tensor compute_copy(const Tensor& t);
// What a kernel of Backend::kernels_read_bf16 (elementwise, dropout, softmax, layer_norm,
// cross_entropy) is handed for t: t itself where its backend's kernels read bf16 (the CPU's,
// which convert in registers a row or a block at a time), else compute_copy(t). The kernel's
// result is the same either way, bit for bit.
Tensor kernel_operand(const Tensor& t);
// t converted to dtype (round to nearest even for bf16), or t itself when it already is.
Tensor stored_as(const Tensor& t, DType dtype);

// Dropout's mask D: 1/(1-p) where an element is kept, 0 where it is dropped, drawn from the Philox
// counters at offset (the same seed and offset give the same mask on either device).
Tensor dropout_mask(const Shape& shape, TensorOptions options, double p, std::uint64_t seed,
                    std::uint64_t offset);

// An empty (rows, cols) tensor whose rows start on 64-byte boundaries (cols rounded up to whole
// cache lines; the view hides the padding): a GEMM writing it stores whole cache lines, not
// lines split between two rows. The LM head's logits use it (the packed kernel's logits: 2-3%
// faster with AVX2, docs/performance.md), and bench_ops times its GEMMs on the same layout.
Tensor padded_rows(std::int64_t rows, std::int64_t cols, const TensorOptions& options);

// Errors unless t may be written in place: not a tensor that autograd tracks (outside
// NoGradGuard), and not an expanded view, whose elements overlap.
void check_writable(std::string_view op, const Tensor& t);

// The number of targets that are not ignore_index; errors (naming op) for a target outside
// [0, classes) and when every target is ignored. Reads the targets on the host.
std::int64_t count_targets(std::string_view op, const Tensor& targets, std::int64_t classes,
                           std::int64_t ignore_index);

}  // namespace kiln
