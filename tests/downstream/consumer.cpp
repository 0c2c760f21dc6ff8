// Uses an installed kiln: d/dw sum(relu(x w)) for a known x and w, checked exactly, and a
// single-process communicator from dist/.
#include <cstdio>

#include "core/kiln.h"
#include "dist/communicator.h"
#include "nn/linear.h"

int main() {
  using namespace kiln;
  const Tensor x = from_vector<double>({1, 2, 3, 4}, {2, 2});
  const Tensor w = from_vector<double>({1, -1, 0.5, 2}, {2, 2}).requires_grad_();
  relu(matmul(x, w)).sum().backward();
  // x w = [[2, 3], [5, 5]]: all positive, so d/dw = x^T 1 = [[4, 4], [6, 6]].
  const std::vector<double> expected{4, 4, 6, 6};
  if (w.grad().to_vector<double>() != expected) {
    std::fprintf(stderr, "consumer: wrong gradient %s\n", w.grad().str().c_str());
    return 1;
  }
  // dist/ links too (with MPI and NCCL when kiln was built with them); alone: one rank.
  const auto comm = dist::make_communicator();
  comm->allreduce(w.grad());
  if (comm->world_size() != 1 || w.grad().to_vector<double>() != expected) return 1;
  nn::Linear layer(2, 3);
  std::printf("consumer: kiln works downstream (%s)\n", environment_summary().c_str());
  return layer.forward(x.to(DType::f32)).shape() == Shape{2, 3} ? 0 : 1;
}
