#include "tests/harness/op_table.h"

#include <catch2/catch.hpp>
#include <deque>
#include <iostream>

#include "tests/harness/near.h"

namespace kiln::testing {

namespace {

class FunctionInvoker final : public Catch::ITestInvoker {
 public:
  explicit FunctionInvoker(std::function<void()> body) : body_(std::move(body)) {}
  void invoke() const override { body_(); }

 private:
  std::function<void()> body_;
};

const OpFunction& function_of(const OpRow& row, const OpSample& sample) {
  return sample.fn ? sample.fn : row.fn;
}

std::vector<bool> perturb_flags(const OpSample& sample, const std::vector<Tensor>& inputs) {
  if (!sample.perturb.empty()) return sample.perturb;
  std::vector<bool> flags;
  for (const Tensor& t : inputs) flags.push_back(is_floating(t.dtype()));
  return flags;
}

// Output and input gradients of fn at inputs (gradient of sum(out * v), v fixed).
struct Evaluation {
  Tensor output;
  std::vector<Tensor> grads;
};

Evaluation evaluate(const OpFunction& fn, const std::vector<Tensor>& inputs,
                    const std::vector<bool>& perturb) {
  std::vector<Tensor> leaves = fresh_leaves(inputs, perturb);
  Evaluation e;
  e.output = fn(leaves);
  if (e.output.requires_grad()) {
    Generator gen(99);
    e.output.backward(
        uniform(e.output.shape(), -1.0, 1.0, {e.output.dtype(), e.output.device()}, &gen));
  }
  for (const Tensor& leaf : leaves) e.grads.push_back(leaf.grad());
  e.output = e.output.detach();
  return e;
}

void run_noncontiguous(const OpRow& row) {
  for (const OpSample& sample : row.samples) {
    INFO("sample " << sample.name);
    Generator gen(7);
    const std::vector<Tensor> inputs = sample.inputs(DType::f64, gen);
    const std::vector<bool> perturb = perturb_flags(sample, inputs);
    std::vector<Tensor> strided;
    for (const Tensor& t : inputs) strided.push_back(noncontiguous_copy(t));
    const Evaluation dense = evaluate(function_of(row, sample), inputs, perturb);
    const Evaluation sparse = evaluate(function_of(row, sample), strided, perturb);
    REQUIRE_NEAR(sparse.output, dense.output, 1e-12, 1e-12);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      INFO("gradient of input " << i);
      REQUIRE(sparse.grads[i].defined() == dense.grads[i].defined());
      if (dense.grads[i].defined()) REQUIRE_NEAR(sparse.grads[i], dense.grads[i], 1e-12, 1e-12);
    }
  }
}

void run_twice(const OpRow& row) {
  const int threads_before = num_threads();
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    for (const OpSample& sample : row.samples) {
      INFO("sample " << sample.name << ", " << threads << " threads");
      Generator gen(11);
      const std::vector<Tensor> inputs = sample.inputs(DType::f32, gen);
      const std::vector<bool> perturb = perturb_flags(sample, inputs);
      const Evaluation first = evaluate(function_of(row, sample), inputs, perturb);
      const Evaluation second = evaluate(function_of(row, sample), inputs, perturb);
      REQUIRE_EXACT(second.output, first.output);
      for (std::size_t i = 0; i < inputs.size(); ++i)
        if (first.grads[i].defined()) REQUIRE_EXACT(second.grads[i], first.grads[i]);
    }
  }
  set_num_threads(threads_before);
}

void run_errors(const OpRow& row) {
  REQUIRE_FALSE(row.errors.empty());
  for (const ErrorCase& error : row.errors) {
    INFO("error case: " << error.what);
    std::string message;
    try {
      error.call();
    } catch (const Error& e) {
      message = e.what();
    }
    INFO("message: " << message);
    REQUIRE_FALSE(message.empty());
    REQUIRE_THAT(message, Catch::Contains(row.name + ":"));
  }
}

void run_parity(const OpRow& row) {
  if (!cuda_available_or_skip()) return;
  for (const OpSample& sample : row.samples) {
    INFO("sample " << sample.name);
    Generator gen(13);
    const std::vector<Tensor> inputs = sample.inputs(DType::f32, gen);
    const std::vector<bool> perturb = perturb_flags(sample, inputs);
    std::vector<Tensor> on_gpu;
    for (const Tensor& t : inputs) on_gpu.push_back(t.to(Device::cuda()));
    const Evaluation cpu = evaluate(function_of(row, sample), inputs, perturb);
    const Evaluation gpu = evaluate(function_of(row, sample), on_gpu, perturb);
    REQUIRE(gpu.output.device().is_cuda());
    const double out_error = relative_error(gpu.output, cpu.output);
    INFO("output relative error " << out_error);
    REQUIRE(out_error <= row.parity_tolerance);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!cpu.grads[i].defined()) continue;
      const double grad_error = relative_error(gpu.grads[i], cpu.grads[i]);
      INFO("gradient " << i << " relative error " << grad_error);
      REQUIRE(grad_error <= row.parity_tolerance);
    }
  }
}

}  // namespace

void register_test(const std::string& name, const std::string& tags, std::function<void()> body) {
  static std::deque<std::string> strings;  // Catch2 keeps references to the names
  strings.push_back(name);
  const std::string& kept_name = strings.back();
  strings.push_back(tags);
  const std::string& kept_tags = strings.back();
  Catch::AutoReg(new FunctionInvoker(std::move(body)), CATCH_INTERNAL_LINEINFO, Catch::StringRef(),
                 Catch::NameAndTags{kept_name, kept_tags});
}

bool cuda_available_or_skip() {
  if (cuda_device_count() > 0) return true;
  std::cout << "skipped: no CUDA device" << std::endl;
  return false;
}

bool register_op(OpRow row) {
  auto shared = std::make_shared<OpRow>(std::move(row));
  for (const OpSample& sample : shared->samples) {
    register_test("gradcheck/" + shared->name + "/" + sample.name, "[gradcheck]", [shared, sample] {
      Generator gen(5);
      const std::vector<Tensor> inputs = sample.inputs(DType::f64, gen);
      gradcheck(function_of(*shared, sample), inputs, perturb_flags(sample, inputs),
                shared->gradcheck);
    });
  }
  register_test("noncontig/" + shared->name, "[noncontig]",
                [shared] { run_noncontiguous(*shared); });
  register_test("twice/" + shared->name, "[twice]", [shared] { run_twice(*shared); });
  register_test("errors/" + shared->name, "[errors]", [shared] { run_errors(*shared); });
  register_test("parity/" + shared->name, "[parity][cuda]", [shared] { run_parity(*shared); });
  return true;
}

Tensor noncontiguous_copy(const Tensor& t) {
  if (t.dim() == 0) return t.clone();
  Shape wide = t.shape();
  wide.back() *= 2;
  Tensor buffer = zeros(wide, {t.dtype(), t.device()});
  Tensor view = buffer.slice(-1, 0, wide.back(), 2);
  view.copy_(t);
  return view;
}

Tensor away_from_zero(const Shape& shape, DType dtype, Generator& gen, double margin, double low,
                      double high) {
  const Tensor u = uniform(shape, low, high, {dtype}, &gen);
  std::vector<double> values = u.to_vector<double>();
  for (double& v : values)
    if (std::fabs(v) < margin) v = v < 0 ? v - margin : v + margin;
  return from_vector(values, shape).to(dtype);
}

}  // namespace kiln::testing
