// Every op that reaches a GEMM — matmul, linear, causal_attention (tiled and materialized),
// causal_attention_heads, linear_cross_entropy — given its operands as expanded, transposed,
// stepped, narrowed and size-1 views gives the values and gradients it gives on contiguous
// copies of them, in float64, float32 and bf16: no layout reaches BLAS with a leading dimension
// it rejects (OpenBLAS prints "On entry to SGEMM parameter number 8 had an illegal value" and
// skips the product). Internal callers that pass such arguments get a kiln::Error naming them.
#include <catch2/catch.hpp>
#include <functional>

#include "core/backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/tile_gemm.h"
#include "core/kiln.h"
#include "tests/harness/near.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

using Inputs = std::vector<Tensor>;
using Op = std::function<Tensor(const Inputs&)>;

// A floating input laid out one way: a fresh base of base_shape and the view of it the op reads.
struct Layout {
  std::string name;
  Shape base_shape;
  std::function<Tensor(const Tensor&)> view;
};

// The layouts of an operand of `shape`: contiguous; each dim expanded from size 1 (row stride 0
// when it is a matrix's rows); each dim stepped (slice with step 2) and narrowed; each pair of
// dims transposed (a size-1 dim then has a stride below its row's length).
std::vector<Layout> layouts_of(const Shape& shape) {
  const auto n = static_cast<std::int64_t>(shape.size());
  std::vector<Layout> layouts{{"contiguous", shape, [](const Tensor& t) { return t; }}};
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t size = shape[i];
    if (size > 1) {
      Shape base = shape;
      base[i] = 1;
      layouts.push_back({fmt::format("expanded along dim {}", i), base,
                         [shape](const Tensor& t) { return t.expand(shape); }});
    }
    Shape stepped = shape;
    stepped[i] = 2 * size + 1;
    layouts.push_back({fmt::format("stepped along dim {}", i), stepped,
                       [i, size](const Tensor& t) { return t.slice(i, 1, 1 + 2 * size, 2); }});
    Shape wider = shape;
    wider[i] = size + 3;
    layouts.push_back({fmt::format("narrowed along dim {}", i), wider,
                       [i, size](const Tensor& t) { return t.narrow(i, 2, size); }});
    for (std::int64_t j = i + 1; j < n; ++j) {
      Shape swapped = shape;
      std::swap(swapped[i], swapped[j]);
      layouts.push_back({fmt::format("transposed dims {} and {}", i, j), swapped,
                         [i, j](const Tensor& t) { return t.transpose(i, j); }});
    }
  }
  return layouts;
}

// Values of a base in `dtype` (bf16 rounded from float32 draws).
Tensor base_values(const Shape& shape, DType dtype, Generator& gen) {
  const DType drawn = dtype == DType::bf16 ? DType::f32 : dtype;
  return uniform(shape, -2.0, 2.0, {drawn}, &gen).to(dtype);
}

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance_of(DType dtype) {
  // The same values through another GEMM path (a copy, a transposed read, another library
  // kernel) differ by the rounding of their sums only.
  if (dtype == DType::f64) return {1e-12, 1e-12};
  return {2e-5, 2e-6};  // float32, and bf16 operands (float32 products and results)
}

// op(inputs with input `which` laid out as `layout`) == op(the same values, contiguous), in value
// and in the gradients of sum(out * w) with respect to every float32 and float64 input's base.
void require_layout_independent(const std::string& op_name, const Op& op, const Inputs& contiguous,
                                std::size_t which, const Layout& layout, Generator& gen) {
  INFO(fmt::format("{}: input {} {} (base {}, {})", op_name, which, layout.name, layout.base_shape,
                   dtype_name(contiguous[which].dtype())));
  const Tensor base = base_values(layout.base_shape, contiguous[which].dtype(), gen);
  std::vector<Tensor> strided_leaves, copied_leaves;
  Inputs strided, copied;
  for (std::size_t i = 0; i < contiguous.size(); ++i) {
    const Tensor& source = i == which ? base : contiguous[i];
    // bf16 tensors cannot require grad: their layouts are checked in value.
    const bool differentiable = source.dtype() == DType::f32 || source.dtype() == DType::f64;
    const Tensor a = source.detach().clone(), b = source.detach().clone();
    if (differentiable) {
      a.requires_grad_();
      b.requires_grad_();
    }
    strided_leaves.push_back(a);
    copied_leaves.push_back(b);
    // The op reads the view itself, or a dense copy of the same values.
    strided.push_back(i == which ? layout.view(a) : a);
    copied.push_back(i == which ? layout.view(b).clone() : b);
  }
  const Tensor out_strided = op(strided), out_copied = op(copied);
  const Tolerance tol = tolerance_of(contiguous[which].dtype());
  REQUIRE_NEAR(out_strided, out_copied, tol.rtol, tol.atol);
  if (!out_copied.requires_grad()) return;
  const Tensor w = uniform(out_copied.shape(), -1.0, 1.0, {out_copied.dtype()}, &gen);
  out_strided.backward(w);
  out_copied.backward(w);
  for (std::size_t i = 0; i < contiguous.size(); ++i) {
    if (!copied_leaves[i].requires_grad()) continue;
    INFO("gradient of input " << i);
    REQUIRE_NEAR(strided_leaves[i].grad(), copied_leaves[i].grad(), tol.rtol, tol.atol);
  }
}

