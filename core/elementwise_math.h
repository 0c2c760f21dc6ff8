// Per-element math of the unary and binary kernels, written once for the CPU and CUDA backends.
// math::unary<op>(x, s) and math::binary<op>(a, b) are selected at compile time; the
// dispatch_* helpers turn a runtime op into a compile-time one, once per kernel call.
#pragma once

#include <cmath>
#include <type_traits>

#include "core/backend.h"
#include "core/host_device.h"

namespace kiln::math {

// The C library's float and double functions, callable from host and device code alike.
KILN_HOST_DEVICE inline float exp(float x) { return ::expf(x); }
KILN_HOST_DEVICE inline double exp(double x) { return ::exp(x); }
KILN_HOST_DEVICE inline float log(float x) { return ::logf(x); }
KILN_HOST_DEVICE inline double log(double x) { return ::log(x); }
KILN_HOST_DEVICE inline float sqrt(float x) { return ::sqrtf(x); }
KILN_HOST_DEVICE inline double sqrt(double x) { return ::sqrt(x); }
KILN_HOST_DEVICE inline float tanh(float x) { return ::tanhf(x); }
KILN_HOST_DEVICE inline double tanh(double x) { return ::tanh(x); }
KILN_HOST_DEVICE inline float erf(float x) { return ::erff(x); }
KILN_HOST_DEVICE inline double erf(double x) { return ::erf(x); }
KILN_HOST_DEVICE inline float pow(float x, float p) { return ::powf(x, p); }
KILN_HOST_DEVICE inline double pow(double x, double p) { return ::pow(x, p); }

// sqrt(2/pi) and 1/sqrt(2pi): GELU's constants.
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kGeluCubic = 0.044715;

template <typename T>
KILN_HOST_DEVICE inline T sigmoid(T x) {
  return T(1) / (T(1) + exp(-x));
}

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <typename T>
KILN_HOST_DEVICE inline T gelu_tanh(T x) {
  const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
  return T(0.5) * x * (T(1) + tanh(u));
}
template <typename T>
KILN_HOST_DEVICE inline T gelu_tanh_grad(T x) {
  const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
  const T t = tanh(u);
  const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
}

// GELU, exact: x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))).
template <typename T>
KILN_HOST_DEVICE inline T gelu_erf(T x) {
  return T(0.5) * x * (T(1) + erf(x * T(kInvSqrt2)));
}
template <typename T>
KILN_HOST_DEVICE inline T gelu_erf_grad(T x) {
  return T(0.5) * (T(1) + erf(x * T(kInvSqrt2))) + x * T(kInvSqrt2Pi) * exp(T(-0.5) * x * x);
}

template <UnaryOp op, typename T>
KILN_HOST_DEVICE inline T unary(T x, T s) {
  if constexpr (op == UnaryOp::neg)
    return -x;
  else if constexpr (op == UnaryOp::exp)
    return exp(x);
  else if constexpr (op == UnaryOp::log)
    return log(x);
  else if constexpr (op == UnaryOp::sqrt)
    return sqrt(x);
  else if constexpr (op == UnaryOp::tanh)
    return tanh(x);
  else if constexpr (op == UnaryOp::sigmoid)
    return sigmoid(x);
  else if constexpr (op == UnaryOp::relu)
    return x < T(0) ? T(0) : x;  // NaN and -0 pass through, as in PyTorch
  else if constexpr (op == UnaryOp::gelu_tanh)
    return gelu_tanh(x);
  else if constexpr (op == UnaryOp::gelu_erf)
    return gelu_erf(x);
  else if constexpr (op == UnaryOp::pow_scalar)
    return pow(x, s);
  else if constexpr (op == UnaryOp::add_scalar)
    return x + s;
  else if constexpr (op == UnaryOp::mul_scalar)
    return x * s;
  else if constexpr (op == UnaryOp::rsub_scalar)
    return s - x;
  else if constexpr (op == UnaryOp::rdiv_scalar)
    return s / x;
  else
    return x / s;  // div_scalar
}

constexpr bool is_comparison(BinaryOp op) {
  return op == BinaryOp::eq || op == BinaryOp::ne || op == BinaryOp::lt || op == BinaryOp::le ||
         op == BinaryOp::gt || op == BinaryOp::ge;
}

// The binary ops the backends take int64 operands for: the comparisons, and add for the ops' own
// index arithmetic (exact; the public add stays floating, as the differential corpus expects).
constexpr bool takes_integers(BinaryOp op) { return is_comparison(op) || op == BinaryOp::add; }

template <BinaryOp op, typename T>
KILN_HOST_DEVICE inline T binary(T a, T b) {
  if constexpr (op == BinaryOp::add)
    return a + b;
  else if constexpr (op == BinaryOp::sub)
    return a - b;
  else if constexpr (op == BinaryOp::mul)
    return a * b;
  else if constexpr (op == BinaryOp::div)
    return a / b;
  else if constexpr (op == BinaryOp::eq)
    return a == b ? T(1) : T(0);
  else if constexpr (op == BinaryOp::ne)
    return a != b ? T(1) : T(0);
  else if constexpr (op == BinaryOp::lt)
    return a < b ? T(1) : T(0);
  else if constexpr (op == BinaryOp::le)
    return a <= b ? T(1) : T(0);
  else if constexpr (op == BinaryOp::gt)
    return a > b ? T(1) : T(0);
  else if constexpr (op == BinaryOp::ge)
    return a >= b ? T(1) : T(0);
  else if constexpr (op == BinaryOp::relu_backward)
    return b <= T(0) ? T(0) : a;  // b = relu(x): a NaN x passes its gradient, as in PyTorch
  else if constexpr (op == BinaryOp::gelu_tanh_backward)
    return a * gelu_tanh_grad(b);
  else if constexpr (op == BinaryOp::gelu_erf_backward)
    return a * gelu_erf_grad(b);
  else if constexpr (op == BinaryOp::tanh_backward)
    return a * (T(1) - b * b);
  else
    return a * b * (T(1) - b);  // sigmoid_backward
}

template <UnaryOp op>
using UnaryTag = std::integral_constant<UnaryOp, op>;
template <BinaryOp op>
using BinaryTag = std::integral_constant<BinaryOp, op>;

// Calls f(UnaryTag<op>{}) for the runtime op.
template <typename F>
void dispatch_unary(UnaryOp op, F&& f) {
  switch (op) {
    case UnaryOp::neg:
      return f(UnaryTag<UnaryOp::neg>{});
    case UnaryOp::exp:
      return f(UnaryTag<UnaryOp::exp>{});
    case UnaryOp::log:
      return f(UnaryTag<UnaryOp::log>{});
    case UnaryOp::sqrt:
      return f(UnaryTag<UnaryOp::sqrt>{});
    case UnaryOp::tanh:
      return f(UnaryTag<UnaryOp::tanh>{});
    case UnaryOp::sigmoid:
      return f(UnaryTag<UnaryOp::sigmoid>{});
    case UnaryOp::relu:
      return f(UnaryTag<UnaryOp::relu>{});
    case UnaryOp::gelu_tanh:
      return f(UnaryTag<UnaryOp::gelu_tanh>{});
    case UnaryOp::gelu_erf:
      return f(UnaryTag<UnaryOp::gelu_erf>{});
    case UnaryOp::pow_scalar:
      return f(UnaryTag<UnaryOp::pow_scalar>{});
    case UnaryOp::add_scalar:
      return f(UnaryTag<UnaryOp::add_scalar>{});
    case UnaryOp::mul_scalar:
      return f(UnaryTag<UnaryOp::mul_scalar>{});
    case UnaryOp::rsub_scalar:
      return f(UnaryTag<UnaryOp::rsub_scalar>{});
    case UnaryOp::rdiv_scalar:
      return f(UnaryTag<UnaryOp::rdiv_scalar>{});
    case UnaryOp::div_scalar:
      return f(UnaryTag<UnaryOp::div_scalar>{});
  }
}

// Calls f(BinaryTag<op>{}) for the runtime op.
template <typename F>
void dispatch_binary(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::add:
      return f(BinaryTag<BinaryOp::add>{});
    case BinaryOp::sub:
      return f(BinaryTag<BinaryOp::sub>{});
    case BinaryOp::mul:
      return f(BinaryTag<BinaryOp::mul>{});
    case BinaryOp::div:
      return f(BinaryTag<BinaryOp::div>{});
    case BinaryOp::eq:
      return f(BinaryTag<BinaryOp::eq>{});
    case BinaryOp::ne:
      return f(BinaryTag<BinaryOp::ne>{});
    case BinaryOp::lt:
      return f(BinaryTag<BinaryOp::lt>{});
    case BinaryOp::le:
      return f(BinaryTag<BinaryOp::le>{});
    case BinaryOp::gt:
      return f(BinaryTag<BinaryOp::gt>{});
    case BinaryOp::ge:
      return f(BinaryTag<BinaryOp::ge>{});
    case BinaryOp::relu_backward:
      return f(BinaryTag<BinaryOp::relu_backward>{});
    case BinaryOp::gelu_tanh_backward:
      return f(BinaryTag<BinaryOp::gelu_tanh_backward>{});
    case BinaryOp::gelu_erf_backward:
      return f(BinaryTag<BinaryOp::gelu_erf_backward>{});
    case BinaryOp::tanh_backward:
      return f(BinaryTag<BinaryOp::tanh_backward>{});
    case BinaryOp::sigmoid_backward:
      return f(BinaryTag<BinaryOp::sigmoid_backward>{});
  }
}

}  // namespace kiln::math
