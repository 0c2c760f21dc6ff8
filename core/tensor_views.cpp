// Tensor's views (core/tensor.h): tensors that share their base's storage with other sizes,
// strides or offset. Each is differentiable; its backward maps the gradient back to the base's
// shape.
#include <algorithm>
#include <numeric>
#include <optional>

#include "core/autograd.h"
#include "core/ops/factories.h"
#include "core/ops/reduction.h"
#include "core/tensor_impl.h"

namespace kiln {

namespace {

// Replaces one -1 in `shape` so that it holds numel elements.
Shape infer_size(const Shape& shape, std::int64_t numel, std::string_view op, const Shape& from) {
  Shape out = shape;
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(infer < 0, "{}: only one dim can be -1, got {}", op, shape);
      infer = static_cast<int>(i);
    } else {
      KILN_CHECK(out[i] >= 0, "{}: invalid size {} in shape {}", op, out[i], shape);
      known *= out[i];
    }
  }
  if (infer >= 0) {
    KILN_CHECK(known != 0 && numel % known == 0,
               "{}: shape {} is invalid for a tensor of {} elements (shape {})", op, shape, numel,
               from);
    out[infer] = numel / known;
  }
  KILN_CHECK(numel_of(out) == numel,
             "{}: shape {} is invalid for a tensor of {} elements (shape {})", op, shape, numel,
             from);
  return out;
}

