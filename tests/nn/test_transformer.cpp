// The transformer layers: gradient checks of every module, fused attention against the per-head
// formula, GQA, causality, KV-cache decoding, and the tied output embedding.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/kiln.h"
#include "nn/feed_forward.h"
#include "nn/transformer_lm.h"
#include "optim/adam.h"
#include "tests/harness/module_gradcheck.h"
#include "tests/harness/near.h"

using namespace kiln;
using namespace kiln::nn;
using namespace kiln::testing;

namespace {

Tensor random_f64(const Shape& shape, std::uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  return uniform(shape, -scale, scale, {.dtype = DType::f64}, &gen);
}

Tensor random_ids(const Shape& shape, std::int64_t vocab, std::uint64_t seed) {
  Generator gen(seed);
  const std::vector<double> u =
      uniform(shape, 0.0, 1.0, {.dtype = DType::f64}, &gen).to_vector<double>();
  std::vector<std::int64_t> ids;
  for (double v : u) ids.push_back(static_cast<std::int64_t>(v * vocab) % vocab);
  return from_vector(ids, shape);
}

TransformerConfig tiny(std::int64_t heads = 2, std::int64_t kv_heads = 0,
                       PositionKind position = PositionKind::sinusoidal,
                       NormPlacement norm = NormPlacement::post) {
  TransformerConfig c;
  c.vocab = 13, c.d_model = 8, c.heads = heads, c.kv_heads = kv_heads, c.layers = 2, c.ff = 12;
  c.max_seq_len = 16, c.dropout = 0.0, c.position = position, c.norm = norm;
  return c;
}

// Z by the per-head formula: each head with its own slices of the fused weight, a causal mask,
// heads concatenated, then W_O.
Tensor per_head_attention(const MultiHeadAttention& mha, const Tensor& x) {
  const std::int64_t T = x.size(1), dh = mha.d_head, h = mha.heads, kv = mha.kv_heads;
  const Tensor& W = mha.qkv->weight;
  const Tensor& b = mha.qkv->bias;
  auto project = [&](std::int64_t row) {  // X W_r^T + b_r for the d_head rows from `row`
    return matmul(x, W.narrow(0, row, dh).t()) + b.narrow(0, row, dh);
  };
  std::vector<double> hidden(T * T);
  for (std::int64_t i = 0; i < T; ++i)
    for (std::int64_t j = 0; j < T; ++j) hidden[i * T + j] = j > i ? 1.0 : 0.0;
  const Tensor future = from_vector(hidden, {T, T});
  std::vector<Tensor> heads;
  for (std::int64_t i = 0; i < h; ++i) {
    const std::int64_t j = i * kv / h;  // kv head of query head i
    const Tensor Q = project(i * dh), K = project((h + j) * dh), V = project((h + kv + j) * dh);
    const Tensor S = matmul(Q, K.transpose(1, 2)) / std::sqrt(static_cast<double>(dh));
    heads.push_back(matmul(softmax(masked_fill(S, future, -INFINITY), -1), V));
  }
  return mha.out->forward(cat(heads, 2));
}

}  // namespace

TEST_CASE("every layer passes a float64 gradient check", "[nn][gradcheck]") {
  SECTION("Linear") {
    Linear m(4, 3);
    m.to(DType::f64);
    gradcheck_module(
        m, [&](const Tensor& x) { return m.forward(x); }, random_f64({2, 5, 4}, 1));
  }
  SECTION("Embedding") {
    Embedding m(7, 3);
    m.to(DType::f64);
    gradcheck_module(
        m, [&](const Tensor& ids) { return m.forward(ids); },
        from_vector<std::int64_t>({1, 6, 1, 0}, {2, 2}));
  }
  SECTION("LayerNorm") {
    LayerNorm m(5);
    m.to(DType::f64);
    {
      NoGradGuard no_grad;
      m.weight.copy_(random_f64({5}, 2));
      m.bias.copy_(random_f64({5}, 3));
    }
    gradcheck_module(
        m, [&](const Tensor& x) { return m.forward(x); }, random_f64({3, 5}, 4, 2.0));
  }
  SECTION("FeedForward, ReLU and GELU") {
    for (Activation act : {Activation::relu, Activation::gelu}) {
      FeedForward m(4, 6, act);
      m.to(DType::f64);
      gradcheck_module(
          m, [&](const Tensor& x) { return m.forward(x); }, random_f64({2, 3, 4}, 5));
    }
  }
  SECTION("RotaryEmbedding") {
    RotaryEmbedding rope(4, 8);
    rope.to(DType::f64);
    gradcheck_module(
        rope, [&](const Tensor& x) { return rope.forward(x, 2); }, random_f64({1, 2, 3, 4}, 6));
  }
}

