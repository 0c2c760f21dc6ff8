// Op-table rows for the core ops: elementwise arithmetic and activations, reductions, matmul and
// views. Each row generates gradcheck/, noncontig/, twice/, errors/ and parity/ test cases.
#include "core/kiln.h"
#include "tests/harness/op_table.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

using Inputs = std::vector<Tensor>;

// Binary samples: equal shapes, broadcasting either way and both ways, a 0-dim operand,
// transposed and sliced operands.
std::vector<OpSample> binary_samples(double lo = -2.0, double hi = 2.0) {
  return {
      {"same_shape",
       [=](DType d, Generator& g) {
         return Inputs{u({3, 4}, d, g, lo, hi), u({3, 4}, d, g, lo, hi)};
       }},
      {"broadcast_right",
       [=](DType d, Generator& g) {
         return Inputs{u({3, 4}, d, g, lo, hi), u({4}, d, g, lo, hi)};
       }},
      {"broadcast_left",
       [=](DType d, Generator& g) {
         return Inputs{u({2, 1, 4}, d, g, lo, hi), u({3, 4}, d, g, lo, hi)};
       }},
      {"broadcast_both",
       [=](DType d, Generator& g) {
         return Inputs{u({3, 1}, d, g, lo, hi), u({1, 4}, d, g, lo, hi)};
       }},
      {"scalar_operand",
       [=](DType d, Generator& g) {
         return Inputs{u({}, d, g, lo, hi), u({2, 3}, d, g, lo, hi)};
       }},
      {"transposed",
       [=](DType d, Generator& g) {
         return Inputs{u({4, 3}, d, g, lo, hi).t(), u({3, 4}, d, g, lo, hi)};
       }},
      {"sliced",
       [=](DType d, Generator& g) {
         return Inputs{u({3, 8}, d, g, lo, hi).slice(1, 1, 8, 2), u({3, 4}, d, g, lo, hi)};
       }},
  };
}

std::vector<ErrorCase> binary_errors(
    const std::function<Tensor(const Tensor&, const Tensor&)>& op) {
  return {
      {"shapes that do not broadcast",
       [op] {
         op(ones({2, 3}), ones({4}));
       }},
      {"mixed dtypes", [op] { op(ones({2}), ones({2}, {.dtype = DType::f64})); }},
      {"int64 arithmetic",
       [op] { op(arange(2, {.dtype = DType::i64}), arange(2, {.dtype = DType::i64})); }},
      {"undefined operand", [op] { op(ones({2}), Tensor()); }},
  };
}

// A binary op's row; `with_scalar` is its tensor-scalar form, checked as one more sample.
void binary_row(const std::string& name,
                const std::function<Tensor(const Tensor&, const Tensor&)>& op,
                const std::function<Tensor(const Tensor&)>& with_scalar, double lo = -2.0,
                double hi = 2.0) {
  std::vector<OpSample> samples = binary_samples(lo, hi);
  samples.push_back({"scalar_constant",
                     [=](DType d, Generator& g) {
                       return Inputs{u({3, 4}, d, g, lo, hi)};
                     },
                     {},
                     [with_scalar](const Inputs& x) { return with_scalar(x[0]); }});
  std::vector<ErrorCase> errors = binary_errors(op);
  errors.push_back(
      {"int64 with a scalar", [with_scalar] { with_scalar(arange(2, {.dtype = DType::i64})); }});
  register_op({name, [op](const Inputs& x) { return op(x[0], x[1]); }, samples, errors});
}

// Unary samples over a domain [lo, hi): a matrix, a 0-dim tensor, a transposed view.
std::vector<OpSample> unary_samples(double lo, double hi, double margin = 0.0) {
  auto make = [=](const Shape& s, DType d, Generator& g) {
    return margin > 0 ? away_from_zero(s, d, g, margin, lo, hi) : u(s, d, g, lo, hi);
  };
  return {
      {"matrix",
       [=](DType d, Generator& g) {
         return Inputs{make({3, 5}, d, g)};
       }},
      {"scalar", [=](DType d, Generator& g) { return Inputs{make({}, d, g)}; }},
      {"transposed",
       [=](DType d, Generator& g) {
         return Inputs{make({5, 3}, d, g).t()};
       }},
  };
}

void unary_row(const std::string& name, const std::function<Tensor(const Tensor&)>& op,
               double lo = -2.0, double hi = 2.0, double margin = 0.0) {
  register_op({name,
               [op](const Inputs& x) { return op(x[0]); },
               unary_samples(lo, hi, margin),
               {{"int64 input", [op] { op(arange(3, {.dtype = DType::i64})); }},
                {"undefined input", [op] { op(Tensor()); }}}});
}

