// Op-table rows for the ops a transformer needs: softmax family, layer_norm, cross_entropy,
// causal_attention, index_select/embedding, dropout, where/masked_fill, cat/split, the LM heads
// (linear_cross_entropy, the adaptive softmax).
#include "core/kiln.h"
#include "tests/harness/op_table.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

using Inputs = std::vector<Tensor>;

Tensor ids(const std::vector<std::int64_t>& values, const Shape& shape) {
  return from_vector(values, shape);
}

const bool softmax_rows = [] {
  register_op({"softmax",
               [](const Inputs& x) { return softmax(x[0], -1); },
               {{"rows",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 5}, d, g)};
                 }},
                {"dim0",
                 [](DType d, Generator& g) {
                   return Inputs{u({4, 3}, d, g)};
                 },
                 {},
                 [](const Inputs& x) { return softmax(x[0], 0); }},
                {"middle_dim_3d",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 4, 3}, d, g)};
                 },
                 {},
                 [](const Inputs& x) { return softmax(x[0], 1); }}},
               {{"int64 input", [] { softmax(arange(3, {.dtype = DType::i64})); }},
                {"0-dim input", [] { softmax(ones({})); }},
                {"dim out of range", [] {
                   softmax(ones({2, 3}), 2);
                 }}}});
  register_op({"log_softmax",
               [](const Inputs& x) { return log_softmax(x[0], -1); },
               {{"rows",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 5}, d, g)};
                 }},
                {"dim0",
                 [](DType d, Generator& g) {
                   return Inputs{u({4, 3}, d, g)};
                 },
                 {},
                 [](const Inputs& x) { return log_softmax(x[0], 0); }}},
               {{"int64 input", [] { log_softmax(arange(3, {.dtype = DType::i64})); }},
                {"dim out of range", [] {
                   log_softmax(ones({2, 3}), -3);
                 }}}});
  register_op({"causal_softmax",
               [](const Inputs& x) { return causal_softmax(x[0]); },
               {{"square",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 4, 4}, d, g)};
                 }},
                {"with_cache",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 3, 5}, d, g)};
                 },
                 {},
                 [](const Inputs& x) { return causal_softmax(x[0], 2); }},
                {"heads_4d",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 2, 3, 3}, d, g)};
                 }}},
               {{"1-D scores", [] { causal_softmax(ones({4})); }},
                {"fewer keys than queries",
                 [] {
                   causal_softmax(ones({4, 3}));
                 }},
                {"offset past the keys", [] {
                   causal_softmax(ones({2, 4}), 3);
                 }}}});
  return true;
}();

const bool norm_and_loss_rows = [] {
  register_op({"layer_norm",
               [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); },
               {{"rows",
                 [](DType d, Generator& g) {
                   return Inputs{u({4, 6}, d, g), u({6}, d, g), u({6}, d, g)};
                 }},
                {"batch_3d",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 3, 5}, d, g, -3, 3), u({5}, d, g), u({5}, d, g)};
                 }},
                {"eps_1e-2",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 4}, d, g), u({4}, d, g), u({4}, d, g)};
                 },
                 {},
                 [](const Inputs& x) { return layer_norm(x[0], x[1], x[2], 1e-2); }}},
               {{"gamma of the wrong size",
                 [] {
                   layer_norm(ones({2, 3}), ones({4}), ones({3}));
                 }},
                {"non-positive eps",
                 [] {
                   layer_norm(ones({2, 3}), ones({3}), ones({3}), 0.0);
                 }},
                {"mixed dtypes", [] {
                   layer_norm(ones({2, 3}), ones({3}, {.dtype = DType::f64}), ones({3}));
                 }}}});
  register_op({"cross_entropy",
               [](const Inputs& x) { return cross_entropy(x[0], x[1]); },
               {{"rows",
                 [](DType d, Generator& g) {
                   return Inputs{u({5, 7}, d, g), ids({0, 6, 3, 3, 1}, {5})};
                 }},
                {"ignore_index",
                 [](DType d, Generator& g) {
                   return Inputs{u({4, 6}, d, g), ids({2, -100, 5, -100}, {4})};
                 }},
                {"batch_3d",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 3, 4}, d, g), ids({0, 1, 2, 3, 3, 0}, {2, 3})};
                 }},
                {"custom_ignore",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 4}, d, g), ids({0, 3, 1}, {3})};
                 },
                 {},
                 [](const Inputs& x) { return cross_entropy(x[0], x[1], 3); }}},
               {{"target out of range",
                 [] {
                   cross_entropy(ones({2, 3}), ids({0, 3}, {2}));
                 }},
                {"negative target",
                 [] {
                   cross_entropy(ones({2, 3}), ids({-1, 0}, {2}));
                 }},
                {"every target ignored",
                 [] {
                   cross_entropy(ones({2, 3}), ids({-100, -100}, {2}));
                 }},
                {"float targets",
                 [] {
                   cross_entropy(ones({2, 3}), ones({2}));
                 }},
                {"targets of the wrong shape", [] {
                   cross_entropy(ones({2, 3}), ids({0, 1, 2}, {3}));
                 }}}});
  return true;
}();

