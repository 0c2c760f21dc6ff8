// A whole TransformerLM on CUDA against the same model on the CPU (llm.c's check, with the CPU
// as the reference): identical weights, dropout active in train mode (both devices draw the same
// Philox masks, so the comparison includes it), then the logits, the loss, every gradient, and
// the losses of ten Adam steps with gradient clipping. Two models: GQA with sinusoids, post-LN
// and attention dropout; RoPE with pre-LN and GELU. After its first steps the GPU makes no new
// cudaMalloc.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "nn/transformer_lm.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr std::int64_t kBatch = 4, kTime = 16;  // B, T
constexpr std::uint64_t kDropoutSeed = 99;
constexpr int kSteps = 10;

nn::TransformerConfig small_config() {
  nn::TransformerConfig c;
  c.vocab = 200;
  c.d_model = 64;
  c.heads = 4;
  c.layers = 2;
  c.ff = 128;
  c.max_seq_len = 32;
  c.dropout = 0.1;
  return c;
}

// The model on `device` with the weights of `reference` and a dropout stream at its start.
std::unique_ptr<nn::TransformerLM> copy_to(const nn::TransformerLM& reference, Device device) {
  auto model = std::make_unique<nn::TransformerLM>(reference.config());
  model->load_state_dict(reference.state_dict());
  model->to(device);
  model->dropout_generator().set_state(kDropoutSeed, 0);
  model->train();
  return model;
}

// Token ids (B, T + 1) in [0, vocab): inputs are the first T, targets the last T.
Tensor token_batch(std::int64_t vocab, Generator& gen) {
  const std::int64_t n = kBatch * (kTime + 1);
  const std::vector<double> u = uniform({n}, 0.0, 1.0, {DType::f64}, &gen).to_vector<double>();
  std::vector<std::int64_t> ids(n);
  for (std::int64_t i = 0; i < n; ++i)
    ids[i] = static_cast<std::int64_t>(u[i] * static_cast<double>(vocab));
  return from_vector(ids, {kBatch, kTime + 1});
}

// ||t|| (2-norm), on the host.
double norm(const Tensor& t) {
  double sum = 0.0;
  for (double v : t.to_vector<double>()) sum += v * v;
  return std::sqrt(sum);
}

struct Steps {
  std::vector<double> losses, norms;
  std::vector<std::int64_t> cuda_mallocs;  // cudaMalloc calls so far, after each step (GPU only)
};

// kSteps Adam steps (lr 1e-3) on one batch, the global gradient norm clipped to 1 in the update.
Steps adam_steps(nn::TransformerLM& model, const Tensor& inputs, const Tensor& targets) {
  Adam opt(model.named_parameters(), {.lr = 1e-3});
  Steps out;
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    const Tensor loss = model.loss(inputs, targets);
    loss.backward();
    const double total_norm = grad_norm(opt.parameters());
    opt.step(clip_scale(total_norm, 1.0));
    out.losses.push_back(loss.item<double>());
    out.norms.push_back(total_norm);
    if (inputs.device().is_cuda()) out.cuda_mallocs.push_back(gpu_backend().device_allocations());
  }
  return out;
}

void check_model(const nn::TransformerConfig& config) {
  manual_seed(5);
  const nn::TransformerLM reference(config);
  const auto cpu = copy_to(reference, Device::cpu());
  const auto gpu = copy_to(reference, Device::cuda());
  for (const auto& [name, p] : gpu->named_parameters()) {
    INFO("parameter " << name);
    REQUIRE(p.device().is_cuda());
  }
  Generator gen(6);
  const Tensor tokens = token_batch(config.vocab, gen);
  const Tensor inputs = tokens.narrow(1, 0, kTime).contiguous();
  const Tensor targets = tokens.narrow(1, 1, kTime).contiguous();
  const Tensor gpu_inputs = inputs.to(Device::cuda()), gpu_targets = targets.to(Device::cuda());

  // Logits (B, T, vocab), with dropout masks drawn on each device.
  const Tensor cpu_logits = cpu->forward(inputs);
  const Tensor gpu_logits = gpu->forward(gpu_inputs);
  REQUIRE(gpu_logits.device().is_cuda());
  CHECK(relative_error(gpu_logits, cpu_logits) <= 1e-5);

  // The fused loss and every gradient.
  const Tensor cpu_loss = cpu->loss(inputs, targets);
  const Tensor gpu_loss = gpu->loss(gpu_inputs, gpu_targets);
  cpu_loss.backward();
  gpu_loss.backward();
  CHECK(near(gpu_loss.item<double>(), cpu_loss.item<double>(), 1e-5, 0.0));
  const auto cpu_params = cpu->named_parameters(), gpu_params = gpu->named_parameters();
  REQUIRE(cpu_params.size() == gpu_params.size());
  double total = 0.0;
  for (const auto& [name, p] : cpu_params) total += std::pow(norm(p.grad()), 2);
  // Some gradients are zero up to rounding (the key bias: softmax ignores a shift shared by a
  // whole row), and rounding differs between the devices: such a gradient is held to a small
  // fraction of the global norm instead of its own.
  const double floor = 1e-6 * std::sqrt(total);
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    const Tensor expected = cpu_params[i].second.grad(), actual = gpu_params[i].second.grad();
    INFO("gradient of " << cpu_params[i].first);
    REQUIRE(actual.defined());
    REQUIRE(actual.device().is_cuda());
    const double error = norm(actual.to(Device::cpu()) - expected), size = norm(expected);
    INFO("error " << error << ", norm " << size);
    CHECK(error <= 1e-4 * size + floor);
  }

  // Ten steps from the same start: every loss within 1e-4 relative.
  const auto cpu_again = copy_to(reference, Device::cpu());
  const auto gpu_again = copy_to(reference, Device::cuda());
  const Steps on_cpu = adam_steps(*cpu_again, inputs, targets);
  const Steps on_gpu = adam_steps(*gpu_again, gpu_inputs, gpu_targets);
  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step + 1 << ": loss cpu " << on_cpu.losses[step] << " gpu "
                 << on_gpu.losses[step] << ", gradient norm cpu " << on_cpu.norms[step] << " gpu "
                 << on_gpu.norms[step]);
    CHECK(near(on_gpu.losses[step], on_cpu.losses[step], 1e-4, 0.0));
  }
  REQUIRE(on_cpu.losses.back() < on_cpu.losses.front());  // the steps did train
  // From the second step on every step allocates the same blocks: steps 4 to 10 are served from
  // the caching allocator's cache.
  REQUIRE(on_gpu.cuda_mallocs.back() == on_gpu.cuda_mallocs[2]);
}

}  // namespace

TEST_CASE("cuda/TransformerLM with GQA and dropout: forward, backward and ten Adam steps",
          "[cuda][model]") {
  if (!cuda_available_or_skip()) return;
  nn::TransformerConfig config = small_config();
  config.kv_heads = 2;
  config.attn_dropout = 0.1;
  check_model(config);
}

TEST_CASE("cuda/TransformerLM with RoPE, pre-LN and GELU: forward, backward and ten Adam steps",
          "[cuda][model]") {
  if (!cuda_available_or_skip()) return;
  nn::TransformerConfig config = small_config();
  config.position = nn::PositionKind::rope;
  config.norm = nn::NormPlacement::pre;
  config.activation = nn::Activation::gelu;
  check_model(config);
}
