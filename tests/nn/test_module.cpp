// Module: registration, dotted names, modes, conversion, state dicts.
#include <catch2/catch.hpp>

#include "core/kiln.h"
#include "nn/feed_forward.h"
#include "nn/linear.h"
#include "nn/transformer_lm.h"
#include "tests/harness/near.h"

using namespace kiln;
using namespace kiln::nn;

namespace {

struct Pair : Module {
  Pair() {
    first = register_module("first", std::make_shared<Linear>(3, 4));
    scale = register_parameter("scale", ones({4}));
    counter = register_buffer("counter", zeros({1}));
    second = register_module("second", std::make_shared<Linear>(4, 2, false));
  }
  std::shared_ptr<Linear> first, second;
  Tensor scale, counter;
  void register_again() { register_parameter("scale", ones({1})); }
  void register_dotted() { register_parameter("a.b", ones({1})); }
};

std::vector<std::string> names(const NamedTensors& list) {
  std::vector<std::string> out;
  for (const auto& [name, t] : list) out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("parameters are listed by dotted path in registration order", "[module]") {
  Pair m;
  REQUIRE(names(m.named_parameters()) ==
          std::vector<std::string>{"scale", "first.weight", "first.bias", "second.weight"});
  REQUIRE(names(m.named_buffers()) == std::vector<std::string>{"counter"});
  REQUIRE(m.num_parameters() == 4 + 12 + 4 + 8);
  for (const Tensor& p : m.parameters()) REQUIRE(p.requires_grad());
  REQUIRE_THROWS_WITH(m.register_again(), Catch::Contains("'scale' is already registered"));
  REQUIRE_THROWS_WITH(m.register_dotted(), Catch::Contains("'a.b'"));
}

TEST_CASE("train and eval reach every submodule", "[module]") {
  TransformerConfig c;
  c.vocab = 11, c.d_model = 8, c.heads = 2, c.layers = 2, c.ff = 16, c.max_seq_len = 8;
  TransformerLM model(c);
  REQUIRE(model.is_training());
  model.eval();
  REQUIRE_FALSE(model.blocks[1]->attn->is_training());
  model.train();
  REQUIRE(model.blocks[1]->norm2->is_training());
}

TEST_CASE("to(dtype) converts in place and keeps handles valid", "[module]") {
  Pair m;
  const Tensor handle = m.first->weight;
  const std::vector<double> before = handle.to_vector<double>();
  m.to(DType::f64);
  REQUIRE(handle.dtype() == DType::f64);
  REQUIRE(m.first->weight.dtype() == DType::f64);
  REQUIRE(handle.to_vector<double>() == before);
  REQUIRE(m.counter.dtype() == DType::f64);
  const Tensor y = m.first->forward(ones({2, 3}, {.dtype = DType::f64}));
  REQUIRE(y.dtype() == DType::f64);
}

TEST_CASE("zero_grad clears every gradient", "[module]") {
  Pair m;
  (m.second->forward(m.first->forward(ones({1, 3})) * m.scale)).sum().backward();
  REQUIRE(m.first->weight.grad().defined());
  m.zero_grad();
  for (const Tensor& p : m.parameters()) REQUIRE_FALSE(p.grad().defined());
}

TEST_CASE("state_dict round-trips and load_state_dict reports missing and unexpected names",
          "[module]") {
  Pair a, b;
  b.load_state_dict(a.state_dict());
  REQUIRE(b.first->weight.to_vector<float>() == a.first->weight.to_vector<float>());
  NamedTensors partial = a.state_dict();
  partial.erase(partial.begin());  // drop "scale"
  partial.emplace_back("extra.weight", ones({2}));
  const Module::LoadResult result = b.load_state_dict(partial, /*strict=*/false);
  REQUIRE(result.missing == std::vector<std::string>{"scale"});
  REQUIRE(result.unexpected == std::vector<std::string>{"extra.weight"});
  REQUIRE_THROWS_WITH(b.load_state_dict(partial),
                      Catch::Contains("scale") && Catch::Contains("extra.weight"));
  NamedTensors wrong = a.state_dict();
  wrong[1].second = ones({5, 5});
  REQUIRE_THROWS_WITH(b.load_state_dict(wrong),
                      Catch::Contains("first.weight") && Catch::Contains("[5, 5]"));
}

TEST_CASE("TransformerLM names follow the documented layout", "[module]") {
  TransformerConfig c;
  c.vocab = 11, c.d_model = 8, c.heads = 2, c.layers = 1, c.ff = 16, c.max_seq_len = 8;
  TransformerLM model(c);
  REQUIRE(names(model.state_dict()) ==
          std::vector<std::string>{
              "embedding.weight", "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias",
              "blocks.0.attn.out.weight", "blocks.0.attn.out.bias", "blocks.0.norm1.weight",
              "blocks.0.norm1.bias", "blocks.0.ffn.fc1.weight", "blocks.0.ffn.fc1.bias",
              "blocks.0.ffn.fc2.weight", "blocks.0.ffn.fc2.bias", "blocks.0.norm2.weight",
              "blocks.0.norm2.bias"});
  REQUIRE(model.blocks[0]->attn->qkv->weight.shape() == Shape{24, 8});
  // Tied output: the only vocabulary-sized matrix is the embedding.
  std::int64_t vocabulary_sized = 0;
  for (const auto& [name, t] : model.named_parameters())
    if (t.dim() == 2 && t.size(0) == 11) ++vocabulary_sized;
  REQUIRE(vocabulary_sized == 1);
}
