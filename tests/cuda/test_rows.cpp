// The fused row kernels on CUDA against the CPU backend: softmax and log-softmax (causal with
// query offsets too), layer norm and cross-entropy, forward and backward (cross-entropy also
// fused with its gradient, in place), for rows short enough for a warp and long enough for a
// block, in float32 and float64. Poisoning is on, so an element a kernel does not write is NaN
// and fails.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const std::int64_t kCols[] = {1, 37, 1024, 1025, 5000};

double tolerance(DType dtype) { return dtype == DType::f32 ? 1e-5 : 1e-12; }

}  // namespace

TEST_CASE("cuda/softmax and log_softmax match the CPU, causal or not", "[cuda][rows]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(51);
  for (DType dtype : {DType::f32, DType::f64}) {
    for (std::int64_t cols : kCols) {
      for (bool log : {false, true}) {
        for (bool causal : {false, true}) {
          INFO(dtype_name(dtype) << " cols " << cols << " log " << log << " causal " << causal);
          SoftmaxArgs args;
          args.dtype = dtype;
          args.rows = 3 * 7;
          args.cols = cols;
          args.log = log;
          args.causal = causal;
          args.query_len = 7;
          args.query_offset = causal ? cols - 7 : 0;  // the last 7 queries of a cache of cols
          const Mirrored x = uniform_mirrored({args.rows, cols}, gen, -4.0, 4.0, dtype);
          const Mirrored y = outputs({args.rows, cols}, dtype);
          cpu_backend_ref().softmax_forward(args, x.cpu.raw_data(), y.cpu.raw_data());
          gpu_backend().softmax_forward(args, x.gpu.raw_data(), y.gpu.raw_data());
          REQUIRE_NEAR(y.gpu, y.cpu, tolerance(dtype), tolerance(dtype));

          const Mirrored dy = uniform_mirrored({args.rows, cols}, gen, -1.0, 1.0, dtype);
          const Mirrored dx = outputs({args.rows, cols}, dtype);
          cpu_backend_ref().softmax_backward(args, y.cpu.raw_data(), dy.cpu.raw_data(),
                                             dx.cpu.raw_data());
          gpu_backend().softmax_backward(args, y.gpu.raw_data(), dy.gpu.raw_data(),
                                         dx.gpu.raw_data());
          REQUIRE_NEAR(dx.gpu, dx.cpu, tolerance(dtype), tolerance(dtype));
        }
      }
    }
  }
}

TEST_CASE("cuda/softmax rows with no visible column match the CPU", "[cuda][rows]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(52);
  for (bool log : {false, true}) {
    SoftmaxArgs args;
    args.rows = 4;
    args.cols = 6;
    args.log = log;
    args.causal = true;
    args.query_len = 4;
    args.query_offset = -2;  // rows 0 and 1 see nothing
    const Mirrored x = uniform_mirrored({4, 6}, gen);
    const Mirrored y = outputs({4, 6});
    cpu_backend_ref().softmax_forward(args, x.cpu.raw_data(), y.cpu.raw_data());
    gpu_backend().softmax_forward(args, x.gpu.raw_data(), y.gpu.raw_data());
    REQUIRE_NEAR(y.gpu, y.cpu, 1e-6, 1e-6);
  }
}

