// The operands of the GEMM tests (test_packed_gemm.cpp, test_bf16_gemm_paths.cpp): a product's
// shape and scalars, and uniform random operands in [-1, 1) stored with padded rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/kiln.h"

namespace kiln::testing {

// C = alpha op(A) op(B) + beta C with op(A) m × k and op(B) k × n.
struct GemmProduct {
  std::int64_t m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
};

// Stored operands with `pad` unused floats after each row, and C's initial values.
struct GemmOperands {
  std::int64_t lda, ldb, ldc;
  std::vector<float> a, b, c;
};

inline GemmOperands gemm_operands(const GemmProduct& p, std::int64_t pad, std::uint64_t seed) {
  Generator gen(seed);
  auto values = [&](std::int64_t rows, std::int64_t ld) {
    return uniform({rows * ld}, -1, 1, {}, &gen).to_vector<float>();
  };
  GemmOperands o;
  o.lda = (p.trans_a ? p.m : p.k) + pad;
  o.ldb = (p.trans_b ? p.k : p.n) + pad;
  o.ldc = p.n + pad;
  o.a = values(p.trans_a ? p.k : p.m, o.lda);
  o.b = values(p.trans_b ? p.n : p.k, o.ldb);
  o.c = values(p.m, o.ldc);
  // beta 0 must not read C: NaN there would show in the result.
  if (p.beta == 0.0f) std::fill(o.c.begin(), o.c.end(), std::numeric_limits<float>::quiet_NaN());
  return o;
}

}  // namespace kiln::testing
