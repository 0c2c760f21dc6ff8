#include "core/ops/linear_cross_entropy.h"

#include "core/autograd.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// C (m, n) = alpha op(A) op(B) for contiguous row-major operands.
void gemm_into(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
               double alpha) {
  GemmArgs g;
  g.dtype = c.dtype();
  g.m = c.size(0), g.n = c.size(1), g.k = trans_a ? a.size(0) : a.size(1);
  g.a = a.raw_data(), g.lda = a.size(1), g.trans_a = trans_a;
  g.b = b.raw_data(), g.ldb = b.size(1), g.trans_b = trans_b;
  g.c = c.raw_data(), g.ldc = c.size(1);
  g.alpha = alpha;
  if (g.m > 0 && g.n > 0) backend_of(c).gemm(g);
}

}  // namespace

Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets,
                            std::int64_t ignore_index) {
  profile::Scope scope(profile::Family::vocabulary);
  check_defined("linear_cross_entropy", x);
  check_defined("linear_cross_entropy", weight);
  check_defined("linear_cross_entropy", targets);
  check_floating("linear_cross_entropy", x);
  check_same_dtype_device("linear_cross_entropy", x, weight);
  KILN_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
             "linear_cross_entropy: x {} and weight {} must be (N, d) and (V, d)", x.shape(),
             weight.shape());
  KILN_CHECK(targets.dtype() == DType::i64 && targets.shape() == Shape{x.size(0)},
             "linear_cross_entropy: targets must be int64 of shape [{}], got {} {}", x.size(0),
             targets.dtype(), targets.shape());
  KILN_CHECK(targets.device() == x.device(), "linear_cross_entropy: x on {} and targets on {}",
             x.device(), targets.device());
  const std::int64_t rows = x.size(0), classes = weight.size(0);
  const Tensor ids = targets.contiguous();
  const std::int64_t counted = count_targets("linear_cross_entropy", ids, classes, ignore_index);

  const Tensor input = x.contiguous().detach(), w = weight.contiguous().detach();
  Tensor row_loss = empty({rows}, {x.dtype(), x.device()});
  Tensor logsumexp = empty({rows}, {x.dtype(), x.device()});
  Backend& backend = backend_of(x);
  const auto* target_ids = static_cast<const std::int64_t*>(ids.raw_data());
  const std::size_t element = dtype_size(x.dtype());
  const bool gradient = any_requires_grad({x, weight});
  Tensor logits;  // (N, V), becomes G; kept for backward
  if (gradient) {
    logits = empty({rows, classes}, {x.dtype(), x.device()});
    gemm_into(logits, input, false, w, true, 1.0);  // X W^T
    backend.cross_entropy_forward_with_grad(x.dtype(), rows, classes, logits.raw_data(), target_ids,
                                            ignore_index, row_loss.raw_data(),
                                            logsumexp.raw_data());
  } else {
    // Without a gradient the logits are only read once more: compute them a block of rows at a
    // time into one buffer that stays in cache, instead of an (N, V) tensor.
    constexpr std::int64_t kRowBlock = 256;
    Tensor block = empty({std::min(rows, kRowBlock), classes}, {x.dtype(), x.device()});
    for (std::int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
      const std::int64_t n = std::min(kRowBlock, rows - r0);
      const Tensor block_logits = block.narrow(0, 0, n);
      gemm_into(block_logits, input.narrow(0, r0, n), false, w, true, 1.0);
      backend.cross_entropy_forward(x.dtype(), n, classes, block_logits.raw_data(), target_ids + r0,
                                    ignore_index,
                                    static_cast<char*>(row_loss.raw_data()) + r0 * element,
                                    static_cast<char*>(logsumexp.raw_data()) + r0 * element);
    }
  }
  Tensor total = empty({}, {x.dtype(), x.device()});
  backend.sum(x.dtype(), row_loss.raw_data(), total.raw_data(), 1, rows, 1);
  const double scale = 1.0 / static_cast<double>(counted);
  Tensor loss = empty({}, {x.dtype(), x.device()});
  backend.unary(UnaryOp::mul_scalar, arg_of(loss), arg_of(total), scale);

  // dX = (g / count) G W, dW = (g / count) G^T X; g is read on the host (one scalar).
  record("linear_cross_entropy", loss, {x, weight, targets}, {input, w, logits},
         [scale](const Tensor& g, const Saved& s) {
           const double alpha = g.item<double>() * scale;
           Tensor dx, dw;
           if (s.needs_grad(0)) {
             dx = empty(s[0].shape(), {g.dtype(), g.device()});
             gemm_into(dx, s[2], false, s[1], false, alpha);
           }
           if (s.needs_grad(1)) {
             dw = empty(s[1].shape(), {g.dtype(), g.device()});
             gemm_into(dw, s[2], true, s[0], false, alpha);
           }
           return Grads{dx, dw, Tensor()};
         });
  return loss;
}

}  // namespace kiln