// Every floating input of `inputs` in every layout of its shape.
void require_every_layout(const std::string& op_name, const Op& op,
                          const std::function<Inputs(DType, Generator&)>& make,
                          std::initializer_list<DType> dtypes) {
  for (DType dtype : dtypes) {
    Generator gen(43);
    const Inputs inputs = make(dtype, gen);
    for (std::size_t which = 0; which < inputs.size(); ++which) {
      if (inputs[which].dtype() == DType::i64) continue;
      for (const Layout& layout : layouts_of(inputs[which].shape()))
        require_layout_independent(op_name, op, inputs, which, layout, gen);
    }
  }
}

Tensor values(const Shape& shape, DType dtype, Generator& gen) {
  return base_values(shape, dtype, gen);
}

Tensor ids(const std::vector<std::int64_t>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())});
}

}  // namespace

TEST_CASE("causal_attention_heads reads v expanded along the sequence (issue 43's case)",
          "[gemm_layouts][attention]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(dtype_name(dtype));
    const Tensor q = zeros({1, 1, 2, 2}, {dtype});
    const Tensor k = from_vector<double>({1, 0, 0, 1}, {1, 1, 2, 2}).to(dtype);
    const Tensor v = from_vector<double>({1, 2}, {1, 1, 1, 2}).to(dtype).expand({1, 1, 2, 2});
    // Every row of V is [1, 2], so every output row is [1, 2] whatever the weights.
    const Tensor y = causal_attention_heads(q, k, v);
    REQUIRE_EXACT(y, from_vector<double>({1, 2, 1, 2}, {1, 2, 2}).to(dtype));
  }
}

TEST_CASE("causal_attention_heads differentiates q expanded along the sequence",
          "[gemm_layouts][attention]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(dtype_name(dtype));
    Generator gen(5);
    const Tensor q_row = values({1, 1, 1, 2}, dtype, gen);
    const Tensor k = values({1, 1, 2, 2}, dtype, gen), v = values({1, 1, 2, 2}, dtype, gen);
    const auto dk_of = [&](bool expanded) {
      const Tensor kk = k.clone().requires_grad_();
      const Tensor q = expanded ? q_row.expand({1, 1, 2, 2}) : q_row.expand({1, 1, 2, 2}).clone();
      causal_attention_heads(q, kk, v).sum().backward();
      return kk.grad();
    };
    REQUIRE_NEAR(dk_of(true), dk_of(false), 1e-6, 1e-7);
  }
}

TEST_CASE("causal_attention_heads takes a size-1 sequence dim with a stride below d_head",
          "[gemm_layouts][attention]") {
  // (B, heads, d, 1) transposed: the one query row has stride 1 < d = 4 (a decoding step).
  Generator gen(6);
  const Tensor q = values({1, 2, 4, 1}, DType::f32, gen).transpose(2, 3);
  REQUIRE(q.strides()[2] == 1);
  const Tensor k = values({1, 2, 3, 4}, DType::f32, gen), v = values({1, 2, 3, 4}, DType::f32, gen);
  REQUIRE_NEAR(causal_attention_heads(q, k, v), causal_attention_heads(q.contiguous(), k, v), 0, 0);
}

TEST_CASE("matmul gives the same values and gradients for every operand layout", "[gemm_layouts]") {
  const Op op = [](const Inputs& x) { return matmul(x[0], x[1]); };
  const auto pair = [](Shape a, Shape b) {
    return [=](DType d, Generator& g) { return Inputs{values(a, d, g), values(b, d, g)}; };
  };
  for (const auto& make : {pair({3, 4}, {4, 5}), pair({1, 4}, {4, 1}), pair({3, 1}, {1, 2}),
                           pair({2, 3, 4}, {2, 4, 2}), pair({2, 1, 3}, {3, 2}),
                           pair({2, 1, 2, 3}, {1, 3, 3, 2}), pair({4}, {4, 3}), pair({3, 4}, {4})})
    require_every_layout("matmul", op, make, {DType::f64, DType::f32, DType::bf16});
}

