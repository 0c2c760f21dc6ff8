// bench_ops: speed of the kernels behind kiln's ops, called exactly as the ops call them.
//   peak INSTRUCTION threads GFLOP/s    the arithmetic's ceiling: independent VDPBF16PS (bf16
//                                       products) and float32 FMAs on 512-bit and on 256-bit
//                                       registers, 2 FLOPs per multiply-add; a row whose
//                                       instructions this CPU lacks (cpuid) says so and skips
//   gemm M N K threads SOURCE GFLOP/s   C (M x N) = A (M x K) B (K x N), float32, where SOURCE
//                                       is kiln (the backend's GEMM, as training calls it) and
//                                       each source alone: openblas, blis (when installed),
//                                       packed (kiln's own kernel, where built), eigen -- the
//                                       step's GEMMs against every ceiling; then the bf16
//                                       products as autocast calls them: bf16 (the backend's
//                                       path), bf16-native (the VDPBF16PS kernel, where the
//                                       CPU has it) and bf16-widen (the widening fallback)
//   <kernel> rows cols threads GB/s     bytes read + written per second; memory_read and
//                                       memory_copy first: the memory's own rate in this run
//   attention_tiled|materialized T ...  causal attention forward + backward: time, peak memory
// First it prints the CPU, threads, compiler flags and GEMM source. --quick runs fewer
// repetitions (under 30 s on a 2-core machine); --tiny runs every row once on tiny shapes (a check
// that every kernel runs on this CPU, in seconds; the ISA check runs it under qemu,
// docs/isa-check.md); --cpu-time times by CPU time (a shared machine).
//
// --device cuda times the CUDA backend's kernels instead, each by CUDA events recorded on the
// backend's stream around one call (the median of several; never the host clock, which only sees
// the launches), on gpt2-small's shapes (bench_train --config gpt2-small), or tiny ones with
// --tiny (a check that everything runs; on the emulator the times are its host clock's):
//   gemm M N K f32|bf16 GFLOP/s           cuBLAS through the backend, as training calls it
//   <kernel> rows cols GB/s               the row kernels, bytes read + written per second
//   adam_update_many / sum_squares_many   every gpt2-small parameter in one call, GB/s
//   attention T ... fwd+bwd ms            the fused causal attention op, forward + backward
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <Eigen/Core>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/backend.h"
#include "core/cpu/blas_library.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/cpu_features.h"
#include "core/cpu/packed_gemm.h"
#include "core/cpu/packed_gemm_bf16.h"
#include "core/kiln.h"
#include "core/ops/op_utils.h"
#include "core/profiler.h"

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

// What a run's seconds are: wall-clock time, or with --cpu-time the process's CPU time divided
// by the threads running (on a machine shared with other work, time a thread spends descheduled
// is then not counted; run with OMP_WAIT_POLICY=passive, else spinning threads count too).
struct Timing {
  bool cpu_time = false;
  int threads = 1;
};
Timing timing;

double seconds_now() {
  if (!timing.cpu_time)
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec)) / timing.threads;
}

// Median seconds of `repeats` runs after one warm-up run.
double time_median(int repeats, const std::function<void()>& run) {
  run();
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    const double start = seconds_now();
    run();
    seconds.push_back(seconds_now() - start);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// set_num_threads, and the count the CPU time is divided by.
void use_threads(int threads) {
  set_num_threads(threads);
  timing.threads = threads;
}

struct GemmCase {
  std::int64_t m, n, k;
  bool trans_a, trans_b;  // as the LM's forward and backward call them
  const char* what;
  bool in_quick = true;  // also run with --quick
  // Under autocast B is a float32 weight that the bf16 GEMM rounds as it reads it (linear's
  // forward and input gradient, the LM head's logits and dX); else both operands are bf16.
  bool weight_b = false;
};

// Eigen's own product on the same row-major operands (op(A) read in place, as kiln's fallback).
void eigen_gemm(const GemmCase& c, const float* a, const float* b, float* out, std::int64_t ldc) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Map = Eigen::Map<const RowMajor>;
  const Map A(a, c.trans_a ? c.k : c.m, c.trans_a ? c.m : c.k);
  const Map B(b, c.trans_b ? c.n : c.k, c.trans_b ? c.k : c.n);
  Eigen::Map<RowMajor, 0, Eigen::OuterStride<>> C(out, c.m, c.n, Eigen::OuterStride<>(ldc));
  if (c.trans_a && c.trans_b) C.noalias() = A.transpose() * B.transpose();
  if (c.trans_a && !c.trans_b) C.noalias() = A.transpose() * B;
  if (!c.trans_a && c.trans_b) C.noalias() = A * B.transpose();
  if (!c.trans_a && !c.trans_b) C.noalias() = A * B;
}

