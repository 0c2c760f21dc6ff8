// Tensor basics: factories, views and their shared storage, copies, in-place updates, printing.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/kiln.h"
#include "tests/harness/near.h"

using namespace kiln;

TEST_CASE("factories fill shapes with the requested values and dtypes", "[tensor]") {
  const Tensor z = zeros({2, 3});
  REQUIRE(z.shape() == Shape{2, 3});
  REQUIRE(z.dtype() == DType::f32);
  REQUIRE(z.to_vector<double>() == std::vector<double>(6, 0.0));
  REQUIRE(ones({4}, {.dtype = DType::f64}).to_vector<double>() == std::vector<double>(4, 1.0));
  REQUIRE(full({2}, 2.5).to_vector<float>() == std::vector<float>{2.5f, 2.5f});
  REQUIRE(arange(5, {.dtype = DType::i64}).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{0, 1, 2, 3, 4});
  REQUIRE(arange(1.0, 2.0, 0.25).to_vector<float>() == std::vector<float>{1, 1.25f, 1.5f, 1.75f});
  const Tensor v = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  REQUIRE(v.at<double>({1, 2}) == 6.0);
  REQUIRE(v.dtype() == DType::f64);
  REQUIRE(full({}, 3.0).item<double>() == 3.0);
  REQUIRE_THROWS_WITH(from_vector<float>({1, 2, 3}, {2, 2}),
                      Catch::Contains("from_vector") && Catch::Contains("[2, 2]"));
}

TEST_CASE("views share storage and the version counter with their base", "[tensor]") {
  const Tensor base = arange(0.0, 12.0, 1.0, {.dtype = DType::f64}).view({3, 4});
  const Tensor t = base.transpose(0, 1);
  REQUIRE(t.shape() == Shape{4, 3});
  REQUIRE(t.at<double>({1, 2}) == base.at<double>({2, 1}));
  REQUIRE_FALSE(t.is_contiguous());
  REQUIRE(t.storage() == base.storage());
  const std::uint64_t before = base.version();
  {
    NoGradGuard no_grad;
    t.narrow(0, 1, 1).fill_(-1.0);  // writes base[:, 1]
  }
  REQUIRE(base.version() == before + 1);
  REQUIRE(t.version() == base.version());
  REQUIRE(base.at<double>({0, 1}) == -1.0);
  REQUIRE(base.at<double>({2, 1}) == -1.0);
  REQUIRE(base.at<double>({2, 2}) == 10.0);
  REQUIRE(base.detach().version() == base.version());
}

TEST_CASE("reshape views when strides allow and copies otherwise", "[tensor]") {
  const Tensor base = arange(0.0, 24.0).view({2, 3, 4});
  REQUIRE(base.reshape({6, 4}).storage() == base.storage());
  REQUIRE(base.reshape({-1}).shape() == Shape{24});
  const Tensor permuted = base.permute({2, 0, 1});
  const Tensor flat = permuted.reshape({-1});
  REQUIRE(flat.storage() != base.storage());
  REQUIRE(flat.at<float>({1}) == base.at<float>({0, 1, 0}));
  REQUIRE_THROWS_WITH(permuted.view({-1}), Catch::Contains("view") && Catch::Contains("reshape"));
  REQUIRE_THROWS_WITH(base.view({5, -1}), Catch::Contains("view") && Catch::Contains("24"));
}

TEST_CASE("slice, select, expand, squeeze and unsqueeze give the expected geometry", "[tensor]") {
  const Tensor x = arange(0.0, 10.0, 1.0, {.dtype = DType::f64});
  REQUIRE(x.slice(0, 1, 9, 3).to_vector<double>() == std::vector<double>{1, 4, 7});
  REQUIRE(x.slice(0, -3, 10).to_vector<double>() == std::vector<double>{7, 8, 9});
  const Tensor m = x.view({2, 5});
  REQUIRE(m.select(1, -1).to_vector<double>() == std::vector<double>{4, 9});
  const Tensor col = m.narrow(1, 0, 1);
  const Tensor e = col.expand({2, 3});
  REQUIRE(e.strides()[1] == 0);
  REQUIRE(e.to_vector<double>() == std::vector<double>{0, 0, 0, 5, 5, 5});
  REQUIRE(m.unsqueeze(0).shape() == Shape{1, 2, 5});
  REQUIRE(m.unsqueeze(-1).shape() == Shape{2, 5, 1});
  REQUIRE(m.unsqueeze(1).squeeze(1).shape() == Shape{2, 5});
  REQUIRE(m.squeeze(0).shape() == Shape{2, 5});
  REQUIRE_THROWS_WITH(m.expand({3, 5}), Catch::Contains("expand") && Catch::Contains("[2, 5]"));
  REQUIRE_THROWS_WITH(m.narrow(1, 3, 3), Catch::Contains("narrow") && Catch::Contains("size 5"));
  REQUIRE_THROWS_WITH(m.permute({0, 0}), Catch::Contains("permute"));
  REQUIRE_THROWS_WITH(m.transpose(0, 2), Catch::Contains("transpose") && Catch::Contains("dim 2"));
}

TEST_CASE("contiguous copies only when needed, clone always copies", "[tensor]") {
  const Tensor a = ones({3, 4});
  REQUIRE(a.contiguous().is_same(a));
  REQUIRE(a.clone().storage() != a.storage());
  const Tensor t = a.t();
  REQUIRE(t.contiguous().is_contiguous());
  REQUIRE(t.contiguous().storage() != a.storage());
}

