// nn::AdaptiveSoftmax: PyTorch's AdaptiveLogSoftmaxWithLoss with kiln's tie and frequency order
// (golden made once by tools/make_adaptive_softmax_golden.py), the normalized distribution, the
// gradients in float64, adaptive input, the order through a checkpoint, and TransformerLM with it.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/io/safetensors.h"
#include "core/kiln.h"
#include "nn/adaptive_softmax.h"
#include "nn/transformer_layout.h"
#include "nn/transformer_lm.h"
#include "tests/harness/module_gradcheck.h"
#include "tests/harness/near.h"
#include "tests/harness/paths.h"

using namespace kiln;
using namespace kiln::nn;

namespace {

Tensor golden_tensor(const SafetensorsFile& file, const std::string& name) {
  for (const auto& [n, t] : file.tensors)
    if (n == name) return t;
  FAIL("golden file has no tensor " << name);
  return {};
}

// The golden's module: vocabulary 23, d 8, cutoffs [5, 12], div 2, tied to `embedding`.
struct GoldenModule {
  std::shared_ptr<Embedding> embedding = std::make_shared<Embedding>(23, 8);
  AdaptiveSoftmax module{23, 8, {5, 12}, 2.0, embedding};
};

std::vector<std::int64_t> reversed(std::int64_t n) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r) order[static_cast<std::size_t>(r)] = n - 1 - r;
  return order;
}

}  // namespace

TEST_CASE("AdaptiveSoftmax reproduces PyTorch's loss, log-probabilities and gradients",
          "[nn][golden][adaptive]") {
  const SafetensorsFile file =
      load_safetensors(testing::source_path("tests/golden/adaptive_softmax.safetensors"));
  GoldenModule m;
  NamedTensors weights{{"weight", golden_tensor(file, "embedding.weight")}};
  m.embedding->load_state_dict(weights);
  NamedTensors adaptive;
  for (const auto& [name, t] : m.module.state_dict())
    adaptive.emplace_back(name, golden_tensor(file, "adaptive." + name));
  m.module.load_state_dict(adaptive);  // the order too: loaded() rebuilds the ranks

  const Tensor x = golden_tensor(file, "x").requires_grad_();
  const Tensor targets = golden_tensor(file, "targets");
  const Tensor loss = m.module.loss(x, targets);
  REQUIRE_NEAR(loss, golden_tensor(file, "out.loss"), 1e-5, 0);
  REQUIRE_NEAR(m.module.log_prob(x.detach()), golden_tensor(file, "out.log_prob"), 1e-5, 1e-6);
  loss.backward();
  REQUIRE_NEAR(x.grad(), golden_tensor(file, "grad.x"), 1e-4, 1e-6);
  REQUIRE_NEAR(m.embedding->weight.grad(), golden_tensor(file, "grad.embedding.weight"), 1e-4,
               1e-6);
  for (const auto& [name, p] : m.module.named_parameters()) {
    INFO("gradient of adaptive." << name);
    REQUIRE_NEAR(p.grad(), golden_tensor(file, "grad.adaptive." + name), 1e-4, 1e-6);
  }
}