void bench_gemm(const GemmCase& c, int threads, int repeats) {
  Generator gen(1);
  const Tensor a = rand({c.trans_a ? c.k : c.m, c.trans_a ? c.m : c.k}, {}, &gen);
  const Tensor b = rand({c.trans_b ? c.n : c.k, c.trans_b ? c.k : c.n}, {}, &gen);
  // C's rows padded as the LM head pads the logits': the products run on the step's layout.
  Tensor out = padded_rows(c.m, c.n, {});
  const std::int64_t ldc = out.strides()[0];
  const auto* pa = static_cast<const float*>(a.raw_data());
  const auto* pb = static_cast<const float*>(b.raw_data());
  auto* pc = static_cast<float*>(out.raw_data());
  GemmArgs args;
  args.m = c.m, args.n = c.n, args.k = c.k;
  args.trans_a = c.trans_a, args.trans_b = c.trans_b;
  args.a = pa, args.lda = a.size(1);
  args.b = pb, args.ldb = b.size(1);
  args.c = pc, args.ldc = ldc;
  use_threads(threads);
  const auto report = [&](const std::string& source, const std::function<void()>& run) {
    const double s = time_median(repeats, run);
    std::printf("gemm %lld %lld %lld %d %-8s %6.1f GFLOP/s   %s\n", static_cast<long long>(c.m),
                static_cast<long long>(c.n), static_cast<long long>(c.k), threads, source.c_str(),
                2.0 * c.m * c.n * c.k / s * 1e-9, c.what);
  };
  report("kiln", [&] { backend_for(Device::cpu()).gemm(args); });
  for (const char* name : {"openblas", "blis"}) {
    const BlasLibrary* blas = blas_library(name);
    if (blas == nullptr) continue;
    blas->set_num_threads(threads);
    constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
    report(name, [&] {
      blas->sgemm(kRowMajor, c.trans_a ? kTrans : kNoTrans, c.trans_b ? kTrans : kNoTrans,
                  static_cast<int>(c.m), static_cast<int>(c.n), static_cast<int>(c.k), 1.0f, pa,
                  static_cast<int>(a.size(1)), pb, static_cast<int>(b.size(1)), 0.0f, pc,
                  static_cast<int>(ldc));
    });
  }
  if (packed_gemm_built()) report("packed", [&] { packed_gemm(args); });
  report("eigen", [&] { eigen_gemm(c, pa, pb, pc, ldc); });
  use_threads(threads);  // back to the GEMM library's own setting
  // bf16 products as autocast calls them: bf16 A, B bf16 or the float32 weight rounded as read.
  const Tensor a16 = a.to(DType::bf16), b16 = b.to(DType::bf16);
  GemmArgs bf16_args = args;
  bf16_args.bf16_operands = true;
  bf16_args.a = a16.raw_data();
  bf16_args.b = c.weight_b ? b.raw_data() : b16.raw_data();
  bf16_args.round_b = c.weight_b;
  report("bf16", [&] { backend_for(Device::cpu()).gemm(bf16_args); });
  if (packed_gemm_bf16_available()) report("bf16-native", [&] { packed_gemm_bf16(bf16_args); });
  report("bf16-widen", [&] { gemm_bf16_widened(bf16_args); });
}

// One core's (and each thread's) peak of an instruction: `threads` threads each run independent
// accumulator chains (more than latency x throughput: 24 on the 32 zmm registers, 12 on the 16
// ymm ones) for a fixed count of instructions, with nothing else in the loop. 2 FLOPs per
// multiply-add: VDPBF16PS (zmm) is 32 bf16 products, 64 FLOPs; VFMADD 16 (zmm) or 8 (ymm), 32 or
// 16 FLOPs. Each is compiled for its own target and run only where cpuid says the CPU has it.
#if defined(__x86_64__)
constexpr int kZmmChains = 24, kYmmChains = 12;

// The sum of every lane of the chains (stored and added in scalars: GCC 12's
// _mm512_reduce_add_ps warns inside its own header, GCC bug 105593).
__attribute__((target("avx512f"))) float lane_sum(const __m512 (&chains)[kZmmChains]) {
  alignas(64) float lanes[16];
  float sum = 0.0f;
  for (const __m512& v : chains) {
    _mm512_store_ps(lanes, v);
    for (const float x : lanes) sum += x;
  }
  return sum;
}

