// CPU elementwise kernels: fill, arange, copy (with dtype conversion), unary, binary, where.
// The inner loops have a contiguous fast path that the compiler vectorises.
#include <algorithm>
#include <initializer_list>
#include <type_traits>

#include "core/convert.h"
#include "core/cpu/bf16_runs.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/strided_loop.h"
#include "core/elementwise_math.h"

namespace kiln {

namespace {
template <typename T>
T* typed(const TensorArg& a) {
  return static_cast<T*>(a.data);
}
}  // namespace

void CpuBackend::fill(const TensorArg& out, double value) {
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = typed<T>(out);
    const T v = convert<T>(value);
    for_each_run<1>(out.sizes, {&out.strides}, [&](std::int64_t n, auto off, auto st) {
      T* p = o + off[0];
      if (st[0] == 1) {
        for (std::int64_t i = 0; i < n; ++i) p[i] = v;
      } else {
        for (std::int64_t i = 0; i < n; ++i) p[i * st[0]] = v;
      }
    });
  });
}

void CpuBackend::arange(const TensorArg& out, double start, double step) {
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = typed<T>(out);
    const std::int64_t n = out.sizes[0];
    for (std::int64_t i = 0; i < n; ++i) o[i] = convert<T>(start + static_cast<double>(i) * step);
  });
}

void CpuBackend::copy(const TensorArg& out, const TensorArg& in) {
  dispatch_dtype(out.dtype, [&](auto out_tag) {
    using To = decltype(out_tag);
    dispatch_dtype(in.dtype, [&](auto in_tag) {
      using From = decltype(in_tag);
      To* o = typed<To>(out);
      const From* x = typed<From>(in);
      for_each_run<2>(
          out.sizes, {&out.strides, &in.strides}, [&](std::int64_t n, auto off, auto st) {
            To* p = o + off[0];
            const From* q = x + off[1];
            if (st[0] == 1 && st[1] == 1) {
              if constexpr (std::is_same_v<To, bf16> && std::is_same_v<From, float>) {
                round_to_bf16_run(q, p, n);
              } else if constexpr (std::is_same_v<To, float> && std::is_same_v<From, bf16>) {
                widen_bf16_run(q, p, n);
              } else {
                for (std::int64_t i = 0; i < n; ++i) p[i] = convert<To>(q[i]);
              }
            } else {
              for (std::int64_t i = 0; i < n; ++i) p[i * st[0]] = convert<To>(q[i * st[1]]);
            }
          });
    });
  });
}

namespace {

// ---- bf16 operands (Backend::kernels_read_bf16): the float32 kernel's arithmetic on each
// element's float32 value, one rounding where the result is stored in bf16, as the float32 op on
// widened operands then rounded gives. Contiguous runs go a block at a time through float32
// arrays on the stack (the vectorised conversions of core/cpu/bf16_runs.h), never a tensor.

constexpr std::int64_t kBf16Block = 256;

// One operand's elements [i, i + n) of a run as float32: a pointer to them when they already are
// (contiguous float32), else copied (widened) into `buffer`.
template <typename S>
const float* block_values(const S* p, std::int64_t stride, std::int64_t i, std::int64_t n,
                          float* buffer) {
  if constexpr (std::is_same_v<S, float>) {
    if (stride == 1) return p + i;
    for (std::int64_t j = 0; j < n; ++j) buffer[j] = p[(i + j) * stride];
  } else if (stride == 1) {
    widen_bf16_run(p + i, buffer, n);
  } else {
    for (std::int64_t j = 0; j < n; ++j) buffer[j] = to_float(p[(i + j) * stride]);
  }
  return buffer;
}

// out's elements [i, i + n) from float32 values, rounded once when out is bf16.
template <typename S>
void store_block(S* p, std::int64_t stride, std::int64_t i, std::int64_t n, const float* values) {
  if (stride == 1) {
    if constexpr (std::is_same_v<S, float>) {
      std::copy(values, values + n, p + i);
    } else {
      round_to_bf16_run(values, p + i, n);
    }
  } else {
    for (std::int64_t j = 0; j < n; ++j) p[(i + j) * stride] = convert<S>(values[j]);
  }
}

template <UnaryOp kOp, typename O, typename I>
void unary_bf16(const TensorArg& out, const TensorArg& in, float s) {
  O* o = typed<O>(out);
  const I* x = typed<I>(in);
  for_each_run<2>(out.sizes, {&out.strides, &in.strides}, [&](std::int64_t n, auto off, auto st) {
    alignas(64) float a[kBf16Block], y[kBf16Block];
    for (std::int64_t i = 0; i < n; i += kBf16Block) {
      const std::int64_t m = std::min(kBf16Block, n - i);
      const float* q = block_values(x + off[1], st[1], i, m, a);
      for (std::int64_t j = 0; j < m; ++j) y[j] = math::unary<kOp>(q[j], s);
      store_block(o + off[0], st[0], i, m, y);
    }
  });
}

template <BinaryOp kOp, typename O, typename A, typename B>
void binary_bf16(const TensorArg& out, const TensorArg& a, const TensorArg& b) {
  O* o = typed<O>(out);
  const A* x = typed<A>(a);
  const B* y = typed<B>(b);
  for_each_run<3>(out.sizes, {&out.strides, &a.strides, &b.strides},
                  [&](std::int64_t n, auto off, auto st) {
                    alignas(64) float u[kBf16Block], v[kBf16Block], z[kBf16Block];
                    for (std::int64_t i = 0; i < n; i += kBf16Block) {
                      const std::int64_t m = std::min(kBf16Block, n - i);
                      // A stride-0 operand (broadcast) is one value, read once.
                      const float* p = block_values(x + off[1], st[1], i, st[1] == 0 ? 1 : m, u);
                      const float* q = block_values(y + off[2], st[2], i, st[2] == 0 ? 1 : m, v);
                      const std::int64_t pa = st[1] == 0 ? 0 : 1, pb = st[2] == 0 ? 0 : 1;
                      for (std::int64_t j = 0; j < m; ++j)
                        z[j] = math::binary<kOp>(p[j * pa], q[j * pb]);
                      store_block(o + off[0], st[0], i, m, z);
                    }
                  });
}

// Calls f with the storage type of a float32 or bf16 operand.
template <typename F>
void dispatch_float_or_bf16(DType dtype, F&& f) {
  if (dtype == DType::bf16) {
    f(bf16{});
  } else {
    f(float{});
  }
}

bool any_bf16(std::initializer_list<const TensorArg*> operands) {
  for (const TensorArg* t : operands)
    if (t->dtype == DType::bf16) return true;
  return false;
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const TensorArg& out, const TensorArg& in, double scalar) {
  if (any_bf16({&out, &in})) {
    math::dispatch_unary(op, [&](auto op_tag) {
      dispatch_float_or_bf16(out.dtype, [&](auto out_tag) {
        dispatch_float_or_bf16(in.dtype, [&](auto in_tag) {
          unary_bf16<decltype(op_tag)::value, decltype(out_tag), decltype(in_tag)>(
              out, in, static_cast<float>(scalar));
        });
      });
    });
    return;
  }
  dispatch_floating(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    math::dispatch_unary(op, [&](auto op_tag) {
      constexpr UnaryOp kOp = decltype(op_tag)::value;
      T* o = typed<T>(out);
      const T* x = typed<T>(in);
      const T s = static_cast<T>(scalar);
      for_each_run<2>(out.sizes, {&out.strides, &in.strides},
                      [&](std::int64_t n, auto off, auto st) {
                        T* p = o + off[0];
                        const T* q = x + off[1];
                        if (st[0] == 1 && st[1] == 1) {
                          for (std::int64_t i = 0; i < n; ++i) p[i] = math::unary<kOp>(q[i], s);
                        } else {
                          for (std::int64_t i = 0; i < n; ++i)
                            p[i * st[0]] = math::unary<kOp>(q[i * st[1]], s);
                        }
                      });
    });
  });
}