TEST_CASE("AdaptiveSoftmax: exact normalized log-probabilities, and the loss is their mean",
          "[nn][adaptive]") {
  manual_seed(3);
  GoldenModule m;
  m.module.set_order(reversed(23));
  const Tensor x = randn({6, 8});
  const Tensor log_prob = m.module.log_prob(x);
  REQUIRE(log_prob.shape() == Shape({6, 23}));
  for (std::int64_t row = 0; row < 6; ++row) {
    double total = 0;
    for (const double lp : log_prob.select(0, row).to_vector<double>()) total += std::exp(lp);
    REQUIRE(testing::near(total, 1.0, 1e-5, 0));
  }
  // Targets in the shortlist and both clusters (ranks 22 - id), one ignored.
  const std::vector<std::int64_t> ids = {22, 3, 15, -100, 10, 0};
  double expected = 0;
  for (std::size_t row = 0; row < ids.size(); ++row)
    if (ids[row] >= 0) expected -= log_prob.at<double>({static_cast<std::int64_t>(row), ids[row]});
  const Tensor loss = m.module.loss(x, from_vector(ids, {6}));
  REQUIRE(testing::near(loss.item<double>(), expected / 5, 1e-5, 0));
  // An ignore_index that is a word's id ignores that word only, not the word whose rank it equals
  // (id 12 has rank 10; id 10, rank 12, still counts).
  std::vector<std::int64_t> twelves = ids;
  twelves[3] = 12;
  double without = 0;
  for (std::size_t row = 0; row < ids.size(); ++row)
    if (twelves[row] != 12)
      without -= log_prob.at<double>({static_cast<std::int64_t>(row), twelves[row]});
  REQUIRE(testing::near(m.module.loss(x, from_vector(twelves, {6}), 12).item<double>(), without / 5,
                        1e-5, 0));
}

TEST_CASE(
    "adaptive_softmax_loss: an ignore_index equal to a cluster's head column ignores only "
    "that rank",
    "[nn][adaptive]") {
  // A shortlist of 3 and one cluster of 3 words: the cluster's head column is 3, also rank 3.
  manual_seed(5);
  const Tensor x = randn({3, 4}, {DType::f64});
  const AdaptiveSoftmaxWeights w{
      randn({4, 4}, {DType::f64}), {randn({2, 4}, {DType::f64})}, {randn({3, 2}, {DType::f64})}};
  const Tensor log_prob = adaptive_log_softmax(x, w);
  // Ranks 4 and 5 are in the cluster (head column 3); ignore_index 3 names no target here.
  const Tensor loss = adaptive_softmax_loss(x, w, from_vector<std::int64_t>({0, 4, 5}, {3}), 3);
  const double expected =
      -(log_prob.at<double>({0, 0}) + log_prob.at<double>({1, 4}) + log_prob.at<double>({2, 5})) /
      3;
  REQUIRE(testing::near(loss.item<double>(), expected, 1e-12, 0));
  // Rank 3 itself is ignored.
  const Tensor ignored = adaptive_softmax_loss(x, w, from_vector<std::int64_t>({3, 4, 3}, {3}), 3);
  REQUIRE(testing::near(ignored.item<double>(), -log_prob.at<double>({1, 4}), 1e-12, 0));
}

TEST_CASE("adaptive_softmax_loss and adaptive_log_softmax take bf16 operands", "[nn][adaptive]") {
  // bf16 x and weights outside autocast (the differential test's bf16 cases): float32 results
  // near the float64 ones on the same values; the cluster's x P_i^T rounds to bf16.
  manual_seed(6);
  const auto bf16 = [](const Shape& s) { return randn(s).to(DType::bf16); };
  const Tensor x = bf16({3, 4});
  const AdaptiveSoftmaxWeights w{bf16({4, 4}), {bf16({2, 4})}, {bf16({3, 2})}};
  const AdaptiveSoftmaxWeights w64{
      w.head.to(DType::f64), {w.projections[0].to(DType::f64)}, {w.outputs[0].to(DType::f64)}};
  const Tensor targets = from_vector<std::int64_t>({0, 4, 5}, {3});
  const Tensor log_prob = adaptive_log_softmax(x, w);
  REQUIRE(log_prob.dtype() == DType::f32);
  REQUIRE_NEAR(log_prob, adaptive_log_softmax(x.to(DType::f64), w64), 0.03, 0.03);
  const Tensor loss = adaptive_softmax_loss(x, w, targets);
  REQUIRE(loss.dtype() == DType::f32);
  REQUIRE_NEAR(loss, adaptive_softmax_loss(x.to(DType::f64), w64, targets), 0.03, 0.03);
}

