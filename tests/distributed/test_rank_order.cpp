// The pieces of the rank-ordered allreduce, in one process: the shares and the in-order sum, and
// that the sum is the very accumulation autograd does into .grad.
#include <catch2/catch.hpp>

#include <cstring>

#include "core/kiln.h"
#include "distributed/rank_order.h"
#include "tests/distributed/order_sensitive.h"
#include "tests/harness/near.h"

using namespace kiln;
using kiln::dist::Share;
using kiln::dist::share_of;

TEST_CASE("dist: shares tile the elements in rank order, sizes differing by at most one") {
  for (std::int64_t n : {0, 1, 2, 5, 7, 64, 1000, 100003}) {
    for (int world : {1, 2, 3, 4, 7, 8}) {
      std::int64_t next = 0, smallest = n, largest = 0;
      for (int r = 0; r < world; ++r) {
        const Share s = share_of(n, world, r);
        CHECK(s.offset == next);
        next += s.count;
        smallest = std::min(smallest, s.count);
        largest = std::max(largest, s.count);
      }
      CHECK(next == n);
      CHECK(largest - smallest <= 1);
    }
  }
}

TEST_CASE("dist: the in-order sum is ((x_0 + x_1) + x_2) + ... bit for bit, also in place") {
  const std::int64_t n = 10007;
  for (int world : {1, 2, 3, 5}) {
    std::vector<std::vector<float>> x;
    std::vector<const void*> parts;
    for (int r = 0; r < world; ++r) x.push_back(testing::order_sensitive<float>(r, n));
    for (const auto& v : x) parts.push_back(v.data());
    const std::vector<float> expected = testing::sum_over_ranks<float>(world, n);

    std::vector<float> out(static_cast<std::size_t>(n));
    dist::sum_in_rank_order(DType::f32, Device::cpu(), n, parts, out.data());
    CHECK(std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)) == 0);
    dist::sum_in_rank_order(DType::f32, Device::cpu(), n, parts, x[0].data());  // in place
    CHECK(std::memcmp(x[0].data(), expected.data(), out.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("dist: the test values make the order visible: a reversed sum of 3 differs") {
  const std::int64_t n = 10007;
  const std::vector<float> forward = testing::sum_over_ranks<float>(3, n);
  const std::vector<float> reverse = testing::sum_over_ranks<float>(3, n, true);
  std::int64_t differ = 0;
  for (std::size_t i = 0; i < forward.size(); ++i) differ += forward[i] != reverse[i];
  CHECK(differ > n / 20);
}

TEST_CASE(
    "dist: the in-order sum of micro-batch gradients is what backward accumulates into .grad") {
  // One process with 3 micro-batches: .grad = g_0, then += g_1, += g_2 (AccumulateGrad).
  manual_seed(11);
  const Tensor w = randn({37, 29}).requires_grad_();
  std::vector<Tensor> inputs;
  for (int i = 0; i < 3; ++i) inputs.push_back(randn({5, 37}) * (i == 1 ? 1e4 : 1e-3));
  const auto loss = [&](int i) { return (tanh(matmul(inputs[i], w)) * (1.0 / 3.0)).sum(); };
  for (int i = 0; i < 3; ++i) loss(i).backward();
  const Tensor accumulated = w.grad().clone();

  // Each micro-batch's gradient alone, as each rank of a 3-rank job computes it.
  std::vector<Tensor> grads;
  for (int i = 0; i < 3; ++i) {
    w.set_grad(Tensor());
    loss(i).backward();
    grads.push_back(w.grad().clone());
  }
  std::vector<const void*> parts;
  for (const Tensor& g : grads) parts.push_back(g.raw_data());
  const Tensor summed = empty_like(accumulated);
  dist::sum_in_rank_order(DType::f32, Device::cpu(), summed.numel(), parts, summed.raw_data());
  const testing::NearResult same = testing::compare_exact(summed, accumulated);
  INFO(same.message);
  CHECK(same.ok);
}