TEST_CASE("cuda/layer norm forward and backward match the CPU", "[cuda][rows]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(53);
  for (DType dtype : {DType::f32, DType::f64}) {
    for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 1},
                              {300, 64},
                              {129, 1500},
                              {1000, 512},
                              {0, 16}}) {
      INFO(dtype_name(dtype) << " rows " << rows << " cols " << cols);
      const Mirrored x = uniform_mirrored({rows, cols}, gen, -3.0, 3.0, dtype);
      const Mirrored gamma = uniform_mirrored({cols}, gen, 0.5, 1.5, dtype);
      const Mirrored beta = uniform_mirrored({cols}, gen, -0.5, 0.5, dtype);
      const Mirrored y = outputs({rows, cols}, dtype), mean = outputs({rows}, dtype),
                     rstd = outputs({rows}, dtype);
      const LayerNormArgs args{.dtype = dtype, .rows = rows, .cols = cols, .eps = 1e-5};
      cpu_backend_ref().layer_norm_forward(args, x.cpu.raw_data(), gamma.cpu.raw_data(),
                                           beta.cpu.raw_data(), y.cpu.raw_data(),
                                           mean.cpu.raw_data(), rstd.cpu.raw_data());
      gpu_backend().layer_norm_forward(args, x.gpu.raw_data(), gamma.gpu.raw_data(),
                                       beta.gpu.raw_data(), y.gpu.raw_data(), mean.gpu.raw_data(),
                                       rstd.gpu.raw_data());
      REQUIRE(relative_error(y.gpu, y.cpu) <= tolerance(dtype));
      REQUIRE(relative_error(mean.gpu, mean.cpu) <= tolerance(dtype));
      REQUIRE(relative_error(rstd.gpu, rstd.cpu) <= tolerance(dtype));

      const Mirrored dy = uniform_mirrored({rows, cols}, gen, -1.0, 1.0, dtype);
      const Mirrored dx = outputs({rows, cols}, dtype), dgamma = outputs({cols}, dtype),
                     dbeta = outputs({cols}, dtype);
      cpu_backend_ref().layer_norm_backward(
          args, x.cpu.raw_data(), gamma.cpu.raw_data(), mean.cpu.raw_data(), rstd.cpu.raw_data(),
          dy.cpu.raw_data(), dx.cpu.raw_data(), dgamma.cpu.raw_data(), dbeta.cpu.raw_data());
      gpu_backend().layer_norm_backward(
          args, x.gpu.raw_data(), gamma.gpu.raw_data(), mean.gpu.raw_data(), rstd.gpu.raw_data(),
          dy.gpu.raw_data(), dx.gpu.raw_data(), dgamma.gpu.raw_data(), dbeta.gpu.raw_data());
      // dx = rstd (g - mean(g) - xhat mean(g xhat)) cancels to 0 with one column, where the two
      // backends' differing roundings (an FMA or not) leave residues of eps rstd |g|: dx's error
      // is measured against the size of those terms, rstd dy gamma, not against the residue.
      const auto norm = [](const Tensor& t) {
        double sum = 0.0;
        for (double v : t.to_vector<double>()) sum += v * v;
        return std::sqrt(sum);
      };
      const Tensor terms = dy.cpu * gamma.cpu * rstd.cpu.view({rows, 1});
      REQUIRE(norm(dx.gpu.to(Device::cpu()) - dx.cpu) <= tolerance(dtype) * norm(terms));
      REQUIRE(relative_error(dgamma.gpu, dgamma.cpu) <= tolerance(dtype));
      REQUIRE(relative_error(dbeta.gpu, dbeta.cpu) <= tolerance(dtype));
    }
  }
}

TEST_CASE("cuda/cross-entropy forward and backward match the CPU, ignore_index included",
          "[cuda][rows]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(54);
  constexpr std::int64_t kIgnore = -100;
  for (DType dtype : {DType::f32, DType::f64}) {
    for (std::int64_t cols : {2, 50, 1025, 33278}) {
      INFO(dtype_name(dtype) << " cols " << cols);
      const std::int64_t rows = 37;
      std::vector<std::int64_t> target_values(rows);
      const std::vector<double> picks =
          uniform({rows}, 0.0, 1.0, {DType::f64}, &gen).to_vector<double>();
      for (std::int64_t r = 0; r < rows; ++r)
        target_values[r] = r % 5 == 2 ? kIgnore : static_cast<std::int64_t>(picks[r] * cols);
      const Mirrored targets = mirrored(from_vector(target_values, {rows}));
      const Mirrored logits = uniform_mirrored({rows, cols}, gen, -5.0, 5.0, dtype);
      const Mirrored loss = outputs({rows}, dtype), lse = outputs({rows, 2}, dtype);
      const CrossEntropyArgs args{
          .dtype = dtype, .rows = rows, .cols = cols, .ignore_index = kIgnore, .scale = 1.0 / 30};
      cpu_backend_ref().cross_entropy_forward(args, logits.cpu.raw_data(),
                                              ptr<const std::int64_t>(targets.cpu),
                                              loss.cpu.raw_data(), lse.cpu.raw_data());
      gpu_backend().cross_entropy_forward(args, logits.gpu.raw_data(),
                                          ptr<const std::int64_t>(targets.gpu), loss.gpu.raw_data(),
                                          lse.gpu.raw_data());
      REQUIRE(relative_error(loss.gpu, loss.cpu) <= tolerance(dtype));
      REQUIRE(relative_error(lse.gpu, lse.cpu) <= tolerance(dtype));

      const Mirrored grad_loss = mirrored(full({}, 0.75, {dtype}));
      const Mirrored dlogits = outputs({rows, cols}, dtype);
      cpu_backend_ref().cross_entropy_backward(
          args, logits.cpu.raw_data(), ptr<const std::int64_t>(targets.cpu), lse.cpu.raw_data(),
          grad_loss.cpu.raw_data(), dlogits.cpu.raw_data());
      gpu_backend().cross_entropy_backward(args, logits.gpu.raw_data(),
                                           ptr<const std::int64_t>(targets.gpu), lse.gpu.raw_data(),
                                           grad_loss.gpu.raw_data(), dlogits.gpu.raw_data());
      REQUIRE(relative_error(dlogits.gpu, dlogits.cpu) <= tolerance(dtype));
    }
  }
}

