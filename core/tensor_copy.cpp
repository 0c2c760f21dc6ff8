// Tensor's copies, conversions and in-place updates (core/tensor.h).
#include <algorithm>

#include "core/autograd.h"
#include "core/ops/elementwise.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// `source` on t's device, as a tensor that does not alias t's storage in another layout.
Tensor operand_for(const Tensor& t, const Tensor& source) {
  Tensor s = source.device() == t.device() ? source : source.to(t.device());
  const bool same_layout = s.storage() == t.storage() && s.offset() == t.offset() &&
                           s.strides() == t.strides() && s.shape() == t.shape();
  if (s.storage() == t.storage() && !same_layout) s = s.clone();
  return s.detach();
}

// Copies host bytes of a contiguous tensor across devices.
Tensor copy_across_devices(const Tensor& x, Device device) {
  const Tensor src = x.contiguous();
  Tensor out = empty(x.shape(), {x.dtype(), device});
  const std::size_t nbytes = x.numel() * dtype_size(x.dtype());
  if (nbytes == 0) return out;
  if (src.device().is_cpu()) {
    backend_of(out).copy_from_host(out.raw_data(), src.raw_data(), nbytes);
  } else if (device.is_cpu()) {
    backend_of(src).copy_to_host(out.raw_data(), src.raw_data(), nbytes);
  } else {
    return copy_across_devices(copy_across_devices(src, Device::cpu()), device);
  }
  return out;
}

}  // namespace

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  profile::Scope scope(profile::Family::other);
  check_defined("clone", *this);
  Tensor out = empty(shape(), {dtype(), device()});
  backend_of(*this).copy(arg_of(out), arg_of(*this));
  record("clone", out, {*this}, {}, [](const Tensor& g, const Saved&) { return Grads{g}; });
  return out;
}

Tensor Tensor::detach() const {
  return Tensor(std::make_shared<TensorImpl>(storage(), shape(), strides(), offset(), dtype()));
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), {target, device()});
  backend_of(*this).copy(arg_of(out), arg_of(*this));
  if (is_floating(target) && is_floating(dtype())) {
    // The gradient comes in compute_dtype(target) and leaves in compute_dtype(source): between
    // float32 and bf16 it passes unchanged (both have float32 gradients).
    record("to", out, {*this}, {},
           [source = compute_dtype(dtype())](const Tensor& g, const Saved&) {
             return Grads{g.to(source)};
           });
  }
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  if (target.is_cuda()) backend_for(target);  // a clear error when there is no such device
  Tensor out = copy_across_devices(*this, target);
  record("to", out, {*this}, {},
         [source = device()](const Tensor& g, const Saved&) { return Grads{g.to(source)}; });
  return out;
}

const Tensor& Tensor::copy_(const Tensor& source) const {
  profile::Scope scope(profile::Family::other);
  check_defined("copy_", source);
  check_writable("copy_", *this);
  KILN_CHECK(broadcast_shapes(source.shape(), shape(), "copy_") == shape(),
             "copy_: source of shape {} does not broadcast to the destination's shape {}",
             source.shape(), shape());
  const Tensor s = operand_for(*this, source);
  backend_of(*this).copy(arg_of(*this), broadcast_arg(s, shape()));
  storage()->bump_version();
  return *this;
}

const Tensor& Tensor::fill_(double value) const {
  check_writable("fill_", *this);
  backend_of(*this).fill(arg_of(*this), value);
  storage()->bump_version();
  return *this;
}

const Tensor& Tensor::add_(const Tensor& other, double alpha) const {
  profile::Scope scope(profile::Family::other);
  check_defined("add_", other);
  check_writable("add_", *this);
  check_same_dtype_device("add_", *this, other);
  check_floating("add_", *this);
  KILN_CHECK(broadcast_shapes(other.shape(), shape(), "add_") == shape(),
             "add_: operand of shape {} does not broadcast to the destination's shape {}",
             other.shape(), shape());
  Tensor s = operand_for(*this, other);
  if (alpha != 1.0) {
    NoGradGuard no_grad;
    s = mul(s, alpha);
  }
  backend_of(*this).binary(BinaryOp::add, arg_of(*this), arg_of(*this), broadcast_arg(s, shape()));
  storage()->bump_version();
  return *this;
}

const Tensor& Tensor::mul_(double scalar) const {
  check_writable("mul_", *this);
  check_floating("mul_", *this);
  backend_of(*this).unary(UnaryOp::mul_scalar, arg_of(*this), arg_of(*this), scalar);
  storage()->bump_version();
  return *this;
}

const Tensor& Tensor::mul_(const Tensor& other) const {
  check_defined("mul_", other);
  check_writable("mul_", *this);
  check_same_dtype_device("mul_", *this, other);
  check_floating("mul_", *this);
  KILN_CHECK(broadcast_shapes(other.shape(), shape(), "mul_") == shape(),
             "mul_: operand of shape {} does not broadcast to the destination's shape {}",
             other.shape(), shape());
  const Tensor s = operand_for(*this, other);
  backend_of(*this).binary(BinaryOp::mul, arg_of(*this), arg_of(*this), broadcast_arg(s, shape()));
  storage()->bump_version();
  return *this;
}

}  // namespace kiln
