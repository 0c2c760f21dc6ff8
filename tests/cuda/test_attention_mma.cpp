// The tensor-core attention (core/cuda/attention_mma.cu: bf16 Q, K, V read directly, mma.sync
// with float32 accumulation, FlashAttention-2) against float64 and against the CPU.
//
// The bound, as FlashAttention-2's own tests state it: on the same bf16 operands (Q, K, V and the
// output gradient dY all bf16 values), the largest elementwise error of the tensor-core result
// against float64 attention is at most twice the CPU's:
//   Y (under autocast, rounded to bf16 as the op returns it): against the CPU's fused attention
//     under autocast (float32 inside, Y rounded to bf16 once);
//   dQ, dK, dV: against the CPU's step-by-step attention under autocast (S = Q K^T, A =
//     causal_softmax(S), Y = A V with each product and the softmax rounding to bf16, and each
//     product's backward rounding its incoming gradient to bf16: what PyTorch's autocast
//     computes). The fused CPU path's dV is float32 from start to end, ~1e-6 off (its dQ and dK
//     carry the bf16 rounding of the saved Y through D = rowsum(dY * Y)); a tensor-core backward
//     multiplies bf16 P, dS and dY and cannot be within twice that (docs/attention.md has the
//     figures).
// Cases: causal MHA, GQA and MQA, queries at the end of a KV cache, T not a multiple of the
// 64-row tiles, T = 1, d_head 32, 64, 128, 256 and sizes that are not multiples of 16 (24, 100,
// 200: zero-padded to 16 in shared memory). Then: runs bit-identical to each other and under the
// emulator's `check` thread order; the dropout mask bit-identical to the CPU's; bf16 operands
// outside autocast; the fused projection, RoPE and the KV cache through MultiHeadAttention
// against the CPU; no float32 copies of the operands.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/cuda/caching_allocator.h"
#include "nn/attention.h"
#include "nn/rotary.h"
#include "tests/cuda/cuda_testing.h"

#ifdef KILN_CUDA_EMULATE
#include "cuda_emulator/emulator.h"
#endif

using namespace kiln;
using namespace kiln::testing;

namespace {

struct MmaCase {
  std::int64_t batch, heads, kv, queries, keys, d;
};

// Output and gradients, as float64 on the CPU.
struct MmaResult {
  Tensor out, dq, dk, dv;
};

Tensor host64(const Tensor& t) { return t.to(Device::cpu()).to(DType::f64); }

// Values of float32 tensors that bf16 holds exactly.
Tensor bf16_values(const Tensor& t) { return t.to(DType::bf16).to(DType::f32); }

// causal_attention_heads on leaves with q, k, v's values (float32, or float64 for the reference),
// the output gradient w; under autocast the op reads bf16 operands and returns bf16.
MmaResult fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& w, bool autocast,
                double dropout = 0.0, std::uint64_t seed = 7) {
  const Tensor ql = q.detach().requires_grad_(), kl = k.detach().requires_grad_(),
               vl = v.detach().requires_grad_();
  Generator gen(seed);
  Tensor out;
  {
    Autocast mixed(autocast ? Precision::bf16 : Precision::f32);
    out = causal_attention_heads(ql, kl, vl, dropout, true, &gen);
  }
  out.backward(w.to(compute_dtype(out.dtype())));
  return {host64(out), host64(ql.grad()), host64(kl.grad()), host64(vl.grad())};
}

// The same attention step by step under autocast (docs/attention.md's table): bf16 S, A and Y.
MmaResult composed(const MmaCase& c, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& w) {
  const Tensor ql = q.detach().requires_grad_(), kl = k.detach().requires_grad_(),
               vl = v.detach().requires_grad_();
  const std::int64_t group = c.heads / c.kv;
  Tensor out;
  {
    Autocast mixed(Precision::bf16);
    const Tensor qg = ql.reshape({c.batch, c.kv, group * c.queries, c.d});
    const Tensor s = matmul(qg, kl.transpose(2, 3)) * (1.0 / std::sqrt(static_cast<double>(c.d)));
    const Tensor a =
        causal_softmax(s.view({c.batch, c.kv, group, c.queries, c.keys}), c.keys - c.queries);
    const Tensor y = matmul(a.view({c.batch, c.kv, group * c.queries, c.keys}), vl);
    out = y.view({c.batch, c.heads, c.queries, c.d})
              .permute({0, 2, 1, 3})
              .reshape({c.batch, c.queries, c.heads * c.d});
  }
  out.backward(w.to(compute_dtype(out.dtype())));
  return {host64(out), host64(ql.grad()), host64(kl.grad()), host64(vl.grad())};
}

