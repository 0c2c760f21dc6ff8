// GEMM throughput on the GPU (a hidden test case, never run by CTest): scripts/gpu_check.sh runs
// `test_cuda "[bench]"` and reads its "RESULT" lines. Square float32 products at a few sizes (and
// the same with bf16 operands) and one strided batch like attention's, timed over repeated calls
// after a warm-up, in full FP32 (TF32 off, as kiln trains).
#include <catch2/catch.hpp>

#include <chrono>
#include <iostream>

#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// TFLOP/s of `iterations` calls of args (2 m n k batch flops each) after two warm-up calls.
double tflops(const GemmArgs& args, int iterations) {
  CudaBackend& gpu = gpu_backend();
  for (int i = 0; i < 2; ++i) gpu.gemm(args);
  gpu.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) gpu.gemm(args);
  gpu.synchronize();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double flops =
      2.0 * static_cast<double>(args.m * args.n * args.k * args.batch) * iterations;
  return flops / seconds / 1e12;
}

}  // namespace

TEST_CASE("cuda/bench: float32 GEMM throughput", "[.bench]") {
  if (!cuda_available_or_skip()) return;
  Generator gen(71);
  // Square products in float32, and with bf16 operands (float32 C and sums: the tensor cores).
  for (const DType operands : {DType::f32, DType::bf16}) {
    for (std::int64_t size : {1024, 2048, 4096, 8192}) {
      const Tensor a = rand({size, size}, {DType::f32, Device::cuda()}, &gen).to(operands);
      const Tensor b = rand({size, size}, {DType::f32, Device::cuda()}, &gen).to(operands);
      const Tensor c = empty({size, size}, {DType::f32, Device::cuda()});
      GemmArgs args;
      args.bf16_operands = operands == DType::bf16;
      args.m = args.n = args.k = size;
      args.a = a.raw_data();
      args.b = b.raw_data();
      args.c = c.raw_data();
      args.lda = args.ldb = args.ldc = size;
      const double t = tflops(args, size >= 4096 ? 20 : 100);
      std::cout << "RESULT gemm_" << (args.bf16_operands ? "bf16" : "f32") << "_" << size
                << "_tflops " << t << std::endl;
    }
  }
  // Attention's scores: (B h) x (T x d_head) @ (d_head x T), B h = 32 * 8, T = 256, d_head = 64.
  const std::int64_t batch = 256, t = 256, d = 64;
  const Tensor q = rand({batch, t, d}, {DType::f32, Device::cuda()}, &gen);
  const Tensor k = rand({batch, t, d}, {DType::f32, Device::cuda()}, &gen);
  const Tensor s = empty({batch, t, t}, {DType::f32, Device::cuda()});
  GemmArgs args;
  args.trans_b = true;
  args.m = t;
  args.n = t;
  args.k = d;
  args.a = q.raw_data();
  args.lda = d;
  args.b = k.raw_data();
  args.ldb = d;
  args.c = s.raw_data();
  args.ldc = t;
  args.batch = batch;
  args.stride_a = args.stride_b = t * d;
  args.stride_c = t * t;
  std::cout << "RESULT gemm_f32_batched_tflops " << tflops(args, 50) << std::endl;
  std::cout << "RESULT gpu_peak_bytes " << gpu_backend().peak_bytes_in_use() << std::endl;
}
