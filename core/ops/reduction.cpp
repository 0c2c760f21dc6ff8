// Reductions: sum, mean, max along dims, and sum_to (the backward of broadcasting). A bf16 input
// is reduced in float32, and the result is float32.
#include "core/ops/reduction.h"

#include <algorithm>

#include "core/autograd.h"
#include "core/ops/elementwise.h"
#include "core/ops/factories.h"
#include "core/ops/op_utils.h"
#include "core/ops/select.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// Sorted, unique, non-negative dims; all dims when `dims` is empty.
std::vector<int> reduced_dims(const Tensor& x, const std::vector<std::int64_t>& dims,
                              std::string_view op) {
  std::vector<int> out;
  if (dims.empty()) {
    for (int d = 0; d < x.dim(); ++d) out.push_back(d);
    return out;
  }
  for (std::int64_t d : dims) out.push_back(normalize_dim(d, x.dim(), op));
  std::sort(out.begin(), out.end());
  KILN_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), "{}: dim repeated in {}", op,
             dims);
  return out;
}

Shape keepdim_shape(const Shape& shape, const std::vector<int>& dims) {
  Shape out = shape;
  for (int d : dims) out[d] = 1;
  return out;
}

Shape dropped_shape(const Shape& shape, const std::vector<int>& dims) {
  Shape out;
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (std::find(dims.begin(), dims.end(), static_cast<int>(i)) == dims.end())
      out.push_back(shape[i]);
  return out;
}

// Sums contiguous x over the run of dims [first, last] in one pass: (outer, reduced, inner).
Tensor sum_run(const Tensor& x, int first, int last) {
  const Shape& s = x.shape();
  std::int64_t outer = 1, reduced = 1, inner = 1;
  for (int d = 0; d < first; ++d) outer *= s[d];
  for (int d = first; d <= last; ++d) reduced *= s[d];
  for (int d = last + 1; d < x.dim(); ++d) inner *= s[d];
  Shape out_shape = s;
  for (int d = first; d <= last; ++d) out_shape[d] = 1;
  Tensor out = empty(out_shape, {x.dtype(), x.device()});
  backend_of(x).sum({.dtype = x.dtype(), .outer = outer, .reduced = reduced, .inner = inner},
                    x.raw_data(), out.raw_data());
  return out;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  profile::Scope scope(profile::Family::other);
  check_operands("sum", std::array{x});
  const std::vector<int> ds = reduced_dims(x, dims, "sum");
  // Reduce each run of adjacent dims in one pass, the innermost run first.
  Tensor out = compute_copy(x.detach()).contiguous();
  for (std::size_t end = ds.size(); end > 0;) {
    std::size_t begin = end - 1;
    while (begin > 0 && ds[begin - 1] == ds[begin] - 1) --begin;
    out = sum_run(out, ds[begin], ds[end - 1]);
    end = begin;
  }
  if (ds.empty()) out = out.clone();
  if (!keepdim) out = out.view(dropped_shape(x.shape(), ds));
  record("sum", out, {x}, {}, [in_shape = x.shape(), ds](const Tensor& g, const Saved&) {
    return Grads{g.reshape(keepdim_shape(in_shape, ds)).expand(in_shape)};
  });
  return out;
}

Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  check_operands("mean", std::array{x});
  const std::vector<int> ds = reduced_dims(x, dims, "mean");
  std::int64_t count = 1;
  for (int d : ds) count *= x.shape()[d];
  KILN_CHECK(count > 0, "mean: cannot average over an empty dim (shape {})", x.shape());
  return div(sum(x, dims, keepdim), static_cast<double>(count));
}

MaxResult max(const Tensor& x, std::int64_t dim, bool keepdim) {
  check_operands("max", std::array{x});
  KILN_CHECK(x.dim() > 0, "max: expected a tensor with at least one dim, got a scalar");
  const int d = normalize_dim(dim, x.dim(), "max");
  KILN_CHECK(x.shape()[d] > 0, "max: cannot take the max over an empty dim (shape {})", x.shape());
  const Tensor input = compute_copy(x.detach()).contiguous();
  const Shape& s = x.shape();
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= s[i];
  for (int i = d + 1; i < x.dim(); ++i) inner *= s[i];
  const Shape kept = keepdim_shape(s, {d});
  Tensor values = empty(kept, {input.dtype(), x.device()});
  Tensor indices = empty(kept, {DType::i64, x.device()});
  backend_of(x).max({.dtype = input.dtype(), .outer = outer, .reduced = s[d], .inner = inner},
                    input.raw_data(), values.raw_data(),
                    static_cast<std::int64_t*>(indices.raw_data()));
  // The gradient goes to the returned index, every other position gets exactly 0 (selected, not
  // multiplied by a 0/1 mask: an infinite g would make the rest NaN).
  record("max", values, {x}, {indices}, [d, in_shape = s](const Tensor& g, const Saved& saved) {
    Shape positions_shape(in_shape.size(), 1);
    positions_shape[d] = in_shape[d];
    const Tensor positions = arange(in_shape[d], {DType::i64, g.device()}).view(positions_shape);
    return Grads{where(eq(positions, saved[0]), g, zeros({}, {g.dtype(), g.device()}))};
  });
  if (!keepdim) {
    const Shape dropped = dropped_shape(s, {d});
    return {values.view(dropped), indices.view(dropped)};
  }
  return {values, indices};
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x.dtype() == DType::bf16 ? x.to(DType::f32) : x;
  KILN_CHECK(x.dim() >= static_cast<std::int64_t>(shape.size()),
             "sum_to: cannot reduce shape {} to {}", x.shape(), shape);
  const std::size_t lead = x.shape().size() - shape.size();
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < x.shape().size(); ++i) {
    if (i < lead) {
      dims.push_back(static_cast<std::int64_t>(i));
    } else if (shape[i - lead] == 1 && x.shape()[i] != 1) {
      dims.push_back(static_cast<std::int64_t>(i));
    } else {
      KILN_CHECK(shape[i - lead] == x.shape()[i], "sum_to: cannot reduce shape {} to {}", x.shape(),
                 shape);
    }
  }
  return sum(x, dims, true).reshape(shape);
}

}  // namespace kiln
