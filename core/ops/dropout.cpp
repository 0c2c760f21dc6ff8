#include "core/ops/dropout.h"

#include "core/autograd.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// x * D for a contiguous x, D drawn as it is applied (no mask tensor, no autograd).
Tensor apply_mask(const Tensor& x, double p, std::uint64_t seed, std::uint64_t offset) {
  Tensor out = empty(x.shape(), {x.dtype(), x.device()});
  backend_of(x).dropout_apply(x.dtype(), out.raw_data(), x.raw_data(), x.numel(), p, seed, offset);
  return out;
}

}  // namespace

// y = x * D, dx = dy * D. The backward draws D again from the same Philox counters instead of
// saving it: nothing of x's size stays alive for backward (attention's dropout does the same).
// A bf16 x is multiplied in float32 and y rounded once to bf16 (by the kernel where it reads bf16).
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_operands("dropout", std::array{x});
  KILN_CHECK(p >= 0.0 && p < 1.0, "dropout: probability must be in [0, 1), got {}", p);
  if (!training || p == 0.0) return x;
  profile::Scope scope(profile::Family::other);
  Generator& g = gen != nullptr ? *gen : default_generator();
  const std::uint64_t seed = g.seed(), offset = g.reserve((x.numel() + 3) / 4);
  const Tensor input = kernel_operand(x.detach()).contiguous();
  const Tensor y = stored_as(apply_mask(input, p, seed, offset), x.dtype());
  record("dropout", y, {x}, {}, [p, seed, offset](const Tensor& dy, const Saved&) {
    return Grads{apply_mask(dy.contiguous(), p, seed, offset)};
  });
  return y;
}

}  // namespace kiln