double max_error(const Tensor& actual, const Tensor& expected) {
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  REQUIRE(a.size() == e.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    worst = std::max(worst, std::abs(a[i] - e[i]));
  }
  return worst;
}

struct MmaOperands {
  Tensor q, k, v, w;  // float32 on the CPU, bf16 values
};

MmaOperands operands(const MmaCase& c, std::uint64_t seed) {
  Generator gen(seed);
  return {bf16_values(uniform({c.batch, c.heads, c.queries, c.d}, -2, 2, {}, &gen)),
          bf16_values(uniform({c.batch, c.kv, c.keys, c.d}, -2, 2, {}, &gen)),
          bf16_values(uniform({c.batch, c.kv, c.keys, c.d}, -2, 2, {}, &gen)),
          bf16_values(uniform({c.batch, c.queries, c.heads * c.d}, -1, 1, {}, &gen))};
}

MmaOperands on_gpu(const MmaOperands& o) {
  const Device cuda = Device::cuda();
  return {o.q.to(cuda), o.k.to(cuda), o.v.to(cuda), o.w.to(cuda)};
}

const MmaCase kMmaCases[] = {
    {2, 4, 4, 70, 70, 64},   // MHA, T past one tile
    {1, 4, 2, 65, 65, 32},   // GQA
    {2, 3, 1, 33, 33, 128},  // MQA
    {1, 2, 1, 1, 1, 64},     // T = 1
    {2, 2, 2, 1, 77, 64},    // one query after a cache of 76
    {1, 4, 2, 20, 150, 24},  // queries at the end of a cache; d_head 24
    {1, 2, 2, 40, 40, 100},  // d_head 100
    {1, 2, 1, 17, 17, 200},  // d_head 200
    {1, 1, 1, 9, 9, 256},    // d_head 256
};

}  // namespace

TEST_CASE(
    "cuda/tensor-core attention is within twice the CPU's error against float64, "
    "forward and backward",
    "[cuda][attention]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  for (const MmaCase& c : kMmaCases) {
    INFO(fmt::format("B {} heads {} kv {} T_q {} T_k {} d {}", c.batch, c.heads, c.kv, c.queries,
                     c.keys, c.d));
    const MmaOperands cpu = operands(c, 100 + c.d), gpu = on_gpu(cpu);
    const MmaResult exact = fused(cpu.q.to(DType::f64), cpu.k.to(DType::f64), cpu.v.to(DType::f64),
                                  cpu.w.to(DType::f64), false);
    const MmaResult tensor_cores = fused(gpu.q, gpu.k, gpu.v, gpu.w, true);
    const MmaResult cpu_fused = fused(cpu.q, cpu.k, cpu.v, cpu.w, true);
    const MmaResult cpu_steps = composed(c, cpu.q, cpu.k, cpu.v, cpu.w);
    const double e_out = max_error(tensor_cores.out, exact.out);
    const double e_out_cpu = max_error(cpu_fused.out, exact.out);
    INFO(fmt::format("Y: tensor cores {:.3g}, CPU fused {:.3g}, CPU steps {:.3g}", e_out, e_out_cpu,
                     max_error(cpu_steps.out, exact.out)));
    CHECK(e_out <= 2 * e_out_cpu);
    for (auto [name, got, fused_cpu, steps, ref] :
         {std::tuple{"dQ", tensor_cores.dq, cpu_fused.dq, cpu_steps.dq, exact.dq},
          std::tuple{"dK", tensor_cores.dk, cpu_fused.dk, cpu_steps.dk, exact.dk},
          std::tuple{"dV", tensor_cores.dv, cpu_fused.dv, cpu_steps.dv, exact.dv}}) {
      const double e = max_error(got, ref), e_steps = max_error(steps, ref);
      INFO(fmt::format("{}: tensor cores {:.3g}, CPU fused {:.3g}, CPU steps {:.3g}", name, e,
                       max_error(fused_cpu, ref), e_steps));
      CHECK(e <= 2 * e_steps);
    }
  }
}

