// Tensor's handle and accessors, host data access and autograd members, TensorImpl, and the
// allocation of new tensors (empty). Views, copies and printing have files of their own
// (tensor_views.cpp, tensor_copy.cpp, tensor_print.cpp).
#include "core/tensor.h"

#include <atomic>
#include <cstring>

#include "core/autograd.h"
#include "core/checked.h"
#include "core/convert.h"
#include "core/ops/reduction.h"
#include "core/storage.h"
#include "core/tensor_impl.h"

namespace kiln {

namespace {
std::atomic<std::int64_t> live_impls{0};

const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  KILN_CHECK(impl != nullptr, "tensor: use of an undefined tensor");
  return *impl;
}
}  // namespace

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage_, Shape sizes_, Shape strides_,
                       std::int64_t offset_, DType dtype_)
    : storage(std::move(storage_)),
      sizes(std::move(sizes_)),
      strides(std::move(strides_)),
      offset(offset_),
      dtype(dtype_) {
  live_impls.fetch_add(1, std::memory_order_relaxed);
}

TensorImpl::~TensorImpl() { live_impls.fetch_sub(1, std::memory_order_relaxed); }

std::int64_t live_tensor_count() { return live_impls.load(); }

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, std::int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(base.storage(), std::move(sizes), std::move(strides),
                                             offset, base.dtype()));
}

Tensor empty(const Shape& shape, TensorOptions options) {
  for (std::int64_t s : shape) KILN_CHECK(s >= 0, "empty: negative size in shape {}", shape);
  const std::size_t nbytes = checked_bytes(checked_product(shape, "empty: shape"),
                                           dtype_size(options.dtype), "empty: the tensor's bytes");
  auto storage = std::make_shared<Storage>(nbytes, options.device);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), shape, contiguous_strides(shape),
                                             0, options.dtype));
}

Tensor empty_like(const Tensor& like) { return empty(like.shape(), {like.dtype(), like.device()}); }

const Shape& Tensor::shape() const { return checked(impl_).sizes; }
const Shape& Tensor::strides() const { return checked(impl_).strides; }
std::int64_t Tensor::offset() const { return checked(impl_).offset; }
DType Tensor::dtype() const { return checked(impl_).dtype; }
Device Tensor::device() const { return checked(impl_).storage->device(); }
const std::shared_ptr<Storage>& Tensor::storage() const { return checked(impl_).storage; }
std::uint64_t Tensor::version() const { return checked(impl_).storage->version(); }
std::int64_t Tensor::numel() const { return numel_of(shape()); }

std::int64_t Tensor::size(std::int64_t d) const { return shape()[normalize_dim(d, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  const TensorImpl& t = checked(impl_);
  if (numel_of(t.sizes) == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = t.sizes.size(); i-- > 0;) {
    if (t.sizes[i] == 1) continue;
    if (t.strides[i] != expected) return false;
    expected *= t.sizes[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  const TensorImpl& t = checked(impl_);
  return static_cast<char*>(t.storage->data()) + t.offset * dtype_size(t.dtype);
}

template <typename T>
T* Tensor::data() const {
  KILN_CHECK(dtype() == DTypeOf<T>::value, "data: tensor has dtype {}, asked for {}", dtype(),
             DTypeOf<T>::value);
  KILN_CHECK(device().is_cpu(), "data: tensor is on {}; move it with .to(Device::cpu()) first",
             device());
  return static_cast<T*>(raw_data());
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template std::int64_t* Tensor::data<std::int64_t>() const;
template bf16* Tensor::data<bf16>() const;

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to(Device::cpu()).contiguous();
  std::vector<T> out(static_cast<std::size_t>(numel()));
  dispatch_dtype(dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* src = static_cast<const S*>(host.raw_data());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = convert<T>(src[i]);
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template std::vector<bf16> Tensor::to_vector<bf16>() const;

template <typename T>
T Tensor::item() const {
  KILN_CHECK(numel() == 1, "item: tensor has {} elements (shape {}), expected one", numel(),
             shape());
  return to_vector<T>()[0];
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template std::int64_t Tensor::item<std::int64_t>() const;
template bf16 Tensor::item<bf16>() const;

template <typename T>
T Tensor::at(std::initializer_list<std::int64_t> index) const {
  KILN_CHECK(static_cast<std::int64_t>(index.size()) == dim(),
             "at: {} indices for a tensor of {} dims (shape {})", index.size(), dim(), shape());
  std::int64_t offset_elems = offset();
  std::size_t d = 0;
  for (std::int64_t i : index) {
    KILN_CHECK(i >= 0 && i < shape()[d], "at: index {} out of range for dim {} of shape {}", i, d,
               shape());
    offset_elems += i * strides()[d];
    ++d;
  }
  Tensor element = make_view(*this, {}, {}, offset_elems);
  return element.item<T>();
}
template float Tensor::at<float>(std::initializer_list<std::int64_t>) const;
template double Tensor::at<double>(std::initializer_list<std::int64_t>) const;
template std::int64_t Tensor::at<std::int64_t>(std::initializer_list<std::int64_t>) const;
template bf16 Tensor::at<bf16>(std::initializer_list<std::int64_t>) const;

bool Tensor::requires_grad() const {
  const TensorImpl& t = checked(impl_);
  return t.autograd && (t.autograd->requires_grad || t.autograd->grad_fn);
}

const Tensor& Tensor::requires_grad_(bool enabled) const {
  KILN_CHECK(is_leaf(),
             "requires_grad_: only leaves can change requires_grad (this tensor was made by {}); "
             "use detach() to make a leaf",
             grad_fn() ? grad_fn()->name() : "?");
  KILN_CHECK(!enabled || (is_floating(dtype()) && !is_storage_only(dtype())),
             "requires_grad_: only float32/float64 tensors can require grad, not {}", dtype());
  impl_->autograd_meta().requires_grad = enabled;
  return *this;
}

bool Tensor::is_leaf() const {
  const TensorImpl& t = checked(impl_);
  return !t.autograd || !t.autograd->grad_fn;
}

Tensor Tensor::grad() const {
  const TensorImpl& t = checked(impl_);
  return t.autograd ? t.autograd->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined())
    KILN_CHECK(grad.shape() == shape() && grad.dtype() == dtype() && grad.device() == device(),
               "set_grad: gradient {} {} on {} does not match the tensor {} {} on {}", grad.shape(),
               grad.dtype(), grad.device(), shape(), dtype(), device());
  impl_->autograd_meta().grad = grad;
}

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> none;
  const TensorImpl& t = checked(impl_);
  return t.autograd ? t.autograd->grad_fn : none;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  run_backward(*this, gradient, retain_graph);
}

// ---- Reductions as members: the free functions of core/ops/reduction.h
Tensor Tensor::sum() const { return kiln::sum(*this); }
Tensor Tensor::mean() const { return kiln::mean(*this); }

}  // namespace kiln