TEST_CASE("MultiHeadAttention passes a gradient check with MHA, GQA, MQA and RoPE",
          "[nn][gradcheck]") {
  struct Case {
    std::int64_t heads, kv;
    bool rope;
  };
  for (const Case c : {Case{2, 2, false}, Case{4, 2, false}, Case{4, 1, false}, Case{2, 1, true}}) {
    INFO("heads " << c.heads << " kv_heads " << c.kv << " rope " << c.rope);
    auto rope = c.rope ? std::make_shared<RotaryEmbedding>(8 / c.heads, 16) : nullptr;
    MultiHeadAttention m(8, c.heads, c.kv, 0.0, rope);
    m.to(DType::f64);
    if (rope) rope->to(DType::f64);
    gradcheck_module(
        m, [&](const Tensor& x) { return m.forward(x); }, random_f64({2, 5, 8}, 7));
  }
}

TEST_CASE("a whole 2-layer TransformerLM passes a gradient check (eval mode)", "[nn][gradcheck]") {
  for (NormPlacement norm : {NormPlacement::post, NormPlacement::pre}) {
    INFO("norm " << name_of(norm));
    manual_seed(8);
    TransformerLM model(tiny(2, 1, PositionKind::sinusoidal, norm));
    model.to(DType::f64);
    model.eval();
    gradcheck_module(
        model, [&](const Tensor& ids) { return model.forward(ids); }, random_ids({2, 6}, 13, 9));
  }
}

TEST_CASE("GPT-2's form passes a gradient check: learned positions, no embedding scale, tanh GELU",
          "[nn][gradcheck]") {
  manual_seed(8);
  TransformerConfig config = tiny(2, 1, PositionKind::learned, NormPlacement::pre);
  config.embedding_scale = EmbeddingScale::none;
  config.activation = Activation::gelu_tanh;
  TransformerLM model(config);
  REQUIRE(model.position_embedding);
  model.to(DType::f64);
  model.eval();
  gradcheck_module(
      model, [&](const Tensor& ids) { return model.forward(ids); }, random_ids({2, 6}, 13, 9));
}

TEST_CASE("learned positions add their table's rows, the embedding scale is sqrt(d) or 1", "[nn]") {
  manual_seed(3);
  TransformerConfig config = tiny(1, 1, PositionKind::learned, NormPlacement::pre);
  config.embedding_scale = EmbeddingScale::none;
  const Tensor ids = random_ids({1, 4}, 13, 2);
  for (const auto& [scale, s] :
       {std::pair{EmbeddingScale::none, 1.0}, std::pair{EmbeddingScale::sqrt_d, std::sqrt(8.0)}}) {
    INFO("scale " << s);
    TransformerConfig c = config;
    c.embedding_scale = scale;
    TransformerLM model(c);
    model.eval();
    // The blocks' sublayers write zeros into the residual stream (W_O, W_2 and their biases 0)
    // and the final norm is skipped: hidden() is then the blocks' input, X_0 = s E[ids] +
    // P[past..past+T), through the KV cache too.
    {
      NoGradGuard no_grad;
      for (const auto& [name, p] : model.named_parameters())
        if (name.find(".attn.out.") != std::string::npos ||
            name.find(".ffn.fc2.") != std::string::npos)
          p.zero_();
    }
    model.norm = nullptr;
    const Tensor E = model.embedding->weight, P = model.position_embedding->weight;
    const auto expected = [&](const Tensor& part, std::int64_t past) {
      return embedding(E, part) * s + P.narrow(0, past, part.size(1));
    };
    CHECK(compare(model.hidden(ids), expected(ids, 0), 1e-6, 1e-7).ok);
    std::vector<KVCache> caches = model.new_caches();
    model.hidden(ids.narrow(1, 0, 2), &caches);
    const Tensor tail = ids.narrow(1, 2, 2);
    CHECK(compare(model.hidden(tail, &caches), expected(tail, 2), 1e-6, 1e-7).ok);
  }
  TransformerConfig scaled = config;
  scaled.embedding_scale = EmbeddingScale::sqrt_d;
  CHECK(TransformerConfig::from_json(scaled.to_json()).embedding_scale == EmbeddingScale::sqrt_d);
  CHECK(TransformerConfig::from_json(config.to_json()).embedding_scale == EmbeddingScale::none);
  // A config written before the field existed (no "embedding_scale" key) keeps sqrt_d, and a
  // default config's JSON does not name it, so old files stay byte for byte the same.
  CHECK(scaled.to_json().find("embedding_scale") == std::string::npos);
  CHECK(config.to_json().find("\"embedding_scale\":\"none\"") != std::string::npos);
}

