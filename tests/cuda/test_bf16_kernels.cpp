// The CUDA backend's bf16-native kernels (Backend::kernels_read_bf16): unary, binary, copy,
// dropout, softmax, layer norm and cross-entropy called with bf16 operands, each against
//   - the same CUDA kernel in float32 on the widened operands, its result rounded once to bf16
//     where the kernel returns bf16: bit for bit on any device (the contract of
//     docs/mixed-precision.md), and
//   - the CPU backend's bf16 kernel: bit for bit where both compute with correctly rounded IEEE
//     operations (+ - * /, sqrt, comparisons, relu, dropout's product); elsewhere (a GPU's libm,
//     the CPU's fused multiply-adds, row sums in other orders) within one bf16 rounding (2u,
//     u = 2^-8) for bf16 results and within 1e-6 (elementwise) or 1e-5 (row sums) for float32,
// for operands that are contiguous and 16-byte aligned (the packed path), off a 16-byte boundary
// or of odd length (element by element, and the tail after the last pack), and strided.
// Poisoning is on: an element a kernel does not write is NaN and fails.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr double kTwoRoundings = 2.0 / 256.0;

TensorArg arg(const Tensor& t) {
  return TensorArg{t.raw_data(), t.dtype(), t.shape(), t.strides()};
}

// Element i of t as a double (bf16 and float32 exactly).
std::vector<double> values_of(const Tensor& t) { return t.to(DType::f64).to_vector<double>(); }

// Bit for bit, or both NaN (the NaN a function returns may differ between libraries).
void require_same(const Tensor& got, const Tensor& want, const char* against) {
  INFO("against " << against);
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.shape() == want.shape());
  const Tensor g = got.to(Device::cpu()).contiguous(), w = want.to(Device::cpu()).contiguous();
  const std::vector<double> gv = values_of(g), wv = values_of(w);
  for (std::size_t i = 0; i < gv.size(); ++i) {
    INFO("element " << i << ": " << gv[i] << " vs " << wv[i]);
    if (std::isnan(gv[i]) || std::isnan(wv[i])) {
      REQUIRE((std::isnan(gv[i]) && std::isnan(wv[i])));
    } else {
      REQUIRE(std::bit_cast<std::uint64_t>(gv[i]) == std::bit_cast<std::uint64_t>(wv[i]));
    }
  }
}

// Equal within `rtol` of the larger magnitude (plus atol), or both NaN, or equal infinities.
void require_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  REQUIRE(got.dtype() == want.dtype());
  const std::vector<double> gv = values_of(got.to(Device::cpu()).contiguous()),
                            wv = values_of(want.to(Device::cpu()).contiguous());
  REQUIRE(gv.size() == wv.size());
  for (std::size_t i = 0; i < gv.size(); ++i) {
    INFO("element " << i << ": " << gv[i] << " vs " << wv[i]);
    if (std::isnan(gv[i]) || std::isnan(wv[i])) {
      REQUIRE((std::isnan(gv[i]) && std::isnan(wv[i])));
    } else if (std::isinf(gv[i]) || std::isinf(wv[i])) {
      REQUIRE(gv[i] == wv[i]);
    } else {
      REQUIRE(std::abs(gv[i] - wv[i]) <= rtol * std::max(std::abs(gv[i]), std::abs(wv[i])) + atol);
    }
  }
}

// The view of a (13, 9) tensor that a case reads.
enum class Layout { aligned, aligned_tail, misaligned, strided };
constexpr Layout kLayouts[] = {Layout::aligned, Layout::aligned_tail, Layout::misaligned,
                               Layout::strided};

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::aligned:
      return "contiguous, aligned, whole packs";
    case Layout::aligned_tail:
      return "contiguous, aligned, with a tail";
    case Layout::misaligned:
      return "contiguous, off 16 bytes, odd length";
    case Layout::strided:
      return "strided";
  }
  return "?";
}

