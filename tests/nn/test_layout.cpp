// nn/transformer_layout.h: what a config's model holds, from the config alone, must be what
// TransformerLM builds; and a config whose sizes overflow is an error naming the field before any
// module allocates (an overflowing max_seq_len x d_model once sized the sinusoid table too small,
// and its constructor wrote past it: SIGSEGV).
#include <catch2/catch.hpp>

#include <cstdint>

#include "core/kiln.h"
#include "nn/rotary.h"
#include "nn/sinusoidal.h"
#include "nn/transformer_layout.h"
#include "nn/transformer_lm.h"

using namespace kiln;
using namespace kiln::nn;
using Catch::Contains;

namespace {

constexpr std::int64_t k2to62 = std::int64_t{1} << 62;

TransformerConfig small_config() {
  TransformerConfig c;
  c.vocab = 11, c.d_model = 8, c.heads = 2, c.layers = 2, c.ff = 12, c.max_seq_len = 6;
  return c;
}

}  // namespace

TEST_CASE("state_layout lists exactly the names and shapes of the built model's state_dict",
          "[layout]") {
  std::vector<TransformerConfig> configs;
  configs.push_back(small_config());
  TransformerConfig pre = small_config();
  pre.norm = NormPlacement::pre;
  configs.push_back(pre);
  TransformerConfig gqa = small_config();
  gqa.heads = 4, gqa.kv_heads = 2, gqa.position = PositionKind::rope,
  gqa.activation = Activation::gelu;
  configs.push_back(gqa);
  TransformerConfig mqa = gqa;
  mqa.kv_heads = 1, mqa.layers = 3, mqa.norm = NormPlacement::pre;
  configs.push_back(mqa);
  TransformerConfig gpt2 = pre;
  gpt2.position = PositionKind::learned, gpt2.activation = Activation::gelu_tanh,
  gpt2.embedding_scale = EmbeddingScale::none;
  configs.push_back(gpt2);
  for (const TransformerConfig& config : configs) {
    INFO(config.to_json());
    const TransformerLM model(config);
    const NamedTensors state = model.state_dict();
    const std::vector<TensorLayout> layout = state_layout(config);
    REQUIRE(state_tensor_count(config) == static_cast<std::int64_t>(state.size()));
    REQUIRE(layout.size() == state.size());
    for (std::size_t i = 0; i < state.size(); ++i) {
      CHECK(layout[i].name == state[i].first);
      CHECK(layout[i].shape == state[i].second.shape());
    }
    CHECK(parameter_count(config) == model.num_parameters());
    // RoPE's cos and sin tables are private to the attention: their shape is (max_seq_len,
    // d_head / 2) each (nn/rotary.h). Learned positions are a parameter, counted there.
    const std::int64_t table = model.positions            ? model.positions->table.numel()
                               : model.position_embedding ? 0
                                                          : config.max_seq_len * config.d_head();
    CHECK(position_table_count(config) == table);
    CHECK(model_bytes(config) == 4 * (model.num_parameters() + table));
    CHECK(model_bytes(config, 3) == 4 * (4 * model.num_parameters() + table));
  }
}

TEST_CASE("a config whose sizes overflow int64 is an error naming the fields", "[layout]") {
  const auto with = [](auto edit) {
    TransformerConfig c = small_config();
    edit(c);
    return c;
  };
  REQUIRE_THROWS_WITH(with([](auto& c) { c.d_model = k2to62, c.heads = 1; }).validate(),
                      Contains("vocab x d_model overflows int64"));
  REQUIRE_THROWS_WITH(with([](auto& c) { c.ff = k2to62; }).validate(),
                      Contains("the parameters of a block [4611686018427387904, 8] overflows"));
  REQUIRE_THROWS_WITH(with([](auto& c) { c.max_seq_len = k2to62; }).validate(),
                      Contains("max_seq_len x d_model overflows int64"));
  REQUIRE_THROWS_WITH(with([](auto& c) { c.layers = 1'000'000'000'000'000'000; }).validate(),
                      Contains("layers x the parameters of a block overflows int64"));
  REQUIRE_THROWS_WITH(state_tensor_count(with([](auto& c) { c.layers = k2to62; })),
                      Contains("layers x the tensors of a block overflows int64"));
  // Large but representable: valid (memory is the readers' check, not the config's).
  REQUIRE_NOTHROW(with([](auto& c) { c.layers = 1'000'000'000; }).validate());
}

TEST_CASE("a config from JSON rejects integers beyond int64 instead of wrapping them", "[layout]") {
  std::string json = small_config().to_json();
  json.replace(json.find("\"d_model\":8"), 11, "\"d_model\":18446744073709551615");
  REQUIRE_THROWS_WITH(TransformerConfig::from_json(json),
                      "config: 'd_model' is 18446744073709551615, beyond int64");
}

TEST_CASE("positional tables whose size overflows are errors, not writes past a buffer",
          "[layout]") {
  REQUIRE_THROWS_WITH(SinusoidalPositionalEncoding(16, k2to62),
                      Contains("SinusoidalPositionalEncoding: the table of max_len x d_model "
                               "overflows int64"));
  REQUIRE_THROWS_WITH(SinusoidalPositionalEncoding(k2to62, 512), Contains("overflows int64"));
  REQUIRE_THROWS_WITH(RotaryEmbedding(16, k2to62),
                      Contains("RotaryEmbedding") && Contains("overflows int64"));
  // The tables themselves are unchanged: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos.
  const SinusoidalPositionalEncoding pe(4, 3);
  const std::vector<float> table = pe.table.to_vector<float>();
  REQUIRE(table[2 * 4 + 0] == static_cast<float>(std::sin(2.0)));
  REQUIRE(table[2 * 4 + 3] ==
          static_cast<float>(std::cos(2.0 * std::exp(2 * -std::log(10000.0) / 4))));
}