TEST_CASE("cuda/cross-entropy with its exponentials in place matches the CPU's fused pass",
          "[cuda][rows]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(55);
  constexpr std::int64_t kIgnore = -100;
  for (DType dtype : {DType::f32, DType::f64}) {
    // Rows stored contiguously, and `pad` elements apart beyond the row (as the LM head pads its
    // logits): the padding is neither read nor written.
    for (const auto& [cols, pad] : {std::pair<std::int64_t, std::int64_t>{2, 0},
                                    {50, 0},
                                    {1024, 0},
                                    {1025, 0},
                                    {33278, 0},
                                    {50, 14},
                                    {33278, 2}}) {
      INFO(dtype_name(dtype) << " cols " << cols << " pad " << pad);
      const std::int64_t rows = 41;
      std::vector<std::int64_t> target_values(rows);
      for (std::int64_t r = 0; r < rows; ++r)
        target_values[r] = r % 7 == 3 ? kIgnore : (r * 7919) % cols;
      const Mirrored targets = mirrored(from_vector(target_values, {rows}));
      // Logits that rise along the row make the running max change often; the padding is NaN.
      const Tensor ramp = arange(0.0, static_cast<double>(cols), 1.0, {dtype}) * (4.0 / cols);
      const Tensor stored = full({rows, cols + pad}, std::nan(""), {dtype});
      stored.narrow(1, 0, cols)
          .copy_(uniform({rows, cols}, -5.0, 5.0, {dtype}, &gen) + ramp.view({1, cols}));
      const Mirrored logits = mirrored(stored);
      const Mirrored loss = outputs({rows}, dtype), lse = outputs({rows}, dtype);
      const Mirrored row_scale = outputs({rows}, dtype);
      const CrossEntropyArgs args{.dtype = dtype,
                                  .rows = rows,
                                  .cols = cols,
                                  .ignore_index = kIgnore,
                                  .row_stride = pad > 0 ? cols + pad : 0};
      cpu_backend_ref().cross_entropy_forward_exp(
          args, logits.cpu.raw_data(), ptr<const std::int64_t>(targets.cpu), loss.cpu.raw_data(),
          lse.cpu.raw_data(), row_scale.cpu.raw_data());
      gpu_backend().cross_entropy_forward_exp(
          args, logits.gpu.raw_data(), ptr<const std::int64_t>(targets.gpu), loss.gpu.raw_data(),
          lse.gpu.raw_data(), row_scale.gpu.raw_data());
      REQUIRE(relative_error(loss.gpu, loss.cpu) <= tolerance(dtype));
      REQUIRE(relative_error(lse.gpu, lse.cpu) <= tolerance(dtype));
      // The backends may shift rows differently; the softmax they encode must agree.
      const Tensor gpu_softmax = logits.gpu.narrow(1, 0, cols) * row_scale.gpu.view({rows, 1});
      const Tensor cpu_softmax = logits.cpu.narrow(1, 0, cols) * row_scale.cpu.view({rows, 1});
      REQUIRE(relative_error(gpu_softmax, cpu_softmax) <= tolerance(dtype));
      if (pad > 0) {
        for (const Tensor& after : {logits.cpu, logits.gpu.to(Device::cpu())})
          for (double value : after.narrow(1, cols, pad).to(DType::f64).to_vector<double>())
            REQUIRE(std::isnan(value));
      }
    }
  }
}