// The view in the layout: a fresh (13, 8) copy (13 whole packs), the first 114 elements (14 packs
// and a tail of 2), the elements from the second on (2 or 4 bytes off every 16-byte boundary, an
// odd count), or the transposed view.
Tensor view_in(Layout layout, const Tensor& base_values) {
  switch (layout) {
    case Layout::aligned:
      return base_values.narrow(1, 0, 8).contiguous();
    case Layout::aligned_tail:
      return base_values.reshape({-1}).narrow(0, 0, base_values.numel() - 3);
    case Layout::misaligned:
      return base_values.reshape({-1}).narrow(0, 1, base_values.numel() - 2);
    case Layout::strided:
      return base_values.t();
  }
  return base_values;
}

bool correctly_rounded(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg:
    case UnaryOp::sqrt:
    case UnaryOp::relu:
    case UnaryOp::add_scalar:
    case UnaryOp::mul_scalar:
    case UnaryOp::rsub_scalar:
    case UnaryOp::rdiv_scalar:
    case UnaryOp::div_scalar:
      return true;
    default:
      return false;
  }
}

bool correctly_rounded(BinaryOp op) {
  switch (op) {
    case BinaryOp::gelu_tanh_backward:
    case BinaryOp::gelu_erf_backward:
    case BinaryOp::tanh_backward:
    case BinaryOp::sigmoid_backward:
      return false;
    default:
      return true;
  }
}

constexpr UnaryOp kUnaryOps[] = {UnaryOp::neg,         UnaryOp::exp,         UnaryOp::log,
                                 UnaryOp::sqrt,        UnaryOp::tanh,        UnaryOp::sigmoid,
                                 UnaryOp::relu,        UnaryOp::gelu_tanh,   UnaryOp::gelu_erf,
                                 UnaryOp::pow_scalar,  UnaryOp::add_scalar,  UnaryOp::mul_scalar,
                                 UnaryOp::rsub_scalar, UnaryOp::rdiv_scalar, UnaryOp::div_scalar};

constexpr BinaryOp kBinaryOps[] = {BinaryOp::add,
                                   BinaryOp::sub,
                                   BinaryOp::mul,
                                   BinaryOp::div,
                                   BinaryOp::eq,
                                   BinaryOp::ne,
                                   BinaryOp::lt,
                                   BinaryOp::le,
                                   BinaryOp::gt,
                                   BinaryOp::ge,
                                   BinaryOp::relu_backward,
                                   BinaryOp::gelu_tanh_backward,
                                   BinaryOp::gelu_erf_backward,
                                   BinaryOp::tanh_backward,
                                   BinaryOp::sigmoid_backward};

}  // namespace

TEST_CASE("cuda/bf16 unary kernels: the float32 kernel on widened values, rounded once",
          "[cuda][bf16][elementwise]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(71);
  // 13 x 9 values of [-3, 3) with 0, -0, inf and NaN among them, as bf16.
  std::vector<float> v = uniform({13, 9}, -3.0, 3.0, {}, &gen).to_vector<float>();
  v[3] = 0.0f, v[20] = -0.0f, v[40] = INFINITY, v[60] = NAN;
  const Tensor values = from_vector(v, {13, 9}).to(DType::bf16);
  for (Layout layout : kLayouts) {
    const Tensor cpu_in = view_in(layout, values);
    const Tensor gpu_base = values.to(Device::cuda());
    const Tensor gpu_in = view_in(layout, gpu_base);
    const bool aligned = reinterpret_cast<std::uintptr_t>(gpu_in.raw_data()) % 16 == 0;
    if (layout != Layout::strided)
      REQUIRE(aligned == (layout == Layout::aligned || layout == Layout::aligned_tail));
    for (UnaryOp op : kUnaryOps) {
      INFO(layout_name(layout) << ", unary op " << static_cast<int>(op));
      const double scalar = op == UnaryOp::pow_scalar ? 2.5 : 1.00390625;
      for (DType out_dtype : {DType::bf16, DType::f32}) {
        const Tensor cpu_out = empty(cpu_in.shape(), {out_dtype});
        const Tensor gpu_out = empty(gpu_in.shape(), {out_dtype, Device::cuda()});
        cpu_backend_ref().unary(op, arg(cpu_out), arg(cpu_in), scalar);
        gpu_backend().unary(op, arg(gpu_out), arg(gpu_in), scalar);
        // The CUDA float32 kernel on the widened values, rounded once.
        const Tensor widened = gpu_in.to(DType::f32);
        const Tensor reference = empty(widened.shape(), {DType::f32, Device::cuda()});
        gpu_backend().unary(op, arg(reference), arg(widened), scalar);
        require_same(gpu_out, reference.to(out_dtype), "the float32 kernel");
        if (correctly_rounded(op)) {
          require_same(gpu_out, cpu_out, "the CPU");
        } else {
          require_close(gpu_out, cpu_out, out_dtype == DType::bf16 ? kTwoRoundings : 1e-6, 0.0);
        }
      }
    }
  }
}