TEST_CASE("fused attention equals the per-head formula", "[nn][attention]") {
  struct Case {
    std::int64_t heads, kv;
  };
  for (const Case c : {Case{1, 1}, Case{2, 2}, Case{4, 4}, Case{4, 2}, Case{4, 1}}) {
    INFO("heads " << c.heads << " kv_heads " << c.kv);
    MultiHeadAttention m(8, c.heads, c.kv);
    m.to(DType::f64);
    const Tensor x = random_f64({2, 5, 8}, 10);
    REQUIRE_NEAR(m.forward(x), per_head_attention(m, x), 1e-10, 1e-13);
  }
}

TEST_CASE("MultiHeadAttention's tiled paths equal its step-by-step path with attention weights",
          "[nn][attention]") {
  // Without `attention` the projection, RoPE and KV-cache paths run the tiled kernels; with it,
  // the materializing causal_attention (no RoPE, no cache) or the composed matmul /
  // causal_softmax / dropout path, which return A. Same weights, same dropout stream: the same
  // function, to float64 rounding.
  struct Case {
    std::int64_t heads, kv;
    bool rope;
    double p;
  };
  for (const Case c : {Case{2, 2, true, 0.0}, Case{4, 2, true, 0.3}, Case{4, 1, false, 0.2}}) {
    INFO("heads " << c.heads << " kv " << c.kv << " rope " << c.rope << " dropout " << c.p);
    auto rope = c.rope ? std::make_shared<RotaryEmbedding>(16 / c.heads, 80) : nullptr;
    Generator gen(30);
    MultiHeadAttention m(16, c.heads, c.kv, c.p, rope, &gen);
    m.to(DType::f64);
    if (rope) rope->to(DType::f64);
    const Tensor x = random_f64({2, 70, 16}, 31);
    {
      m.train();
      const auto run = [&](bool with_weights) {
        gen.set_state(30, 0);
        m.zero_grad();
        const Tensor leaf = x.detach().requires_grad_();
        Tensor weights;
        const Tensor z = m.forward(leaf, nullptr, with_weights ? &weights : nullptr);
        z.backward(random_f64(z.shape(), 32));
        return std::vector<Tensor>{z.detach(), leaf.grad(), m.qkv->weight.grad()};
      };
      const std::vector<Tensor> tiled = run(false), composed = run(true);
      for (std::size_t i = 0; i < tiled.size(); ++i)
        REQUIRE_NEAR(tiled[i], composed[i], 1e-10, 1e-13);
    }
    // Decoding: a prefix of 40 positions, then one position at a time, against the cache.
    m.eval();
    NoGradGuard no_grad;
    KVCache tiled_cache, composed_cache;
    for (std::int64_t t = 0; t < 70; t = t == 0 ? 40 : t + 1) {
      const std::int64_t n = t == 0 ? 40 : 1;
      const Tensor step = x.narrow(1, t, n);
      Tensor weights;
      const Tensor tiled = m.forward(step, &tiled_cache, nullptr, 70);
      const Tensor composed = m.forward(step, &composed_cache, &weights, 70);
      REQUIRE(weights.shape() == Shape{2, c.heads, n, t + n});
      REQUIRE_NEAR(tiled, composed, 1e-10, 1e-13);
    }
  }
}