__attribute__((target("avx2,fma"))) float lane_sum(const __m256 (&chains)[kYmmChains]) {
  alignas(32) float lanes[8];
  float sum = 0.0f;
  for (const __m256& v : chains) {
    _mm256_store_ps(lanes, v);
    for (const float x : lanes) sum += x;
  }
  return sum;
}

__attribute__((target("avx512f,avx512bf16"), noinline)) float vdpbf16ps_chains(long steps) {
  __m512 acc[kZmmChains];
  for (__m512& v : acc) v = _mm512_setzero_ps();
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3c003c00);
  for (long i = 0; i < steps; ++i) {
#pragma GCC unroll 24
    for (__m512& v : acc) v = _mm512_dpbf16_ps(v, x, y);
    __asm__ volatile("" : "+v"(x), "+v"(y));  // the operands stay in registers, opaque
  }
  return lane_sum(acc);
}

__attribute__((target("avx512f"), noinline)) float fma_zmm_chains(long steps) {
  __m512 acc[kZmmChains];
  for (__m512& v : acc) v = _mm512_setzero_ps();
  __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(1e-3f);
  for (long i = 0; i < steps; ++i) {
#pragma GCC unroll 24
    for (__m512& v : acc) v = _mm512_fmadd_ps(x, y, v);
    __asm__ volatile("" : "+v"(x), "+v"(y));
  }
  return lane_sum(acc);
}

__attribute__((target("avx2,fma"), noinline)) float fma_ymm_chains(long steps) {
  __m256 acc[kYmmChains];
  for (__m256& v : acc) v = _mm256_setzero_ps();
  __m256 x = _mm256_set1_ps(1.0f), y = _mm256_set1_ps(1e-3f);
  for (long i = 0; i < steps; ++i) {
#pragma GCC unroll 12
    for (__m256& v : acc) v = _mm256_fmadd_ps(x, y, v);
    __asm__ volatile("" : "+x"(x), "+x"(y));
  }
  return lane_sum(acc);
}

struct PeakInstruction {
  const char* name;
  const char* needs;  // the cpuid feature it needs, named in the skip line
  bool (*available)();
  float (*chains)(long steps);
  double flops_per_step;  // per thread: chains x FLOPs per instruction
};

// Where the results go, so that the compiler keeps the chains.
volatile float peak_sink = 0.0f;

// peak INSTRUCTION threads GFLOP/s: the best of 5 runs of about 0.2 s each (--tiny: one short
// run, a check that every row runs or skips).
void bench_peak(int threads, bool tiny) {
  const long steps = tiny ? 20'000 : 20'000'000;
  const PeakInstruction instructions[] = {
      {"vdpbf16ps", "AVX512_BF16", cpu_has_avx512_bf16, vdpbf16ps_chains, kZmmChains * 64.0},
      {"fma_f32_zmm", "AVX512F", cpu_has_avx512f, fma_zmm_chains, kZmmChains * 32.0},
      {"fma_f32_ymm", "AVX2 and FMA", cpu_has_avx2_fma, fma_ymm_chains, kYmmChains * 16.0},
  };
  for (const PeakInstruction& instruction : instructions) {
    if (!instruction.available()) {
      std::printf("peak %s %d skipped: no %s\n", instruction.name, threads, instruction.needs);
      continue;
    }
    double best = 0.0;
    for (int run = 0; run < (tiny ? 1 : 5); ++run) {
      float sink = 0.0f;
      timing.threads = threads;
      const double start = seconds_now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
      sink += instruction.chains(steps);
      const double s = seconds_now() - start;
      best = std::max(best,
                      threads * static_cast<double>(steps) * instruction.flops_per_step / s * 1e-9);
      peak_sink = sink;
    }
    std::printf("peak %-11s %d %6.1f GFLOP/s\n", instruction.name, threads, best);
    std::fflush(stdout);
  }
}
#else
void bench_peak(int threads, bool) { std::printf("peak %d skipped: not an x86-64 CPU\n", threads); }
#endif

void bench_rows(const char* name, std::int64_t rows, std::int64_t cols, double bytes_per_element,
                int threads, int repeats, const std::function<void()>& run) {
  use_threads(threads);
  const double s = time_median(repeats, run);
  std::printf("%s %lld %lld %d %.1f GB/s\n", name, static_cast<long long>(rows),
              static_cast<long long>(cols), threads, bytes_per_element * rows * cols / s * 1e-9);
}

