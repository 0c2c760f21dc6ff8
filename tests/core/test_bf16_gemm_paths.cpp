// The two paths of a bf16 GEMM on the CPU (core/cpu/blas_library.h, bf16_gemm): kiln's native
// VDPBF16PS kernel (core/cpu/packed_gemm_bf16.h) and the widening fallback, each alone, against
// a float64 product of the bf16-rounded operands: every transpose, tiles cut by the edges of C, k
// in one block and in several, alpha and beta, leading dimensions wider than the rows (the rows of
// the float32 packed kernel's test), operands stored as bf16 or as float32 rounded as they are
// read. Both paths give the same bits run after run at 1, 2 and 3 threads, and the native kernel
// the same bits across those counts. A path this CPU cannot run prints "skipped: no AVX512_BF16".
#include <catch2/catch.hpp>

#include <immintrin.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "core/backend.h"
#include "core/bf16.h"
#include "core/cpu/blas_library.h"
#include "core/cpu/packed_gemm_bf16.h"
#include "core/kiln.h"
#include "tests/core/gemm_operands.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

enum class Path { native, widened };

const char* name_of(Path path) { return path == Path::native ? "native" : "widened"; }

// Runs the product on one path; false (after printing the skip) when this CPU cannot.
bool run_on(Path path, const GemmArgs& g) {
  if (path == Path::native) {
    if (!packed_gemm_bf16_available()) return false;
    packed_gemm_bf16(g);
  } else {
    gemm_bf16_widened(g);
  }
  return true;
}

bool skip(Path path) {
  if (path == Path::widened || packed_gemm_bf16_available()) return false;
  std::puts("skipped: no AVX512_BF16 (VDPBF16PS) on this CPU for the native bf16 kernel");
  return true;
}

struct Bf16Operands : GemmOperands {
  std::vector<bf16> a16, b16;
};

std::vector<bf16> rounded(const std::vector<float>& x) {
  std::vector<bf16> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = to_bf16(x[i]);
  return out;
}

Bf16Operands bf16_operands(const GemmProduct& p, std::int64_t pad, std::uint64_t seed) {
  Bf16Operands o{gemm_operands(p, pad, seed)};
  o.a16 = rounded(o.a), o.b16 = rounded(o.b);
  return o;
}

// The product's arguments, A and B read as bf16 or as float32 rounded by the GEMM.
GemmArgs args_of(const GemmProduct& p, const Bf16Operands& o, std::vector<float>& c, bool round_a,
                 bool round_b) {
  GemmArgs g;
  g.bf16_operands = true;
  g.round_a = round_a, g.round_b = round_b;
  g.m = p.m, g.n = p.n, g.k = p.k;
  g.trans_a = p.trans_a, g.trans_b = p.trans_b;
  g.a = round_a ? static_cast<const void*>(o.a.data()) : o.a16.data(), g.lda = o.lda;
  g.b = round_b ? static_cast<const void*>(o.b.data()) : o.b16.data(), g.ldb = o.ldb;
  g.c = c.data(), g.ldc = o.ldc;
  g.alpha = p.alpha, g.beta = p.beta;
  return g;
}

void check_against_float64(Path path, const GemmProduct& p, std::int64_t pad, bool round_a,
                           bool round_b) {
  INFO(name_of(path) << ": m " << p.m << " n " << p.n << " k " << p.k << " trans_a " << p.trans_a
                     << " trans_b " << p.trans_b << " alpha " << p.alpha << " beta " << p.beta
                     << " pad " << pad << " round_a " << round_a << " round_b " << round_b);
  const Bf16Operands o =
      bf16_operands(p, pad, static_cast<std::uint64_t>(p.m * 131 + p.n * 7 + p.k));
  std::vector<float> got = o.c;
  REQUIRE(run_on(path, args_of(p, o, got, round_a, round_b)));
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      double sum = 0, magnitude = 0;
      for (std::int64_t q = 0; q < p.k; ++q) {
        const double x = to_float(o.a16[p.trans_a ? q * o.lda + i : i * o.lda + q]);
        const double y = to_float(o.b16[p.trans_b ? j * o.ldb + q : q * o.ldb + j]);
        sum += x * y;
        magnitude += std::abs(x * y);
      }
      const double c0 = p.beta == 0.0f ? 0.0 : o.c[i * o.ldc + j];
      const double want = p.alpha * sum + p.beta * c0;
      // Each bf16 product is exact in float32; the k sums, alpha and beta C round at most k + 2
      // times by 2^-24 of the magnitudes summed so far.
      const double tolerance = (static_cast<double>(p.k) + 3) * std::ldexp(1.0, -24) *
                                   (std::abs(p.alpha) * magnitude + std::abs(p.beta * c0)) +
                               1e-30;
      INFO("C[" << i << "][" << j << "] = " << got[i * o.ldc + j] << ", float64 " << want);
      REQUIRE(std::abs(got[i * o.ldc + j] - want) <= tolerance);
    }
  // The padding after each row of C is left as it was.
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = p.n; j < o.ldc; ++j) {
      const float before = o.c[i * o.ldc + j], after = got[i * o.ldc + j];
      REQUIRE((after == before || (std::isnan(after) && std::isnan(before))));
    }
}

}  // namespace