TEST_CASE("GQA equals MHA whose key and value heads are repeated per group", "[nn][attention]") {
  MultiHeadAttention gqa(8, 4, 2), mha(8, 4, 4);
  gqa.to(DType::f64);
  mha.to(DType::f64);
  const std::int64_t dh = 2;
  {
    NoGradGuard no_grad;
    const Tensor& src = gqa.qkv->weight;  // rows: Q (4 heads), K (2), V (2)
    std::vector<Tensor> rows{src.narrow(0, 0, 4 * dh)}, biases{gqa.qkv->bias.narrow(0, 0, 4 * dh)};
    for (std::int64_t block : {4, 6})  // K heads start at head 4, V heads at head 6
      for (std::int64_t i = 0; i < 4; ++i) {
        rows.push_back(src.narrow(0, (block + i * 2 / 4) * dh, dh));
        biases.push_back(gqa.qkv->bias.narrow(0, (block + i * 2 / 4) * dh, dh));
      }
    mha.qkv->weight.copy_(cat(rows, 0));
    mha.qkv->bias.copy_(cat(biases, 0));
    mha.out->weight.copy_(gqa.out->weight);
    mha.out->bias.copy_(gqa.out->bias);
  }
  const Tensor x = random_f64({2, 6, 8}, 11);
  REQUIRE_NEAR(gqa.forward(x), mha.forward(x), 1e-10, 1e-13);
  REQUIRE(gqa.qkv->weight.size(0) < mha.qkv->weight.size(0));
}

TEST_CASE("causal attention ignores future tokens", "[nn][attention]") {
  for (PositionKind pos : {PositionKind::sinusoidal, PositionKind::rope}) {
    manual_seed(12);
    TransformerLM model(tiny(2, 1, pos));
    model.eval();
    const Tensor ids = random_ids({2, 10}, 13, 13);
    Tensor changed = ids.clone();
    changed.narrow(1, 6, 4).fill_(3.0);  // tokens after position 5 differ
    const Tensor a = model.forward(ids).narrow(1, 0, 6);
    const Tensor b = model.forward(changed).narrow(1, 0, 6);
    REQUIRE_EXACT(a.contiguous(), b.contiguous());
    REQUIRE_FALSE(compare_exact(model.forward(ids).narrow(1, 6, 1).contiguous(),
                                model.forward(changed).narrow(1, 6, 1).contiguous())
                      .ok);
  }
}

TEST_CASE("KV-cache decoding equals the full forward pass at every position",
          "[nn][attention][cache]") {
  struct Case {
    std::int64_t heads, kv;
    PositionKind pos;
    NormPlacement norm;
  };
  for (const Case c : {Case{2, 2, PositionKind::sinusoidal, NormPlacement::post},
                       Case{4, 2, PositionKind::sinusoidal, NormPlacement::pre},
                       Case{2, 1, PositionKind::rope, NormPlacement::post},
                       Case{4, 2, PositionKind::rope, NormPlacement::pre}}) {
    for (DType dtype : {DType::f64, DType::f32}) {
      INFO("heads " << c.heads << " kv " << c.kv << " rope " << (c.pos == PositionKind::rope)
                    << " dtype " << dtype_name(dtype));
      manual_seed(14);
      TransformerLM model(tiny(c.heads, c.kv, c.pos, c.norm));
      model.to(dtype);
      model.eval();
      NoGradGuard no_grad;
      const Tensor ids = random_ids({2, 9}, 13, 15);
      const Tensor full = model.forward(ids);  // (2, 9, 13)
      std::vector<KVCache> caches = model.new_caches();
      double largest = 0.0;
      for (double v : full.to_vector<double>()) largest = std::max(largest, std::fabs(v));
      for (std::int64_t t = 0; t < 9; ++t) {
        const Tensor step = model.forward(ids.narrow(1, t, 1), &caches);  // (2, 1, 13)
        REQUIRE(caches[0].length == t + 1);
        const double atol = dtype == DType::f64 ? 1e-10 * largest : 1e-5 * largest;
        REQUIRE_NEAR(step, full.narrow(1, t, 1), 0.0, atol);
      }
    }
  }
}

