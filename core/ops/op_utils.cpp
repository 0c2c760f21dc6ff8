// The argument checks ops share (core/ops/op_utils.h).
#include "core/ops/op_utils.h"

#include "core/autograd.h"

namespace kiln {

void check_operands(std::string_view op, std::span<const Tensor> operands, OperandRules rules) {
  for (const Tensor& t : operands) check_defined(op, t);
  if (operands.empty()) return;
  const Tensor& first = operands.front();
  if (rules.accepts == Accepts::floating) check_floating(op, first);
  if (rules.accepts == Accepts::floating_or_bf16) check_floating_or_bf16(op, first);
  for (const Tensor& t : operands.subspan(1)) {
    if (rules.same_dtype) {
      check_same_dtype_device(op, first, t);
    } else {
      check_same_device(op, first, t);
    }
  }
}

std::array<Tensor, 2> checked_weight_operands(std::string_view op, const Tensor& x,
                                              const Tensor& weight) {
  check_defined(op, x);
  check_defined(op, weight);
  const Tensor operand = autocast_operand(x);
  if (operand.dtype() != DType::bf16 || weight.dtype() != DType::f32 ||
      autocast_precision() != Precision::bf16)
    return checked_operands<2>(op, {x, weight}, {.autocast = true});
  check_operands(op, std::array{operand});
  check_same_device(op, operand, weight);
  return {operand, weight};
}

void check_ids_operand(std::string_view op, std::string_view name, const Tensor& ids,
                       Device device) {
  check_defined(op, ids);
  KILN_CHECK(ids.dtype() == DType::i64, "{}: {} must be int64, got {}", op, name, ids.dtype());
  KILN_CHECK(ids.device() == device, "{}: {} on {}, but the values on {}", op, name, ids.device(),
             device);
}

void check_same_dtype_device(std::string_view op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype() == b.dtype(),
             "{}: dtypes {} and {} differ (no implicit promotion; convert one with .to(dtype))", op,
             a.dtype(), b.dtype());
  check_same_device(op, a, b);
}

void check_same_device(std::string_view op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.device() == b.device(),
             "{}: tensors are on different devices ({} and {}); move one with .to(device)", op,
             a.device(), b.device());
}

void check_floating(std::string_view op, const Tensor& t) {
  KILN_CHECK(is_floating(t.dtype()), "{}: expected a float32 or float64 tensor, got {}", op,
             t.dtype());
  check_computable(op, t.dtype());
}

void check_floating_or_bf16(std::string_view op, const Tensor& t) {
  KILN_CHECK(is_floating(t.dtype()), "{}: expected a float32, float64 or bfloat16 tensor, got {}",
             op, t.dtype());
}

void check_computable(std::string_view op, DType dtype) {
  KILN_CHECK(!is_storage_only(dtype),
             "{}: {} is not supported yet (kiln only stores and converts it); convert with "
             ".to(DType::f32) first",
             op, dtype);
}

Tensor compute_copy(const Tensor& t) {
  return t.dtype() == DType::bf16 ? stored_as(t, DType::f32) : t;
}

Tensor kernel_operand(const Tensor& t) {
  return t.dtype() == DType::bf16 && backend_of(t).kernels_read_bf16() ? t : compute_copy(t);
}

Tensor stored_as(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = empty(t.shape(), {dtype, t.device()});
  backend_of(t).copy(arg_of(out), arg_of(t));
  return out;
}

Tensor dropout_mask(const Shape& shape, TensorOptions options, double p, std::uint64_t seed,
                    std::uint64_t offset) {
  Tensor mask = empty(shape, options);
  backend_of(mask).dropout_mask(options.dtype, mask.raw_data(), mask.numel(), p, seed, offset);
  return mask;
}

Tensor padded_rows(std::int64_t rows, std::int64_t cols, const TensorOptions& options) {
  constexpr std::int64_t kRowAlignmentBytes = 64;
  const std::int64_t per_line =
      kRowAlignmentBytes / static_cast<std::int64_t>(dtype_size(options.dtype));
  const std::int64_t stride = (cols + per_line - 1) / per_line * per_line;
  return empty({rows, stride}, options).narrow(1, 0, cols);
}

void check_defined(std::string_view op, const Tensor& t) {
  KILN_CHECK(t.defined(), "{}: got an undefined tensor", op);
}

void check_writable(std::string_view op, const Tensor& t) {
  KILN_CHECK(!(grad_mode_enabled() && t.requires_grad()),
             "{}: in-place update of a tensor that requires grad (shape {}); do it under "
             "NoGradGuard (as optimizers do) or on a detach()ed copy",
             op, t.shape());
  for (std::size_t i = 0; i < t.shape().size(); ++i)
    KILN_CHECK(!(t.strides()[i] == 0 && t.shape()[i] > 1),
               "{}: cannot write through an expanded view (shape {}, strides {}): its elements "
               "overlap; call contiguous() first",
               op, t.shape(), t.strides());
}

}  // namespace kiln