TEST_CASE("bf16 GEMM paths match a float64 product of the rounded operands", "[gemm][bf16]") {
  for (const Path path : {Path::native, Path::widened}) {
    if (skip(path)) continue;
    // Tiles cut by the bottom and right edges (12 rows, 32 columns a tile), k odd and even, in
    // one block (<= 1024) and in two or three, row and column blocks (240 rows, 512 columns),
    // products tall (n <= 1024) and wide (n > 1024: its own schedule).
    const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
        {1, 1, 1},     {5, 7, 3},     {6, 16, 8},      {12, 32, 17},   {13, 37, 9},
        {25, 70, 513}, {7, 33, 1030}, {9, 40, 2100},   {250, 600, 24}, {61, 1100, 40},
        {12, 32, 64},  {500, 45, 33}, {30, 1500, 1100}};
    for (const auto& [m, n, k] : shapes)
      for (const bool trans_a : {false, true})
        for (const bool trans_b : {false, true})
          check_against_float64(path, {m, n, k, trans_a, trans_b, 1.0f, 0.0f}, 0, false, false);
    // alpha and beta, rows longer than the matrices, and float32 operands rounded as read.
    for (const auto& [alpha, beta] :
         {std::pair{0.5f, 0.0f}, std::pair{1.0f, 1.0f}, std::pair{-2.0f, -0.75f}})
      for (const bool trans_a : {false, true})
        for (const bool trans_b : {false, true}) {
          check_against_float64(path, {29, 45, 21, trans_a, trans_b, alpha, beta}, 3, true, false);
          check_against_float64(path, {13, 40, 600, trans_a, trans_b, alpha, beta}, 5, false, true);
          check_against_float64(path, {37, 70, 96, trans_a, trans_b, alpha, beta}, 1, true, true);
        }
  }
}

TEST_CASE("bf16 GEMM paths read a float32 operand as its bf16 rounding, bit for bit",
          "[gemm][bf16]") {
  // round_a / round_b give exactly the product of the operands rounded beforehand (the same
  // values packed or widened), NaN and subnormals included in the rounding.
  for (const Path path : {Path::native, Path::widened}) {
    if (skip(path)) continue;
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true}) {
        INFO(name_of(path) << " trans_a " << trans_a << " trans_b " << trans_b);
        const GemmProduct p{45, 70, 67, trans_a, trans_b, 1.0f, 0.0f};
        Bf16Operands o = bf16_operands(p, 2, 5);
        o.a[3] = 1.5e-39f;  // a float32 subnormal, rounded to a bf16 subnormal
        o.b[7] = 1.00390625f + std::ldexp(1.0f, -9);  // a tie between two bf16 values
        o.a16 = rounded(o.a), o.b16 = rounded(o.b);
        std::vector<float> from_bf16 = o.c, from_float32 = o.c;
        REQUIRE(run_on(path, args_of(p, o, from_bf16, false, false)));
        REQUIRE(run_on(path, args_of(p, o, from_float32, true, true)));
        // Bits, NaN padding included.
        REQUIRE(std::memcmp(from_bf16.data(), from_float32.data(), from_bf16.size() * 4) == 0);
      }
  }
}