TEST_CASE("cuda/tensor-core attention gives the same bits run after run, in any thread order",
          "[cuda][attention]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  const MmaCase c{1, 4, 2, 70, 75, 64};
  const MmaOperands gpu = on_gpu(operands(c, 5));
  const MmaResult first = fused(gpu.q, gpu.k, gpu.v, gpu.w, true, 0.2);
  const MmaResult second = fused(gpu.q, gpu.k, gpu.v, gpu.w, true, 0.2);
  REQUIRE_EXACT(second.out, first.out);
  REQUIRE_EXACT(second.dq, first.dq);
  REQUIRE_EXACT(second.dk, first.dk);
  REQUIRE_EXACT(second.dv, first.dv);
#ifdef KILN_CUDA_EMULATE
  // Each launch forward, then again in reverse from the same memory: the emulator stops the
  // process if any byte differs (a missing __syncthreads, or a race between a block's threads).
  const emulator::ThreadOrder before = emulator::thread_order();
  emulator::set_thread_order(emulator::ThreadOrder::check);
  const MmaResult checked = fused(gpu.q, gpu.k, gpu.v, gpu.w, true, 0.2);
  emulator::set_thread_order(before);
  REQUIRE_EXACT(checked.out, first.out);
  REQUIRE_EXACT(checked.dq, first.dq);
  REQUIRE_EXACT(checked.dk, first.dk);
  REQUIRE_EXACT(checked.dv, first.dv);
#endif
}

TEST_CASE("cuda/tensor-core attention drops exactly the CPU's probabilities", "[cuda][attention]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  // V = the identity: Y[t][j] = A[t][j] Z[t][j], 0 exactly where (t, j) is dropped (A > 0 on the
  // visible keys). 100 keys over two key tiles, queries at the end of a cache of 10.
  const MmaCase c{2, 2, 1, 90, 100, 128};
  MmaOperands cpu = operands(c, 9);
  cpu.v = zeros({c.batch, c.kv, c.keys, c.d});
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t j = 0; j < c.keys; ++j)
      cpu.v.select(0, b).select(0, 0).select(0, j).select(0, j).fill_(1.0);
  const MmaOperands gpu = on_gpu(cpu);
  for (const double p : {0.1, 0.5}) {
    INFO("p " << p);
    const MmaResult on_cpu = fused(cpu.q, cpu.k, cpu.v, cpu.w, true, p, 21);
    const MmaResult on_cuda = fused(gpu.q, gpu.k, gpu.v, gpu.w, true, p, 21);
    const std::vector<double> y_cpu = on_cpu.out.to_vector<double>();
    const std::vector<double> y_cuda = on_cuda.out.to_vector<double>();
    std::int64_t dropped = 0, kept = 0;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t t = 0; t < c.queries; ++t)
        for (std::int64_t h = 0; h < c.heads; ++h)
          for (std::int64_t j = 0; j <= t + c.keys - c.queries; ++j) {
            const std::size_t at =
                static_cast<std::size_t>(((b * c.queries + t) * c.heads + h) * c.d + j);
            INFO("batch " << b << " query " << t << " head " << h << " key " << j);
            REQUIRE((y_cuda[at] == 0.0) == (y_cpu[at] == 0.0));
            ++(y_cpu[at] == 0.0 ? dropped : kept);
          }
    REQUIRE(dropped > 0);
    REQUIRE(kept > 0);
    // The backward draws the same mask: dV of a dropped (t, j) gets nothing from t.
    REQUIRE(relative_error(on_cuda.dv, on_cpu.dv) <= 2e-2);
    REQUIRE(relative_error(on_cuda.dq, on_cpu.dq) <= 2e-2);
    REQUIRE(relative_error(on_cuda.dk, on_cpu.dk) <= 2e-2);
  }
}

TEST_CASE("cuda/tensor-core attention outside autocast returns float32 from bf16 operands",
          "[cuda][attention]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  const MmaCase c{1, 2, 2, 50, 50, 64};
  const MmaOperands cpu = operands(c, 13), gpu = on_gpu(cpu);
  const Tensor q = gpu.q.to(DType::bf16), k = gpu.k.to(DType::bf16), v = gpu.v.to(DType::bf16);
  const Tensor out = causal_attention_heads(q, k, v);
  REQUIRE(out.dtype() == DType::f32);
  const Tensor expected =
      causal_attention_heads(cpu.q.to(DType::bf16), cpu.k.to(DType::bf16), cpu.v.to(DType::bf16));
  // P rounded to bf16 before P V: a few bf16 ulps of the largest |Y| (< 2).
  REQUIRE(max_error(host64(out), host64(expected)) <= 3e-2);
  REQUIRE(relative_error(host64(out), host64(expected)) <= 1e-2);
}