const bool elementwise_rows = [] {
  binary_row(
      "add", [](const Tensor& a, const Tensor& b) { return add(a, b); },
      [](const Tensor& x) { return add(x, 1.5); });
  binary_row(
      "sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
      [](const Tensor& x) { return sub(x, 1.5); });
  binary_row(
      "mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
      [](const Tensor& x) { return mul(x, -2.5); });
  binary_row(
      "div", [](const Tensor& a, const Tensor& b) { return div(a, b); },
      [](const Tensor& x) { return div(x, 4.0); }, 0.5, 2.0);
  unary_row("rsub", [](const Tensor& x) { return rsub(3.0, x); });
  unary_row(
      "rdiv", [](const Tensor& x) { return rdiv(3.0, x); }, 0.5, 2.0);
  unary_row("neg", [](const Tensor& x) { return neg(x); });
  unary_row("exp", [](const Tensor& x) { return exp(x); });
  unary_row(
      "log", [](const Tensor& x) { return log(x); }, 0.1, 3.0);
  unary_row(
      "sqrt", [](const Tensor& x) { return sqrt(x); }, 0.1, 3.0);
  unary_row(
      "pow", [](const Tensor& x) { return pow(x, 2.5); }, 0.1, 3.0);
  unary_row("tanh", [](const Tensor& x) { return tanh(x); });
  unary_row("sigmoid", [](const Tensor& x) { return sigmoid(x); });
  unary_row(
      "relu", [](const Tensor& x) { return relu(x); }, -2.0, 2.0, 1e-3);
  register_op({"gelu",
               [](const Inputs& x) { return gelu(x[0], GeluApproximation::none); },
               [] {
                 std::vector<OpSample> samples = unary_samples(-3.0, 3.0);
                 samples.push_back(
                     {"tanh_form",
                      [](DType d, Generator& g) {
                        return Inputs{u({3, 5}, d, g, -3, 3)};
                      },
                      {},
                      [](const Inputs& x) { return gelu(x[0], GeluApproximation::tanh); }});
                 return samples;
               }(),
               {{"int64 input", [] { gelu(arange(3, {.dtype = DType::i64})); }}}});
  return true;
}();

const bool reduction_rows = [] {
  register_op({"sum",
               [](const Inputs& x) { return sum(x[0]); },
               {{"all",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 4}, d, g)};
                 }},
                {"scalar", [](DType d, Generator& g) { return Inputs{u({}, d, g)}; }},
                {"dims_keepdim",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 3, 4}, d, g)};
                 },
                 {},
                 [](const Inputs& x) {
                   return sum(x[0], {0, 2}, true);
                 }},
                {"dims_permuted",
                 [](DType d, Generator& g) {
                   return Inputs{u({4, 3, 2}, d, g).permute({2, 1, 0})};
                 },
                 {},
                 [](const Inputs& x) {
                   return sum(x[0], {0, 2});
                 }},
                {"middle_dim",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 5, 3}, d, g)};
                 },
                 {},
                 [](const Inputs& x) { return sum(x[0], {-2}); }}},
               {{"dim out of range",
                 [] {
                   sum(ones({2, 3}), {2});
                 }},
                {"repeated dim",
                 [] {
                   sum(ones({2, 3}), {1, -1});
                 }},
                {"int64 input", [] { sum(arange(3, {.dtype = DType::i64})); }}}});
  register_op({"mean",
               [](const Inputs& x) { return mean(x[0], {1}); },
               {{"rows",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 4}, d, g)};
                 }},
                {"sliced",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 8}, d, g).slice(1, 0, 8, 2)};
                 }},
                {"all",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 3}, d, g)};
                 },
                 {},
                 [](const Inputs& x) { return mean(x[0]); }}},
               {{"empty dim",
                 [] {
                   mean(ones({2, 0}), {1});
                 }},
                {"dim out of range", [] { mean(ones({2}), {1}); }}}});
  // max: distinct values (a shuffled ramp) so no ties sit at a kink.
  auto distinct = [](const Shape& s, DType d, Generator& g) {
    const std::int64_t n = numel_of(s);
    const std::vector<double> r = uniform({n}, 0.0, 1.0, {DType::f64}, &g).to_vector<double>();
    std::vector<double> v(n);
    for (std::int64_t i = 0; i < n; ++i) v[i] = 0.1 * static_cast<double>(i) + 0.01 * r[i];
    for (std::int64_t i = n - 1; i > 0; --i)
      std::swap(v[i], v[static_cast<std::int64_t>(r[i] * static_cast<double>(i + 1)) % (i + 1)]);
    return from_vector(v, s).to(d);
  };
  register_op({"max",
               [](const Inputs& x) { return max(x[0], 1).values; },
               {{"rows",
                 [=](DType d, Generator& g) {
                   return Inputs{distinct({3, 5}, d, g)};
                 }},
                {"keepdim_3d",
                 [=](DType d, Generator& g) {
                   return Inputs{distinct({2, 4, 3}, d, g)};
                 },
                 {},
                 [](const Inputs& x) { return max(x[0], 1, true).values; }}},
               {{"dim out of range",
                 [] {
                   max(ones({2, 3}), 2);
                 }},
                {"0-dim input", [] { max(ones({}), 0); }},
                {"int64 input", [] { max(arange(3, {.dtype = DType::i64}), 0); }}}});
  return true;
}();