namespace {

// One VDPBF16PS on one pair: c + a_odd b_odd + a_even b_even, rounded as this CPU's instruction
// rounds (Intel's SDM: the odd product added first, each sum rounded; a vendor may differ, so the
// test asks the instruction rather than a model of it).
__attribute__((target("avx512f,avx512bf16"))) float dot_pair(float c, bf16 a_even, bf16 a_odd,
                                                             bf16 b_even, bf16 b_odd) {
  const __m512i a = _mm512_set1_epi32(static_cast<int>(a_even.bits | (a_odd.bits << 16)));
  const __m512i b = _mm512_set1_epi32(static_cast<int>(b_even.bits | (b_odd.bits << 16)));
  return _mm512_cvtss_f32(_mm512_dpbf16_ps(_mm512_set1_ps(c), reinterpret_cast<const __m512bh&>(a),
                                           reinterpret_cast<const __m512bh&>(b)));
}

}  // namespace

TEST_CASE("the native bf16 kernel sums like VDPBF16PS, one pair after another in k order",
          "[gemm][bf16]") {
  if (skip(Path::native)) return;
  // One block of k: every element of C is the chain c = 0; for each pair p in order:
  // c = VDPBF16PS(c, a_{2p}, a_{2p+1}, b_{2p}, b_{2p+1}), an odd k padded with 0. That pins the
  // kernel's order down to the last bit, with the pair's rounding the instruction's own.
  const GemmProduct p{30, 50, 99, false, true, 1.0f, 0.0f};
  const Bf16Operands o = bf16_operands(p, 0, 17);
  std::vector<float> got = o.c;
  packed_gemm_bf16(args_of(p, o, got, false, false));
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      auto a = [&](std::int64_t q) { return q < p.k ? o.a16[i * o.lda + q] : bf16{}; };
      auto b = [&](std::int64_t q) { return q < p.k ? o.b16[j * o.ldb + q] : bf16{}; };
      float c = 0.0f;
      for (std::int64_t q = 0; q < p.k; q += 2) c = dot_pair(c, a(q), a(q + 1), b(q), b(q + 1));
      INFO("C[" << i << "][" << j << "]");
      REQUIRE(got[i * o.ldc + j] == c);
    }
}

