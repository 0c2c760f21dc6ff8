#include "core/ops/join.h"

#include "core/autograd.h"
#include "core/ops/op_utils.h"

namespace kiln {

// Each input is copied into its slice of the output; backward hands each input its slice.
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim_in) {
  KILN_CHECK(!tensors.empty(), "cat: needs at least one tensor");
  const Tensor& first = tensors.front();
  check_operands("cat", tensors, {.accepts = Accepts::any});
  KILN_CHECK(first.dim() >= 1, "cat: cannot concatenate 0-dim tensors");
  const int dim = normalize_dim(dim_in, first.dim(), "cat");
  Shape shape = first.shape();
  shape[dim] = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool compatible = t.dim() == first.dim();
    for (std::int64_t d = 0; compatible && d < t.dim(); ++d)
      compatible = d == dim || t.shape()[d] == first.shape()[d];
    KILN_CHECK(compatible, "cat: tensor {} has shape {}, which does not match {} outside dim {}", i,
               t.shape(), first.shape(), dim);
    shape[dim] += t.shape()[dim];
  }
  Tensor out = empty(shape, {first.dtype(), first.device()});
  std::vector<std::int64_t> starts;
  std::int64_t start = 0;
  for (const Tensor& t : tensors) {
    starts.push_back(start);
    const Tensor slot = out.narrow(dim, start, t.shape()[dim]);
    backend_of(out).copy(arg_of(slot), arg_of(t));
    start += t.shape()[dim];
  }
  std::vector<std::int64_t> lengths;
  for (const Tensor& t : tensors) lengths.push_back(t.shape()[dim]);
  record("cat", out, tensors, {}, [dim, starts, lengths](const Tensor& g, const Saved&) {
    Grads grads;
    for (std::size_t i = 0; i < starts.size(); ++i)
      grads.push_back(g.narrow(dim, starts[i], lengths[i]));
    return grads;
  });
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes,
                          std::int64_t dim_in) {
  check_operands("split", std::array{x}, {.accepts = Accepts::any});
  const int dim = normalize_dim(dim_in, x.dim(), "split");
  std::int64_t total = 0;
  for (std::int64_t s : sizes) {
    KILN_CHECK(s >= 0, "split: negative size in {}", sizes);
    total += s;
  }
  KILN_CHECK(total == x.size(dim), "split: sizes {} add up to {}, but dim {} of shape {} has {}",
             sizes, total, dim, x.shape(), x.size(dim));
  std::vector<Tensor> pieces;
  std::int64_t start = 0;
  for (std::int64_t s : sizes) {
    pieces.push_back(x.narrow(dim, start, s));
    start += s;
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, std::int64_t size, std::int64_t dim_in) {
  check_operands("split", std::array{x}, {.accepts = Accepts::any});
  KILN_CHECK(size > 0, "split: piece size must be positive, got {}", size);
  const int dim = normalize_dim(dim_in, x.dim(), "split");
  std::vector<std::int64_t> sizes;
  for (std::int64_t left = x.size(dim); left > 0; left -= size)
    sizes.push_back(std::min(size, left));
  if (sizes.empty()) sizes.push_back(0);  // an empty dim is one empty piece, as in PyTorch
  return split(x, sizes, dim);
}

}  // namespace kiln