TEST_CASE("cuda/bf16 binary kernels: any operand bf16, broadcast operands, every layout",
          "[cuda][bf16][elementwise]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(72);
  const Tensor a_values = uniform({13, 9}, -3.0, 3.0, {}, &gen);
  const Tensor b_values = uniform({13, 9}, -3.0, 3.0, {}, &gen);
  for (Layout layout : kLayouts) {
    for (BinaryOp op : kBinaryOps) {
      // (a dtype, b dtype): both bf16 give bf16; bf16 with float32 gives float32.
      for (const auto& [a_dtype, b_dtype] :
           {std::pair{DType::bf16, DType::bf16}, std::pair{DType::bf16, DType::f32},
            std::pair{DType::f32, DType::bf16}}) {
        for (bool broadcast_b : {false, true}) {
          INFO(layout_name(layout)
               << ", binary op " << static_cast<int>(op) << ", a " << dtype_name(a_dtype) << ", b "
               << dtype_name(b_dtype) << (broadcast_b ? ", b broadcast" : ""));
          const DType out_dtype =
              a_dtype == DType::bf16 && b_dtype == DType::bf16 ? DType::bf16 : DType::f32;
          const Tensor a = a_values.to(a_dtype), b = b_values.to(b_dtype);
          const auto operands = [&](Device device) {
            const Tensor x = view_in(layout, a.to(device));
            Tensor y = view_in(layout, b.to(device));
            if (broadcast_b) {
              const Shape ones(x.shape().size(), 1);
              y = y.reshape({-1}).narrow(0, 5, 1).reshape(ones).expand(x.shape());
            }
            return std::pair{x, y};
          };
          const auto [cx, cy] = operands(Device::cpu());
          const auto [gx, gy] = operands(Device::cuda());
          const Tensor cpu_out = empty(cx.shape(), {out_dtype});
          const Tensor gpu_out = empty(gx.shape(), {out_dtype, Device::cuda()});
          cpu_backend_ref().binary(op, arg(cpu_out), arg(cx), arg(cy));
          gpu_backend().binary(op, arg(gpu_out), arg(gx), arg(gy));
          const Tensor wx = gx.to(DType::f32), wy = gy.to(DType::f32);
          const Tensor reference = empty(gx.shape(), {DType::f32, Device::cuda()});
          gpu_backend().binary(op, arg(reference), arg(wx), arg(wy.expand(gx.shape())));
          require_same(gpu_out, reference.to(out_dtype), "the float32 kernel");
          if (correctly_rounded(op)) {
            require_same(gpu_out, cpu_out, "the CPU");
          } else {
            require_close(gpu_out, cpu_out, out_dtype == DType::bf16 ? kTwoRoundings : 1e-6, 1e-6);
          }
        }
      }
    }
  }
}

