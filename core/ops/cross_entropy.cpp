#include "core/ops/cross_entropy.h"

#include "core/autograd.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

std::int64_t count_targets(std::string_view op, const Tensor& targets, std::int64_t classes,
                           std::int64_t ignore_index) {
  const std::vector<std::int64_t> ids = targets.to_vector<std::int64_t>();
  std::int64_t counted = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == ignore_index) continue;
    KILN_CHECK(ids[i] >= 0 && ids[i] < classes,
               "{}: target {} at position {} is out of range for {} classes", op, ids[i], i,
               classes);
    ++counted;
  }
  KILN_CHECK(counted > 0,
             "{}: every one of the {} targets equals ignore_index {}, so the mean loss is "
             "undefined",
             op, ids.size(), ignore_index);
  return counted;
}

// Forward keeps each row's logsumexp; backward is d loss / d logits = (softmax - onehot) / count,
// recomputed from logits and logsumexp in one pass, so the probabilities are never stored. bf16
// logits are read in float32 (saved in bf16); the loss and dlogits are float32.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index) {
  profile::Scope scope(profile::Family::other);
  check_operands("cross_entropy", std::array{logits});
  check_ids_operand("cross_entropy", "targets", targets, logits.device());
  KILN_CHECK(logits.dim() >= 1, "cross_entropy: logits need a class dim, got a 0-dim tensor");
  const Shape leading(logits.shape().begin(), logits.shape().end() - 1);
  KILN_CHECK(targets.shape() == leading,
             "cross_entropy: targets of shape {} do not match logits {} (expected {})",
             targets.shape(), logits.shape(), leading);
  const std::int64_t classes = logits.size(-1);
  const std::int64_t rows = numel_of(leading);

  const Tensor ids = targets.contiguous();
  const std::int64_t counted = count_targets("cross_entropy", ids, classes, ignore_index);

  const Tensor input = logits.contiguous().detach();  // saved: bf16 stays bf16
  const DType dtype = compute_dtype(logits.dtype());
  Tensor row_loss = empty({rows}, {dtype, logits.device()});
  Tensor row_stats = empty({rows, 2}, {dtype, logits.device()});  // max, log-sum per row
  Backend& backend = backend_of(logits);
  const double scale = 1.0 / static_cast<double>(counted);
  const Tensor values = kernel_operand(input);
  const CrossEntropyArgs args{.dtype = dtype,
                              .bf16_logits = values.dtype() == DType::bf16,
                              .rows = rows,
                              .cols = classes,
                              .ignore_index = ignore_index,
                              .scale = scale};
  backend.cross_entropy_forward(args, values.raw_data(),
                                static_cast<const std::int64_t*>(ids.raw_data()),
                                row_loss.raw_data(), row_stats.raw_data());
  Tensor total = empty({}, {dtype, logits.device()});
  backend.sum({.dtype = dtype, .reduced = rows}, row_loss.raw_data(), total.raw_data());
  Tensor loss = empty({}, {dtype, logits.device()});
  backend.unary(UnaryOp::mul_scalar, arg_of(loss), arg_of(total), scale);

  record("cross_entropy", loss, {logits, targets}, {input, ids, row_stats},
         [args](const Tensor& g, const Saved& s) {
           const Tensor grad_loss = g.contiguous();
           Tensor dlogits = empty(s[0].shape(), {g.dtype(), g.device()});
           backend_of(g).cross_entropy_backward(args, kernel_operand(s[0]).raw_data(),
                                                static_cast<const std::int64_t*>(s[1].raw_data()),
                                                s[2].raw_data(), grad_loss.raw_data(),
                                                dlogits.raw_data());
           return Grads{dlogits, Tensor()};
         });
  return loss;
}

}  // namespace kiln
