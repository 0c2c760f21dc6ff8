#include "core/ops/dropout.h"

#include "core/autograd.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// a * b in a's dtype, for contiguous tensors of one shape (no autograd).
Tensor times(const Tensor& a, const Tensor& b) {
  Tensor out = empty(a.shape(), {a.dtype(), a.device()});
  backend_of(a).binary(BinaryOp::mul, arg_of(out), arg_of(a), arg_of(b));
  return out;
}

}  // namespace

// y = x * D, dx = dy * D. The backward draws D again from the same Philox counters instead of
// saving it: nothing of x's size stays alive for backward (attention's dropout does the same).
// A bf16 x is multiplied in float32 and y rounded back to bf16.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_defined("dropout", x);
  check_floating_or_bf16("dropout", x);
  KILN_CHECK(p >= 0.0 && p < 1.0, "dropout: probability must be in [0, 1), got {}", p);
  if (!training || p == 0.0) return x;
  profile::Scope scope(profile::Family::other);
  Generator& g = gen != nullptr ? *gen : default_generator();
  const std::uint64_t seed = g.seed(), offset = g.reserve((x.numel() + 3) / 4);
  const Tensor input = compute_copy(x.detach()).contiguous();
  const Tensor y =
      stored_as(times(input, dropout_mask(x.shape(), {input.dtype(), x.device()}, p, seed, offset)),
                x.dtype());
  record("dropout", y, {x}, {}, [p, seed, offset](const Tensor& dy, const Saved&) {
    const Tensor grad = dy.contiguous();
    return Grads{
        times(grad, dropout_mask(grad.shape(), {grad.dtype(), grad.device()}, p, seed, offset))};
  });
  return y;
}

}  // namespace kiln