// Strides that view (old_sizes, old_strides) as new_sizes without copying, if possible
// (the algorithm of PyTorch's computeStride).
std::optional<Shape> view_strides(const Shape& old_sizes, const Shape& old_strides,
                                  const Shape& new_sizes) {
  if (numel_of(old_sizes) == 0 || old_sizes.empty()) return contiguous_strides(new_sizes);
  Shape new_strides(new_sizes.size(), 1);
  std::int64_t view_d = static_cast<std::int64_t>(new_sizes.size()) - 1;
  std::int64_t chunk_base_stride = old_strides.back();
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (std::int64_t tensor_d = static_cast<std::int64_t>(old_sizes.size()) - 1; tensor_d >= 0;
       --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    if (tensor_d == 0 || (old_sizes[tensor_d - 1] != 1 &&
                          old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// The view of x with the given geometry, recording `backward` when x requires grad.
Tensor differentiable_view(std::string_view name, const Tensor& x, Shape sizes, Shape strides,
                           std::int64_t offset, BackwardFn backward) {
  Tensor out = make_view(x, std::move(sizes), std::move(strides), offset);
  record(name, out, {x}, {}, std::move(backward));
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& shape_in) const {
  const Shape sizes = infer_size(shape_in, numel(), "view", shape());
  std::optional<Shape> strides_out = view_strides(shape(), strides(), sizes);
  KILN_CHECK(strides_out.has_value(),
             "view: shape {} is not compatible with the strides {} of a tensor of shape {}; use "
             "reshape() (which copies) or call contiguous() first",
             sizes, strides(), shape());
  const Shape in_shape = shape();
  return differentiable_view(
      "view", *this, sizes, *strides_out, offset(),
      [in_shape](const Tensor& g, const Saved&) -> Grads { return {g.reshape(in_shape)}; });
}

Tensor Tensor::reshape(const Shape& shape_in) const {
  const Shape sizes = infer_size(shape_in, numel(), "reshape", shape());
  if (view_strides(shape(), strides(), sizes).has_value()) return view(sizes);
  return contiguous().view(sizes);
}

Tensor Tensor::transpose(std::int64_t dim0, std::int64_t dim1) const {
  const int d0 = normalize_dim(dim0, dim(), "transpose");
  const int d1 = normalize_dim(dim1, dim(), "transpose");
  Shape sizes = shape(), strides_out = strides();
  if (dim() == 0)
    return differentiable_view("transpose", *this, sizes, strides_out, offset(),
                               [](const Tensor& g, const Saved&) -> Grads { return {g}; });
  std::swap(sizes[d0], sizes[d1]);
  std::swap(strides_out[d0], strides_out[d1]);
  return differentiable_view(
      "transpose", *this, sizes, strides_out, offset(),
      [d0, d1](const Tensor& g, const Saved&) -> Grads { return {g.transpose(d0, d1)}; });
}

Tensor Tensor::t() const {
  KILN_CHECK(dim() == 2, "t: expected a 2-D tensor, got shape {}", shape());
  return transpose(0, 1);
}

Tensor Tensor::permute(const std::vector<std::int64_t>& dims) const {
  KILN_CHECK(static_cast<std::int64_t>(dims.size()) == dim(),
             "permute: {} dims given for a tensor of {} dims (shape {})", dims.size(), dim(),
             shape());
  std::vector<std::int64_t> inverse(dims.size(), -1);
  Shape sizes(dims.size()), strides_out(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int d = normalize_dim(dims[i], dim(), "permute");
    KILN_CHECK(inverse[d] < 0, "permute: dim {} appears twice in {}", d, dims);
    inverse[d] = static_cast<std::int64_t>(i);
    sizes[i] = shape()[d];
    strides_out[i] = strides()[d];
  }
  return differentiable_view(
      "permute", *this, sizes, strides_out, offset(),
      [inverse](const Tensor& g, const Saved&) -> Grads { return {g.permute(inverse)}; });
}

Tensor Tensor::slice(std::int64_t dim_in, std::int64_t start, std::int64_t end,
                     std::int64_t step) const {
  const int d = normalize_dim(dim_in, dim(), "slice");
  KILN_CHECK(dim() > 0, "slice: cannot slice a 0-dim tensor");
  KILN_CHECK(step > 0, "slice: step must be positive, got {}", step);
  const std::int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  Shape sizes = shape(), strides_out = strides();
  sizes[d] = (end - start + step - 1) / step;
  strides_out[d] *= step;
  const Shape in_shape = shape();
  return differentiable_view(
      "slice", *this, sizes, strides_out, offset() + start * strides()[d],
      [in_shape, d, start, end, step](const Tensor& g, const Saved&) -> Grads {
        Tensor grad = zeros(in_shape, {g.dtype(), g.device()});
        grad.slice(d, start, end, step).copy_(g);
        return {grad};
      });
}

Tensor Tensor::narrow(std::int64_t dim_in, std::int64_t start, std::int64_t length) const {
  KILN_CHECK(dim() > 0, "narrow: cannot narrow a 0-dim tensor");
  const int d = normalize_dim(dim_in, dim(), "narrow");
  const std::int64_t n = shape()[d];
  if (start < 0 && start >= -n) start += n;
  KILN_CHECK(start >= 0 && length >= 0 && start + length <= n,
             "narrow: start {} and length {} are out of range for dim {} of size {} (shape {})",
             start, length, d, n, shape());
  return slice(d, start, start + length);
}

Tensor Tensor::select(std::int64_t dim_in, std::int64_t index) const {
  KILN_CHECK(dim() > 0, "select: cannot select from a 0-dim tensor");
  const int d = normalize_dim(dim_in, dim(), "select");
  const std::int64_t n = shape()[d];
  KILN_CHECK(index >= -n && index < n, "select: index {} is out of range for dim {} of size {}",
             index, d, n);
  if (index < 0) index += n;
  return narrow(d, index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& shape_in) const {
  KILN_CHECK(shape_in.size() >= shape().size(),
             "expand: target shape {} has fewer dims than the tensor's shape {}", shape_in,
             shape());
  const std::size_t lead = shape_in.size() - shape().size();
  Shape sizes(shape_in.size()), strides_out(shape_in.size(), 0);
  for (std::size_t i = 0; i < shape_in.size(); ++i) {
    if (i < lead) {
      KILN_CHECK(shape_in[i] >= 0, "expand: size -1 is not allowed for a new leading dim ({})",
                 shape_in);
      sizes[i] = shape_in[i];
      continue;
    }
    const std::int64_t have = shape()[i - lead];
    const std::int64_t want = shape_in[i] == -1 ? have : shape_in[i];
    KILN_CHECK(have == want || have == 1,
               "expand: cannot expand shape {} to {} (dim {}: {} is not 1 and differs from {})",
               shape(), shape_in, i, have, want);
    sizes[i] = want;
    strides_out[i] = have == want ? strides()[i - lead] : 0;
  }
  const Shape in_shape = shape();
  return differentiable_view(
      "expand", *this, sizes, strides_out, offset(),
      [in_shape](const Tensor& g, const Saved&) -> Grads { return {sum_to(g, in_shape)}; });
}

Tensor Tensor::squeeze(std::int64_t dim_in) const {
  const int d = normalize_dim(dim_in, dim(), "squeeze");
  if (dim() == 0 || shape()[d] != 1) return view(shape());
  Shape sizes = shape(), strides_out = strides();
  sizes.erase(sizes.begin() + d);
  strides_out.erase(strides_out.begin() + d);
  const Shape in_shape = shape();
  return differentiable_view(
      "squeeze", *this, sizes, strides_out, offset(),
      [in_shape](const Tensor& g, const Saved&) -> Grads { return {g.reshape(in_shape)}; });
}

Tensor Tensor::unsqueeze(std::int64_t dim_in) const {
  const int d = normalize_dim(dim_in, dim() + 1, "unsqueeze");
  Shape sizes = shape(), strides_out = strides();
  const std::int64_t stride = d < dim() ? shape()[d] * strides()[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides_out.insert(strides_out.begin() + d, stride);
  const Shape in_shape = shape();
  return differentiable_view(
      "unsqueeze", *this, sizes, strides_out, offset(),
      [in_shape](const Tensor& g, const Saved&) -> Grads { return {g.reshape(in_shape)}; });
}

}  // namespace kiln