TEST_CASE("AdaptiveSoftmax: float64 gradients of the tied module and of adaptive input",
          "[nn][adaptive][gradcheck]") {
  manual_seed(5);
  SECTION("tied to an embedding, in a permuted order") {
    GoldenModule m;
    m.module.set_order(reversed(23));
    m.module.to(DType::f64);
    m.embedding->to(DType::f64);
    const Tensor targets = from_vector<std::int64_t>({0, 22, 6, 13, 17, 2, -100}, {7});
    // The embedding's gradient (through the tie) and the module's, with x's.
    testing::gradcheck_module(
        m.module, [&](const Tensor& x) { return m.module.loss(x, targets); },
        randn({7, 8}, {DType::f64}));
    testing::gradcheck_module(
        *m.embedding, [&](const Tensor& x) { return m.module.loss(x, targets); },
        randn({7, 8}, {DType::f64}));
  }
  SECTION("adaptive input: the input and output share the clusters") {
    AdaptiveSoftmax module(23, 8, {5, 12}, 2.0, nullptr);
    module.set_order(reversed(23));
    module.to(DType::f64);
    const Tensor inputs = from_vector<std::int64_t>({1, 20, 9, 14, 4}, {5});
    const Tensor targets = from_vector<std::int64_t>({22, 3, 11, 0, 16}, {5});
    testing::gradcheck_module(
        module, [&](const Tensor& x) { return module.loss(module.embed(inputs) * x, targets); },
        randn({5, 8}, {DType::f64}));
  }
}

TEST_CASE("AdaptiveSoftmax: adaptive input embeds a word as its cluster's output row times P_i",
          "[nn][adaptive]") {
  manual_seed(9);
  AdaptiveSoftmax module(23, 8, {5, 12}, 2.0, nullptr);
  module.set_order(reversed(23));
  // id 20 has rank 2 (shortlist); id 10 rank 12 (cluster 1, row 0); id 16 rank 6 (cluster 0, row
  // 1).
  const Tensor e = module.embed(from_vector<std::int64_t>({20, 10, 16}, {3}));
  REQUIRE_EXACT(e.select(0, 0), module.shortlist.select(0, 2));
  REQUIRE_NEAR(e.select(0, 1),
               matmul(module.outputs[1].narrow(0, 0, 1), module.projections[1]).view({8}), 1e-6,
               1e-7);
  REQUIRE_NEAR(e.select(0, 2),
               matmul(module.outputs[0].narrow(0, 1, 1), module.projections[0]).view({8}), 1e-6,
               1e-7);
  REQUIRE(module.projections[0].shape() == Shape({4, 8}));  // 8 / 2
  REQUIRE(module.projections[1].shape() == Shape({2, 8}));  // 8 / 4
  REQUIRE(module.outputs[1].shape() == Shape({11, 2}));     // ranks [12, 23)
}

TEST_CASE("AdaptiveSoftmax: the frequency order, its checks, and its trip through a state_dict",
          "[nn][adaptive]") {
  // Descending count, ties by ascending id.
  REQUIRE(AdaptiveSoftmax::frequency_order({3, 9, 3, 0, 9}) ==
          std::vector<std::int64_t>{1, 4, 0, 2, 3});
  GoldenModule m;
  REQUIRE_THROWS_WITH(m.module.set_order({0, 1}),
                      Catch::Contains("an order of 2 words for a vocabulary of 23"));
  std::vector<std::int64_t> twice = reversed(23);
  twice[4] = twice[3];
  REQUIRE_THROWS_WITH(m.module.set_order(twice), Catch::Contains("not a permutation"));
  REQUIRE_THROWS_WITH(m.module.loss(randn({2, 8}), from_vector<std::int64_t>({0, 23}, {2})),
                      Catch::Contains("id 23 at position 1 is outside [0, 23)"));

  m.module.set_order(reversed(23));
  const Tensor x = randn({4, 8});
  const Tensor targets = from_vector<std::int64_t>({1, 7, 14, 22}, {4});
  const double loss = m.module.loss(x, targets).item<double>();
  GoldenModule copy;  // identity order until the state arrives
  copy.embedding->load_state_dict(m.embedding->state_dict());
  copy.module.load_state_dict(m.module.state_dict());
  REQUIRE(copy.module.loss(x, targets).item<double>() == loss);
  // A state whose order is not a permutation is refused as it loads.
  NamedTensors bad = m.module.state_dict();
  for (auto& [name, t] : bad)
    if (name == "order") t = from_vector(twice, {23});
  REQUIRE_THROWS_WITH(copy.module.load_state_dict(bad), Catch::Contains("not a permutation"));
}

