// softmax, log_softmax and the causal softmax of attention. A bf16 x is computed on in float32
// and y stored in bf16 (what backward saves), by the kernel where it reads bf16 (kernel_operand).
// Backward reads the saved output:
//   softmax:     dx = y * (dy - sum(dy * y))
//   log_softmax: dx = dy - exp(y) * sum(dy)
#include "core/ops/softmax.h"

#include "core/autograd.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// Runs the row kernel on x with `dim` moved last; returns y in x's layout.
Tensor softmax_rows(std::string_view op, const Tensor& x, std::int64_t dim_in, bool log,
                    bool causal, std::int64_t query_offset) {
  profile::Scope scope(profile::Family::other);
  check_operands(op, std::array{x});
  KILN_CHECK(x.dim() >= 1, "{}: expected at least one dim, got a 0-dim tensor", op);
  const int dim = normalize_dim(dim_in, x.dim(), op);
  const int last = static_cast<int>(x.dim()) - 1;
  const Tensor rows =
      kernel_operand(dim == last ? x.detach() : x.detach().transpose(dim, last)).contiguous();
  SoftmaxArgs args;
  args.dtype = compute_dtype(rows.dtype());
  args.bf16_values = rows.dtype() == DType::bf16;
  args.cols = rows.size(-1);
  args.rows = args.cols == 0 ? 0 : rows.numel() / args.cols;
  args.log = log;
  args.causal = causal;
  args.query_len = causal ? rows.size(-2) : 1;
  args.query_offset = query_offset;
  Tensor y = empty(rows.shape(), {rows.dtype(), x.device()});
  if (args.rows > 0) backend_of(x).softmax_forward(args, rows.raw_data(), y.raw_data());
  y = stored_as(y, x.dtype());
  if (dim != last) y = y.transpose(dim, last);
  record(op, y, {x}, {y}, [args, dim, last](const Tensor& g, const Saved& s) {
    const Tensor y_rows =
        kernel_operand((dim == last ? s[0] : s[0].transpose(dim, last)).contiguous());
    const Tensor g_rows = (dim == last ? g : g.transpose(dim, last)).contiguous();
    Tensor dx = empty(y_rows.shape(), {g.dtype(), g.device()});
    if (args.rows > 0)
      backend_of(g).softmax_backward(args, y_rows.raw_data(), g_rows.raw_data(), dx.raw_data());
    return Grads{dim == last ? dx : dx.transpose(dim, last)};
  });
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) {
  return softmax_rows("softmax", x, dim, false, false, 0);
}

Tensor log_softmax(const Tensor& x, std::int64_t dim) {
  return softmax_rows("log_softmax", x, dim, true, false, 0);
}

Tensor causal_softmax(const Tensor& scores, std::int64_t query_offset) {
  check_operands("causal_softmax", std::array{scores});
  KILN_CHECK(scores.dim() >= 2,
             "causal_softmax: expected scores of at least 2 dims (.., T_q, T_k), got shape {}",
             scores.shape());
  KILN_CHECK(query_offset >= 0 && scores.size(-2) + query_offset <= scores.size(-1),
             "causal_softmax: {} queries after {} cached positions need at least {} keys, scores "
             "have shape {}",
             scores.size(-2), query_offset, scores.size(-2) + query_offset, scores.shape());
  return softmax_rows("causal_softmax", scores, -1, false, true, query_offset);
}

}  // namespace kiln
