// CUDA elementwise kernels: fill, arange, copy (with dtype conversion), unary, binary, where.
// The host collapses each call's dims into a StridedPlan (core/cuda/strided.h) passed by value;
// one grid-stride kernel turns a linear index into each operand's offset and calls a small
// functor that does the per-element work with core/elementwise_math.h, the math the CPU backend
// uses. A plan of one dim (contiguous, or broadcast along one run) needs no index division; wider
// plans divide in 32 bits when the element count allows. A flat plan whose operands are
// contiguous (an input may be one broadcast value) and 16-byte aligned runs packed instead: each
// thread moves eight elements per access (core/cuda/packs.cuh), the last numel % 8 one by one.
//
// bf16 operands (Backend::kernels_read_bf16): unary and binary read float32 or bf16 operands and
// write a float32 or bf16 output, converting in registers: the float32 arithmetic on the widened
// values, rounded once where the output is bf16, as the CPU backend's bf16 kernels compute.
#include <array>
#include <cstdint>
#include <limits>

#include "core/convert.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.h"
#include "core/cuda/packs.cuh"
#include "core/cuda/strided.h"
#include "core/elementwise_math.h"

namespace kiln {

namespace gpu {
namespace {

// Calls fn(offsets) for every element of the plan; offsets[k] is operand k's element offset.
template <int N, bool kFlat, typename Index, typename Fn>
__global__ void __launch_bounds__(kThreads) strided_kernel(StridedPlan<N> plan, Fn fn) {
  const Index numel = static_cast<Index>(plan.numel);
  const Index step = static_cast<Index>(thread_count());
  for (Index i = static_cast<Index>(thread_index()); i < numel; i += step) {
    std::int64_t offsets[N];
    if constexpr (kFlat) {
#pragma unroll
      for (int k = 0; k < N; ++k) offsets[k] = static_cast<std::int64_t>(i) * plan.strides[k][0];
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) offsets[k] = 0;
      Index rest = i;
      for (int d = plan.ndim - 1; d >= 0; --d) {
        const Index size = static_cast<Index>(plan.sizes[d]);
        const std::int64_t coord = static_cast<std::int64_t>(rest % size);
        rest /= size;
#pragma unroll
        for (int k = 0; k < N; ++k) offsets[k] += coord * plan.strides[k][d];
      }
    }
    fn(offsets);
  }
}

template <int N, typename Fn>
void launch_strided(cudaStream_t stream, const StridedPlan<N>& plan, const Fn& fn) {
  if (plan.numel == 0) return;
  const unsigned grid = blocks_for(plan.numel);
  if (plan.ndim == 1) {
    KILN_LAUNCH(grid, kThreads, stream, strided_kernel<N, true, std::int64_t, Fn>)(plan, fn);
  } else if (plan.numel <= std::numeric_limits<std::int32_t>::max()) {
    // i < 2^31 and the grid has fewer than 2^31 threads, so i + step never wraps in 32 bits.
    KILN_LAUNCH(grid, kThreads, stream, strided_kernel<N, false, std::uint32_t, Fn>)(plan, fn);
  } else {
    KILN_LAUNCH(grid, kThreads, stream, strided_kernel<N, false, std::int64_t, Fn>)(plan, fn);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

// fn.pack(i) for the packs [i, i + kPack) of a flat, contiguous plan, then fn.element(i) for the
// elements after the last whole pack.
template <typename Fn>
__global__ void __launch_bounds__(kThreads) packed_kernel(std::int64_t numel, Fn fn) {
  const std::int64_t packs = numel / kPack;
  for (std::int64_t p = thread_index(); p < packs; p += thread_count()) fn.pack(p * kPack);
  for (std::int64_t i = packs * kPack + thread_index(); i < numel; i += thread_count())
    fn.element(i);
}

constexpr std::size_t kMaxOperands = 4;

// Whether a plan runs packed: one dim, the output contiguous, each input contiguous or one
// broadcast value (stride 0), and every contiguous operand 16-byte aligned.
template <int N>
bool packable(const StridedPlan<N>& plan, const std::array<const void*, kMaxOperands>& data) {
  if (plan.ndim != 1 || plan.numel < kPack || plan.strides[0][0] != 1) return false;
  for (int k = 0; k < N; ++k) {
    const std::int64_t stride = plan.strides[k][0];
    if (stride != 0 && (stride != 1 || !aligned16(data[k]))) return false;
  }
  return true;
}

// Runs fn packed where packable says so, else element by element through the plan.
template <int N, typename Fn>
void launch_elementwise(cudaStream_t stream, const StridedPlan<N>& plan,
                        const std::array<const void*, kMaxOperands>& data, const Fn& fn) {
  if (!packable(plan, data)) {
    launch_strided(stream, plan, fn);
    return;
  }
  KILN_LAUNCH(blocks_for(plan.numel / kPack), kThreads, stream, packed_kernel<Fn>)(plan.numel, fn);
  KILN_CUDA_CHECK_LAUNCH();
}

// Input k of a packed call: kPack values from p + first (stride 1), or p's one value (stride 0).
template <typename C, typename S>
__device__ void load_input(const S* p, std::int64_t stride, std::int64_t first,
                           C (&values)[kPack]) {
  if (stride == 0) {
    const C v = convert<C>(*p);
#pragma unroll
    for (int e = 0; e < kPack; ++e) values[e] = v;
  } else {
    load_pack(p + first, values);
  }
}

template <typename T>
struct FillFn {
  T* out;
  T value;
  __device__ void operator()(const std::int64_t* off) const { out[off[0]] = value; }
};

// in_stride (packed calls only): the input's flat stride, 1 or 0 (broadcast).
template <typename To, typename From>
struct CopyFn {
  To* out;
  const From* in;
  std::int64_t in_stride = 1;
  __device__ void operator()(const std::int64_t* off) const {
    out[off[0]] = convert<To>(in[off[1]]);
  }
  __device__ void pack(std::int64_t first) const {
    To values[kPack];
    load_input(in, in_stride, first, values);
    store_pack(out + first, values);
  }
  __device__ void element(std::int64_t i) const { out[i] = convert<To>(in[i * in_stride]); }
};

// Stored as O, read as I, computed in C (float32 for bf16 operands); in_stride as CopyFn's.
template <typename C, typename O, typename I, UnaryOp kOp>
struct UnaryFn {
  O* out;
  const I* in;
  C scalar;
  std::int64_t in_stride = 1;
  __device__ void operator()(const std::int64_t* off) const {
    out[off[0]] = convert<O>(math::unary<kOp>(convert<C>(in[off[1]]), scalar));
  }
  __device__ void pack(std::int64_t first) const {
    C values[kPack];
    load_input(in, in_stride, first, values);
#pragma unroll
    for (int e = 0; e < kPack; ++e) values[e] = math::unary<kOp>(values[e], scalar);
    store_pack(out + first, values);
  }
  __device__ void element(std::int64_t i) const {
    out[i] = convert<O>(math::unary<kOp>(convert<C>(in[i * in_stride]), scalar));
  }
};

// Stored as O, read as A and B, computed in C. stride_a and stride_b (packed calls only) are each
// input's flat stride, 1 or 0 (broadcast).
template <typename C, typename O, typename A, typename B, BinaryOp kOp>
struct BinaryFn {
  O* out;
  const A* a;
  const B* b;
  std::int64_t stride_a = 1, stride_b = 1;
  __device__ void operator()(const std::int64_t* off) const {
    out[off[0]] = convert<O>(math::binary<kOp>(convert<C>(a[off[1]]), convert<C>(b[off[2]])));
  }
  __device__ void pack(std::int64_t first) const {
    C x[kPack], y[kPack];
    load_input(a, stride_a, first, x);
    load_input(b, stride_b, first, y);
#pragma unroll
    for (int e = 0; e < kPack; ++e) x[e] = math::binary<kOp>(x[e], y[e]);
    store_pack(out + first, x);
  }
  __device__ void element(std::int64_t i) const {
    out[i] =
        convert<O>(math::binary<kOp>(convert<C>(a[i * stride_a]), convert<C>(b[i * stride_b])));
  }
};

template <typename T, typename C>
struct WhereFn {
  T* out;
  const C* cond;
  const T* a;
  const T* b;
  __device__ void operator()(const std::int64_t* off) const {
    out[off[0]] = is_nonzero(cond[off[1]]) ? a[off[2]] : b[off[3]];
  }
};

// out[i] = start + i * step, computed in double as the CPU does.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    arange_kernel(T* out, std::int64_t n, double start, double step) {
  for (std::int64_t i = thread_index(); i < n; i += thread_count())
    out[i] = convert<T>(start + static_cast<double>(i) * step);
}

template <typename T>
T* typed(const TensorArg& t) {
  return static_cast<T*>(t.data);
}

// Calls f with the storage type of a float32 or bf16 operand; `op` names the kernel's op in the
// error for any other dtype (the ops check dtypes first: this is the last guard).
template <typename F>
void dispatch_float_or_bf16(const char* op, DType dtype, F&& f) {
  KILN_CHECK(dtype == DType::f32 || dtype == DType::bf16, "{}: {} operands are not supported here",
             op, dtype_name(dtype));
  if (dtype == DType::bf16) {
    f(bf16{});
  } else {
    f(float{});
  }
}

// The user-facing op behind a kernel call, for error messages.
const char* op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg:
      return "neg";
    case UnaryOp::exp:
      return "exp";
    case UnaryOp::log:
      return "log";
    case UnaryOp::sqrt:
      return "sqrt";
    case UnaryOp::tanh:
      return "tanh";
    case UnaryOp::sigmoid:
      return "sigmoid";
    case UnaryOp::relu:
      return "relu";
    case UnaryOp::gelu_tanh:
    case UnaryOp::gelu_erf:
      return "gelu";
    case UnaryOp::pow_scalar:
      return "pow";
    case UnaryOp::add_scalar:
      return "add";
    case UnaryOp::mul_scalar:
      return "mul";
    case UnaryOp::rsub_scalar:
      return "rsub";
    case UnaryOp::rdiv_scalar:
      return "rdiv";
    case UnaryOp::div_scalar:
      return "div";
  }
  return "unary";
}

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
      return "add";
    case BinaryOp::sub:
      return "sub";
    case BinaryOp::mul:
      return "mul";
    case BinaryOp::div:
      return "div";
    case BinaryOp::eq:
      return "eq";
    case BinaryOp::ne:
      return "ne";
    case BinaryOp::lt:
      return "lt";
    case BinaryOp::le:
      return "le";
    case BinaryOp::gt:
      return "gt";
    case BinaryOp::ge:
      return "ge";
    case BinaryOp::relu_backward:
      return "relu backward";
    case BinaryOp::gelu_tanh_backward:
    case BinaryOp::gelu_erf_backward:
      return "gelu backward";
    case BinaryOp::tanh_backward:
      return "tanh backward";
    case BinaryOp::sigmoid_backward:
      return "sigmoid backward";
  }
  return "binary";
}

}  // namespace
}  // namespace gpu

