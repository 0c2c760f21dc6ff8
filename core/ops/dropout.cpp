#include "core/ops/dropout.h"

#include "core/ops/elementwise.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

namespace kiln {

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_defined("dropout", x);
  check_floating("dropout", x);
  KILN_CHECK(p >= 0.0 && p < 1.0, "dropout: probability must be in [0, 1), got {}", p);
  if (!training || p == 0.0) return x;
  profile::Scope scope(profile::Family::other);
  Generator& g = gen != nullptr ? *gen : default_generator();
  Tensor mask = empty(x.shape(), {x.dtype(), x.device()});
  const std::uint64_t offset = g.reserve((x.numel() + 3) / 4);
  backend_of(x).dropout_mask(x.dtype(), mask.raw_data(), x.numel(), p, g.seed(), offset);
  // mul records dx = dy * mask (the mask needs no gradient).
  return mul(x, mask);
}

}  // namespace kiln
