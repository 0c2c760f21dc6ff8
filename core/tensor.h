// Tensor: an n-dimensional array of float32, float64 or int64 on a device, with reverse-mode
// automatic differentiation.
//
// A Tensor is a cheap value handle over a shared TensorImpl: copying a Tensor aliases the same
// data (like a shared_ptr), clone() copies the data, and detach() shares the data without the
// autograd history. Views (view/reshape, transpose, permute, narrow, expand, squeeze, unsqueeze)
// share storage and its version counter with their base.
//
//   Tensor w = randn({3, 2}).requires_grad_();    // a leaf that wants a gradient
//   Tensor x = ones({4, 3});
//   Tensor loss = relu(matmul(x, w)).sum();
//   loss.backward();                               // w.grad() now holds d loss / d w
//
// The ops live in core/ops/*.h (all included by core/kiln.h); views and in-place updates are
// member functions here.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace kiln {

class Node;
class Storage;
struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (defined() is false)
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // ---- Metadata
  const Shape& shape() const;
  std::int64_t size(std::int64_t dim) const;  // negative dims count from the end
  std::int64_t dim() const { return static_cast<std::int64_t>(shape().size()); }
  std::int64_t numel() const;
  const Shape& strides() const;
  std::int64_t offset() const;  // in elements, into the storage
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;
  std::uint64_t version() const;  // bumped by every in-place write to the storage

  // ---- Data (host access)
  // Pointer to the first element; CPU tensors only, and T must match the dtype.
  template <typename T>
  T* data() const;
  void* raw_data() const;  // the first element on the tensor's device
  // The value of a one-element tensor, converted to T (copies from the device if needed).
  template <typename T>
  T item() const;
  // One element by index, converted to T (for tests; slow).
  template <typename T>
  T at(std::initializer_list<std::int64_t> index) const;
  // All elements in row-major order, converted to T.
  template <typename T>
  std::vector<T> to_vector() const;

  // ---- Autograd
  bool requires_grad() const;
  // Marks a leaf as wanting a gradient (floating dtypes only). Returns *this.
  const Tensor& requires_grad_(bool enabled = true) const;
  bool is_leaf() const;  // created by the user, not by a differentiable op
  Tensor grad() const;   // accumulated gradient of a leaf (undefined before backward)
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<Node>& grad_fn() const;  // the node that made this tensor, or null
  // Backpropagates from this tensor: a scalar, or any shape when `gradient` is given. The graph
  // is freed afterwards unless retain_graph is true.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;

  // ---- Views (share storage; differentiable)
  Tensor view(const Shape& shape) const;     // needs compatible strides; one size may be -1
  Tensor reshape(const Shape& shape) const;  // a view where possible, else a copy
  Tensor flatten() const { return reshape({-1}); }
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor permute(const std::vector<std::int64_t>& dims) const;
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  // Elements start, start+step, ... < end along dim (negative start/end count from the end).
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;  // narrow to one and drop the dim
  Tensor expand(const Shape& shape) const;                    // -1 keeps a size
  Tensor squeeze(std::int64_t dim) const;
  Tensor unsqueeze(std::int64_t dim) const;

  // ---- Copies and conversions
  Tensor contiguous() const;  // this tensor if already contiguous, else a dense copy
  Tensor clone() const;       // a dense copy (differentiable)
  Tensor detach() const;      // same storage, no autograd history
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;

  // ---- In-place updates (bump the version counter). On a tensor that requires grad they are
  // allowed only under NoGradGuard; writing through an expanded view is an error.
  const Tensor& add_(const Tensor& other, double alpha = 1.0) const;  // this += alpha * other
  const Tensor& mul_(double scalar) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& copy_(const Tensor& source) const;  // broadcasts source; converts dtype
  const Tensor& fill_(double value) const;
  const Tensor& zero_() const { return fill_(0.0); }

  // ---- Reductions as members (see core/ops/reduction.h)
  Tensor sum() const;
  Tensor mean() const;

  std::string str() const;  // shape, dtype, device and values (abbreviated when large)

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Options of the factories: dtype and device, e.g. zeros({2, 3}, {.dtype = DType::f64}).
struct TensorOptions {
  DType dtype = DType::f32;
  Device device = Device::cpu();
};

// (name, tensor) pairs: a module's named parameters, an optimizer's state, a file's tensors.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Uninitialised storage of the given shape (kernels overwrite it).
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor empty_like(const Tensor& like);

// Live TensorImpl objects (tests check for leaks with it).
std::int64_t live_tensor_count();

}  // namespace kiln

template <>
struct fmt::formatter<kiln::Tensor> : fmt::formatter<std::string_view> {
  auto format(const kiln::Tensor& t, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(t.str(), ctx);
  }
};
