#include "core/ops/linear_cross_entropy.h"

#include <algorithm>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/ops/elementwise.h"
#include "core/ops/factories.h"
#include "core/ops/gemm_operand.h"
#include "core/ops/indexing.h"
#include "core/ops/op_utils.h"
#include "core/ops/select.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// C (m, n) = alpha op(A) op(B), C's rows contiguous (the logits' rows may be padded: their row
// stride is the leading dimension); A and B as gemm_operand reads them.
void gemm_into(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
               double alpha) {
  const GemmOperand op_a = gemm_operand(trans_a ? a.t() : a);
  const GemmOperand op_b = gemm_operand(trans_b ? b.t() : b);
  GemmArgs g;
  g.op = "linear_cross_entropy";
  g.dtype = c.dtype();
  set_operand_dtypes(g, a.dtype(), b.dtype());
  g.m = c.size(0), g.n = c.size(1), g.k = trans_a ? a.size(0) : a.size(1);
  g.a = op_a.tensor.raw_data(), g.lda = op_a.ld, g.trans_a = op_a.transposed;
  g.b = op_b.tensor.raw_data(), g.ldb = op_b.ld, g.trans_b = op_b.transposed;
  g.c = c.raw_data(), g.ldc = gemm_result_ld(c);
  g.alpha = alpha;
  if (g.m > 0 && g.n > 0) backend_of(c).gemm(g);
}

// With bf16 operands the logits pass through a float32 buffer of at most this many elements
// (64 MB, half the bf16 P' of 2048 x 33278), in blocks of equal rows. Each block's GEMM packs all
// of W again: blocks of 2^23 floats (252 rows and a last one of 32) ran the logits 12-15% slower
// than one product (1 thread, Zen 4, the native bf16 kernel), blocks of 512 rows 4%.
constexpr std::int64_t kRoundedBlockFloats = std::int64_t{1} << 24;

// P'' = P' - M / s in rows [r0, r0 + n) of block (the block's row i is row r0 + i): each counted
// row's target entry less the row's sum 1 / s. Then s P'' is the softmax minus the one-hot, so the
// backward's products cancel no term of size |x| (P'^T (s X) - M^T X did: float32 lost eps |x|).
// The targets stay where they are: the flat index i ld + t is summed on their device, so a GPU
// step reads nothing back (safe_ids holds 0 on ignored rows).
void subtract_targets(Backend& backend, const Tensor& block, std::int64_t r0, std::int64_t n,
                      const Tensor& safe_ids, const Tensor& counted_mask, const Tensor& row_scale) {
  const std::int64_t ld = block.strides()[0], classes = block.size(1);
  const Tensor row_starts = arange(0.0, static_cast<double>(n * ld), static_cast<double>(ld),
                                   {DType::i64, block.device()});
  const Tensor ids = empty({n}, {DType::i64, block.device()});  // (row, target) in the block
  backend.binary(BinaryOp::add, arg_of(ids), arg_of(row_starts), arg_of(safe_ids.narrow(0, r0, n)));
  // -1 / s on counted rows, 0 on ignored ones (whose s is 0).
  const Tensor minus_sum =
      where(counted_mask.narrow(0, r0, n), rdiv(-1.0, row_scale.narrow(0, r0, n)),
            zeros({}, {block.dtype(), block.device()}))
          .contiguous();
  backend.scatter_add_rows(
      {.dtype = block.dtype(), .n = n, .table_rows = (n - 1) * ld + classes, .cols = 1},
      minus_sum.raw_data(), static_cast<const std::int64_t*>(ids.raw_data()), block.raw_data());
}

}  // namespace

