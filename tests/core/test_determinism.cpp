// Kernels give the same bits run after run — and, for kiln's own kernels, for any thread count:
// work is split into fixed partitions that depend only on the shape. 3 threads are tested
// because on 2 cores a non-deterministic reduction can look deterministic.
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "core/kiln.h"
#include "tests/harness/near.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Output and input gradients of f on fresh leaves, with `threads` threads.
std::vector<Tensor> run(int threads, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                        const std::vector<Tensor>& inputs) {
  set_num_threads(threads);
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) {
    Tensor leaf = t.detach().clone();
    if (is_floating(leaf.dtype())) leaf.requires_grad_();
    leaves.push_back(leaf);
  }
  const Tensor out = f(leaves);
  Generator gen(5);
  out.backward(uniform(out.shape(), -1, 1, {}, &gen));
  std::vector<Tensor> results{out.detach()};
  for (const Tensor& leaf : leaves)
    if (leaf.requires_grad()) results.push_back(leaf.grad());
  set_num_threads(2);
  return results;
}

void require_thread_independent(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                const std::vector<Tensor>& inputs) {
  const std::vector<Tensor> reference = run(3, f, inputs);
  for (int threads : {3, 1, 2}) {
    INFO(threads << " threads");
    const std::vector<Tensor> again = run(threads, f, inputs);
    for (std::size_t i = 0; i < reference.size(); ++i) REQUIRE_EXACT(again[i], reference[i]);
  }
}

Tensor big(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  return uniform(shape, -3, 3, {}, &gen);
}

}  // namespace

TEST_CASE("reductions are bit-identical for 1, 2 and 3 threads", "[determinism]") {
  const Tensor x = big({3000, 257}, 1);
  require_thread_independent([](const auto& in) { return sum(in[0], {0}); }, {x});
  require_thread_independent([](const auto& in) { return sum(in[0], {1}); }, {x});
  require_thread_independent([](const auto& in) { return sum(in[0]).view({1}); }, {x});
  require_thread_independent([](const auto& in) { return max(in[0], 0).values; }, {x});
}

TEST_CASE("fused row ops are bit-identical for 1, 2 and 3 threads", "[determinism]") {
  const Tensor x = big({2048, 500}, 2);
  require_thread_independent([](const auto& in) { return softmax(in[0]); }, {x});
  require_thread_independent([](const auto& in) { return log_softmax(in[0]); }, {x});
  require_thread_independent(
      [](const auto& in) {
        return causal_softmax(in[0].view({8, 256, 500}));
      },
      {x});
  require_thread_independent([](const auto& in) { return layer_norm(in[0], in[1], in[2]); },
                             {x, big({500}, 3), big({500}, 4)});
  Generator gen(6);
  std::vector<std::int64_t> targets(2048);
  for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = (i * 7919) % 500;
  require_thread_independent([](const auto& in) { return cross_entropy(in[0], in[1]).view({1}); },
                             {x, from_vector(targets, {2048})});
}

TEST_CASE("causal_attention is bit-identical for 1, 2 and 3 threads", "[determinism]") {
  require_thread_independent(
      [](const auto& in) {
        Generator gen(3);
        return causal_attention(in[0], 4, 2, 0.1, true, &gen);
      },
      {big({16, 24, 8 * 8}, 9)});
  // Several query and key tiles, GQA (the per-query-head dK and dV summed over each group).
  require_thread_independent(
      [](const auto& in) {
        Generator gen(4);
        return causal_attention(in[0], 4, 2, 0.1, true, &gen);
      },
      {big({3, 200, 8 * 16}, 10)});
  // Queries at the end of a longer key sequence (a KV cache), MQA.
  require_thread_independent(
      [](const auto& in) {
        Generator gen(5);
        return causal_attention_heads(in[0], in[1], in[2], 0.2, true, &gen);
      },
      {big({2, 3, 70, 24}, 11), big({2, 1, 300, 24}, 12), big({2, 1, 300, 24}, 13)});
}

TEST_CASE("embedding backward with repeated ids is bit-identical for 1, 2 and 3 threads",
          "[determinism]") {
  std::vector<std::int64_t> ids(4096);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = (i * i) % 97;  // heavy repetition
  require_thread_independent([](const auto& in) { return embedding(in[0], in[1]); },
                             {big({100, 64}, 7), from_vector(ids, {64, 64})});
}

TEST_CASE("dropout masks do not depend on the thread count", "[determinism]") {
  require_thread_independent(
      [](const auto& in) {
        Generator gen(9);
        return dropout(in[0], 0.1, true, &gen);
      },
      {big({1000, 300}, 8)});
}

TEST_CASE("matmul is bit-identical run to run with 3 threads", "[determinism]") {
  const Tensor a = big({300, 400}, 10), b = big({400, 350}, 11);
  const auto f = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  const std::vector<Tensor> first = run(3, f, {a, b});
  const std::vector<Tensor> second = run(3, f, {a, b});
  for (std::size_t i = 0; i < first.size(); ++i) REQUIRE_EXACT(second[i], first[i]);
  const Tensor batched_a = big({64, 32, 48}, 12), batched_b = big({64, 48, 32}, 13);
  const std::vector<Tensor> third = run(3, f, {batched_a, batched_b});
  const std::vector<Tensor> fourth = run(3, f, {batched_a, batched_b});
  for (std::size_t i = 0; i < third.size(); ++i) REQUIRE_EXACT(fourth[i], third[i]);
}

TEST_CASE("the LM head's row kernels are bit-identical for 1, 2 and 3 threads", "[determinism]") {
  // 3,000 classes span several blocks of exponentials; the fused kernel (loss, logsumexp, the
  // logits overwritten by exp(logits - shift) and the row scales) is called directly, since
  // linear_cross_entropy's GEMMs come from the BLAS, which is deterministic only for a fixed thread
  // count.
  const std::int64_t rows = 96, classes = 3000;
  std::vector<std::int64_t> targets(rows);
  for (std::size_t i = 0; i < targets.size(); ++i)
    targets[i] = i % 5 == 0 ? -100 : (i * 7919) % classes;
  require_thread_independent([](const auto& in) { return cross_entropy(in[0], in[1]).view({1}); },
                             {big({rows, classes}, 7), from_vector(targets, {rows})});
  const Tensor logits = big({rows, classes}, 8);
  const auto fused = [&](int threads) {
    set_num_threads(threads);
    std::vector<Tensor> out{logits.clone(), empty({rows}), empty({rows}), empty({rows})};
    backend_for(Device::cpu())
        .cross_entropy_forward_exp(
            {.dtype = DType::f32, .rows = rows, .cols = classes, .ignore_index = -100},
            out[0].raw_data(), targets.data(), out[1].raw_data(), out[2].raw_data(),
            out[3].raw_data());
    set_num_threads(2);
    return out;
  };
  const std::vector<Tensor> reference = fused(3);
  for (int threads : {3, 1, 2}) {
    INFO(threads << " threads");
    const std::vector<Tensor> again = fused(threads);
    for (std::size_t i = 0; i < reference.size(); ++i) REQUIRE_EXACT(again[i], reference[i]);
  }
}
