// The optimizers' fused updates and sums of squares: argument checks, then one kernel each.
#include "core/ops/optimizer_update.h"

#include <cmath>
#include <string_view>
#include <vector>

#include "core/ops/factories.h"
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

// The raw ledger of a guarded update (null without one), after checking it suits `param`.
const double* guard_of(std::string_view op, const Tensor& guard, const Tensor& param) {
  if (!guard.defined()) return nullptr;
  KILN_CHECK(guard.dtype() == DType::f64 && guard.is_contiguous() &&
                 guard.numel() == StepLedger::slots && guard.device() == param.device(),
             "{}: guard must be a contiguous float64 step ledger of {} values on {}, got {} {} on "
             "{}",
             op, static_cast<int>(StepLedger::slots), param.device(), guard.dtype(), guard.shape(),
             guard.device());
  return static_cast<const double*>(guard.raw_data());
}

}  // namespace

void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_avg_sq, const AdamArgs& args_in, const Tensor& guard) {
  constexpr std::string_view op = "adam_update_";
  check_param(op, param);
  check_update_operand(op, "grad", grad, param);
  check_update_operand(op, "exp_avg", exp_avg, param);
  check_update_operand(op, "exp_avg_sq", exp_avg_sq, param);
  check_writable(op, exp_avg);
  check_writable(op, exp_avg_sq);
  AdamArgs args = args_in;
  args.guard = guard_of(op, guard, param);
  backend_of(param).adam_update(param.dtype(), param.numel(), param.raw_data(), grad.raw_data(),
                                exp_avg.raw_data(), exp_avg_sq.raw_data(), args);
  param.storage()->bump_version();
  exp_avg.storage()->bump_version();
  exp_avg_sq.storage()->bump_version();
}

void adam_update_many_(std::span<const AdamParamUpdate> updates, const Tensor& guard) {
  constexpr std::string_view op = "adam_update_many_";
  if (updates.empty()) return;
  const Tensor& first = updates[0].param;
  std::vector<AdamTensor> tensors;
  for (std::size_t i = 0; i < updates.size(); ++i) {
    const AdamParamUpdate& u = updates[i];
    const std::string name = fmt::format("{} (update {})", op, i);
    check_param(name, u.param);
    KILN_CHECK(u.param.dtype() == first.dtype() && u.param.device() == first.device(),
               "{}: every param must share update 0's dtype and device: {} on {} and {} on {}", op,
               first.dtype(), first.device(), u.param.dtype(), u.param.device());
    check_update_operand(name, "grad", u.grad, u.param);
    check_update_operand(name, "exp_avg", u.exp_avg, u.param);
    check_update_operand(name, "exp_avg_sq", u.exp_avg_sq, u.param);
    check_writable(name, u.exp_avg);
    check_writable(name, u.exp_avg_sq);
    AdamArgs args = u.args;
    args.guard = guard_of(op, guard, u.param);
    tensors.push_back({.n = u.param.numel(),
                       .param = u.param.raw_data(),
                       .grad = u.grad.raw_data(),
                       .exp_avg = u.exp_avg.raw_data(),
                       .exp_avg_sq = u.exp_avg_sq.raw_data(),
                       .args = args});
  }
  backend_of(first).adam_update_many(first.dtype(), tensors);
  for (const AdamParamUpdate& u : updates) {
    u.param.storage()->bump_version();
    u.exp_avg.storage()->bump_version();
    u.exp_avg_sq.storage()->bump_version();
  }
}

void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                 const SgdArgs& args_in, const Tensor& guard) {
  constexpr std::string_view op = "sgd_update_";
  SgdArgs args = args_in;
  args.guard = guard_of(op, guard, param);
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
  std::vector<SquaresInput> inputs;
  for (const Tensor& t : dense) inputs.push_back({.n = t.numel(), .data = t.raw_data()});
  backend_of(out).sum_squares_many(dtype, inputs, out.raw_data());
  return out;
}

Tensor step_ledger(Device device) {
  return zeros({StepLedger::slots}, {.dtype = DType::f64, .device = device});
}

void step_guard_(const Tensor& ledger, const Tensor& window_losses, const Tensor& sums,
                 StepGuardArgs args) {
  constexpr std::string_view op = "step_guard_";
  KILN_CHECK(ledger.defined() && ledger.dtype() == DType::f64 && ledger.is_contiguous() &&
                 ledger.numel() == StepLedger::slots,
             "{}: ledger must be a contiguous float64 tensor of {} values (step_ledger)", op,
             static_cast<int>(StepLedger::slots));
  check_writable(op, ledger);
  for (const Tensor* t : {&window_losses, &sums}) {
    KILN_CHECK(t->defined() && t->dim() == 1 && t->device() == ledger.device(),
               "{}: window losses and sums must be 1-D tensors on the ledger's device {}, got {} "
               "on {}",
               op, ledger.device(), t->defined() ? t->shape() : Shape{},
               t->defined() ? t->device() : ledger.device());
    check_floating(op, *t);
  }
  KILN_CHECK(window_losses.numel() > 0, "{}: a step needs at least one window loss", op);
  KILN_CHECK(std::isfinite(args.clip) && args.clip >= 0.0,
             "{}: clip {} must be a finite number >= 0", op, args.clip);
  const Tensor losses = window_losses.to(DType::f64).contiguous();
  const Tensor squares = sums.to(DType::f64).contiguous();
  args.windows = losses.numel();
  args.sums = squares.numel();
  backend_of(ledger).step_guard(args, static_cast<const double*>(losses.raw_data()),
                                static_cast<const double*>(squares.raw_data()),
                                static_cast<double*>(ledger.raw_data()));
  ledger.storage()->bump_version();
}

}  // namespace kiln
