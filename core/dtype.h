// Element types. float32 is the working type, float64 exists for gradient checks, int64 holds
// token ids and indices. There is no implicit promotion: mixing float32 and float64 in one op is
// an error, and a C++ scalar operand takes the tensor's dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>

namespace kiln {

enum class DType : std::uint8_t { f32, f64, i64 };

constexpr std::size_t dtype_size(DType dtype) { return dtype == DType::f32 ? 4 : 8; }

constexpr bool is_floating(DType dtype) { return dtype != DType::i64; }

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::i64:
      return "int64";
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

// Calls f with a value of the C++ type that matches dtype: dispatch_dtype(d, [&]<class T>(T) {...})
// is written as dispatch_dtype(d, [&](auto tag) { using T = decltype(tag); ... }).
template <typename F>
decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    case DType::i64:
      return f(std::int64_t{});
  }
  return f(float{});
}

// As dispatch_dtype, for kernels that exist only for float32 and float64.
template <typename F>
decltype(auto) dispatch_floating(DType dtype, F&& f) {
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
