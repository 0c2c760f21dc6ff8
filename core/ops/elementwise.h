// Elementwise ops. Binary ops broadcast (NumPy rules) both ways. Arithmetic takes float32,
// float64 or bfloat16 (computed in float32 and rounded back: bf16 in, bf16 out; a bf16 and a
// float32 operand give float32, the one promotion); comparisons also take int64 and give 1/0 in
// the inputs' dtype. A C++ scalar operand takes the dtype the op computes in: the tensor's for
// float32 and float64, float32 for bf16, so that x op s is rounded to bf16 once, from float32
// arithmetic (PyTorch 1.13 rounds s to bf16 first: bf16 255 * 1.00390625 is 256 here, 255
// there). All arithmetic ops are differentiable; a bf16 input's gradient is float32.
#pragma once

#include "core/tensor.h"

namespace kiln {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor rsub(double a, const Tensor& b);  // a - b
Tensor rdiv(double a, const Tensor& b);  // a / b

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
enum class GeluApproximation { none, tanh };  // none: x * Phi(x) with erf; tanh: the GPT-2 form
Tensor gelu(const Tensor& x, GeluApproximation approximation = GeluApproximation::none);

// Comparisons (not differentiable).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return rsub(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(double a, const Tensor& b) { return rdiv(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace kiln