TEST_CASE("cuda/bf16 copies and dropout: packed, element by element and strided agree with the CPU",
          "[cuda][bf16][elementwise]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(73);
  const Tensor floats = uniform({13, 9}, -3.0, 3.0, {}, &gen);
  for (Layout layout : kLayouts) {
    INFO(layout_name(layout));
    for (DType from : {DType::f32, DType::bf16}) {
      for (DType to : {DType::f32, DType::bf16}) {
        const Tensor cpu_in = view_in(layout, floats.to(from));
        const Tensor gpu_in = view_in(layout, floats.to(from).to(Device::cuda()));
        const Tensor cpu_out = empty(cpu_in.shape(), {to});
        const Tensor gpu_out = empty(gpu_in.shape(), {to, Device::cuda()});
        cpu_backend_ref().copy(arg(cpu_out), arg(cpu_in));
        gpu_backend().copy(arg(gpu_out), arg(gpu_in));
        require_same(gpu_out, cpu_out, "the CPU");
      }
    }
    if (layout == Layout::strided) continue;  // dropout reads contiguous operands
    // Dropout of bf16: the float32 product x * (kept ? 1 / (1 - p) : 0), rounded once; the same
    // Philox counters on both devices, a pack of eight drawing two of them.
    const Tensor cpu_in = view_in(layout, floats.to(DType::bf16));
    const Tensor gpu_in = view_in(layout, floats.to(DType::bf16).to(Device::cuda()));
    const std::int64_t n = cpu_in.numel();
    for (std::uint64_t offset : {0u, 7u}) {
      const Tensor cpu_out = empty({n}, {DType::bf16});
      const Tensor gpu_out = empty({n}, {DType::bf16, Device::cuda()});
      cpu_backend_ref().dropout_apply(DType::bf16, cpu_out.raw_data(), cpu_in.raw_data(), n, 0.3,
                                      99, offset);
      gpu_backend().dropout_apply(DType::bf16, gpu_out.raw_data(), gpu_in.raw_data(), n, 0.3, 99,
                                  offset);
      require_same(gpu_out, cpu_out, "the CPU");
      const Tensor widened = gpu_in.to(DType::f32);
      const Tensor reference = empty({n}, {DType::f32, Device::cuda()});
      gpu_backend().dropout_apply(DType::f32, reference.raw_data(), widened.raw_data(), n, 0.3, 99,
                                  offset);
      require_same(gpu_out, reference.to(DType::bf16), "the float32 kernel");
      std::int64_t zeros = 0;
      for (const double y : values_of(gpu_out)) zeros += y == 0.0;
      REQUIRE(zeros > 0);
      REQUIRE(zeros < n);
    }
  }
}

namespace {

// A (rows, cols) bf16 operand on both devices: fresh (rows aligned where cols is a multiple of 8),
// or starting one element into a buffer (every row off a 16-byte boundary).
struct RowOperand {
  Tensor cpu, gpu;
};

RowOperand row_operand(std::int64_t rows, std::int64_t cols, bool misaligned, Generator& gen,
                       double low = -4.0, double high = 4.0) {
  const Tensor values = uniform({rows * cols + 1}, low, high, {}, &gen).to(DType::bf16);
  const std::int64_t start = misaligned ? 1 : 0;
  const Tensor cpu = values.narrow(0, start, rows * cols).reshape({rows, cols});
  const Tensor gpu_base = misaligned
                              ? values.to(Device::cuda())
                              : values.narrow(0, 0, rows * cols).contiguous().to(Device::cuda());
  return {cpu, gpu_base.narrow(0, start, rows * cols).reshape({rows, cols})};
}

// Row kernels' column counts: short rows for a warp (whole packs, a tail, one column), rows for
// a block cached in registers (1,032) and read on every pass (8,200).
const std::int64_t kRowCols[] = {1, 37, 64, 1032, 8200};

std::int64_t rows_for(std::int64_t cols) { return cols > 1024 ? 3 : 10; }

}  // namespace

