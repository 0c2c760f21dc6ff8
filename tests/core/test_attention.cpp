// The tiled attention kernels (causal_attention, causal_attention_heads) against attention
// composed from core ops — matmul, causal_softmax, dropout — in value and in gradient: float64 to
// 1e-10 relative, float32 to kF32Rtol / kF32Atol; with and without dropout (the same Philox mask),
// MHA, GQA and MQA, at sizes that are and are not multiples of a tile, queries at the end of a
// longer key sequence (the KV cache); causality; memory linear in T.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/kiln.h"
#include "core/philox.h"
#include "tests/harness/gradcheck.h"
#include "tests/harness/near.h"
#include "tests/harness/op_table.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Float32 against the composed float32 path: both round their products and sums differently
// (tiles, a running max and sum, float32 row statistics), by a few ulps of the largest terms:
// at most 1.3e-6 apart on values up to 5 in these cases (inputs in [-2, 2)).
constexpr double kF32Rtol = 1e-4;
constexpr double kF32Atol = 3e-6;

struct Config {
  std::int64_t batch, heads, kv, queries, keys, d;
  double p;
};

std::string describe(const Config& c) {
  return fmt::format("B {} heads {} kv {} T_q {} T_k {} d {} p {}", c.batch, c.heads, c.kv,
                     c.queries, c.keys, c.d, c.p);
}

// Attention from core ops: query heads grouped by kv head, S = Q K^T / sqrt(d), the causal
// softmax with the queries at the end of the keys, dropout from `gen`, Y = A V, heads
// concatenated -> (B, T_q, h d).
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, double p, Generator* gen) {
  const std::int64_t B = q.size(0), h = q.size(1), Tq = q.size(2), d = q.size(3);
  const std::int64_t kv = k.size(1), Tk = k.size(2), group = h / kv;
  const Tensor qg = q.reshape({B, kv, group * Tq, d});
  const Tensor s = matmul(qg, k.transpose(2, 3)) * (1.0 / std::sqrt(static_cast<double>(d)));
  Tensor a = causal_softmax(s.view({B, kv, group, Tq, Tk}), Tk - Tq);
  a = dropout(a, p, p > 0, gen);
  const Tensor y = matmul(a.view({B, kv, group * Tq, Tk}), v);
  return y.view({B, h, Tq, d}).permute({0, 2, 1, 3}).reshape({B, Tq, h * d});
}

// Q, K, V heads of a fused projection (B, T, (h + 2 kv) d) as (B, heads, T, d) views.
Tensor heads_of(const Tensor& projected, std::int64_t first, std::int64_t count, std::int64_t d) {
  const std::int64_t B = projected.size(0), T = projected.size(1);
  return projected.narrow(2, first * d, count * d).view({B, T, count, d}).permute({0, 2, 1, 3});
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// fused == composed in value and in the gradients of sum(out * w), within rtol / atol.
void require_same(const Fn& fused, const Fn& reference, const std::vector<Tensor>& inputs,
                  double rtol, double atol) {
  std::vector<Tensor> a, b;
  for (const Tensor& t : inputs) {
    a.push_back(t.detach().clone().requires_grad_());
    b.push_back(t.detach().clone().requires_grad_());
  }
  const Tensor out_fused = fused(a), out_reference = reference(b);
  REQUIRE_NEAR(out_fused, out_reference, rtol, atol);
  Generator gen(3);
  const Tensor w = uniform(out_fused.shape(), -1.0, 1.0, {out_fused.dtype()}, &gen);
  out_fused.backward(w);
  out_reference.backward(w);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("gradient of input " << i);
    REQUIRE_NEAR(a[i].grad(), b[i].grad(), rtol, atol);
  }
}

const Config kSquare[] = {
    {2, 2, 2, 1, 1, 8, 0.0},      {2, 4, 2, 7, 7, 24, 0.0},    {1, 2, 1, 33, 33, 8, 0.3},
    {1, 4, 4, 130, 130, 24, 0.1}, {1, 2, 1, 130, 130, 8, 0.0}, {2, 4, 1, 200, 200, 64, 0.2},
    {1, 2, 2, 300, 300, 16, 0.0},
};
const Config kCache[] = {
    {2, 4, 2, 5, 150, 16, 0.0},
    {1, 2, 2, 1, 300, 24, 0.0},
    {2, 2, 1, 70, 333, 8, 0.25},
    {1, 3, 3, 129, 129, 8, 0.0},
};

}  // namespace

TEST_CASE("tiled causal_attention equals the composed attention, with and without dropout",
          "[attention]") {
  for (const Config& c : kSquare) {
    for (DType dtype : {DType::f64, DType::f32}) {
      INFO(describe(c) << " " << dtype_name(dtype));
      Generator gen(21);
      const Tensor projected = u({c.batch, c.queries, (c.heads + 2 * c.kv) * c.d}, dtype, gen);
      const double rtol = dtype == DType::f64 ? 1e-10 : kF32Rtol;
      const double atol = dtype == DType::f64 ? 1e-13 : kF32Atol;
      require_same(
          [&](const auto& in) {
            Generator dropout_gen(99);
            return causal_attention(in[0], c.heads, c.kv, c.p, true, &dropout_gen);
          },
          [&](const auto& in) {
            Generator dropout_gen(99);
            return composed(heads_of(in[0], 0, c.heads, c.d), heads_of(in[0], c.heads, c.kv, c.d),
                            heads_of(in[0], c.heads + c.kv, c.kv, c.d), c.p, &dropout_gen);
          },
          {projected}, rtol, atol);
    }
  }
}