TEST_CASE("to(dtype) converts values and keeps shape", "[tensor]") {
  const Tensor x = from_vector<double>({1.5, -2.25, 3}, {3});
  const Tensor f = x.to(DType::f32);
  REQUIRE(f.dtype() == DType::f32);
  REQUIRE(f.to_vector<float>() == std::vector<float>{1.5f, -2.25f, 3.0f});
  REQUIRE(x.to(DType::i64).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, -2, 3});
  REQUIRE(x.to(DType::f64).is_same(x));
}

TEST_CASE("in-place ops update values and bump the version", "[tensor]") {
  const Tensor x = ones({2, 2}, {.dtype = DType::f64});
  const std::uint64_t v0 = x.version();
  x.add_(full({2}, 2.0, {.dtype = DType::f64}), 0.5);  // broadcast row
  REQUIRE(x.to_vector<double>() == std::vector<double>(4, 2.0));
  x.mul_(3.0);
  x.mul_(from_vector<double>({1, 0}, {2}));
  REQUIRE(x.to_vector<double>() == std::vector<double>{6, 0, 6, 0});
  x.copy_(from_vector<double>({7, 8}, {2, 1}));
  REQUIRE(x.to_vector<double>() == std::vector<double>{7, 7, 8, 8});
  x.zero_();
  REQUIRE(x.to_vector<double>() == std::vector<double>(4, 0.0));
  REQUIRE(x.version() == v0 + 5);
}

TEST_CASE("in-place writes are refused on leaves that require grad and on expanded views",
          "[tensor]") {
  const Tensor w = ones({3}).requires_grad_();
  REQUIRE_THROWS_WITH(w.add_(ones({3})), Catch::Contains("add_") && Catch::Contains("NoGradGuard"));
  REQUIRE_THROWS_WITH(w.fill_(0.0), Catch::Contains("fill_"));
  {
    NoGradGuard no_grad;
    w.fill_(2.0);  // allowed under NoGradGuard, as optimizers do
  }
  REQUIRE(w.to_vector<float>() == std::vector<float>(3, 2.0f));
  const Tensor e = ones({1, 3}).expand({4, 3});
  REQUIRE_THROWS_WITH(e.fill_(1.0), Catch::Contains("fill_") && Catch::Contains("expanded"));
}

TEST_CASE("in-place ops with an overlapping operand read it before writing", "[tensor]") {
  const Tensor x = arange(0.0, 4.0, 1.0, {.dtype = DType::f64}).view({2, 2});
  x.add_(x.t());
  REQUIRE(x.to_vector<double>() == std::vector<double>{0, 3, 3, 6});
}

TEST_CASE("printing shows values, shape, dtype and device, abbreviated when large", "[tensor]") {
  const Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2});
  const std::string s = fmt::format("{}", x);
  REQUIRE(s ==
          "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]], shape=[2, 2], "
          "dtype=float32, device=cpu)");
  const std::string big = arange(5000).str();
  REQUIRE(big.find("...") != std::string::npos);
  REQUIRE(big.find("4999") != std::string::npos);
  REQUIRE(big.size() < 200);
  REQUIRE(arange(3, {.dtype = DType::i64}).str().find("[0, 1, 2]") != std::string::npos);
}

TEST_CASE("devices parse, and CUDA tensors are a clear error without CUDA", "[tensor]") {
  REQUIRE(Device::parse("cpu") == Device::cpu());
  REQUIRE(Device::parse("cuda:1") == Device::cuda(1));
  REQUIRE_THROWS_WITH(Device::parse("gpu"), Catch::Contains("gpu"));
  REQUIRE_THROWS_WITH(Device::parse("cuda:x"), Catch::Contains("cuda:x"));
  if (cuda_device_count() == 0) {
    REQUIRE_THROWS_WITH(zeros({2}, {.device = Device::cuda(0)}), Catch::Contains("cuda:0"));
    REQUIRE_THROWS_WITH(ones({2}).to(Device::cuda(0)), Catch::Contains("cuda:0"));
  }
}

TEST_CASE("sum over a long middle dim equals the float64 sum, across row chunks and column blocks",
          "[tensor]") {
  // (2, 1000, 2500) summed over dim 1: the CPU kernel splits the 1000 rows into chunks and the
  // 2500 columns into blocks; every output must be the float64 sum of its column, rounded once.
  const std::int64_t outer = 2, rows = 1000, cols = 2500;
  Generator gen(11);
  const Tensor x = uniform({outer, rows, cols}, -1, 1, {}, &gen);
  const std::vector<float> values = x.to_vector<float>();
  const std::vector<float> sums = sum(x, {1}).to_vector<float>();
  REQUIRE(sums.size() == static_cast<std::size_t>(outer * cols));
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t c = 0; c < cols; ++c) {
      double want = 0.0;
      for (std::int64_t r = 0; r < rows; ++r) want += values[(o * rows + r) * cols + c];
      INFO("outer " << o << " column " << c);
      REQUIRE(std::abs(sums[o * cols + c] - want) <= 1e-6 * (1.0 + std::abs(want)));
    }
  }
}

TEST_CASE("CPU blocks of 2 MB and more start on a huge-page boundary", "[memory]") {
  CpuBackend& cpu = cpu_backend();
  for (const std::size_t bytes : {std::size_t{64}, std::size_t{100000}, std::size_t{2} << 20,
                                  (std::size_t{5} << 20) + 12345}) {
    INFO(bytes << " bytes");
    void* block = cpu.allocate(bytes);
    const auto address = reinterpret_cast<std::uintptr_t>(block);
    CHECK(address % 64 == 0);
    CHECK((bytes < (std::size_t{2} << 20) || address % (std::size_t{2} << 20) == 0));
    std::memset(block, 0x5a, bytes);  // every byte is ours
    CHECK(static_cast<unsigned char*>(block)[bytes - 1] == 0x5a);
    cpu.deallocate(block, bytes);
  }
}
