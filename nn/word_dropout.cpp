#include "nn/word_dropout.h"

#include "core/error.h"
#include "core/ops/dropout.h"
#include "core/ops/elementwise.h"
#include "core/ops/factories.h"
#include "core/ops/indexing.h"

namespace kiln::nn {

Tensor word_dropout(const Tensor& x, const Tensor& ids, std::int64_t vocab, double p, bool training,
                    Generator* gen) {
  KILN_CHECK(p >= 0.0 && p < 1.0, "word_dropout: p must be in [0, 1), got {}", p);
  KILN_CHECK(x.dim() == 3 && ids.dim() == 2 && x.size(0) == ids.size(0) && x.size(1) == ids.size(1),
             "word_dropout: expected x (B, T, D) and ids (B, T), got {} and {}", x.shape(),
             ids.shape());
  if (!training || p == 0.0) return x;
  const DType dtype = x.dtype() == DType::f64 ? DType::f64 : DType::f32;  // bf16 x: f32 mask
  const Tensor mask = dropout(ones({vocab, 1}, {.dtype = dtype, .device = x.device()}), p,
                              /*training=*/true, gen);
  // m[ids] as (B, T, 1), broadcast over D; index_select checks every id against the vocabulary.
  const Tensor per_token = index_select(mask, 0, ids.reshape({-1}));
  return x * per_token.view({ids.size(0), ids.size(1), 1});
}

}  // namespace kiln::nn
