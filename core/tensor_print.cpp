// Tensor::str(): values in nested brackets, like PyTorch, then shape, dtype and device. Large
// tensors show the first and last 3 entries of each dim around "...".
#include <cmath>
#include <string>

#include "core/tensor.h"

namespace kiln {

namespace {

constexpr std::int64_t kSummarizeAbove = 1000;
constexpr std::int64_t kEdgeItems = 3;

struct Printer {
  const std::vector<double>& values;
  const Shape& shape;
  bool integer;
  bool summarize;
  std::string out;

  void element(double v) {
    if (integer) {
      out += fmt::format("{}", static_cast<std::int64_t>(v));
    } else if (std::isfinite(v) && v != 0.0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-4)) {
      out += fmt::format("{:.4e}", v);
    } else {
      out += fmt::format("{:.4f}", v);
    }
  }

  // Prints the sub-tensor at `dim` starting at flat index `base`.
  void print(std::size_t dim, std::int64_t base, std::int64_t stride_elems, int indent) {
    if (dim == shape.size()) {
      element(values[base]);
      return;
    }
    const std::int64_t n = shape[dim];
    const std::int64_t inner = stride_elems / std::max<std::int64_t>(n, 1);
    out += '[';
    for (std::int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        out += dim + 1 == shape.size() ? "..., " : fmt::format("...,\n{:{}}", "", indent + 1);
        i = n - kEdgeItems - 1;
        continue;
      }
      print(dim + 1, base + i * inner, inner, indent + 1);
      if (i + 1 < n) {
        out += dim + 1 == shape.size() ? ", " : fmt::format(",\n{:{}}", "", indent + 1);
      }
    }
    out += ']';
  }
};

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::vector<double> values = to_vector<double>();
  Printer printer{values, shape(), dtype() == DType::i64, numel() > kSummarizeAbove, "tensor("};
  printer.print(0, 0, numel(), 7);
  printer.out += fmt::format(", shape={}, dtype={}, device={}", shape(), dtype(), device());
  if (requires_grad()) printer.out += ", requires_grad";
  printer.out += ')';
  return printer.out;
}

}  // namespace kiln