Tensor linear_cross_entropy(const Tensor& x_in, const Tensor& weight_in, const Tensor& targets,
                            std::int64_t ignore_index) {
  profile::Scope scope(profile::Family::vocabulary);
  const auto [x, weight] = checked_weight_operands("linear_cross_entropy", x_in, weight_in);
  check_ids_operand("linear_cross_entropy", "targets", targets, x.device());
  // The logits, the loss and every gradient are in `dtype`: float32 for bf16 operands.
  const DType dtype = compute_dtype(x.dtype());
  KILN_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
             "linear_cross_entropy: x {} and weight {} must be (N, d) and (V, d)", x.shape(),
             weight.shape());
  KILN_CHECK(targets.shape() == Shape{x.size(0)},
             "linear_cross_entropy: targets must have shape [{}], got {}", x.size(0),
             targets.shape());
  const std::int64_t rows = x.size(0), classes = weight.size(0);
  const Tensor ids = targets.contiguous();
  // The count of the targets that are not ignore_index, and their check: on the host (a read of
  // the targets), or, where the backend checks on its device, kept there: 1 / count as a float64
  // scalar, and the range check raised at the next synchronisation (a step never waits for it).
  Backend& backend = backend_of(x);
  const bool on_device = backend.checks_on_device();
  std::int64_t counted = 0;
  Tensor inverse_count;
  if (on_device) {
    backend.find_invalid_id({.n = rows,
                             .table_rows = classes,
                             .op = "linear_cross_entropy",
                             .targets = true,
                             .ignore_index = ignore_index},
                            static_cast<const std::int64_t*>(ids.raw_data()));
    const Tensor ignore = from_vector<std::int64_t>({ignore_index}, {}, ids.device());
    inverse_count = 1.0 / ne(ids, ignore).to(DType::f64).sum();  // inf when all are ignored
  } else {
    counted = count_targets("linear_cross_entropy", ids, classes, ignore_index);
  }

  // Under autocast a GEMM that cannot round the float32 W as it reads it (cuBLAS) multiplies
  // autocast's cached bf16 copy, made once, not once per block and again in backward.
  const bool cached_copy =
      x.dtype() == DType::bf16 && weight.dtype() == DType::f32 && !backend.gemm_rounds_operands();
  const Tensor input = x.contiguous().detach();
  const Tensor w = cached_copy ? autocast_weight(weight) : weight.contiguous().detach();
  Tensor row_loss = empty({rows}, {dtype, x.device()});
  Tensor logsumexp = empty({rows}, {dtype, x.device()});
  const auto* target_ids = static_cast<const std::int64_t*>(ids.raw_data());
  const std::size_t element = dtype_size(dtype);
  const bool gradient = any_requires_grad({x, weight});
  Tensor logits;        // (N, V), becomes P'' = exp(logits - shift) - M / s; kept for backward
                        // (in bf16 when the operands are: the largest saved tensor)
  Tensor row_scale;     // (N): s, softmax = P' * s (0 on ignored rows)
  Tensor counted_rows;  // (N): 1 on counted rows, 0 on ignored ones
  if (gradient) {
    // Built now, with an exact int64 comparison, so that backward needs neither the targets
    // (which the caller may refill before backward) nor ignore_index.
    const Tensor ignore = from_vector<std::int64_t>({ignore_index}, {}, ids.device());
    const Tensor counted_mask = ne(ids, ignore);
    counted_rows = counted_mask.to(dtype);
    const Tensor safe_ids = where(counted_mask, ids, zeros({}, {DType::i64, ids.device()}));
    row_scale = empty({rows}, {dtype, x.device()});
    // float32 and float64: the GEMM writes the logits in place and one pass turns them into P'.
    // bf16: a block of rows at a time through a float32 buffer, rounded into the bf16 P', so that
    // no (N, V) float32 tensor ever exists beside it (the rows are independent: the same values).
    const bool rounded = x.dtype() != dtype;
    logits = rounded ? empty({rows, classes}, {x.dtype(), x.device()})
                     : padded_rows(rows, classes, {dtype, x.device()});
    const std::int64_t most_rows =
        std::max<std::int64_t>(kRoundedBlockFloats / std::max<std::int64_t>(classes, 1), 1);
    const std::int64_t blocks = std::max<std::int64_t>((rows + most_rows - 1) / most_rows, 1);
    const std::int64_t block_rows = rounded ? (rows + blocks - 1) / blocks : rows;
    const Tensor block = rounded ? empty({block_rows, classes}, {dtype, x.device()}) : logits;
    for (std::int64_t r0 = 0; r0 < rows; r0 += block_rows) {
      const std::int64_t n = std::min(block_rows, rows - r0);
      const Tensor block_logits = block.narrow(0, 0, n);
      gemm_into(block_logits, input.narrow(0, r0, n), false, w, true, 1.0);  // X W^T
      backend.cross_entropy_forward_exp({.dtype = dtype,
                                         .rows = n,
                                         .cols = classes,
                                         .ignore_index = ignore_index,
                                         .row_stride = block_logits.strides()[0]},
                                        block_logits.raw_data(), target_ids + r0,
                                        static_cast<char*>(row_loss.raw_data()) + r0 * element,
                                        static_cast<char*>(logsumexp.raw_data()) + r0 * element,
                                        static_cast<char*>(row_scale.raw_data()) + r0 * element);
      subtract_targets(backend, block_logits, r0, n, safe_ids, counted_mask, row_scale);
      if (rounded) backend.copy(arg_of(logits.narrow(0, r0, n)), arg_of(block_logits));
    }
  } else {
    // Without a gradient the logits are only read once more: compute them a block of rows at a
    // time into one buffer that stays in cache, instead of an (N, V) tensor.
    constexpr std::int64_t kRowBlock = 256;
    Tensor block = empty({std::min(rows, kRowBlock), classes}, {dtype, x.device()});
    // The kernel's per-row max and log-sum, which only a backward would read.
    Tensor row_stats = empty({std::min(rows, kRowBlock), 2}, {dtype, x.device()});
    for (std::int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
      const std::int64_t n = std::min(kRowBlock, rows - r0);
      const Tensor block_logits = block.narrow(0, 0, n);
      gemm_into(block_logits, input.narrow(0, r0, n), false, w, true, 1.0);
      backend.cross_entropy_forward(
          {.dtype = dtype, .rows = n, .cols = classes, .ignore_index = ignore_index},
          block_logits.raw_data(), target_ids + r0,
          static_cast<char*>(row_loss.raw_data()) + r0 * element, row_stats.raw_data());
    }
  }
  Tensor total = empty({}, {dtype, x.device()});
  backend.sum({.dtype = dtype, .reduced = rows}, row_loss.raw_data(), total.raw_data());
  const double scale = on_device ? 0.0 : 1.0 / static_cast<double>(counted);
  Tensor loss;
  if (on_device) {
    loss = (total.to(DType::f64) * inverse_count).to(dtype);
  } else {
    loss = empty({}, {dtype, x.device()});
    backend.unary(UnaryOp::mul_scalar, arg_of(loss), arg_of(total), scale);
  }

  // With alpha = g / count, S = diag(row_scale) and P'' = P' - S^-1 M (M the one-hot of the
  // counted targets; S P'' = softmax - M):
  //   dX = alpha S P'' W,  dW = alpha P''^T (S X).
  // S acts on (N, d) operands and results, never on the (N, V) P''. An ignored row is never read:
  // its rows of dX and S X are selected to 0, not multiplied by 0 (an infinite x or W would make
  // them NaN; PyTorch's are). alpha is read on the host (one scalar) and is the GEMMs' own; where
  // the count stays on the device, alpha does too: the GEMMs run with alpha 1 and their (N, d) and
  // (V, d) results are scaled instead.
  record("linear_cross_entropy", loss, {x, weight, targets},
         {input, w, logits, row_scale, counted_rows},
         [scale, inverse_count](const Tensor& g, const Saved& s) {
           const bool on_device = inverse_count.defined();
           const double alpha = on_device ? 1.0 : g.item<double>() * scale;
           const Tensor &input = s[0], &w = s[1], &p = s[2], &row_scale = s[3];
           const std::int64_t rows = input.size(0);
           const Tensor counted = s[4].view({rows, 1});
           const Tensor scale_rows =
               on_device
                   ? row_scale.view({rows, 1}) * (g.to(DType::f64) * inverse_count).to(g.dtype())
                   : row_scale.view({rows, 1});
           const Tensor zero = zeros({}, {g.dtype(), g.device()});
           // The (N, d) operands in the gradient's dtype for the elementwise terms (a no-op unless
           // they are bf16); the GEMMs read the operands' own dtype.
           const DType dtype = g.dtype(), operands = input.dtype();
           Tensor dx, dw;
           if (s.needs_grad(0)) {
             const Tensor pw = empty(input.shape(), {dtype, g.device()});
             gemm_into(pw, p, false, w, false, alpha);  // alpha P'' W (W as the forward read it)
             dx = where(counted, pw * scale_rows, zero);
           }
           if (s.needs_grad(1)) {
             dw = empty(w.shape(), {dtype, g.device()});
             const Tensor scaled_rows = where(counted, input.to(dtype) * scale_rows, zero);
             gemm_into(dw, p, true, scaled_rows.to(operands).contiguous(), false, alpha);
           }
           return Grads{dx, dw, Tensor()};
         });
  return loss;
}

}  // namespace kiln
