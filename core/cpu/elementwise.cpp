// CPU elementwise kernels: fill, arange, copy (with dtype conversion), unary, binary, where.
// The inner loops have a contiguous fast path that the compiler vectorises.
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

void CpuBackend::unary(UnaryOp op, const TensorArg& out, const TensorArg& in, double scalar) {
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
    if (out.dtype == DType::i64) {
      if constexpr (math::is_comparison(kOp)) binary_loop<std::int64_t, kOp>(out, a, b);
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
