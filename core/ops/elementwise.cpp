// Elementwise ops and their backward rules.
#include "core/ops/elementwise.h"

#include <cmath>

#include "core/autograd.h"
#include "core/ops/factories.h"
#include "core/ops/op_utils.h"
#include "core/ops/reduction.h"
#include "core/profiler.h"

namespace kiln {

namespace {

// bf16 operands are computed on in float32 and the result is stored in bf16 (the ops' table,
// docs/mixed-precision.md): by the kernel itself where it reads bf16 (kernel_operand), else on
// float32 copies whose result is rounded back. Autograd records the bf16 tensors.
Tensor unary_kernel(std::string_view op, UnaryOp kind, const Tensor& x, double scalar = 0.0) {
  profile::Scope scope(profile::Family::other);
  check_operands(op, std::array{x});
  const Tensor input = kernel_operand(x);
  Tensor out = empty(x.shape(), {input.dtype(), x.device()});
  backend_of(x).unary(kind, arg_of(out), arg_of(input), scalar);
  return stored_as(out, x.dtype());
}

// The dtype of a binary op's result: the operands' (when they agree), or float32 for a bf16 and
// a float32 operand; any other mixture is an error.
DType result_dtype(std::string_view op, const Tensor& a, const Tensor& b) {
  const bool mixed_precision = (a.dtype() == DType::bf16 && b.dtype() == DType::f32) ||
                               (a.dtype() == DType::f32 && b.dtype() == DType::bf16);
  if (!mixed_precision) {
    KILN_CHECK(a.dtype() == b.dtype(),
               "{}: dtypes {} and {} differ (the one implicit promotion is bfloat16 with float32; "
               "convert one with .to(dtype))",
               op, a.dtype(), b.dtype());
    return a.dtype();
  }
  return DType::f32;
}

Tensor binary_kernel(std::string_view op, BinaryOp kind, const Tensor& a, const Tensor& b,
                     bool integers_allowed = false) {
  profile::Scope scope(profile::Family::other);
  check_operands(op, std::array{a, b}, {.accepts = Accepts::any, .same_dtype = false});
  const DType dtype = result_dtype(op, a, b);
  if (!integers_allowed || dtype != DType::i64) check_floating_or_bf16(op, a);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  const Tensor x = kernel_operand(a), y = kernel_operand(b);
  // The result's own dtype where the kernel reads the operands as they are, else float32.
  const bool as_given = x.dtype() == a.dtype() && y.dtype() == b.dtype();
  Tensor out = empty(shape, {as_given ? dtype : compute_dtype(dtype), a.device()});
  backend_of(a).binary(kind, arg_of(out), broadcast_arg(x, shape), broadcast_arg(y, shape));
  return stored_as(out, dtype);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("add", BinaryOp::add, a, b);
  record("add", out, {a, b}, {}, [sa = a.shape(), sb = b.shape()](const Tensor& g, const Saved& s) {
    return Grads{s.needs_grad(0) ? sum_to(g, sa) : Tensor(),
                 s.needs_grad(1) ? sum_to(g, sb) : Tensor()};
  });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("sub", BinaryOp::sub, a, b);
  record("sub", out, {a, b}, {}, [sa = a.shape(), sb = b.shape()](const Tensor& g, const Saved& s) {
    return Grads{s.needs_grad(0) ? sum_to(g, sa) : Tensor(),
                 s.needs_grad(1) ? sum_to(neg(g), sb) : Tensor()};
  });
  return out;
}

// d(ab)/da = b, d(ab)/db = a.
Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("mul", BinaryOp::mul, a, b);
  record("mul", out, {a, b}, {a, b}, [](const Tensor& g, const Saved& s) {
    return Grads{s.needs_grad(0) ? sum_to(mul(g, s[1]), s[0].shape()) : Tensor(),
                 s.needs_grad(1) ? sum_to(mul(g, s[0]), s[1].shape()) : Tensor()};
  });
  return out;
}

// d(a/b)/da = 1/b, d(a/b)/db = -a/b^2.
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_kernel("div", BinaryOp::div, a, b);
  record("div", out, {a, b}, {a, b}, [](const Tensor& g, const Saved& s) {
    const Tensor g_over_b = div(g, s[1]);
    return Grads{s.needs_grad(0) ? sum_to(g_over_b, s[0].shape()) : Tensor(),
                 s.needs_grad(1)
                     ? sum_to(neg(mul(g_over_b, div(compute_copy(s[0]), s[1]))), s[1].shape())
                     : Tensor()};
  });
  return out;
}

Tensor add(const Tensor& a, double b) {
  Tensor out = unary_kernel("add", UnaryOp::add_scalar, a, b);
  record("add", out, {a}, {}, [](const Tensor& g, const Saved&) { return Grads{g}; });
  return out;
}

Tensor sub(const Tensor& a, double b) {
  Tensor out = unary_kernel("sub", UnaryOp::add_scalar, a, -b);
  record("sub", out, {a}, {}, [](const Tensor& g, const Saved&) { return Grads{g}; });
  return out;
}

Tensor mul(const Tensor& a, double b) {
  Tensor out = unary_kernel("mul", UnaryOp::mul_scalar, a, b);
  record("mul", out, {a}, {}, [b](const Tensor& g, const Saved&) { return Grads{mul(g, b)}; });
  return out;
}

Tensor div(const Tensor& a, double b) {
  Tensor out = unary_kernel("div", UnaryOp::div_scalar, a, b);
  record("div", out, {a}, {}, [b](const Tensor& g, const Saved&) { return Grads{div(g, b)}; });
  return out;
}

