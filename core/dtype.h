// Element types. float32 is the working type, float64 exists for gradient checks, int64 holds
// token ids and indices, bfloat16 (core/bf16.h) is a storage type for mixed precision: it is
// created, copied, viewed, converted, printed and saved, and read by the matrix products and
// attention (bf16 operands, float32 sums, core/autocast.h) and by the ops after them (elementwise
// ops, reductions, dropout, softmax, layer_norm, cross-entropy), which compute in float32
// (docs/mixed-precision.md); the rest (random factories, in-place updates, optimizers) refuse it
// by name ("uniform: bfloat16 is not supported yet"). The one implicit promotion: an elementwise
// op on a bfloat16 and a float32 tensor gives float32. Mixing float32 and float64 in one op is an
// error, and a C++ scalar operand takes the dtype the op computes in (the tensor's; float32 for
// bfloat16, core/ops/elementwise.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>

#include "core/bf16.h"
#include "core/error.h"

namespace kiln {

enum class DType : std::uint8_t { f32, f64, i64, bf16 };

constexpr std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::bf16:
      return 2;
  }
  return 8;
}

constexpr bool is_floating(DType dtype) { return dtype != DType::i64; }

// A dtype that is stored and converted but that no compute kernel supports yet (bfloat16).
constexpr bool is_storage_only(DType dtype) { return dtype == DType::bf16; }

// The dtype that arithmetic on `dtype` values happens in: float32 for bfloat16 (a matrix product
// of bf16 operands sums in float32 and returns float32), the dtype itself otherwise. A tensor's
// gradient has this dtype, so a bf16 tensor's gradient is float32 and accumulates in float32.
constexpr DType compute_dtype(DType dtype) { return dtype == DType::bf16 ? DType::f32 : dtype; }

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::i64:
      return "int64";
    case DType::bf16:
      return "bfloat16";
  }
  return "?";
}

// The C++ type of each dtype, for kernels: DTypeOf<float>::value == DType::f32.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct DTypeOf<bf16> {
  static constexpr DType value = DType::bf16;
};

// Calls f with a value of the C++ type that matches dtype: dispatch_dtype(d, [&]<class T>(T) {...})
// is written as dispatch_dtype(d, [&](auto tag) { using T = decltype(tag); ... }). For kernels
// that move or convert elements (fill, copy, where): T can be kiln::bf16, which has no arithmetic;
// core/convert.h converts between any two element types.
template <typename F>
decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    case DType::i64:
      return f(std::int64_t{});
    case DType::bf16:
      return f(bf16{});
  }
  return f(float{});
}

// As dispatch_dtype, for kernels that exist only for float32 and float64. The ops check dtypes
// first with the op's name (core/ops/op_utils.h); this error is the last guard, so a bfloat16
// buffer is never computed on as if it held floats.
template <typename F>
decltype(auto) dispatch_floating(DType dtype, F&& f) {
  KILN_CHECK(!is_storage_only(dtype), "kernel: {} is not supported yet", dtype_name(dtype));
  if (dtype == DType::f64) return f(double{});
  return f(float{});
}

}  // namespace kiln

template <>
struct fmt::formatter<kiln::DType> : fmt::formatter<std::string_view> {
  auto format(kiln::DType dtype, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(kiln::dtype_name(dtype), ctx);
  }
};