// What the memory gives in the same run, to read the row kernels against: a read of x (summed
// per chunk) and a copy of x to y, in parallel chunks of rows, counted as the kernels count.
void bench_memory(const Tensor& x, const Tensor& y, int threads, int repeats) {
  const std::int64_t rows = x.size(0), cols = x.size(1);
  const float* source = x.data<float>();
  float* target = y.data<float>();
  std::vector<float> chunk_sums(rows);
  bench_rows("memory_read", rows, cols, 4, threads, repeats, [&] {
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      float lanes[16] = {};
      const float* row = source + r * cols;
      for (std::int64_t j = 0; j + 16 <= cols; j += 16)
#pragma omp simd
        for (int k = 0; k < 16; ++k) lanes[k] += row[j + k];
      chunk_sums[r] = std::accumulate(lanes, lanes + 16, 0.0f);
    }
  });
  bench_rows("memory_copy", rows, cols, 8, threads, repeats, [&] {
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy(source + r * cols, source + (r + 1) * cols, target + r * cols);
  });
}

void bench_row_kernels(std::int64_t rows, std::int64_t cols, int threads, int repeats) {
  Backend& cpu = backend_for(Device::cpu());
  Generator gen(2);
  const Tensor x = uniform({rows, cols}, -3, 3, {}, &gen);
  const Tensor dy = uniform({rows, cols}, -1, 1, {}, &gen);
  Tensor y = empty({rows, cols}), dx = empty({rows, cols});
  bench_memory(x, y, threads, repeats);
  SoftmaxArgs sm;
  sm.rows = rows, sm.cols = cols;
  bench_rows("softmax_forward", rows, cols, 8, threads, repeats,
             [&] { cpu.softmax_forward(sm, x.raw_data(), y.raw_data()); });
  bench_rows("softmax_backward", rows, cols, 12, threads, repeats,
             [&] { cpu.softmax_backward(sm, y.raw_data(), dy.raw_data(), dx.raw_data()); });
  SoftmaxArgs log_sm = sm;
  log_sm.log = true;
  bench_rows("log_softmax_forward", rows, cols, 8, threads, repeats,
             [&] { cpu.softmax_forward(log_sm, x.raw_data(), y.raw_data()); });
  bench_rows("log_softmax_backward", rows, cols, 12, threads, repeats,
             [&] { cpu.softmax_backward(log_sm, y.raw_data(), dy.raw_data(), dx.raw_data()); });
  const Tensor gamma = ones({cols}), beta = zeros({cols});
  Tensor mean = empty({rows}), rstd = empty({rows}), dgamma = empty({cols}), dbeta = empty({cols});
  const LayerNormArgs ln{.dtype = DType::f32, .rows = rows, .cols = cols, .eps = 1e-5};
  bench_rows("layer_norm_forward", rows, cols, 8, threads, repeats, [&] {
    cpu.layer_norm_forward(ln, x.raw_data(), gamma.raw_data(), beta.raw_data(), y.raw_data(),
                           mean.raw_data(), rstd.raw_data());
  });
  bench_rows("layer_norm_backward", rows, cols, 12, threads, repeats, [&] {
    cpu.layer_norm_backward(ln, x.raw_data(), gamma.raw_data(), mean.raw_data(), rstd.raw_data(),
                            dy.raw_data(), dx.raw_data(), dgamma.raw_data(), dbeta.raw_data());
  });
  std::vector<std::int64_t> ids(rows);
  for (std::int64_t i = 0; i < rows; ++i) ids[i] = (i * 7919) % cols;
  Tensor loss = empty({rows}), lse = empty({rows, 2});  // per row: max, log-sum
  const Tensor one = ones({});
  const CrossEntropyArgs ce{
      .dtype = DType::f32, .rows = rows, .cols = cols, .ignore_index = -100, .scale = 1.0 / rows};
  bench_rows("cross_entropy_forward", rows, cols, 4, threads, repeats, [&] {
    cpu.cross_entropy_forward(ce, x.raw_data(), ids.data(), loss.raw_data(), lse.raw_data());
  });
  bench_rows("cross_entropy_backward", rows, cols, 8, threads, repeats, [&] {
    cpu.cross_entropy_backward(ce, x.raw_data(), ids.data(), lse.raw_data(), one.raw_data(),
                               dx.raw_data());
  });
}