const bool indexing_rows = [] {
  register_op({"index_select",
               [](const Inputs& x) { return index_select(x[0], 0, x[1]); },
               {{"repeated_rows",
                 [](DType d, Generator& g) {
                   return Inputs{u({5, 3}, d, g), ids({4, 0, 4, 2, 4}, {5})};
                 }},
                {"dim1",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 4, 3}, d, g), ids({3, 3, 0}, {3})};
                 },
                 {},
                 [](const Inputs& x) { return index_select(x[0], 1, x[1]); }}},
               {{"id out of range",
                 [] {
                   index_select(ones({3, 2}), 0, ids({3}, {1}));
                 }},
                {"2-D ids",
                 [] {
                   index_select(ones({3, 2}), 0, ids({0, 1}, {1, 2}));
                 }},
                {"float ids", [] {
                   index_select(ones({3, 2}), 0, ones({2}));
                 }}}});
  register_op({"embedding",
               [](const Inputs& x) { return embedding(x[0], x[1]); },
               {{"repeated_ids",
                 [](DType d, Generator& g) {
                   return Inputs{u({6, 4}, d, g), ids({5, 1, 5, 0, 5, 2}, {2, 3})};
                 }},
                {"single_id",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 2}, d, g), ids({1}, {})};
                 }}},
               {{"id equal to the vocabulary size",
                 [] {
                   embedding(ones({6, 4}), ids({1, 6}, {2}));
                 }},
                {"negative id",
                 [] {
                   embedding(ones({6, 4}), ids({-1}, {1}));
                 }},
                {"1-D table", [] { embedding(ones({6}), ids({1}, {1})); }}}});
  return true;
}();

