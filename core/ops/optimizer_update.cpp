// The optimizers' fused updates and sums of squares: argument checks, then one kernel each.
#include "core/ops/optimizer_update.h"

#include <string_view>
#include <vector>

#include "core/ops/op_utils.h"

namespace kiln {

namespace {

// Errors unless `t` (called `name`) can take part in a fused update beside `param`: defined, of
// param's dtype, device and shape, contiguous (the kernels index it as one flat array).
void check_update_operand(std::string_view op, std::string_view name, const Tensor& t,
                          const Tensor& param) {
  KILN_CHECK(t.defined(), "{}: {} is undefined", op, name);
  check_same_dtype_device(op, param, t);
  KILN_CHECK(t.shape() == param.shape(), "{}: {} has shape {} but param has shape {}", op, name,
             t.shape(), param.shape());
  KILN_CHECK(t.is_contiguous(), "{}: {} (shape {}, strides {}) is not contiguous", op, name,
             t.shape(), t.strides());
}

void check_param(std::string_view op, const Tensor& param) {
  check_operands(op, std::array{param}, {.accepts = Accepts::floating});
  KILN_CHECK(param.is_contiguous(), "{}: param (shape {}, strides {}) is not contiguous", op,
             param.shape(), param.strides());
  check_writable(op, param);
}

}  // namespace

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_avg_sq, const AdamArgs& args) {
  constexpr std::string_view op = "adam_update_";
  check_param(op, param);
  check_update_operand(op, "grad", grad, param);
  check_update_operand(op, "exp_avg", exp_avg, param);
  check_update_operand(op, "exp_avg_sq", exp_avg_sq, param);
  check_writable(op, exp_avg);
  check_writable(op, exp_avg_sq);
  backend_of(param).adam_update(param.dtype(), param.numel(), param.raw_data(), grad.raw_data(),
                                exp_avg.raw_data(), exp_avg_sq.raw_data(), args);
  param.storage()->bump_version();
  exp_avg.storage()->bump_version();
  exp_avg_sq.storage()->bump_version();
}

void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                 const SgdArgs& args) {
  constexpr std::string_view op = "sgd_update_";
  check_param(op, param);
  check_update_operand(op, "grad", grad, param);
  const bool has_momentum = args.momentum != 0.0;
  KILN_CHECK(momentum_buffer.defined() == has_momentum, "{}: momentum {} {} (param shape {})", op,
             args.momentum, has_momentum ? "needs a momentum buffer" : "takes no momentum buffer",
             param.shape());
  if (has_momentum) {
    check_update_operand(op, "momentum_buffer", momentum_buffer, param);
    check_writable(op, momentum_buffer);
  }
  backend_of(param).sgd_update(param.dtype(), param.numel(), param.raw_data(), grad.raw_data(),
                               has_momentum ? momentum_buffer.raw_data() : nullptr, args);
  param.storage()->bump_version();
  if (has_momentum) momentum_buffer.storage()->bump_version();
}

Tensor sums_of_squares(std::span<const Tensor> tensors) {
  constexpr std::string_view op = "sums_of_squares";
  KILN_CHECK(!tensors.empty(), "{}: got no tensors", op);
  check_operands(op, tensors, {.accepts = Accepts::floating});
  std::vector<Tensor> dense;  // contiguous, in order
  for (const Tensor& t : tensors) dense.push_back(t.contiguous());
  const DType dtype = dense[0].dtype();
  const Tensor out = empty({static_cast<std::int64_t>(dense.size())},
                           {.dtype = dtype, .device = dense[0].device()});
  Backend& backend = backend_of(out);
  char* slot = static_cast<char*>(out.raw_data());
  for (const Tensor& t : dense) {
    backend.sum_squares({.dtype = dtype, .reduced = t.numel()}, t.raw_data(), slot);
    slot += dtype_size(dtype);
  }
  return out;
}

}  // namespace kiln