TEST_CASE("the tied embedding's gradient is the sum of its input and output contributions",
          "[nn]") {
  manual_seed(16);
  TransformerLM model(tiny());
  model.to(DType::f64);
  model.eval();
  const Tensor ids = random_ids({2, 7}, 13, 17), targets = random_ids({2, 7}, 13, 18);
  model.loss(ids, targets).backward();
  const Tensor tied = model.embedding->weight.grad();

  // The same network with two separate matrices holding equal values.
  const Tensor E_in = model.embedding->weight.detach().clone().requires_grad_();
  const Tensor E_out = model.embedding->weight.detach().clone().requires_grad_();
  Tensor x = embedding(E_in, ids) * std::sqrt(8.0);
  x = model.positions->forward(x);
  for (const auto& block : model.blocks) x = block->forward(x);
  const Tensor logits = matmul(x, E_out.t());
  cross_entropy(logits.view({-1, 13}), targets.view({-1})).backward();
  REQUIRE_NEAR(tied, E_in.grad() + E_out.grad(), 1e-12, 1e-15);
  REQUIRE(max(E_in.grad().view({-1}), 0).values.item<double>() > 0);  // both sides contribute
  REQUIRE(max(E_out.grad().view({-1}), 0).values.item<double>() > 0);
}

TEST_CASE("a tiny TransformerLM overfits one batch to a loss below 0.05", "[nn][training]") {
  manual_seed(19);
  TransformerConfig c = tiny();
  c.vocab = 20, c.d_model = 32, c.heads = 2, c.ff = 64;
  TransformerLM model(c);
  const Tensor ids = random_ids({4, 8}, 20, 20), targets = random_ids({4, 8}, 20, 21);
  Adam optimizer(model.named_parameters(), {.lr = 3e-3});
  double loss_value = 0.0;
  int step = 0;
  for (; step < 400; ++step) {
    optimizer.zero_grad();
    const Tensor loss = model.loss(ids, targets);
    loss.backward();
    optimizer.step();
    loss_value = loss.item<double>();
    if (loss_value < 0.05) break;
  }
  INFO("loss " << loss_value << " after " << step << " steps");
  REQUIRE(loss_value < 0.05);
}

TEST_CASE("TransformerLM owns its output layer: logits, loss with ignored targets, device",
          "[nn]") {
  manual_seed(21);
  TransformerLM model(tiny());
  model.to(DType::f64);
  model.eval();
  const Tensor ids = random_ids({2, 5}, 13, 22);
  const Tensor hidden_states = model.hidden(ids);
  const Tensor logits = model.logits(hidden_states);
  REQUIRE(logits.shape() == Shape{2, 5, 13});
  REQUIRE_NEAR(logits, matmul(hidden_states, model.embedding->weight.t()), 0, 0);
  REQUIRE_NEAR(model.forward(ids), logits, 0, 0);
  // The last position alone, as a decoder samples it.
  REQUIRE_NEAR(model.logits(hidden_states.select(1, 4)), logits.select(1, 4), 0, 0);

  // Targets equal to ignore_index are left out of the mean.
  std::vector<std::int64_t> target_ids = random_ids({2, 5}, 13, 23).to_vector<std::int64_t>();
  target_ids[1] = target_ids[7] = -7;
  const Tensor targets = from_vector(target_ids, {2, 5});
  const std::vector<double> log_p = log_softmax(logits.view({10, 13})).to_vector<double>();
  double expected = 0.0;
  for (std::int64_t r = 0; r < 10; ++r)
    if (target_ids[r] != -7) expected -= log_p[r * 13 + target_ids[r]] / 8.0;
  CHECK(model.loss(ids, targets, -7).item<double>() == Approx(expected).epsilon(1e-12));
  CHECK(model.device() == Device::cpu());
}
