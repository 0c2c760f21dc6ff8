// Conversion of one element between kiln's element types (float, double, int64, bf16), for the
// kernels that copy and fill across dtypes on both backends. Conversions to bf16 round to nearest
// with ties to even, once, from every source type (core/bf16.h); from bf16 they go through the
// exact float32 value. Between the other types it is static_cast, as C++ converts.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/bf16.h"
#include "core/host_device.h"

namespace kiln {

template <typename To, typename From>
KILN_HOST_DEVICE inline To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, bf16>) {
    return to_bf16(x);
  } else if constexpr (std::is_same_v<From, bf16>) {
    return static_cast<To>(to_float(x));
  } else {
    return static_cast<To>(x);
  }
}

// Whether x is nonzero, as `x != 0` says for numbers (NaN is nonzero, -0 is zero): where's test of
// its condition.
template <typename T>
KILN_HOST_DEVICE inline bool is_nonzero(T x) {
  return x != T(0);
}
KILN_HOST_DEVICE inline bool is_nonzero(bf16 x) { return (x.bits & 0x7fffu) != 0; }

}  // namespace kiln
