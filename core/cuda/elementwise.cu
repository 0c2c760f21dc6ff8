// CUDA elementwise kernels: fill, arange, copy (with dtype conversion), unary, binary, where.
// The host collapses each call's dims into a StridedPlan (core/cuda/strided.h) passed by value;
// one grid-stride kernel turns a linear index into each operand's offset and calls a small
// functor that does the per-element work with core/elementwise_math.h, the math the CPU backend
// uses. A plan of one dim (contiguous, or broadcast along one run) needs no index division; wider
// plans divide in 32 bits when the element count allows.
#include <cstdint>
#include <limits>

#include "core/convert.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.h"
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

template <typename T>
struct FillFn {
  T* out;
  T value;
  __device__ void operator()(const std::int64_t* off) const { out[off[0]] = value; }
};

template <typename To, typename From>
struct CopyFn {
  To* out;
  const From* in;
  __device__ void operator()(const std::int64_t* off) const {
    out[off[0]] = convert<To>(in[off[1]]);
  }
};

template <typename T, UnaryOp kOp>
struct UnaryFn {
  T* out;
  const T* in;
  T scalar;
  __device__ void operator()(const std::int64_t* off) const {
    out[off[0]] = math::unary<kOp>(in[off[1]], scalar);
  }
};

template <typename T, BinaryOp kOp>
struct BinaryFn {
  T* out;
  const T* a;
  const T* b;
  __device__ void operator()(const std::int64_t* off) const {
    out[off[0]] = math::binary<kOp>(a[off[1]], b[off[2]]);
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
      launch_strided(stream_, plan, gpu::CopyFn<To, From>{typed<To>(out), typed<const From>(in)});
    });
  });
}

void CudaBackend::unary(UnaryOp op, const TensorArg& out, const TensorArg& in, double scalar) {
  const auto plan = plan_strided<2>(gpu::op_name(op), out.sizes, {&out.strides, &in.strides});
  activate();
  dispatch_floating(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    math::dispatch_unary(op, [&](auto op_tag) {
      constexpr UnaryOp kOp = decltype(op_tag)::value;
      launch_strided(
          stream_, plan,
          gpu::UnaryFn<T, kOp>{typed<T>(out), typed<const T>(in), static_cast<T>(scalar)});
    });
  });
}

void CudaBackend::binary(BinaryOp op, const TensorArg& out, const TensorArg& a,
                         const TensorArg& b) {
  const auto plan =
      plan_strided<3>(gpu::op_name(op), out.sizes, {&out.strides, &a.strides, &b.strides});
  activate();
  math::dispatch_binary(op, [&](auto op_tag) {
    constexpr BinaryOp kOp = decltype(op_tag)::value;
    if (out.dtype == DType::i64) {
      if constexpr (math::takes_integers(kOp)) {
        using T = std::int64_t;
        launch_strided(stream_, plan,
                       gpu::BinaryFn<T, kOp>{typed<T>(out), typed<const T>(a), typed<const T>(b)});
      }
      return;
    }
    dispatch_floating(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      launch_strided(stream_, plan,
                     gpu::BinaryFn<T, kOp>{typed<T>(out), typed<const T>(a), typed<const T>(b)});
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