TEST_CASE("linear gives the same values and gradients for every operand layout", "[gemm_layouts]") {
  const Op with_bias = [](const Inputs& x) { return linear(x[0], x[1], x[2]); };
  const Op without_bias = [](const Inputs& x) { return linear(x[0], x[1]); };
  for (const Shape& x_shape : {Shape{5, 4}, Shape{1, 4}, Shape{5, 1}}) {
    const std::int64_t in = x_shape[1];
    require_every_layout(
        "linear", with_bias,
        [&](DType d, Generator& g) {
          return Inputs{values(x_shape, d, g), values({3, in}, d, g), values({3}, DType::f64, g)};
        },
        {DType::f64});
    require_every_layout("linear", without_bias,
                         [&](DType d, Generator& g) {
                           return Inputs{values(x_shape, d, g), values({1, in}, d, g)};
                         },
                         {DType::f64, DType::f32, DType::bf16});
  }
}

TEST_CASE("linear_cross_entropy gives the same values and gradients for every operand layout",
          "[gemm_layouts]") {
  const Op op = [](const Inputs& x) { return linear_cross_entropy(x[0], x[1], x[2]); };
  for (const auto& [rows, d] : {std::pair<std::int64_t, std::int64_t>{4, 3}, {1, 3}, {4, 1}})
    require_every_layout("linear_cross_entropy", op,
                         [rows = rows, d = d](DType dt, Generator& g) {
                           std::vector<std::int64_t> t;
                           for (std::int64_t r = 0; r < rows; ++r) t.push_back((3 * r + 1) % 5);
                           return Inputs{values({rows, d}, dt, g), values({5, d}, dt, g), ids(t)};
                         },
                         {DType::f64, DType::f32, DType::bf16});
}

TEST_CASE("causal_attention_heads gives the same values and gradients for every operand layout",
          "[gemm_layouts][attention]") {
  const Op op = [](const Inputs& x) { return causal_attention_heads(x[0], x[1], x[2]); };
  struct Sizes {
    std::int64_t batch, heads, kv, queries, keys, d;
  };
  for (const Sizes& s : {Sizes{2, 2, 1, 3, 4, 4}, Sizes{1, 2, 2, 1, 3, 4}, Sizes{2, 1, 1, 2, 2, 2},
                         Sizes{1, 2, 1, 1, 1, 1}})
    require_every_layout("causal_attention_heads", op,
                         [s](DType d, Generator& g) {
                           return Inputs{values({s.batch, s.heads, s.queries, s.d}, d, g),
                                         values({s.batch, s.kv, s.keys, s.d}, d, g),
                                         values({s.batch, s.kv, s.keys, s.d}, d, g)};
                         },
                         {DType::f64, DType::f32, DType::bf16});
}

TEST_CASE("causal_attention gives the same values and gradients for every operand layout",
          "[gemm_layouts][attention]") {
  // The tiled kernels, and the materializing path (asked for the probabilities).
  const Op tiled = [](const Inputs& x) { return causal_attention(x[0], 2, 1); };
  const Op materialized = [](const Inputs& x) {
    Tensor probabilities;
    return causal_attention(x[0], 2, 1, 0.0, false, nullptr, &probabilities);
  };
  for (const Shape& shape : {Shape{2, 3, 8}, Shape{1, 1, 4}, Shape{2, 1, 8}}) {
    const auto make = [shape](DType d, Generator& g) { return Inputs{values(shape, d, g)}; };
    require_every_layout("causal_attention", tiled, make, {DType::f64, DType::f32, DType::bf16});
    require_every_layout("causal_attention (materialized)", materialized, make,
                         {DType::f64, DType::f32});
  }
}

