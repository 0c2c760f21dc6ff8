// Collectives of a multi-rank backend, run by every rank of a 2- or 3-rank job (CTest starts this
// binary with mpirun; scripts/multi_gpu_check.sh with NCCL): every rank runs the same test cases
// in the same order, on tensors on the communicator's device.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/kiln.h"
#include "tests/distributed/order_sensitive.h"
#include "tests/distributed/ranks_comm.h"
#include "tests/harness/near.h"

using namespace kiln;
using Catch::Matchers::Contains;
using dist::ReduceOp;
using dist::SumOrder;

namespace kiln::testing {

dist::Communicator& ranks_comm() {
  static const std::unique_ptr<dist::Communicator> comm = [] {
    const char* backend = std::getenv("KILN_TEST_DIST_BACKEND");
    const char* device = std::getenv("KILN_TEST_DIST_DEVICE");
    const std::string name = backend != nullptr ? backend : "mpi";
    return dist::make_communicator({.backend = name,
                                    .device = device != nullptr ? Device::parse(device)
                                              : name == "nccl"  ? Device::cuda()
                                                                : Device::cpu()});
  }();
  return *comm;
}

}  // namespace kiln::testing

namespace {

dist::Communicator& comm() { return testing::ranks_comm(); }

// On the communicator's device.
template <typename T>
Tensor tensor_of(const std::vector<T>& values) {
  return from_vector(values, {static_cast<std::int64_t>(values.size())}).to(comm().device());
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace

TEST_CASE("dist: every rank has its own rank in a world of the launcher's size") {
  const int world = comm().world_size();
  CHECK(world == dist::detect_launch().world_size);
  const Tensor ranks = comm().allgather(tensor_of(std::vector<std::int64_t>{comm().rank()}));
  for (int r = 0; r < world; ++r) CHECK(ranks.at<std::int64_t>({r, 0}) == r);
}

TEMPLATE_TEST_CASE("dist: a rank-ordered sum is ((x_0 + x_1) + ...) bit for bit on every rank", "",
                   float, double) {
  const int world = comm().world_size();
  // Sizes that do not divide by the world, shorter than it, and empty.
  for (std::int64_t n : {0, 1, 2, 7, 1000, 100003}) {
    const Tensor t = tensor_of(testing::order_sensitive<TestType>(comm().rank(), n));
    comm().allreduce(t);
    INFO("n = " << n);
    CHECK(same_bits(t.to_vector<TestType>(), testing::sum_over_ranks<TestType>(world, n)));
  }
  // Host values take the same path.
  std::vector<TestType> host = testing::order_sensitive<TestType>(comm().rank(), 999);
  comm().allreduce(std::span<TestType>(host));
  CHECK(same_bits(host, testing::sum_over_ranks<TestType>(world, 999)));
}

TEST_CASE("dist: the library-order sum agrees with the rank-ordered one to rounding") {
  const std::int64_t n = 4099;
  const Tensor t = tensor_of(testing::order_sensitive<double>(comm().rank(), n));
  comm().allreduce(t, ReduceOp::sum, SumOrder::library);
  const std::vector<double> got = t.to_vector<double>();
  const std::vector<double> expected = testing::sum_over_ranks<double>(comm().world_size(), n);
  // Terms up to 2^24: a different order moves a double by a few ulps of 2^24 (~4e-9).
  for (std::size_t i = 0; i < got.size(); ++i)
    REQUIRE(testing::near(got[i], expected[i], 1e-12, 1e-7));
}

TEST_CASE("dist: max, min and integer sums over ranks are exact") {
  const int r = comm().rank(), world = comm().world_size();
  std::vector<std::int64_t> counts{r + 1, std::int64_t{1} << 40, -r};
  comm().allreduce(std::span<std::int64_t>(counts));
  CHECK(counts == std::vector<std::int64_t>{world * (world + 1) / 2,
                                            world * (std::int64_t{1} << 40),
                                            -world * (world - 1) / 2});
  const Tensor high = tensor_of(std::vector<float>{static_cast<float>(r), -static_cast<float>(r)});
  comm().allreduce(high, ReduceOp::max);
  CHECK(high.to_vector<float>() == std::vector<float>{static_cast<float>(world - 1), 0.0f});
  std::vector<std::int64_t> low{10 - r};
  comm().allreduce(std::span<std::int64_t>(low), ReduceOp::min);
  CHECK(low[0] == 10 - (world - 1));
}

TEST_CASE("dist: broadcast gives every rank the root's tensor and bytes") {
  for (int root = 0; root < comm().world_size(); ++root) {
    const Tensor t =
        full({3, 5}, comm().rank() * 10.0 + 1.0, {.dtype = DType::f64, .device = comm().device()});
    comm().broadcast(t, root);
    CHECK(t.to_vector<double>() == std::vector<double>(15, root * 10.0 + 1.0));
    std::string text = comm().rank() == root ? "the root's 17 bytes" : "xxxxxxxxxxxxxxxxxxx";
    comm().broadcast(std::as_writable_bytes(std::span<char>(text.data(), text.size())), root);
    CHECK(text == "the root's 17 bytes");
  }
}

TEST_CASE("dist: allgather stacks every rank's tensor and texts of any length in rank order") {
  const int r = comm().rank(), world = comm().world_size();
  const Tensor mine = full({2, 2}, static_cast<double>(r), {.device = comm().device()});
  const Tensor all = comm().allgather(mine);
  CHECK(all.shape() == Shape{world, 2, 2});
  for (int p = 0; p < world; ++p) CHECK(all.at<float>({p, 1, 1}) == static_cast<float>(p));
  const std::vector<std::string> texts =
      comm().allgather(std::string(static_cast<std::size_t>(r * 5), 'a' + r));
  REQUIRE(texts.size() == static_cast<std::size_t>(world));
  for (int p = 0; p < world; ++p)
    CHECK(texts[static_cast<std::size_t>(p)] ==
          std::string(static_cast<std::size_t>(p * 5), 'a' + p));
}

TEST_CASE("dist: check_same passes equal texts and names the first rank that differs") {
  comm().check_same("config", "d_model 16\nlr 0.001\n");
  const std::string mine = comm().rank() == 1 ? "d_model 16\nlr 0.002\n" : "d_model 16\nlr 0.001\n";
  CHECK_THROWS_WITH(comm().check_same("config", mine),
                    Contains("config differs between ranks: rank 1 has 'lr 0.002' where rank 0 "
                             "has 'lr 0.001' (line 2)"));
  comm().barrier();  // the communicator still works after the error
}

TEST_CASE("dist: collectives bump the version counter of the tensors they write") {
  const Tensor t = ones({4}, {.device = comm().device()});
  const std::uint64_t before = t.version();
  comm().allreduce(t);
  comm().broadcast(t, 0);
  CHECK(t.version() == before + 2);
  CHECK(t.to_vector<float>() == std::vector<float>(4, static_cast<float>(comm().world_size())));
}