// Causal attention forward + backward, (B, T, 3 h d_head) float32 projections, as training
// runs it: the tiled op (memory O(T)) against the materializing one (O(T^2): the scores and
// probabilities, (B, h, T, T) each, and their gradient). Prints the median and the minimum of
// the runs (the machine may be shared), and the peak of the CPU backend's tensor bytes during one
// run beyond the input's. bench/sdpa_torch.py prints PyTorch's on the same shapes.
void bench_attention(std::int64_t T, int threads, int repeats) {
  constexpr std::int64_t B = 4, heads = 8, d = 64;
  Generator gen(3);
  const Tensor projected = uniform({B, T, 3 * heads * d}, -1, 1, {}, &gen).requires_grad_();
  const Tensor grad = uniform({B, T, heads * d}, -1, 1, {}, &gen);
  use_threads(threads);
  for (bool materialize : {false, true}) {
    const auto run = [&] {
      Tensor probabilities;
      causal_attention(projected, heads, heads, 0.0, true, nullptr,
                       materialize ? &probabilities : nullptr)
          .backward(grad);
      projected.set_grad(Tensor());
    };
    std::vector<double> seconds;
    run();  // warm-up
    for (int r = 0; r < repeats; ++r) {
      const double start = seconds_now();
      run();
      seconds.push_back(seconds_now() - start);
    }
    std::sort(seconds.begin(), seconds.end());
    CpuBackend& cpu = cpu_backend();
    cpu.reset_peak_bytes_in_use();
    const std::size_t before = cpu.bytes_in_use();
    run();
    const double peak_mb = static_cast<double>(cpu.peak_bytes_in_use() - before) / (1 << 20);
    std::printf(
        "attention_%s T %lld B %lld heads %lld d %lld threads %d fwd+bwd median %.1f ms min "
        "%.1f ms peak %.1f MB\n",
        materialize ? "materialized" : "tiled", static_cast<long long>(T),
        static_cast<long long>(B), static_cast<long long>(heads), static_cast<long long>(d),
        threads, 1e3 * seconds[seconds.size() / 2], 1e3 * seconds.front(), peak_mb);
    std::fflush(stdout);
  }
}

// ---- CUDA (--device cuda)