TEST_CASE("GEMM ops on empty operands give their closed forms", "[gemm_layouts]") {
  for (DType dtype : {DType::f64, DType::f32, DType::bf16}) {
    INFO(dtype_name(dtype));
    const DType out = dtype == DType::bf16 ? DType::f32 : dtype;
    // k = 0: the empty sum.
    const bool differentiable = dtype != DType::bf16;
    const Tensor a = zeros({3, 0}, {dtype}).requires_grad_(differentiable);
    const Tensor y = matmul(a, zeros({0, 2}, {dtype}));
    REQUIRE_EXACT(y, zeros({3, 2}, {out}));
    if (differentiable) {
      y.sum().backward();
      REQUIRE(a.grad().shape() == Shape{3, 0});
    }
    REQUIRE(matmul(zeros({0, 3}, {dtype}), ones({3, 2}, {dtype})).shape() == Shape{0, 2});
    REQUIRE_EXACT(linear(zeros({2, 0}, {dtype}), zeros({3, 0}, {dtype}), ones({3}, {out})),
                  ones({2, 3}, {out}));
    // d = 0: every logit is 0, the loss log V.
    const Tensor x = zeros({2, 0}, {dtype}).requires_grad_(differentiable);
    const Tensor w = zeros({5, 0}, {dtype}).requires_grad_(differentiable);
    const Tensor loss = linear_cross_entropy(x, w, ids({1, 4}));
    REQUIRE(near(loss.item<double>(), std::log(5.0), 1e-6, 0));
    if (differentiable) {
      loss.backward();
      REQUIRE(x.grad().shape() == Shape{2, 0});
      REQUIRE(w.grad().shape() == Shape{5, 0});
    }
  }
  // No positions: the materializing attention has no scores.
  Tensor probabilities;
  const Tensor projected = zeros({1, 0, 8}).requires_grad_();
  const Tensor y = causal_attention(projected, 2, 1, 0.0, false, nullptr, &probabilities);
  REQUIRE(y.shape() == Shape{1, 0, 4});
  REQUIRE(probabilities.shape() == Shape{1, 2, 0, 0});
}

TEST_CASE("a GEMM whose leading dimensions BLAS would reject is a kiln::Error naming them",
          "[gemm_layouts]") {
  std::vector<float> a(8, 1.0f), b(8, 1.0f), c(4, 0.0f);
  GemmArgs g;
  g.op = "test caller";
  g.m = 2, g.n = 2, g.k = 4;
  g.a = a.data(), g.lda = 4;
  g.b = b.data(), g.ldb = 2;
  g.c = c.data(), g.ldc = 2;
  REQUIRE_NOTHROW(check_gemm(g));
  REQUIRE_NOTHROW(cpu_backend().gemm(g));
  REQUIRE(c[0] == 4.0f);
  const auto require_rejected = [](const GemmArgs& bad, const std::string& what) {
    INFO(what);
    REQUIRE_THROWS_WITH(cpu_backend().gemm(bad),
                        Catch::Contains("test caller") && Catch::Contains(what));
  };
  GemmArgs bad = g;
  bad.lda = 1;  // the parameter number 8: lda below k
  require_rejected(bad, "lda 1");
  bad = g, bad.trans_a = true;  // A^T stored k x m: lda must be at least m = 2: 4 is fine
  REQUIRE_NOTHROW(check_gemm(bad));
  bad.lda = 1;
  require_rejected(bad, "lda 1");
  bad = g, bad.ldb = 0;
  require_rejected(bad, "ldb 0");
  bad = g, bad.ldc = 1;
  require_rejected(bad, "ldc 1");
  bad = g, bad.k = -1;
  require_rejected(bad, "k -1");
  bad = g, bad.batch = 2, bad.stride_c = 1;  // the two results would overlap
  require_rejected(bad, "stride_c 1");
  bad = g, bad.m = 0, bad.ldc = 0;  // empty, but BLAS still asks ldc >= 1
  require_rejected(bad, "ldc 0");
  // The attention kernels' tile products go through the same check.
  REQUIRE_THROWS_WITH(
      tile_gemm<float>(false, false, 2, 2, 4, 1.0f, a.data(), 1, b.data(), 2, 0.0f, c.data(), 2),
      Catch::Contains("lda 1"));
}

TEST_CASE("attention kernels reject heads whose rows are shorter than d_head",
          "[gemm_layouts][attention]") {
  std::vector<float> q(8, 0.0f), out(8), logsumexp(2);
  AttentionArgs a;
  a.batch = 1, a.heads = 1, a.kv_heads = 1, a.queries = 2, a.keys = 2, a.d = 4, a.scale = 0.5;
  a.q = {q.data(), 8, 8, 4}, a.k = {q.data(), 8, 8, 4}, a.v = {q.data(), 8, 8, 0};
  a.out = {out.data(), 8, 8, 4};
  a.logsumexp = logsumexp.data();
  REQUIRE_THROWS_WITH(cpu_backend().attention_forward(a), Catch::Contains("attention") &&
                                                              Catch::Contains("v") &&
                                                              Catch::Contains("row stride 0"));
}