using gpu::launch_strided;
using gpu::typed;

void CudaBackend::fill(const TensorArg& out, double value) {
  const auto plan = plan_strided<1>("fill", out.sizes, {&out.strides});
  activate();
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    launch_strided(stream_, plan, gpu::FillFn<T>{typed<T>(out), convert<T>(value)});
  });
}

void CudaBackend::arange(const TensorArg& out, double start, double step) {
  const std::int64_t n = out.sizes.empty() ? 1 : out.sizes[0];
  if (n == 0) return;
  activate();
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    KILN_LAUNCH(gpu::blocks_for(n), gpu::kThreads, stream_, gpu::arange_kernel<T>)
    (typed<T>(out), n, start, step);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void CudaBackend::copy(const TensorArg& out, const TensorArg& in) {
  const auto plan = plan_strided<2>("copy", out.sizes, {&out.strides, &in.strides});
  activate();
  dispatch_dtype(out.dtype, [&](auto out_tag) {
    using To = decltype(out_tag);
    dispatch_dtype(in.dtype, [&](auto in_tag) {
      using From = decltype(in_tag);
      gpu::launch_elementwise(
          stream_, plan, {out.data, in.data},
          gpu::CopyFn<To, From>{typed<To>(out), typed<const From>(in), plan.strides[1][0]});
    });
  });
}

void CudaBackend::unary(UnaryOp op, const TensorArg& out, const TensorArg& in, double scalar) {
  const char* name = gpu::op_name(op);
  const auto plan = plan_strided<2>(name, out.sizes, {&out.strides, &in.strides});
  activate();
  math::dispatch_unary(op, [&](auto op_tag) {
    constexpr UnaryOp kOp = decltype(op_tag)::value;
    const std::array<const void*, gpu::kMaxOperands> data{out.data, in.data};
    if (out.dtype == DType::f64) {
      using T = double;
      KILN_CHECK(in.dtype == DType::f64, "{}: float64 output, {} input", name, in.dtype);
      launch_strided(stream_, plan,
                     gpu::UnaryFn<T, T, T, kOp>{typed<T>(out), typed<const T>(in), scalar});
      return;
    }
    gpu::dispatch_float_or_bf16(name, out.dtype, [&](auto out_tag) {
      gpu::dispatch_float_or_bf16(name, in.dtype, [&](auto in_tag) {
        using O = decltype(out_tag);
        using I = decltype(in_tag);
        gpu::launch_elementwise(
            stream_, plan, data,
            gpu::UnaryFn<float, O, I, kOp>{typed<O>(out), typed<const I>(in),
                                           static_cast<float>(scalar), plan.strides[1][0]});
      });
    });
  });
}

void CudaBackend::binary(BinaryOp op, const TensorArg& out, const TensorArg& a,
                         const TensorArg& b) {
  const char* name = gpu::op_name(op);
  const auto plan = plan_strided<3>(name, out.sizes, {&out.strides, &a.strides, &b.strides});
  activate();
  math::dispatch_binary(op, [&](auto op_tag) {
    constexpr BinaryOp kOp = decltype(op_tag)::value;
    if (out.dtype == DType::i64 || out.dtype == DType::f64) {
      KILN_CHECK(a.dtype == out.dtype && b.dtype == out.dtype, "{}: dtypes {}, {} and {} differ",
                 name, out.dtype, a.dtype, b.dtype);
      const auto run = [&](auto tag) {
        using T = decltype(tag);
        launch_strided(
            stream_, plan,
            gpu::BinaryFn<T, T, T, T, kOp>{typed<T>(out), typed<const T>(a), typed<const T>(b)});
      };
      if (out.dtype == DType::f64) {
        run(double{});
      } else if constexpr (math::takes_integers(kOp)) {
        run(std::int64_t{});
      }
      return;
    }
    gpu::dispatch_float_or_bf16(name, out.dtype, [&](auto out_tag) {
      gpu::dispatch_float_or_bf16(name, a.dtype, [&](auto a_tag) {
        gpu::dispatch_float_or_bf16(name, b.dtype, [&](auto b_tag) {
          using O = decltype(out_tag);
          using A = decltype(a_tag);
          using B = decltype(b_tag);
          gpu::launch_elementwise(stream_, plan, {out.data, a.data, b.data},
                                  gpu::BinaryFn<float, O, A, B, kOp>{
                                      typed<O>(out), typed<const A>(a), typed<const B>(b),
                                      plan.strides[1][0], plan.strides[2][0]});
        });
      });
    });
  });
}

void CudaBackend::where(const TensorArg& out, const TensorArg& cond, const TensorArg& a,
                        const TensorArg& b) {
  const auto plan =
      plan_strided<4>("where", out.sizes, {&out.strides, &cond.strides, &a.strides, &b.strides});
  activate();
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_dtype(cond.dtype, [&](auto cond_tag) {
      using C = decltype(cond_tag);
      launch_strided(stream_, plan,
                     gpu::WhereFn<T, C>{typed<T>(out), typed<const C>(cond), typed<const T>(a),
                                        typed<const T>(b)});
    });
  });
}

}  // namespace kiln