TEST_CASE(
    "cuda/tensor-core attention over a fused projection, with RoPE and with a KV cache "
    "matches the CPU",
    "[cuda][attention]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  const std::int64_t B = 2, T = 40, d_model = 128, heads = 4, kv = 2;
  Generator gen(31);
  const Tensor x = uniform({B, T, d_model}, -1, 1, {}, &gen);
  const Tensor w = bf16_values(uniform({B, T, d_model}, -1, 1, {}, &gen));
  for (const bool rope : {false, true}) {
    INFO("rope " << rope);
    auto rotary = rope ? std::make_shared<nn::RotaryEmbedding>(d_model / heads, 128) : nullptr;
    nn::MultiHeadAttention m(d_model, heads, kv, 0.0, rotary);
    Tensor out[2], grad[2];
    for (int device = 0; device < 2; ++device) {
      const Device where = device == 0 ? Device::cpu() : Device::cuda();
      m.to(where);
      if (rotary) rotary->to(where);
      const Tensor leaf = x.to(where).detach().requires_grad_();
      {
        Autocast mixed(Precision::bf16);
        out[device] = m.forward(leaf);
      }
      out[device].backward(w.to(where));
      out[device] = host64(out[device]);
      grad[device] = host64(leaf.grad());
    }
    REQUIRE(relative_error(out[1], out[0]) <= 1e-2);
    REQUIRE(relative_error(grad[1], grad[0]) <= 2e-2);

    // Decoding one position at a time over the cache equals the whole sequence at once.
    NoGradGuard no_grad;
    Autocast mixed(Precision::bf16);
    const Tensor xg = x.to(Device::cuda());
    const Tensor whole = host64(m.forward(xg));
    nn::KVCache cache;
    std::vector<Tensor> steps;
    steps.push_back(host64(m.forward(xg.narrow(1, 0, 30), &cache, nullptr, T)));
    for (std::int64_t t = 30; t < T; ++t)
      steps.push_back(host64(m.forward(xg.narrow(1, t, 1), &cache, nullptr, T)));
    const Tensor decoded = cat(steps, 1);
    REQUIRE(relative_error(decoded, whole) <= 1e-2);
  }
}

TEST_CASE("cuda/tensor-core attention reads bf16 Q, K, V without float32 copies",
          "[cuda][attention]") {
  if (!cuda_available_or_skip()) return;
  const MmaCase c{1, 4, 4, 128, 128, 64};
  const MmaOperands gpu = on_gpu(operands(c, 17));
  const Tensor ql = gpu.q.detach().requires_grad_(), kl = gpu.k.detach().requires_grad_(),
               vl = gpu.v.detach().requires_grad_();
  const std::size_t elements = static_cast<std::size_t>(ql.numel());  // of each of Q, K, V, Y
  const std::size_t rows = static_cast<std::size_t>(c.batch * c.heads * c.queries);
  CachingAllocator& allocator = gpu_backend().allocator();
  Tensor out;
  {
    Autocast mixed(Precision::bf16);
    const Tensor q = autocast_operand(ql), k = autocast_operand(kl), v = autocast_operand(vl);
    allocator.reset_peak_bytes_in_use();
    const std::size_t before = allocator.bytes_in_use();
    out = causal_attention_heads(q, k, v);
    // Y (bf16) and L (float32); float32 copies of Q, K and V would add 12 bytes an element.
    const std::size_t made = allocator.peak_bytes_in_use() - before;
    INFO("the forward's peak allocation: " << made << " bytes");
    REQUIRE(made <= 2 * elements + 4 * rows);
  }
  allocator.reset_peak_bytes_in_use();
  const std::size_t before = allocator.bytes_in_use();
  out.backward(gpu.w);
  // dQ, dK, dV in float32 and D: float32 copies of Q, K, V and Y would add 16 bytes an element.
  const std::size_t made = allocator.peak_bytes_in_use() - before;
  INFO("the backward's peak allocation: " << made << " bytes");
  REQUIRE(made <= 3 * 4 * elements + 4 * rows);
}