Tensor rsub(double a, const Tensor& b) {
  Tensor out = unary_kernel("rsub", UnaryOp::rsub_scalar, b, a);
  record("rsub", out, {b}, {}, [](const Tensor& g, const Saved&) { return Grads{neg(g)}; });
  return out;
}

// d(a/x)/dx = -a/x^2 = -y/x.
Tensor rdiv(double a, const Tensor& b) {
  Tensor out = unary_kernel("rdiv", UnaryOp::rdiv_scalar, b, a);
  record("rdiv", out, {b}, {b, out}, [](const Tensor& g, const Saved& s) {
    return Grads{neg(mul(g, div(compute_copy(s[1]), s[0])))};
  });
  return out;
}

Tensor neg(const Tensor& x) {
  Tensor out = unary_kernel("neg", UnaryOp::neg, x);
  record("neg", out, {x}, {}, [](const Tensor& g, const Saved&) { return Grads{neg(g)}; });
  return out;
}

// d exp(x) = exp(x) dx: saves the output.
Tensor exp(const Tensor& x) {
  Tensor out = unary_kernel("exp", UnaryOp::exp, x);
  record("exp", out, {x}, {out},
         [](const Tensor& g, const Saved& s) { return Grads{mul(g, s[0])}; });
  return out;
}

Tensor log(const Tensor& x) {
  Tensor out = unary_kernel("log", UnaryOp::log, x);
  record("log", out, {x}, {x}, [](const Tensor& g, const Saved& s) { return Grads{div(g, s[0])}; });
  return out;
}

// d sqrt(x) = dx / (2 sqrt(x)).
Tensor sqrt(const Tensor& x) {
  Tensor out = unary_kernel("sqrt", UnaryOp::sqrt, x);
  record("sqrt", out, {x}, {out},
         [](const Tensor& g, const Saved& s) { return Grads{div(mul(g, 0.5), s[0])}; });
  return out;
}

// d x^p = p x^(p-1) dx.
Tensor pow(const Tensor& x, double exponent) {
  Tensor out = unary_kernel("pow", UnaryOp::pow_scalar, x, exponent);
  // d(x^p)/dx = p x^(p - 1); x^0 is the constant 1, whose gradient is 0 everywhere (also at
  // x = 0 or inf, where p x^(p - 1) would be 0 * inf = NaN; PyTorch's rule too).
  record("pow", out, {x}, {x}, [exponent](const Tensor& g, const Saved& s) {
    if (exponent == 0.0) return Grads{zeros(g.shape(), {g.dtype(), g.device()})};
    return Grads{mul(g, mul(pow(compute_copy(s[0]), exponent - 1.0), exponent))};
  });
  return out;
}

// Activations: backward kernels read the saved output (tanh, sigmoid, relu) or input (gelu).
namespace {
Tensor activation_backward(BinaryOp kind, const Tensor& g, const Tensor& saved) {
  profile::Scope scope(profile::Family::other);
  Tensor out = empty(g.shape(), {g.dtype(), g.device()});
  backend_of(g).binary(kind, arg_of(out), arg_of(g),
                       broadcast_arg(kernel_operand(saved), g.shape()));
  return out;
}
}  // namespace

Tensor tanh(const Tensor& x) {
  Tensor out = unary_kernel("tanh", UnaryOp::tanh, x);
  record("tanh", out, {x}, {out}, [](const Tensor& g, const Saved& s) {
    return Grads{activation_backward(BinaryOp::tanh_backward, g, s[0])};
  });
  return out;
}

Tensor sigmoid(const Tensor& x) {
  Tensor out = unary_kernel("sigmoid", UnaryOp::sigmoid, x);
  record("sigmoid", out, {x}, {out}, [](const Tensor& g, const Saved& s) {
    return Grads{activation_backward(BinaryOp::sigmoid_backward, g, s[0])};
  });
  return out;
}

// relu(x) = max(x, 0), NaN staying NaN; relu'(x) = [x > 0], and 1 for NaN: the gradient passes
// unless relu(x) <= 0 (PyTorch's rule, which keeps a NaN visible downstream). Saves the output.
Tensor relu(const Tensor& x) {
  Tensor out = unary_kernel("relu", UnaryOp::relu, x);
  record("relu", out, {x}, {out}, [](const Tensor& g, const Saved& s) {
    return Grads{activation_backward(BinaryOp::relu_backward, g, s[0])};
  });
  return out;
}

Tensor gelu(const Tensor& x, GeluApproximation approximation) {
  const bool tanh_form = approximation == GeluApproximation::tanh;
  Tensor out = unary_kernel("gelu", tanh_form ? UnaryOp::gelu_tanh : UnaryOp::gelu_erf, x);
  record("gelu", out, {x}, {x}, [tanh_form](const Tensor& g, const Saved& s) {
    return Grads{activation_backward(
        tanh_form ? BinaryOp::gelu_tanh_backward : BinaryOp::gelu_erf_backward, g, s[0])};
  });
  return out;
}

Tensor eq(const Tensor& a, const Tensor& b) {
  return binary_kernel("eq", BinaryOp::eq, a, b, true);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return binary_kernel("ne", BinaryOp::ne, a, b, true);
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return binary_kernel("lt", BinaryOp::lt, a, b, true);
}
Tensor le(const Tensor& a, const Tensor& b) {
  return binary_kernel("le", BinaryOp::le, a, b, true);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return binary_kernel("gt", BinaryOp::gt, a, b, true);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return binary_kernel("ge", BinaryOp::ge, a, b, true);
}

}  // namespace kiln
