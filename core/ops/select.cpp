#include "core/ops/select.h"

#include "core/autograd.h"
#include "core/ops/factories.h"
#include "core/ops/op_utils.h"
#include "core/ops/reduction.h"

namespace kiln {

namespace {

Tensor where_kernel(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape) {
  Tensor out = empty(shape, {a.dtype(), a.device()});
  backend_of(a).where(arg_of(out), broadcast_arg(cond, shape), broadcast_arg(a, shape),
                      broadcast_arg(b, shape));
  return out;
}

}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_operands("where", std::array{a, b}, {.accepts = Accepts::any});
  check_operands("where", std::array{a, cond}, {.accepts = Accepts::any, .same_dtype = false});
  const Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = where_kernel(cond, a, b, shape);
  record("where", out, {a, b}, {cond},
         [sa = a.shape(), sb = b.shape()](const Tensor& g, const Saved& s) {
           const Tensor zero = zeros({}, {g.dtype(), g.device()});
           return Grads{
               s.needs_grad(0) ? sum_to(where_kernel(s[0], g, zero, g.shape()), sa) : Tensor(),
               s.needs_grad(1) ? sum_to(where_kernel(s[0], zero, g, g.shape()), sb) : Tensor()};
         });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_operands("masked_fill", std::array{x, mask},
                 {.accepts = Accepts::any, .same_dtype = false});
  KILN_CHECK(broadcast_shapes(mask.shape(), x.shape(), "masked_fill") == x.shape(),
             "masked_fill: mask of shape {} does not broadcast to the tensor's shape {}",
             mask.shape(), x.shape());
  const Tensor fill = full({}, value, {x.dtype(), x.device()});
  Tensor out = where_kernel(mask, fill, x, x.shape());
  record("masked_fill", out, {x}, {mask}, [](const Tensor& g, const Saved& s) {
    return Grads{where_kernel(s[0], zeros({}, {g.dtype(), g.device()}), g, g.shape())};
  });
  return out;
}

}  // namespace kiln