const bool matmul_rows = [] {
  const std::vector<ErrorCase> errors = {
      {"inner dims differ",
       [] {
         matmul(ones({2, 3}), ones({4, 5}));
       }},
      {"batch dims do not broadcast",
       [] {
         matmul(ones({2, 2, 3}), ones({3, 3, 4}));
       }},
      {"0-dim operand", [] { matmul(ones({}), ones({3})); }},
      {"mixed dtypes",
       [] {
         matmul(ones({2, 3}), ones({3, 2}, {.dtype = DType::f64}));
       }},
  };
  register_op({"matmul",
               [](const Inputs& x) { return matmul(x[0], x[1]); },
               {{"2d",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 4}, d, g), u({4, 5}, d, g)};
                 }},
                {"transposed_a",
                 [](DType d, Generator& g) {
                   return Inputs{u({4, 3}, d, g).t(), u({4, 5}, d, g)};
                 }},
                {"transposed_b",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 4}, d, g), u({5, 4}, d, g).t()};
                 }},
                {"batched",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 3, 4}, d, g), u({2, 4, 2}, d, g)};
                 }},
                {"broadcast_batch",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 1, 3, 4}, d, g), u({3, 4, 2}, d, g)};
                 }},
                {"batch_times_matrix",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 3, 4}, d, g), u({4, 5}, d, g)};
                 }},
                {"vector_matrix",
                 [](DType d, Generator& g) {
                   return Inputs{u({4}, d, g), u({4, 3}, d, g)};
                 }},
                {"matrix_vector",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 4}, d, g), u({4}, d, g)};
                 }}},
               errors,
               1e-4});
  return true;
}();

const bool view_rows = [] {
  auto one_input = [](const Shape& s) {
    return std::vector<OpSample>{
        {"input", [s](DType d, Generator& g) { return Inputs{u(s, d, g)}; }}};
  };
  register_op({"view",
               [](const Inputs& x) {
                 return x[0].view({4, -1});
               },
               one_input({2, 6}),
               {{"impossible shape",
                 [] {
                   ones({2, 6}).view({5, -1});
                 }},
                {"incompatible strides", [] {
                   ones({2, 6}).t().view({-1});
                 }}}});
  register_op({"reshape",
               [](const Inputs& x) { return x[0].t().reshape({-1}); },
               one_input({2, 6}),
               {{"wrong element count", [] {
                   ones({2, 6}).reshape({5});
                 }}}});
  register_op({"transpose",
               [](const Inputs& x) { return x[0].transpose(0, 2); },
               one_input({2, 3, 4}),
               {{"dim out of range", [] {
                   ones({2, 3}).transpose(0, 3);
                 }}}});
  register_op({"permute",
               [](const Inputs& x) {
                 return x[0].permute({1, 2, 0});
               },
               one_input({2, 3, 4}),
               {{"repeated dim",
                 [] {
                   ones({2, 3}).permute({1, 1});
                 }},
                {"wrong count", [] {
                   ones({2, 3}).permute({0});
                 }}}});
  register_op({"narrow",
               [](const Inputs& x) { return x[0].narrow(1, 1, 2); },
               one_input({3, 4}),
               {{"out of range", [] {
                   ones({3, 4}).narrow(1, 3, 2);
                 }}}});
  register_op({"slice",
               [](const Inputs& x) { return x[0].slice(1, 1, 6, 2); },
               one_input({3, 7}),
               {{"zero step", [] {
                   ones({3, 4}).slice(1, 0, 4, 0);
                 }}}});
  register_op({"select",
               [](const Inputs& x) { return x[0].select(0, -1); },
               one_input({3, 4}),
               {{"index out of range", [] {
                   ones({3, 4}).select(0, 3);
                 }}}});
  register_op({"expand",
               [](const Inputs& x) {
                 return x[0].expand({2, 3, 4});
               },
               one_input({3, 1}),
               {{"non-singleton dim",
                 [] {
                   ones({3, 2}).expand({3, 4});
                 }},
                {"fewer dims", [] {
                   ones({3, 2}).expand({2});
                 }}}});
  register_op({"squeeze",
               [](const Inputs& x) { return x[0].squeeze(1); },
               one_input({3, 1, 2}),
               {{"dim out of range", [] {
                   ones({3, 1}).squeeze(2);
                 }}}});
  register_op({"unsqueeze",
               [](const Inputs& x) { return x[0].unsqueeze(1); },
               one_input({3, 2}),
               {{"dim out of range", [] {
                   ones({3, 1}).unsqueeze(3);
                 }}}});
  register_op({"clone",
               [](const Inputs& x) { return x[0].t().clone(); },
               one_input({3, 2}),
               {{"undefined tensor", [] { Tensor().clone(); }}}});
  return true;
}();

}  // namespace