TEST_CASE("causal_attention_heads equals the composed attention, queries at the end of the keys",
          "[attention]") {
  for (const Config& c : kCache) {
    for (DType dtype : {DType::f64, DType::f32}) {
      INFO(describe(c) << " " << dtype_name(dtype));
      Generator gen(22);
      const Tensor q = u({c.batch, c.heads, c.queries, c.d}, dtype, gen);
      const Tensor k = u({c.batch, c.kv, c.keys, c.d}, dtype, gen);
      const Tensor v = u({c.batch, c.kv, c.keys, c.d}, dtype, gen);
      const double rtol = dtype == DType::f64 ? 1e-10 : kF32Rtol;
      const double atol = dtype == DType::f64 ? 1e-13 : kF32Atol;
      const auto run = [&](bool tiled) {
        return [&, tiled](const std::vector<Tensor>& in) {
          Generator dropout_gen(98);
          return tiled ? causal_attention_heads(in[0], in[1], in[2], c.p, true, &dropout_gen)
                       : composed(in[0], in[1], in[2], c.p, &dropout_gen);
        };
      };
      require_same(run(true), run(false), {q, k, v}, rtol, atol);
    }
  }
}

TEST_CASE("the attention dropout mask is philox::attention_keep, the mask dropout() draws",
          "[attention]") {
  const std::int64_t n = 4 * 3 * 37 * 41;  // (B, h, T_q, T_k) = (4, 3, 37, 41)
  const double p = 0.3;
  Tensor mask = empty({n});
  backend_for(Device::cpu()).dropout_mask(DType::f32, mask.raw_data(), n, p, 5, 17);
  const std::vector<float> values = mask.to_vector<float>();
  const std::uint32_t threshold = philox::dropout_threshold(p);
  std::int64_t kept = 0;
  for (std::int64_t bh = 0; bh < 12; ++bh)
    for (std::int64_t t = 0; t < 37; ++t)
      for (std::int64_t j = 0; j < 41; ++j) {
        const std::uint64_t index = philox::attention_dropout_index(bh, t, j, 37, 41);
        const bool keep = philox::attention_keep(5, 17, index, threshold);
        REQUIRE(keep == (values[index] != 0.0f));
        kept += keep;
      }
  REQUIRE(near(static_cast<double>(kept) / n, 1.0 - p, 0.0, 0.02));
}

TEST_CASE("tiled attention ignores future positions, in values and in gradients", "[attention]") {
  // 150 positions: two query tiles and two key tiles; position 100 lies inside both second ones.
  const std::int64_t T = 150, cut = 100, heads = 2, kv = 1, d = 8;
  Generator gen(23);
  const Tensor projected = u({2, T, (heads + 2 * kv) * d}, DType::f32, gen);
  Tensor changed = projected.clone();
  {
    NoGradGuard no_grad;
    changed.narrow(1, cut + 1, T - cut - 1).fill_(7.0);
  }
  const Tensor a = causal_attention(projected, heads, kv).narrow(1, 0, cut + 1).contiguous();
  const Tensor b = causal_attention(changed, heads, kv).narrow(1, 0, cut + 1).contiguous();
  REQUIRE_EXACT(a, b);
  const Tensor leaf = projected.detach().requires_grad_();
  causal_attention(leaf, heads, kv, 0.2, true).narrow(1, 0, cut + 1).sum().backward();
  const Tensor future = leaf.grad().narrow(1, cut + 1, T - cut - 1).contiguous();
  REQUIRE_EXACT(future, zeros(future.shape()));
  const Tensor past = leaf.grad().narrow(1, 0, cut + 1).contiguous();
  REQUIRE(sum(past * past).item<double>() > 0.0);
}

TEST_CASE("attention memory grows linearly with the context", "[attention]") {
  // Forward and backward at T and 4T: the tiled op's peak grows 4x (its buffers are O(T d)); the
  // materializing one's grows ~16x with its (B, h, T, T) scores, probabilities and gradient.
  CpuBackend& cpu = cpu_backend();
  const auto peak_bytes = [&](std::int64_t T, bool materialize) {
    Generator gen(24);
    const Tensor projected = u({1, T, 4 * 16}, DType::f32, gen).requires_grad_();
    cpu.reset_peak_bytes_in_use();
    const std::size_t before = cpu.bytes_in_use();
    Tensor probabilities;
    causal_attention(projected, 2, 1, 0.0, false, nullptr, materialize ? &probabilities : nullptr)
        .sum()
        .backward();
    return static_cast<double>(cpu.peak_bytes_in_use() - before);
  };
  const double tiled_small = peak_bytes(256, false), tiled_large = peak_bytes(1024, false);
  const double materialized_large = peak_bytes(1024, true);
  INFO("tiled peak " << tiled_small << " -> " << tiled_large << " bytes, materialized "
                     << materialized_large);
  REQUIRE(tiled_large <= 4.5 * tiled_small);
  const double projection_bytes = 1024.0 * 4 * 16 * sizeof(float);
  REQUIRE(tiled_large <= 6 * projection_bytes);
  REQUIRE(materialized_large >= 2.0 * 1024 * 1024 * sizeof(float));  // at least A itself
}