TEST_CASE("the widening path is the float32 GEMM of the widened operands, bit for bit",
          "[gemm][bf16]") {
  for (const bool trans_a : {false, true})
    for (const bool trans_b : {false, true}) {
      INFO("trans_a " << trans_a << " trans_b " << trans_b);
      const GemmProduct p{300, 4200, 96, trans_a, trans_b, 1.0f, 0.0f};
      const Bf16Operands o = bf16_operands(p, 0, 13);
      std::vector<float> widened = o.c;
      gemm_bf16_widened(args_of(p, o, widened, false, trans_b));
      // The same product through the backend's float32 GEMM, on the operands' float32 values.
      std::vector<float> a(o.a16.size()), b(o.b16.size()), c = o.c;
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = to_float(o.a16[i]);
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = to_float(o.b16[i]);
      GemmArgs g = args_of(p, o, c, false, false);
      g.bf16_operands = false, g.a = a.data(), g.b = b.data();
      backend_for(Device::cpu()).gemm(g);
      REQUIRE(std::memcmp(widened.data(), c.data(), c.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("bf16 GEMM paths give the same bits run after run at 1, 2 and 3 threads",
          "[gemm][bf16][determinism]") {
  // Wide enough for several column tasks per thread, and tall with several row tasks per thread
  // (the native kernel's two schedules), k in two blocks.
  for (const GemmProduct& p : {GemmProduct{250, 5000, 1500, false, true, 1.0f, 0.0f},
                               GemmProduct{2000, 300, 1100, true, false, 1.0f, 0.0f}}) {
    const Bf16Operands o = bf16_operands(p, 0, 11);
    for (const Path path : {Path::native, Path::widened}) {
      if (skip(path)) continue;
      auto run = [&] {
        std::vector<float> c = o.c;
        REQUIRE(run_on(path, args_of(p, o, c, false, true)));
        return c;
      };
      set_num_threads(3);
      const std::vector<float> three = run();
      for (const int threads : {1, 2, 3}) {
        INFO(name_of(path) << ", n " << p.n << ", " << threads << " threads");
        set_num_threads(threads);
        const std::vector<float> first = run();
        REQUIRE(run() == first);
        // kiln's own kernel: the same bits whatever the thread count.
        if (path == Path::native) REQUIRE(first == three);
      }
    }
  }
  set_num_threads(2);
}

TEST_CASE("the native bf16 kernel runs a batch of small products one per thread, as alone",
          "[gemm][bf16]") {
  if (skip(Path::native)) return;
  // 7 products of 20 x 24 x 38 (op(B) repeated: stride 0), against each product alone (19 pairs
  // of k: each thread's panels start at a size that is no multiple of a cache line).
  const GemmProduct p{20, 24, 38, true, false, 1.0f, 0.0f};
  const Bf16Operands one = bf16_operands(p, 0, 23);
  Generator gen(29);
  const std::int64_t batch = 7, size_a = p.k * p.m;
  const std::vector<bf16> a =
      rounded(uniform({batch * size_a}, -1, 1, {}, &gen).to_vector<float>());
  std::vector<float> c(static_cast<std::size_t>(batch * p.m * p.n));
  GemmArgs g = args_of(p, one, c, false, false);
  g.a = a.data(), g.batch = batch, g.stride_a = size_a, g.stride_b = 0, g.stride_c = p.m * p.n;
  packed_gemm_bf16(g);
  for (std::int64_t i = 0; i < batch; ++i) {
    std::vector<float> alone(static_cast<std::size_t>(p.m * p.n));
    GemmArgs single = args_of(p, one, alone, false, false);
    single.a = a.data() + i * size_a;
    packed_gemm_bf16(single);
    INFO("product " << i);
    REQUIRE(std::equal(alone.begin(), alone.end(), c.begin() + i * p.m * p.n));
  }
}

TEST_CASE("the backend's bf16 GEMM takes the path bf16_gemm names, and the banner says which",
          "[gemm][bf16]") {
  INFO("environment: " << environment_summary());
  const std::string source = cpu_gemm_source();
  const char* forced = std::getenv("KILN_GEMM");
  const std::string value = forced != nullptr ? forced : "";
  if (value.empty() || value == "bf16")
    CHECK((bf16_gemm() == Bf16Gemm::native) == packed_gemm_bf16_available());
  if (value == "widen") CHECK(bf16_gemm() == Bf16Gemm::widened);
  if (bf16_gemm() == Bf16Gemm::native) {
    CHECK(source.find("bf16 native (AVX512_BF16 12x32)") != std::string::npos);
  } else {
    CHECK(source.find("bf16 widened to float32") != std::string::npos);
  }
  // The backend's GEMM gives the chosen path's bits.
  const GemmProduct p{40, 300, 72, false, true, 1.0f, 0.0f};
  const Bf16Operands o = bf16_operands(p, 0, 31);
  std::vector<float> backend = o.c, alone = o.c;
  backend_for(Device::cpu()).gemm(args_of(p, o, backend, false, true));
  REQUIRE(run_on(bf16_gemm() == Bf16Gemm::native ? Path::native : Path::widened,
                 args_of(p, o, alone, false, true)));
  REQUIRE(backend == alone);
}

TEST_CASE("a bf16 subnormal operand is multiplied as its value on every path", "[gemm][bf16]") {
  // The differential test's cases 7:149 and 20261206:6154. VDPBF16PS reads a subnormal input as 0
  // (a subnormal times -inf would be NaN, times 3e38 lose 0.0276), so the backend widens a
  // product whose operands hold one: exact on both paths, in A or in B, bf16 or float32 rounded.
  const double subnormal = 9.183549615799121e-41, inf = std::numeric_limits<double>::infinity();
  const Tensor a = from_vector<double>({1.78125, subnormal}, {1, 2}).to(DType::bf16);
  const Tensor b = from_vector<double>({-1.3125, -inf}, {2, 1}).to(DType::bf16);
  REQUIRE(matmul(a, b).item<double>() == -inf);
  REQUIRE(matmul(b.t(), a.t()).item<double>() == -inf);
  const Tensor huge = from_vector<double>({-1.40625, 3.00405527047391e+38}, {1, 2}).to(DType::bf16);
  const Tensor w = from_vector<double>({-0.5, subnormal}, {2, 1}).to(DType::bf16);
  const double exact = -1.40625 * -0.5 + 3.00405527047391e+38 * subnormal;  // 0.7307...
  REQUIRE(matmul(huge, w).item<double>() == Approx(exact).epsilon(1e-6));
  REQUIRE(matmul(w.t(), huge.t()).item<double>() == Approx(exact).epsilon(1e-6));
}