TEST_CASE("TransformerLM with the adaptive softmax: layout, loss, logits and a checkpoint's config",
          "[nn][adaptive]") {
  for (const InputKind input : {InputKind::embedding, InputKind::adaptive}) {
    TransformerConfig c;
    c.vocab = 40, c.d_model = 16, c.heads = 2, c.layers = 1, c.ff = 32, c.max_seq_len = 8;
    c.dropout = 0;
    c.adaptive_cutoffs = {6, 20}, c.adaptive_div = 2, c.input = input;
    INFO("input " << name_of(input));
    REQUIRE(TransformerConfig::from_json(c.to_json()).to_json() == c.to_json());
    manual_seed(1);
    TransformerLM model(c);
    model.adaptive->set_order(reversed(40));
    const NamedTensors state = model.state_dict();
    const std::vector<TensorLayout> layout = state_layout(c);
    REQUIRE(layout.size() == state.size());
    REQUIRE(state_tensor_count(c) == static_cast<std::int64_t>(state.size()));
    std::int64_t parameters = 0;
    for (std::size_t i = 0; i < state.size(); ++i) {
      INFO(state[i].first);
      REQUIRE(layout[i].name == state[i].first);
      REQUIRE(layout[i].shape == state[i].second.shape());
      REQUIRE(layout[i].dtype == state[i].second.dtype());
    }
    for (const Tensor& p : model.parameters()) parameters += p.numel();
    REQUIRE(parameter_count(c) == parameters);
    REQUIRE((model.embedding == nullptr) == (input == InputKind::adaptive));

    const Tensor inputs = from_vector<std::int64_t>({3, 39, 0, 17, 8, 25, 1, 30}, {2, 4});
    const Tensor targets = from_vector<std::int64_t>({39, 0, 17, 8, 25, 1, 30, 12}, {2, 4});
    model.eval();
    const Tensor log_prob = model.forward(inputs);  // (2, 4, 40): normalized log-probabilities
    double expected = 0;
    for (std::int64_t i = 0; i < 8; ++i)
      expected -= log_prob.at<double>({i / 4, i % 4, targets.at<std::int64_t>({i / 4, i % 4})});
    REQUIRE(testing::near(model.loss(inputs, targets).item<double>(), expected / 8, 1e-5, 0));
  }
  TransformerConfig bad;
  bad.vocab = 40, bad.adaptive_cutoffs = {6, 6};
  REQUIRE_THROWS_WITH(bad.validate(), Catch::Contains("must increase"));
  bad.adaptive_cutoffs = {6, 40};
  REQUIRE_THROWS_WITH(bad.validate(), Catch::Contains("below vocab 40"));
  bad.adaptive_cutoffs = {6, 20, 30, 35, 38}, bad.adaptive_div = 4;  // 256 / 4^5 < 1
  REQUIRE_THROWS_WITH(bad.validate(), Catch::Contains("cluster 4 would be 0 wide"));
  bad.adaptive_cutoffs = {}, bad.input = InputKind::adaptive;
  REQUIRE_THROWS_WITH(bad.validate(), Catch::Contains("input adaptive needs the adaptive softmax"));
  REQUIRE_THROWS_WITH(parse_cutoffs("2000,x"), Catch::Contains("not a comma-separated list"));
  REQUIRE(parse_cutoffs("2000,10000") == std::vector<std::int64_t>{2000, 10000});
}
