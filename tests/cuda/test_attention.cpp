// The tiled attention kernels on CUDA against the CPU backend: output and the gradients of q, k
// and v (and of the fused projection), float32 and float64, head sizes in each of the kernels'
// bounds (32, 64, 128, 256) and between, sequences of one to several tiles, GQA and MQA, queries
// at the end of a KV cache, with and without dropout (both devices draw philox::attention_keep's
// mask). Poisoning is on, so an output element a kernel does not write is NaN and fails. The
// backward is bit-identical run to run (no atomics).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

struct Case {
  std::int64_t batch, heads, kv, queries, keys, d;
  double p;
};

const Case kCases[] = {
    {2, 2, 2, 1, 1, 8, 0.0},       {2, 4, 2, 7, 7, 24, 0.0},     {1, 2, 1, 33, 33, 64, 0.3},
    {1, 4, 4, 130, 130, 100, 0.1}, {2, 2, 1, 70, 200, 128, 0.0}, {1, 2, 2, 1, 300, 256, 0.0},
    {1, 3, 1, 65, 65, 200, 0.2},   {2, 8, 2, 96, 96, 32, 0.0},
};

double attention_tolerance(DType dtype) { return dtype == DType::f32 ? 2e-5 : 1e-12; }

struct Result {
  Tensor out, dq, dk, dv;
};

// Output and gradients of sum(out * w) on the device of the inputs.
Result run(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& w) {
  const Tensor ql = q.detach().requires_grad_(), kl = k.detach().requires_grad_(),
               vl = v.detach().requires_grad_();
  Generator gen(77);
  const Tensor out = causal_attention_heads(ql, kl, vl, c.p, true, &gen);
  out.backward(w);
  return {out.detach(), ql.grad(), kl.grad(), vl.grad()};
}

}  // namespace

TEST_CASE("cuda/tiled attention matches the CPU, forward and backward", "[cuda][attention]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  for (DType dtype : {DType::f32, DType::f64}) {
    for (const Case& c : kCases) {
      INFO(fmt::format("{} B {} heads {} kv {} T_q {} T_k {} d {} p {}", dtype_name(dtype), c.batch,
                       c.heads, c.kv, c.queries, c.keys, c.d, c.p));
      Generator gen(61);
      const Mirrored q = uniform_mirrored({c.batch, c.heads, c.queries, c.d}, gen, -2, 2, dtype);
      const Mirrored k = uniform_mirrored({c.batch, c.kv, c.keys, c.d}, gen, -2, 2, dtype);
      const Mirrored v = uniform_mirrored({c.batch, c.kv, c.keys, c.d}, gen, -2, 2, dtype);
      const Mirrored w = uniform_mirrored({c.batch, c.queries, c.heads * c.d}, gen, -1, 1, dtype);
      const Result cpu = run(c, q.cpu, k.cpu, v.cpu, w.cpu);
      const Result gpu = run(c, q.gpu, k.gpu, v.gpu, w.gpu);
      // Elementwise with an absolute term: at T 1, dQ is rounding noise around 0 on both devices.
      const double tol = attention_tolerance(dtype);
      REQUIRE_NEAR(gpu.out, cpu.out, tol, tol);
      REQUIRE_NEAR(gpu.dq, cpu.dq, tol, tol);
      REQUIRE_NEAR(gpu.dk, cpu.dk, tol, tol);
      REQUIRE_NEAR(gpu.dv, cpu.dv, tol, tol);
      const Result again = run(c, q.gpu, k.gpu, v.gpu, w.gpu);
      REQUIRE_EXACT(again.out, gpu.out);
      REQUIRE_EXACT(again.dq, gpu.dq);
      REQUIRE_EXACT(again.dk, gpu.dk);
      REQUIRE_EXACT(again.dv, gpu.dv);
    }
  }
}

TEST_CASE("cuda/tiled attention over a fused projection matches the CPU", "[cuda][attention]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  const std::int64_t B = 2, T = 150, heads = 4, kv = 2, d = 64;
  Generator gen(62);
  const Mirrored projected = uniform_mirrored({B, T, (heads + 2 * kv) * d}, gen);
  const Mirrored w = uniform_mirrored({B, T, heads * d}, gen, -1, 1);
  Tensor out[2], grad[2];
  for (int device = 0; device < 2; ++device) {
    const Tensor leaf = (device == 0 ? projected.cpu : projected.gpu).detach().requires_grad_();
    Generator dropout_gen(5);
    out[device] = causal_attention(leaf, heads, kv, 0.1, true, &dropout_gen);
    out[device].backward(device == 0 ? w.cpu : w.gpu);
    grad[device] = leaf.grad();
  }
  REQUIRE(relative_error(out[1], out[0]) <= 2e-5);
  REQUIRE(relative_error(grad[1], grad[0]) <= 2e-5);
}
