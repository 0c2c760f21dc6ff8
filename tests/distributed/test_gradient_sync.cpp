// The determinism rule, on a real model with dropout: N ranks that each back-propagate one
// micro-batch and sum their gradients with GradientSync hold the gradient — and take the step —
// of one process accumulating the same N micro-batches in order (train_lm --grad-accum N), bit
// for bit. Run by every rank of a 2- or 3-rank job (the reference and the rank's computation on
// the same device).
#include <catch2/catch.hpp>

#include "core/kiln.h"
#include "distributed/gradient_sync.h"
#include "nn/transformer_lm.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "tests/distributed/ranks_comm.h"
#include "tests/harness/near.h"

using namespace kiln;

namespace {

constexpr std::int64_t kB = 4, kT = 8, kVocab = 50;
constexpr std::uint64_t kDropoutSeed = 99;

nn::TransformerConfig tiny_config() {
  nn::TransformerConfig c;
  c.vocab = kVocab;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 2;
  c.ff = 32;
  c.max_seq_len = kT;
  c.dropout = 0.1;
  c.attn_dropout = 0.1;
  return c;
}

// Micro-batch i's inputs and next-token targets (B, T), the same on every rank, on `device`.
std::pair<Tensor, Tensor> window(int i, Device device) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(kB * (kT + 1)));
  std::uint64_t state = 1234 + static_cast<std::uint64_t>(i);
  for (std::int64_t& id : ids) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    id = static_cast<std::int64_t>((state >> 33) % kVocab);
  }
  const Tensor all = from_vector(ids, {kB, kT + 1});
  return {all.narrow(1, 0, kT).contiguous().to(device),
          all.narrow(1, 1, kT).contiguous().to(device)};
}

// A model with the weights every rank starts from, on the communicator's device.
std::unique_ptr<nn::TransformerLM> fresh_model() {
  manual_seed(7);
  auto model = std::make_unique<nn::TransformerLM>(tiny_config());
  model->to(testing::ranks_comm().device());
  model->train();
  return model;
}

// One micro-batch's backward with the loss scaled by 1/n, as train_lm does for --grad-accum n.
void backward(nn::TransformerLM& model, int i, std::int64_t n) {
  const auto [inputs, targets] = window(i, testing::ranks_comm().device());
  const Tensor loss = model.loss(inputs, targets);
  (n == 1 ? loss : loss * (1.0 / static_cast<double>(n))).backward();
}

std::vector<Tensor> parameters_of(nn::TransformerLM& model) {
  std::vector<Tensor> out;
  for (const auto& [name, p] : model.named_parameters()) out.push_back(p);
  return out;
}

// Runs one step both ways — one process accumulating micro-batches 0..n-1, and this rank
// back-propagating micro-batch `rank` (none if rank >= n) then GradientSync — and checks that the
// gradients and the updated weights are the same bits.
void check_one_step(std::int64_t n, std::int64_t bucket_bytes) {
  dist::Communicator& comm = testing::ranks_comm();

  auto reference = fresh_model();
  reference->dropout_generator().set_state(kDropoutSeed, 0);
  std::uint64_t counters_per_batch = 0;  // dropout counters one micro-batch's forward reserves
  for (int i = 0; i < n; ++i) {
    backward(*reference, i, n);
    if (i == 0) counters_per_batch = reference->dropout_generator().offset();
  }
  REQUIRE(counters_per_batch > 0);  // dropout is on

  auto model = fresh_model();
  std::vector<Tensor> params = parameters_of(*model);
  dist::GradientSync sync(comm, params, bucket_bytes);
  const bool contributes = comm.rank() < n;
  if (contributes) {
    // Micro-batch r's dropout masks are the ones it would draw in one process: after r others.
    model->dropout_generator().set_state(kDropoutSeed, comm.rank() * counters_per_batch);
    backward(*model, comm.rank(), n);
  }
  sync.allreduce(contributes);

  const std::vector<Tensor> expected = parameters_of(*reference);
  for (std::size_t i = 0; i < params.size(); ++i) {
    REQUIRE(params[i].grad().defined());
    const testing::NearResult same = testing::compare_exact(params[i].grad(), expected[i].grad());
    INFO("gradient of parameter " << i << ": " << same.message);
    REQUIRE(same.ok);
  }
  // The same gradient gives the same clipped step on every rank.
  AdamW ours(model->named_parameters(), {.lr = 1e-2});
  AdamW theirs(reference->named_parameters(), {.lr = 1e-2});
  ours.step(clip_scale(grad_norm(ours.parameters()), 0.5));
  theirs.step(clip_scale(grad_norm(theirs.parameters()), 0.5));
  for (std::size_t i = 0; i < params.size(); ++i)
    REQUIRE(testing::compare_exact(params[i], expected[i]).ok);
}

}  // namespace

TEST_CASE("dist: N ranks' synced gradients are one process's --grad-accum N, bit for bit") {
  check_one_step(testing::ranks_comm().world_size(), std::int64_t{25} << 20);
}

TEST_CASE("dist: gradient buckets smaller than a parameter give the same bits") {
  dist::Communicator& comm = testing::ranks_comm();
  auto model = fresh_model();
  const std::vector<Tensor> params = parameters_of(*model);
  CHECK(dist::GradientSync(comm, params, 1024).num_buckets() > 4);
  check_one_step(comm.world_size(), 1024);
}

TEST_CASE("dist: a short last step, with fewer micro-batches than ranks, matches one process") {
  // Ranks n.. have no micro-batch: they add nothing (-0.0), and the loss scale is 1/n.
  const int world = testing::ranks_comm().world_size();
  check_one_step(world - 1, std::int64_t{25} << 20);
}