const bool attention_rows = [] {
  // projected (B, T, (heads + 2 kv) d_head); dropout with a fresh generator per call, so every
  // evaluation (and perturbation) sees the same mask.
  const auto attention = [](std::int64_t heads, std::int64_t kv, double p) {
    return [=](const Inputs& x) {
      Generator gen(7);
      return causal_attention(x[0], heads, kv, p, p > 0, &gen);
    };
  };
  register_op({"causal_attention",
               attention(2, 2, 0.0),
               {{"mha",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 3, 12}, d, g)};
                 }},
                {"gqa",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 4, 16}, d, g)};
                 },
                 {},
                 attention(4, 2, 0.0)},
                {"mqa_dropout",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 4, 8}, d, g)};
                 },
                 {},
                 attention(2, 1, 0.3)},
                // The tiled kernels at odd sizes: one query, sizes that are not multiples of a
                // tile and sequences of several query and key tiles, d_head 8 and 24.
                {"t1_d8",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 1, 32}, d, g)};
                 },
                 {},
                 attention(2, 1, 0.0)},
                {"t7_d24_gqa",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 7, 192}, d, g)};
                 },
                 {},
                 attention(4, 2, 0.0)},
                {"t33_d8_mqa_dropout",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 33, 32}, d, g)};
                 },
                 {},
                 attention(2, 1, 0.3)},
                {"t130_d24_dropout",
                 [](DType d, Generator& g) {
                   return Inputs{u({1, 130, 96}, d, g)};
                 },
                 {},
                 attention(2, 1, 0.2)},
                {"t130_d8",
                 [](DType d, Generator& g) {
                   return Inputs{u({1, 130, 48}, d, g)};
                 },
                 {},
                 attention(2, 2, 0.0)}},
               {{"kv heads not dividing heads",
                 [] {
                   causal_attention(ones({1, 2, 15}), 3, 2);
                 }},
                {"width not (h + 2 kv) d",
                 [] {
                   causal_attention(ones({1, 2, 10}), 2, 2);
                 }},
                {"2-D input",
                 [] {
                   causal_attention(ones({2, 12}), 2, 2);
                 }},
                {"dropout p = 1",
                 [] {
                   causal_attention(ones({1, 2, 12}), 2, 2, 1.0, true);
                 }},
                {"int64 input", [] {
                   causal_attention(zeros({1, 2, 12}, {.dtype = DType::i64}), 2, 2);
                 }}}});
  // q (B, heads, T_q, d), k and v (B, kv_heads, T_k, d): the RoPE and KV-cache path, where the
  // queries are the last T_q of T_k positions.
  const auto heads_attention = [](double p) {
    return [=](const Inputs& x) {
      Generator gen(8);
      return causal_attention_heads(x[0], x[1], x[2], p, p > 0, &gen);
    };
  };
  const auto qkv = [](std::int64_t B, std::int64_t heads, std::int64_t kv, std::int64_t queries,
                      std::int64_t keys, std::int64_t dh) {
    return [=](DType d, Generator& g) {
      return Inputs{u({B, heads, queries, dh}, d, g), u({B, kv, keys, dh}, d, g),
                    u({B, kv, keys, dh}, d, g)};
    };
  };
  register_op(
      {"causal_attention_heads",
       heads_attention(0.0),
       {{"square_t7_d8", qkv(2, 2, 2, 7, 7, 8)},
        {"cache_t3_of_9_gqa", qkv(2, 4, 2, 3, 9, 8)},
        {"decode_t1_of_33_d24_mqa", qkv(2, 2, 1, 1, 33, 24)},
        {"t130_of_131_d8_dropout", qkv(1, 2, 1, 130, 131, 8), {}, heads_attention(0.25)},
        {"transposed_q",
         [](DType d, Generator& g) {
           return Inputs{u({2, 5, 2, 8}, d, g).transpose(1, 2), u({2, 1, 5, 8}, d, g),
                         u({2, 1, 5, 8}, d, g)};
         }}},
       {{"more queries than keys",
         [] {
           causal_attention_heads(ones({1, 2, 5, 4}), ones({1, 2, 4, 4}), ones({1, 2, 4, 4}));
         }},
        {"kv heads not dividing heads",
         [] {
           causal_attention_heads(ones({1, 3, 2, 4}), ones({1, 2, 2, 4}), ones({1, 2, 2, 4}));
         }},
        {"k and v shapes differ",
         [] {
           causal_attention_heads(ones({1, 2, 2, 4}), ones({1, 2, 3, 4}), ones({1, 2, 2, 4}));
         }},
        {"3-D q",
         [] {
           causal_attention_heads(ones({2, 2, 4}), ones({1, 2, 2, 4}), ones({1, 2, 2, 4}));
         }},
        {"d_head above the limit",
         [] {
           causal_attention_heads(ones({1, 1, 1, 257}), ones({1, 1, 1, 257}), ones({1, 1, 1, 257}));
         }},
        {"mixed dtypes",
         [] {
           causal_attention_heads(ones({1, 2, 2, 4}), ones({1, 2, 2, 4}),
                                  ones({1, 2, 2, 4}, {.dtype = DType::f64}));
         }},
        {"dropout p = 1", [] {
           causal_attention_heads(ones({1, 2, 2, 4}), ones({1, 2, 2, 4}), ones({1, 2, 2, 4}), 1.0,
                                  true);
         }}}});
  return true;
}();

const bool dropout_and_select_rows = [] {
  // A fresh generator per call: every evaluation (and perturbation) sees the same mask.
  register_op({"dropout",
               [](const Inputs& x) {
                 Generator gen(42);
                 return dropout(x[0], 0.3, true, &gen);
               },
               {{"matrix",
                 [](DType d, Generator& g) {
                   return Inputs{u({4, 5}, d, g)};
                 }},
                {"transposed",
                 [](DType d, Generator& g) {
                   return Inputs{u({5, 4}, d, g).t()};
                 }}},
               {{"p = 1", [] { dropout(ones({2}), 1.0, true); }},
                {"negative p", [] { dropout(ones({2}), -0.1, true); }},
                {"int64 input", [] { dropout(arange(2, {.dtype = DType::i64}), 0.5, true); }}}});
  register_op({"where",
               [](const Inputs& x) { return where(x[0], x[1], x[2]); },
               {{"broadcast",
                 [](DType d, Generator& g) {
                   return Inputs{from_vector<double>({1, 0, 0, 1}, {4, 1}).to(d), u({4, 3}, d, g),
                                 u({3}, d, g)};
                 },
                 {false, true, true}},
                {"int_condition",
                 [](DType d, Generator& g) {
                   return Inputs{ids({0, 1, 1}, {3}), u({2, 3}, d, g), u({2, 3}, d, g)};
                 }}},
               {{"value dtypes differ",
                 [] { where(ones({2}), ones({2}), ones({2}, {.dtype = DType::f64})); }},
                {"shapes that do not broadcast", [] { where(ones({3}), ones({2}), ones({2})); }}}});
  register_op({"masked_fill",
               [](const Inputs& x) { return masked_fill(x[0], x[1], -7.5); },
               {{"rows",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 4}, d, g), from_vector<double>({1, 0, 0, 1}, {4}).to(d)};
                 },
                 {true, false}}},
               {{"mask that does not broadcast", [] {
                   masked_fill(ones({3, 4}), ones({3}), 0.0);
                 }}}});
  return true;
}();

