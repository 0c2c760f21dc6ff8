// The argument rules of the GEMM and attention kernels (core/backend.h), in one place: a GEMM
// that BLAS would refuse never reaches it. OpenBLAS answers such a call by printing "On entry
// to SGEMM parameter number 8 had an illegal value" and returning without the product: the
// caller reads whatever C held.
#include <algorithm>
#include <limits>
#include <string>

#include "core/backend.h"
#include "core/error.h"

namespace kiln {

namespace {

constexpr std::int64_t kBlasIntMax = std::numeric_limits<int>::max();

// Appends "; <problem>" (fmt arguments) to `problems`.
template <typename... Args>
void note(std::string& problems, fmt::format_string<Args...> format, Args&&... args) {
  if (!problems.empty()) problems += "; ";
  problems += fmt::format(format, std::forward<Args>(args)...);
}

// A leading dimension `ld` of a stored matrix whose rows are `row_length` long.
void check_ld(std::string& problems, const char* name, std::int64_t ld, std::int64_t row_length,
              const char* matrix) {
  const std::int64_t least = std::max<std::int64_t>(1, row_length);
  if (ld < least)
    note(problems, "{} {} is below max(1, {}), the length of {}'s stored rows", name, ld,
         row_length, matrix);
  if (ld > kBlasIntMax) note(problems, "{} {} exceeds the BLAS int's 2^31 - 1", name, ld);
}

}  // namespace

void check_gemm(const GemmArgs& g) {
  std::string problems;
  for (const auto& [name, value] : {std::pair{"m", g.m}, std::pair{"n", g.n}, std::pair{"k", g.k},
                                    std::pair{"batch", g.batch}}) {
    if (value < 0) note(problems, "{} {} is negative", name, value);
    if (value > kBlasIntMax) note(problems, "{} {} exceeds the BLAS int's 2^31 - 1", name, value);
  }
  // Stored A is m x k, or k x m when transposed; B is k x n, or n x k; C is m x n.
  check_ld(problems, "lda", g.lda, g.trans_a ? g.m : g.k, g.trans_a ? "A^T" : "A");
  check_ld(problems, "ldb", g.ldb, g.trans_b ? g.k : g.n, g.trans_b ? "B^T" : "B");
  check_ld(problems, "ldc", g.ldc, g.n, "C");
  if (g.batch > 1) {
    if (g.stride_a < 0 || g.stride_b < 0)
      note(problems, "stride_a {} and stride_b {} must be >= 0", g.stride_a, g.stride_b);
    if (g.m > 0 && g.n > 0 && g.stride_c < (g.m - 1) * g.ldc + g.n)
      note(problems, "stride_c {} overlaps the batch's {} x {} results (ldc {})", g.stride_c, g.m,
           g.n, g.ldc);
  }
  if (g.m > 0 && g.n > 0 && g.batch > 0 &&
      (g.c == nullptr || (g.k > 0 && (g.a == nullptr || g.b == nullptr))))
    note(problems, "a null matrix pointer");
  if (g.bf16_operands ? g.dtype != DType::f32 : (g.dtype != DType::f32 && g.dtype != DType::f64))
    note(problems, "dtype {} with{} bf16 operands", dtype_name(g.dtype),
         g.bf16_operands ? "" : "out");
  if ((g.bias != nullptr || g.bf16_result) && (g.batch != 1 || g.beta != 0.0))
    note(problems,
         "a bias or bf16 result on a batch of {} with beta {} (only on one product, "
         "beta 0)",
         g.batch, g.beta);
  if (g.bf16_result && !g.bf16_operands) note(problems, "a bf16 result without bf16 operands");
  KILN_CHECK(problems.empty(),
             "{}: GEMM arguments BLAS would reject (m {}, n {}, k {}, {}A, {}B, batch {}): {}",
             g.op, g.m, g.n, g.k, g.trans_a ? "transposed " : "", g.trans_b ? "transposed " : "",
             g.batch, problems);
}

void check_attention(const AttentionArgs& a, const AttentionGradArgs* grads) {
  KILN_CHECK(a.d >= 1 && a.d <= kMaxAttentionHeadDim && a.batch >= 0 && a.kv_heads >= 1 &&
                 a.heads >= a.kv_heads && a.heads % a.kv_heads == 0 && a.queries >= 0 &&
                 a.keys >= a.queries,
             "{}: attention kernel sizes out of range: B {}, heads {}, kv_heads {}, queries {}, "
             "keys {}, d {} (d in [1, {}], kv_heads dividing heads, keys >= queries >= 0)",
             a.op, a.batch, a.heads, a.kv_heads, a.queries, a.keys, a.d, kMaxAttentionHeadDim);
  std::string problems;
  const auto check = [&](const char* name, const HeadsArg& h) {
    if (h.batch_stride < 0 || h.head_stride < 0 || h.row_stride < a.d || h.row_stride > kBlasIntMax)
      note(problems, "{} has row stride {} (batch stride {}, head stride {})", name, h.row_stride,
           h.batch_stride, h.head_stride);
  };
  check("q", a.q), check("k", a.k), check("v", a.v), check("out", a.out);
  if (grads != nullptr) {
    check("dout", grads->dout), check("dq", grads->dq), check("dk", grads->dk);
    check("dv", grads->dv);
  }
  KILN_CHECK(problems.empty(),
             "{}: the attention kernels read rows of d {} contiguous elements, each row at least "
             "d from the next (the row stride is their tile products' leading dimension): {}",
             a.op, a.d, problems);
}

}  // namespace kiln