// Median seconds of one call of `run` on the device, by CUDA events around each call (the
// backend's device clock, core/profiler.h), after one warm-up call.
double device_median(profile::DeviceClock& clock, int repeats, const std::function<void()>& run) {
  run();
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    clock.restart();
    run();
    clock.mark(profile::Family::other);
    seconds.push_back(clock.totals()[static_cast<std::size_t>(profile::Family::other)]);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

struct CudaShapes {
  std::int64_t tokens, d_model, ff, vocab, layers, heads, batch, seq_len;
};

void bench_cuda(Device device, const CudaShapes& s, int repeats) {
  Backend& backend = backend_for(device);
  const std::unique_ptr<profile::DeviceClock> clock = backend.device_clock();
  KILN_CHECK(clock != nullptr, "--device {}: its backend has no device clock", device);
  Generator gen(4);
  const TensorOptions f32{DType::f32, device};
  const auto gb_per_s = [](double bytes, double seconds) { return bytes / seconds * 1e-9; };

  // The step's GEMMs (forward shapes; the backward's are their transposes), float32 and bf16.
  struct Product {
    std::int64_t m, n, k;
    const char* what;
  };
  const std::vector<Product> products = {{s.tokens, 3 * s.d_model, s.d_model, "QKV projection"},
                                         {s.tokens, s.ff, s.d_model, "FFN up"},
                                         {s.tokens, s.d_model, s.ff, "FFN down"},
                                         {s.tokens, s.vocab, s.d_model, "logits"}};
  for (const Product& p : products) {
    const Tensor a = uniform({p.m, p.k}, -1, 1, f32, &gen),
                 b = uniform({p.n, p.k}, -1, 1, f32, &gen);
    const Tensor a16 = a.to(DType::bf16), b16 = b.to(DType::bf16);
    const Tensor c = empty({p.m, p.n}, f32);
    for (bool bf16 : {false, true}) {
      GemmArgs args;
      args.m = p.m, args.n = p.n, args.k = p.k, args.trans_b = true;
      args.bf16_operands = bf16;
      args.a = bf16 ? a16.raw_data() : a.raw_data(), args.lda = p.k;
      args.b = bf16 ? b16.raw_data() : b.raw_data(), args.ldb = p.k;
      args.c = c.raw_data(), args.ldc = p.n;
      const double sec = device_median(*clock, repeats, [&] { backend.gemm(args); });
      std::printf("gemm %lld %lld %lld %-4s %8.1f GFLOP/s   %s\n", static_cast<long long>(p.m),
                  static_cast<long long>(p.n), static_cast<long long>(p.k), bf16 ? "bf16" : "f32",
                  2.0 * p.m * p.n * p.k / sec * 1e-9, p.what);
      std::fflush(stdout);
    }
  }

  // Row kernels on float32 rows: the vocabulary's (softmax, cross-entropy) and the model's (layer
  // norm), bytes counted as bench_ops counts them on the CPU.
  const auto rows_line = [&](const char* name, std::int64_t rows, std::int64_t cols,
                             double bytes_per_element, const std::function<void()>& run) {
    const double sec = device_median(*clock, repeats, run);
    std::printf("%s %lld %lld %.2f GB/s\n", name, static_cast<long long>(rows),
                static_cast<long long>(cols), gb_per_s(bytes_per_element * rows * cols, sec));
    std::fflush(stdout);
  };
  {
    const std::int64_t rows = s.tokens, cols = s.vocab;
    const Tensor x = uniform({rows, cols}, -3, 3, f32, &gen),
                 dy = uniform({rows, cols}, -1, 1, f32, &gen);
    Tensor y = empty({rows, cols}, f32), dx = empty({rows, cols}, f32);
    SoftmaxArgs sm;
    sm.rows = rows, sm.cols = cols;
    rows_line("softmax_forward", rows, cols, 8,
              [&] { backend.softmax_forward(sm, x.raw_data(), y.raw_data()); });
    rows_line("softmax_backward", rows, cols, 12,
              [&] { backend.softmax_backward(sm, y.raw_data(), dy.raw_data(), dx.raw_data()); });
    std::vector<std::int64_t> ids(rows);
    for (std::int64_t i = 0; i < rows; ++i) ids[i] = (i * 7919) % cols;
    const Tensor targets = from_vector(ids, {rows}, device);
    Tensor loss = empty({rows}, f32), stats = empty({rows, 2}, f32);
    const Tensor one = ones({}, f32);
    const CrossEntropyArgs ce{
        .dtype = DType::f32, .rows = rows, .cols = cols, .ignore_index = -100, .scale = 1.0 / rows};
    const auto* target_ids = static_cast<const std::int64_t*>(targets.raw_data());
    rows_line("cross_entropy_forward", rows, cols, 4, [&] {
      backend.cross_entropy_forward(ce, x.raw_data(), target_ids, loss.raw_data(),
                                    stats.raw_data());
    });
    rows_line("cross_entropy_backward", rows, cols, 8, [&] {
      backend.cross_entropy_backward(ce, x.raw_data(), target_ids, stats.raw_data(), one.raw_data(),
                                     dx.raw_data());
    });
  }
  {
    const std::int64_t rows = s.tokens, cols = s.d_model;
    const Tensor x = uniform({rows, cols}, -3, 3, f32, &gen),
                 dy = uniform({rows, cols}, -1, 1, f32, &gen);
    Tensor y = empty({rows, cols}, f32), dx = empty({rows, cols}, f32);
    const Tensor gamma = ones({cols}, f32), beta = zeros({cols}, f32);
    Tensor mean = empty({rows}, f32), rstd = empty({rows}, f32);
    Tensor dgamma = empty({cols}, f32), dbeta = empty({cols}, f32);
    const LayerNormArgs ln{.dtype = DType::f32, .rows = rows, .cols = cols, .eps = 1e-5};
    rows_line("layer_norm_forward", rows, cols, 8, [&] {
      backend.layer_norm_forward(ln, x.raw_data(), gamma.raw_data(), beta.raw_data(), y.raw_data(),
                                 mean.raw_data(), rstd.raw_data());
    });
    rows_line("layer_norm_backward", rows, cols, 12, [&] {
      backend.layer_norm_backward(ln, x.raw_data(), gamma.raw_data(), mean.raw_data(),
                                  rstd.raw_data(), dy.raw_data(), dx.raw_data(), dgamma.raw_data(),
                                  dbeta.raw_data());
    });
  }

  // The optimizer over the model's parameter shapes: per layer QKV, out, FFN up and down weights
  // and biases and two layer norms, then the embedding (tied head) and the final norm.
  {
    std::vector<std::int64_t> sizes;
    for (std::int64_t l = 0; l < s.layers; ++l)
      for (std::int64_t n : {3 * s.d_model * s.d_model, 3 * s.d_model, s.d_model * s.d_model,
                             s.d_model, s.ff * s.d_model, s.ff, s.d_model * s.ff, s.d_model,
                             s.d_model, s.d_model, s.d_model, s.d_model})
        sizes.push_back(n);
    for (std::int64_t n : {s.vocab * s.d_model, s.d_model, s.d_model}) sizes.push_back(n);
    std::vector<Tensor> params, grads, m, v;
    std::vector<AdamTensor> adam;
    std::vector<SquaresInput> squares;
    std::int64_t total = 0;
    for (std::int64_t n : sizes) {
      params.push_back(uniform({n}, -1, 1, f32, &gen));
      grads.push_back(uniform({n}, -1, 1, f32, &gen));
      m.push_back(zeros({n}, f32));
      v.push_back(zeros({n}, f32));
      AdamArgs args;
      args.weight_decay = 0.1, args.decoupled_weight_decay = true;
      adam.push_back({.n = n,
                      .param = params.back().raw_data(),
                      .grad = grads.back().raw_data(),
                      .exp_avg = m.back().raw_data(),
                      .exp_avg_sq = v.back().raw_data(),
                      .args = args});
      squares.push_back({.n = n, .data = grads.back().raw_data()});
      total += n;
    }
    const Tensor sums = empty({static_cast<std::int64_t>(sizes.size())}, f32);
    const double adam_sec =
        device_median(*clock, repeats, [&] { backend.adam_update_many(DType::f32, adam); });
    std::printf("adam_update_many %zu tensors %lld elements %.2f GB/s\n", sizes.size(),
                static_cast<long long>(total), gb_per_s(7.0 * 4 * total, adam_sec));
    const double squares_sec = device_median(
        *clock, repeats, [&] { backend.sum_squares_many(DType::f32, squares, sums.raw_data()); });
    std::printf("sum_squares_many %zu tensors %lld elements %.2f GB/s\n", sizes.size(),
                static_cast<long long>(total), gb_per_s(4.0 * total, squares_sec));
    std::fflush(stdout);
  }

  // Causal attention forward + backward on a fused QKV projection (B, T, 3 d), float32 and bf16
  // (autocast).
  {
    const std::int64_t d = s.d_model, heads = s.heads;
    const Tensor projected32 = uniform({s.batch, s.seq_len, 3 * d}, -1, 1, f32, &gen);
    const Tensor grad32 = uniform({s.batch, s.seq_len, d}, -1, 1, f32, &gen);
    const Tensor projected = projected32.detach().requires_grad_();
    for (DType dtype : {DType::f32, DType::bf16}) {
      const double sec = device_median(*clock, repeats, [&] {
        // bf16: as training runs it, the float32 projection under autocast.
        const Autocast mixed(dtype == DType::bf16 ? Precision::bf16 : Precision::f32);
        const Tensor out = causal_attention(projected, heads, heads, 0.0, true);
        out.backward(grad32);  // a bf16 activation's gradient is float32 (core/autocast.h)
        projected.set_grad(Tensor());
      });
      // FlashAttention's count: forward 4 B h T^2 d_head (QK^T and AV), the backward 2.5 times
      // that, halved by the causal mask.
      const double flops = 7.0 * s.batch * heads * s.seq_len * s.seq_len * (d / heads);
      std::printf(
          "attention %s B %lld T %lld heads %lld d_head %lld fwd+bwd %.3f ms %.1f GFLOP/s\n",
          dtype_name(dtype).data(), static_cast<long long>(s.batch),
          static_cast<long long>(s.seq_len), static_cast<long long>(heads),
          static_cast<long long>(d / heads), 1e3 * sec, flops / sec * 1e-9);
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_ops: GFLOP/s of GEMM and GB/s of the fused row kernels"};
  bool quick = false;
  std::vector<int> thread_counts{1, 2};
  app.add_flag("--quick", quick, "fewer repetitions and shapes (under 30 s)");
  app.add_option("--threads", thread_counts, "thread counts to run (default: 1 2)");
  std::vector<std::int64_t> attention_lengths{256, 1024, 4096};
  app.add_option("--attention-seq-lens", attention_lengths,
                 "T of the attention rows (default: 256 1024 4096; --quick: 256 1024)");
  bool attention_only = false, rows_only = false, gemm_only = false, peak_only = false;
  app.add_flag("--peak-only", peak_only, "only the instructions' peaks (VDPBF16PS, FMA)");
  app.add_flag("--cpu-time", timing.cpu_time,
               "time by the process's CPU time per thread, not the wall clock (a shared machine; "
               "set OMP_WAIT_POLICY=passive)");
  std::string shapes;
  app.add_option("--shapes", shapes, "only the GEMM shapes whose description contains this text");
  app.add_flag("--attention-only", attention_only, "only the attention rows");
  app.add_flag("--gemm-only", gemm_only, "only the GEMM rows");
  app.add_flag("--rows-only", rows_only, "only the row kernels");
  std::string device_name = "cpu";
  app.add_option("--device", device_name,
                 "cpu, or cuda (cuda:N): the CUDA kernels on gpt2-small's shapes, timed by CUDA "
                 "events")
      ->capture_default_str();
  bool tiny = false;
  app.add_flag("--tiny", tiny,
               "tiny shapes, each row once: a check that everything runs (seconds), on the CPU "
               "or with --device cuda");
  CLI11_PARSE(app, argc, argv);
  if (quick && app.count("--attention-seq-lens") == 0) attention_lengths = {256, 1024};
  try {
    std::printf("%s\n", environment_summary().c_str());
    const int repeats = tiny ? 1 : quick ? 3 : 7;
    const Device device = Device::parse(device_name);
    if (device.is_cuda()) {
      std::printf("device %s: %s\n", device.str().c_str(), cuda_device_name(device.index).c_str());
      const CudaShapes shapes = tiny ? CudaShapes{.tokens = 64,
                                                  .d_model = 32,
                                                  .ff = 64,
                                                  .vocab = 97,
                                                  .layers = 2,
                                                  .heads = 2,
                                                  .batch = 2,
                                                  .seq_len = 32}
                                     : CudaShapes{.tokens = 8192,
                                                  .d_model = 768,
                                                  .ff = 3072,
                                                  .vocab = 50257,
                                                  .layers = 12,
                                                  .heads = 12,
                                                  .batch = 8,
                                                  .seq_len = 1024};
      bench_cuda(device, shapes, repeats);
      return 0;
    }
    // The square sizes, then the default model's training GEMMs as bench_train --profile lists
    // them (the same m n k and transposes), to compare the step's GEMMs with the BLAS alone.
    // --tiny: small shapes in each layout the step uses, bf16 B read as a weight or not.
    const std::vector<GemmCase> tiny_gemms = {
        {64, 80, 48, false, false, "tiny"},
        {64, 80, 48, true, false, "tiny, A transposed"},
        {64, 80, 48, false, true, "tiny, B transposed (a weight)", true, true},
    };
    const std::vector<GemmCase> full_gemms = {
        {1024, 1024, 1024, false, false, "square"},
        {2048, 2048, 2048, false, false, "square", false},
        {2048, 33278, 256, false, true, "logits = h E^T (LM forward)", true, true},
        {33278, 256, 2048, true, false, "dE = dlogits^T h (LM backward)"},
        {2048, 256, 33278, false, false, "dh = dlogits E (LM backward)", true, true},
        {2048, 1024, 256, false, true, "FFN up, forward", true, true},
        {1024, 256, 2048, true, false, "FFN up, weight gradient"},
        {2048, 256, 1024, false, false, "FFN up, input gradient", true, true},
        {2048, 768, 256, false, true, "QKV projection, forward", true, true},
        // The large-cpu config's (d_model 512, ff 2048, B 16 x T 128): its most expensive ones.
        {2048, 33278, 512, false, true, "logits (large-cpu)", false, true},
        {33278, 512, 2048, true, false, "dE (large-cpu)", false},
        {2048, 512, 33278, false, false, "dh (large-cpu)", false, true},
        {2048, 2048, 512, false, true, "FFN up, forward (large-cpu)", false, true},
        {512, 2048, 2048, true, false, "FFN down, weight gradient (large-cpu)", false},
        {2048, 512, 2048, false, false, "FFN up, input gradient (large-cpu)", false, true},
        {2048, 1536, 512, false, true, "QKV projection, forward (large-cpu)", false, true},
        {1536, 512, 2048, true, false, "QKV projection, weight gradient (large-cpu)", false},
    };
    const std::vector<GemmCase>& gemms = tiny ? tiny_gemms : full_gemms;
    if (tiny && app.count("--attention-seq-lens") == 0) attention_lengths = {32};
    for (int threads :
         attention_only || rows_only || gemm_only ? std::vector<int>{} : thread_counts)
      bench_peak(threads, tiny);
    if (peak_only) return 0;
    for (int threads : attention_only || rows_only ? std::vector<int>{} : thread_counts)
      for (const GemmCase& g : gemms)
        if ((g.in_quick || !quick || !shapes.empty()) &&
            std::string(g.what).find(shapes) != std::string::npos)
          bench_gemm(g, threads, repeats);
    for (int threads : attention_only || gemm_only ? std::vector<int>{} : thread_counts) {
      if (tiny) {
        bench_row_kernels(64, 1000, threads, repeats);
        continue;
      }
      bench_row_kernels(2048, 33278, threads, repeats);
      bench_row_kernels(2048, 256, threads, quick ? 20 : 50);
    }
    for (int threads : rows_only || gemm_only ? std::vector<int>{} : thread_counts)
      for (std::int64_t T : attention_lengths)
        bench_attention(T, threads, T >= 4096 || quick || tiny ? 1 : 3);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_ops: %s\n", e.what());
    return 1;
  }
  return 0;
}