TEST_CASE("cuda/bf16 softmax rows: the float32 kernel on widened rows, rounded once",
          "[cuda][bf16][rows]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(74);
  for (std::int64_t cols : kRowCols) {
    for (bool misaligned : {false, true}) {
      for (bool log : {false, true}) {
        for (bool causal : {false, true}) {
          INFO("cols " << cols << (misaligned ? " misaligned" : "") << " log " << log << " causal "
                       << causal);
          SoftmaxArgs args;
          args.rows = rows_for(cols);
          args.cols = cols;
          args.log = log;
          args.causal = causal;
          args.query_len = 5;
          args.query_offset = causal ? cols - 5 : 0;
          const RowOperand x = row_operand(args.rows, cols, misaligned, gen);
          SoftmaxArgs bf16_args = args;
          bf16_args.bf16_values = true;
          const Tensor cpu_y = empty({args.rows, cols}, {DType::bf16});
          const Tensor gpu_y = empty({args.rows, cols}, {DType::bf16, Device::cuda()});
          cpu_backend_ref().softmax_forward(bf16_args, x.cpu.raw_data(), cpu_y.raw_data());
          gpu_backend().softmax_forward(bf16_args, x.gpu.raw_data(), gpu_y.raw_data());
          const Tensor widened = x.gpu.to(DType::f32);
          const Tensor y32 = empty({args.rows, cols}, {DType::f32, Device::cuda()});
          gpu_backend().softmax_forward(args, widened.raw_data(), y32.raw_data());
          require_same(gpu_y, y32.to(DType::bf16), "the float32 kernel");
          require_close(gpu_y, cpu_y, kTwoRoundings, 1e-30);

          // Backward from the saved bf16 y and a float32 dy.
          const Tensor dy = uniform({args.rows, cols}, -1.0, 1.0, {}, &gen);
          const Tensor gpu_dy = dy.to(Device::cuda());
          const Tensor cpu_dx = empty({args.rows, cols}),
                       gpu_dx = empty({args.rows, cols}, {DType::f32, Device::cuda()});
          cpu_backend_ref().softmax_backward(bf16_args, cpu_y.raw_data(), dy.raw_data(),
                                             cpu_dx.raw_data());
          gpu_backend().softmax_backward(bf16_args, gpu_y.raw_data(), gpu_dy.raw_data(),
                                         gpu_dx.raw_data());
          const Tensor y_widened = gpu_y.to(DType::f32);
          const Tensor dx32 = empty({args.rows, cols}, {DType::f32, Device::cuda()});
          gpu_backend().softmax_backward(args, y_widened.raw_data(), gpu_dy.raw_data(),
                                         dx32.raw_data());
          require_same(gpu_dx, dx32, "the float32 kernel");
          // From the same bf16 y on both devices (the CPU's), float32 sums in different orders.
          const Tensor cpu_y_on_gpu = cpu_y.to(Device::cuda());
          gpu_backend().softmax_backward(bf16_args, cpu_y_on_gpu.raw_data(), gpu_dy.raw_data(),
                                         gpu_dx.raw_data());
          require_close(gpu_dx, cpu_dx, 1e-5, 1e-6);
        }
      }
    }
  }
}

TEST_CASE("cuda/bf16 layer_norm rows: the float32 kernel on widened rows", "[cuda][bf16][rows]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(75);
  for (std::int64_t cols : kRowCols) {
    for (bool misaligned : {false, true}) {
      INFO("cols " << cols << (misaligned ? " misaligned" : ""));
      LayerNormArgs args;
      args.rows = rows_for(cols);
      args.cols = cols;
      const RowOperand x = row_operand(args.rows, cols, misaligned, gen, 1.0, 3.0);
      const Mirrored gamma = uniform_mirrored({cols}, gen, 0.5, 1.5);
      const Mirrored beta = uniform_mirrored({cols}, gen);
      const Mirrored dy = uniform_mirrored({args.rows, cols}, gen);
      LayerNormArgs bf16_args = args;
      bf16_args.bf16_input = true;
      struct Result {
        Tensor y, mean, rstd, dx, dgamma, dbeta;
      };
      const auto run = [&](Backend& backend, const LayerNormArgs& a, const Tensor& xs,
                           const Tensor& g, const Tensor& b, const Tensor& d, Device device) {
        const TensorOptions f32{DType::f32, device};
        Result r{empty({a.rows, cols}, f32), empty({a.rows}, f32), empty({a.rows}, f32),
                 empty({a.rows, cols}, f32), empty({cols}, f32),   empty({cols}, f32)};
        backend.layer_norm_forward(a, xs.raw_data(), g.raw_data(), b.raw_data(), r.y.raw_data(),
                                   r.mean.raw_data(), r.rstd.raw_data());
        backend.layer_norm_backward(a, xs.raw_data(), g.raw_data(), r.mean.raw_data(),
                                    r.rstd.raw_data(), d.raw_data(), r.dx.raw_data(),
                                    r.dgamma.raw_data(), r.dbeta.raw_data());
        return r;
      };
      const Result gpu =
          run(gpu_backend(), bf16_args, x.gpu, gamma.gpu, beta.gpu, dy.gpu, Device::cuda());
      const Result cpu =
          run(cpu_backend_ref(), bf16_args, x.cpu, gamma.cpu, beta.cpu, dy.cpu, Device::cpu());
      const Tensor widened = x.gpu.to(DType::f32);
      const Result ref =
          run(gpu_backend(), args, widened, gamma.gpu, beta.gpu, dy.gpu, Device::cuda());
      require_same(gpu.y, ref.y, "the float32 kernel");
      require_same(gpu.mean, ref.mean, "the float32 kernel");
      require_same(gpu.rstd, ref.rstd, "the float32 kernel");
      require_same(gpu.dx, ref.dx, "the float32 kernel");
      require_same(gpu.dgamma, ref.dgamma, "the float32 kernel");
      require_same(gpu.dbeta, ref.dbeta, "the float32 kernel");
      require_close(gpu.y, cpu.y, 1e-5, 1e-5);
      require_close(gpu.mean, cpu.mean, 1e-6, 0.0);
      require_close(gpu.rstd, cpu.rstd, 1e-5, 0.0);
      require_close(gpu.dx, cpu.dx, 1e-4, 1e-4);
      require_close(gpu.dgamma, cpu.dgamma, 1e-5, 1e-5);
      require_close(gpu.dbeta, cpu.dbeta, 1e-5, 1e-5);
    }
  }
}