const bool join_rows = [] {
  register_op({"cat",
               [](const Inputs& x) { return cat(x, 1); },
               {{"two",
                 [](DType d, Generator& g) {
                   return Inputs{u({2, 3}, d, g), u({2, 2}, d, g)};
                 }},
                {"three_dim0",
                 [](DType d, Generator& g) {
                   return Inputs{u({1, 3}, d, g), u({2, 3}, d, g), u({1, 3}, d, g)};
                 },
                 {},
                 [](const Inputs& x) { return cat(x, 0); }}},
               {{"other dims differ",
                 [] {
                   cat({ones({2, 3}), ones({3, 3})}, 1);
                 }},
                {"no tensors", [] { cat({}, 0); }},
                {"mixed dtypes", [] {
                   cat({ones({2}), ones({2}, {.dtype = DType::f64})}, 0);
                 }}}});
  register_op({"split",
               [](const Inputs& x) {
                 const std::vector<Tensor> pieces = split(x[0], {1, 3, 2}, 1);
                 return cat({pieces[2], pieces[0] * 2.0}, 1);
               },
               {{"sizes",
                 [](DType d, Generator& g) {
                   return Inputs{u({3, 6}, d, g)};
                 }},
                {"chunks",
                 [](DType d, Generator& g) {
                   return Inputs{u({7, 2}, d, g)};
                 },
                 {},
                 [](const Inputs& x) { return split(x[0], 3, 0).back() * 3.0; }}},
               {{"sizes that do not add up",
                 [] {
                   split(ones({3, 6}), {1, 2}, 1);
                 }},
                {"non-positive chunk", [] {
                   split(ones({3, 6}), 0, 1);
                 }}}});
  return true;
}();

}  // namespace

namespace {
const bool linear_cross_entropy_row = [] {
  register_op({"linear_cross_entropy",
               [](const Inputs& x) { return linear_cross_entropy(x[0], x[1], x[2]); },
               {{"rows",
                 [](DType d, Generator& g) {
                   return Inputs{u({5, 4}, d, g), u({7, 4}, d, g), ids({0, 6, 3, 3, 1}, {5})};
                 }},
                {"ignore_index",
                 [](DType d, Generator& g) {
                   return Inputs{u({4, 3}, d, g), u({6, 3}, d, g), ids({2, -100, 5, -100}, {4})};
                 }}},
               {{"target out of range",
                 [] {
                   linear_cross_entropy(ones({2, 3}), ones({4, 3}), ids({0, 4}, {2}));
                 }},
                {"every target ignored",
                 [] {
                   linear_cross_entropy(ones({2, 3}), ones({4, 3}), ids({-100, -100}, {2}));
                 }},
                {"inner dims differ",
                 [] {
                   linear_cross_entropy(ones({2, 3}), ones({4, 2}), ids({0, 1}, {2}));
                 }},
                {"targets of the wrong shape",
                 [] {
                   linear_cross_entropy(ones({2, 3}), ones({4, 3}), ids({0}, {1}));
                 }}},
               1e-4});
  return true;
}();
}  // namespace

