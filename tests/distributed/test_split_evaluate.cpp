// lm::evaluate split over the ranks: each rank runs its share of the forward passes and every
// rank gets the loss one process computes alone, bit for bit (run by every rank of a 2- or
// 3-rank job, the reference in the same process).
#include <catch2/catch.hpp>

#include <atomic>

#include "core/kiln.h"
#include "lm/evaluate.h"
#include "nn/transformer_lm.h"
#include "tests/distributed/ranks_comm.h"

using namespace kiln;

namespace {

constexpr std::int64_t kVocab = 40, kSeqLen = 32;

// A TransformerLM that counts its loss calls: the forward passes this rank ran.
class CountingLM : public nn::TransformerLM {
 public:
  using TransformerLM::TransformerLM;
  Tensor loss(const Tensor& inputs, const Tensor& targets,
              std::int64_t ignore_index) const override {
    ++forwards;
    return TransformerLM::loss(inputs, targets, ignore_index);
  }
  mutable std::atomic<int> forwards = 0;
};

std::vector<std::int64_t> token_stream(std::size_t n) {
  std::vector<std::int64_t> ids(n);
  std::uint64_t state = 77;
  for (std::int64_t& id : ids) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    id = static_cast<std::int64_t>((state >> 33) % kVocab);
  }
  return ids;
}

}  // namespace

TEST_CASE("dist: an evaluation split over the ranks gives one process's loss, bit for bit") {
  dist::Communicator& comm = testing::ranks_comm();
  nn::TransformerConfig config;
  config.vocab = kVocab;
  config.d_model = 16;
  config.heads = 2;
  config.layers = 1;
  config.ff = 32;
  config.max_seq_len = kSeqLen;
  manual_seed(3);
  CountingLM model(config);
  model.to(comm.device());
  // B 4 × T 32 = 128 rows per window, 16 windows per forward pass: 4,000 tokens in 4 columns
  // of 1,000 rows are 32 windows (the last one short), in forward passes of 16, 15 and 1; with
  // stride 8, more windows, and short ones at the end.
  const std::vector<std::int64_t> tokens = token_stream(4000);
  const std::int64_t stride = GENERATE(0, 8);
  INFO("stride " << stride);
  const lm::EvalOptions alone{.batch_size = 4, .seq_len = kSeqLen, .stride = stride};
  const lm::EvalResult reference = lm::evaluate(model, tokens, alone);
  const int forwards_alone = model.forwards.exchange(0);
  lm::EvalOptions split = alone;
  split.communicator = &comm;
  const lm::EvalResult result = lm::evaluate(model, tokens, split);
  CHECK(result.loss == reference.loss);
  CHECK(result.tokens == reference.tokens);
  CHECK(result.complete);
  // Dealt round robin: rank r runs forwards r, r + N, r + 2N, ...
  const int ranks = comm.world_size();
  CHECK(model.forwards == (forwards_alone - comm.rank() + ranks - 1) / ranks);
  CHECK(forwards_alone >= 3);
}