namespace {

template <typename T, BinaryOp kOp>
void binary_loop(const TensorArg& out, const TensorArg& a, const TensorArg& b) {
  T* o = static_cast<T*>(out.data);
  const T* x = static_cast<const T*>(a.data);
  const T* y = static_cast<const T*>(b.data);
  for_each_run<3>(out.sizes, {&out.strides, &a.strides, &b.strides},
                  [&](std::int64_t n, auto off, auto st) {
                    T* p = o + off[0];
                    const T* q = x + off[1];
                    const T* r = y + off[2];
                    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
                      for (std::int64_t i = 0; i < n; ++i) p[i] = math::binary<kOp>(q[i], r[i]);
                    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
                      const T rv = *r;
                      for (std::int64_t i = 0; i < n; ++i) p[i] = math::binary<kOp>(q[i], rv);
                    } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
                      const T qv = *q;
                      for (std::int64_t i = 0; i < n; ++i) p[i] = math::binary<kOp>(qv, r[i]);
                    } else {
                      for (std::int64_t i = 0; i < n; ++i)
                        p[i * st[0]] = math::binary<kOp>(q[i * st[1]], r[i * st[2]]);
                    }
                  });
}

}  // namespace

void CpuBackend::binary(BinaryOp op, const TensorArg& out, const TensorArg& a, const TensorArg& b) {
  math::dispatch_binary(op, [&](auto op_tag) {
    constexpr BinaryOp kOp = decltype(op_tag)::value;
    if (any_bf16({&out, &a, &b})) {
      dispatch_float_or_bf16(out.dtype, [&](auto out_tag) {
        dispatch_float_or_bf16(a.dtype, [&](auto a_tag) {
          dispatch_float_or_bf16(b.dtype, [&](auto b_tag) {
            binary_bf16<kOp, decltype(out_tag), decltype(a_tag), decltype(b_tag)>(out, a, b);
          });
        });
      });
      return;
    }
    if (out.dtype == DType::i64) {
      if constexpr (math::takes_integers(kOp)) binary_loop<std::int64_t, kOp>(out, a, b);
      return;
    }
    dispatch_floating(out.dtype, [&](auto tag) { binary_loop<decltype(tag), kOp>(out, a, b); });
  });
}

void CpuBackend::where(const TensorArg& out, const TensorArg& cond, const TensorArg& a,
                       const TensorArg& b) {
  dispatch_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_dtype(cond.dtype, [&](auto cond_tag) {
      using C = decltype(cond_tag);
      T* o = typed<T>(out);
      const C* c = typed<C>(cond);
      const T* x = typed<T>(a);
      const T* y = typed<T>(b);
      for_each_run<4>(out.sizes, {&out.strides, &cond.strides, &a.strides, &b.strides},
                      [&](std::int64_t n, auto off, auto st) {
                        for (std::int64_t i = 0; i < n; ++i)
                          o[off[0] + i * st[0]] = is_nonzero(c[off[1] + i * st[1]])
                                                      ? x[off[2] + i * st[2]]
                                                      : y[off[3] + i * st[3]];
                      });
    });
  });
}

}  // namespace kiln