namespace {
// An adaptive softmax over 10 ranks: a shortlist of 3, cluster 0 of 3 words (width 2), cluster 1
// of 4 (width 1); inputs x, head, P_0, O_0, P_1, O_1 (and the targets).
Inputs adaptive_inputs(DType d, Generator& g, std::int64_t rows) {
  return Inputs{u({rows, 4}, d, g), u({5, 4}, d, g), u({2, 4}, d, g),
                u({3, 2}, d, g),    u({1, 4}, d, g), u({4, 1}, d, g)};
}
AdaptiveSoftmaxWeights adaptive_weights(const Inputs& x) {
  return {x[1], {x[2], x[4]}, {x[3], x[5]}};
}

const bool adaptive_softmax_loss_row = [] {
  register_op(
      {"adaptive_softmax_loss",
       [](const Inputs& x) { return adaptive_softmax_loss(x[0], adaptive_weights(x), x[6]); },
       {{"every cluster",
         [](DType d, Generator& g) {
           Inputs x = adaptive_inputs(d, g, 7);
           x.push_back(ids({0, 4, 9, 2, 6, 3, 7}, {7}));
           return x;
         }},
        {"an empty cluster and ignored rows",
         [](DType d, Generator& g) {
           Inputs x = adaptive_inputs(d, g, 5);
           x.push_back(ids({1, -100, 8, 2, -100}, {5}));
           return x;
         }}},
       {{"target out of range",
         [] {
           Inputs x = adaptive_inputs(DType::f32, default_generator(), 2);
           adaptive_softmax_loss(x[0], adaptive_weights(x), ids({0, 10}, {2}));
         }},
        {"every target ignored",
         [] {
           Inputs x = adaptive_inputs(DType::f32, default_generator(), 2);
           adaptive_softmax_loss(x[0], adaptive_weights(x), ids({-100, -100}, {2}));
         }},
        {"a cluster's output does not match its projection",
         [] {
           Inputs x = adaptive_inputs(DType::f32, default_generator(), 2);
           adaptive_softmax_loss(x[0], {x[1], {x[2], x[4]}, {x[5], x[3]}}, ids({0, 1}, {2}));
         }},
        {"a head without a shortlist",
         [] {
           Inputs x = adaptive_inputs(DType::f32, default_generator(), 2);
           adaptive_softmax_loss(x[0], {x[1].narrow(0, 0, 2), {x[2], x[4]}, {x[3], x[5]}},
                                 ids({0, 1}, {2}));
         }},
        {"targets of the wrong shape",
         [] {
           Inputs x = adaptive_inputs(DType::f32, default_generator(), 2);
           adaptive_softmax_loss(x[0], adaptive_weights(x), ids({0}, {1}));
         }}},
       1e-4});
  register_op({"adaptive_log_softmax",
               [](const Inputs& x) { return adaptive_log_softmax(x[0], adaptive_weights(x)); },
               {{"rows", [](DType d, Generator& g) { return adaptive_inputs(d, g, 3); }}},
               {{"x of the wrong width",
                 [] {
                   Inputs x = adaptive_inputs(DType::f32, default_generator(), 2);
                   adaptive_log_softmax(ones({2, 3}), adaptive_weights(x));
                 }},
                {"projections without outputs",
                 [] {
                   Inputs x = adaptive_inputs(DType::f32, default_generator(), 2);
                   adaptive_log_softmax(x[0], {x[1], {x[2], x[4]}, {x[3]}});
                 }}},
               1e-4});
  return true;
}();
}  // namespace

namespace {
const bool linear_row = [] {
  register_op({"linear",
               [](const Inputs& x) { return linear(x[0], x[1], x[2]); },
               {{"with_bias",
                 [](DType d, Generator& g) {
                   return Inputs{u({5, 4}, d, g), u({3, 4}, d, g), u({3}, d, g)};
                 }},
                {"transposed_input",
                 [](DType d, Generator& g) {
                   return Inputs{u({4, 5}, d, g).t(), u({3, 4}, d, g), u({3}, d, g)};
                 }},
                {"no_bias",
                 [](DType d, Generator& g) {
                   return Inputs{u({5, 4}, d, g), u({3, 4}, d, g)};
                 },
                 {},
                 [](const Inputs& x) { return linear(x[0], x[1]); }}},
               {{"inner dims differ",
                 [] {
                   linear(ones({2, 3}), ones({4, 2}));
                 }},
                {"bias of the wrong size",
                 [] {
                   linear(ones({2, 3}), ones({4, 3}), ones({3}));
                 }},
                {"mixed dtypes",
                 [] {
                   linear(ones({2, 3}), ones({4, 3}, {.dtype = DType::f64}));
                 }},
                {"3-D x (nn::Linear flattens the leading dims)",
                 [] {
                   linear(ones({2, 2, 3}), ones({4, 3}));
                 }}},
               1e-4});
  return true;
}();
}  // namespace