TEST_CASE("cuda/bf16 cross-entropy rows: the float32 kernel on widened logits",
          "[cuda][bf16][rows]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(76);
  for (std::int64_t cols : kRowCols) {
    for (bool misaligned : {false, true}) {
      INFO("cols " << cols << (misaligned ? " misaligned" : ""));
      CrossEntropyArgs args;
      args.rows = rows_for(cols);
      args.cols = cols;
      args.ignore_index = -100;
      args.scale = 0.25;
      const RowOperand logits = row_operand(args.rows, cols, misaligned, gen, -6.0, 6.0);
      std::vector<std::int64_t> ids;
      for (std::int64_t r = 0; r < args.rows; ++r) ids.push_back(r == 1 ? -100 : (r * 7) % cols);
      const Mirrored targets = mirrored(from_vector(ids, {args.rows}));
      const Mirrored grad_loss = mirrored(full({1}, 1.5));
      CrossEntropyArgs bf16_args = args;
      bf16_args.bf16_logits = true;
      struct Result {
        Tensor loss, stats, dlogits;
      };
      const auto run = [&](Backend& backend, const CrossEntropyArgs& a, const Tensor& x,
                           const Mirrored& t, const Mirrored& g, Device device) {
        const bool on_gpu = device == Device::cuda();
        const TensorOptions f32{DType::f32, device};
        Result r{empty({a.rows}, f32), empty({2 * a.rows}, f32), empty({a.rows, cols}, f32)};
        const auto* ts = static_cast<const std::int64_t*>((on_gpu ? t.gpu : t.cpu).raw_data());
        backend.cross_entropy_forward(a, x.raw_data(), ts, r.loss.raw_data(), r.stats.raw_data());
        backend.cross_entropy_backward(a, x.raw_data(), ts, r.stats.raw_data(),
                                       (on_gpu ? g.gpu : g.cpu).raw_data(), r.dlogits.raw_data());
        return r;
      };
      const Result gpu =
          run(gpu_backend(), bf16_args, logits.gpu, targets, grad_loss, Device::cuda());
      const Result cpu =
          run(cpu_backend_ref(), bf16_args, logits.cpu, targets, grad_loss, Device::cpu());
      const Tensor widened = logits.gpu.to(DType::f32);
      const Result ref = run(gpu_backend(), args, widened, targets, grad_loss, Device::cuda());
      require_same(gpu.loss, ref.loss, "the float32 kernel");
      require_same(gpu.stats, ref.stats, "the float32 kernel");
      require_same(gpu.dlogits, ref.dlogits, "the float32 kernel");
      REQUIRE(values_of(gpu.loss)[1] == 0.0);
      require_close(gpu.loss, cpu.loss, 1e-5, 1e-6);
      require_close(gpu.dlogits, cpu.dlogits, 1e-5, 1e-7);
    }
  }
}
