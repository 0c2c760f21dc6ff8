// CUDA memory: the caching allocator's reuse and accounting, poisoning, transfers between the
// devices, mixing devices in one op, and asking for a device that does not exist.
#include <catch2/catch.hpp>

#include <cmath>

#include <cuda_runtime_api.h>

#include "core/cuda/caching_allocator.h"
#include "core/native_bf16.h"
#include "tests/cuda/cuda_testing.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// One small training-like step on the GPU: forward, backward, and reading the loss.
float training_step(const Tensor& w) {
  Generator gen(3);
  const Tensor x = rand({64, 128}, {DType::f32, Device::cuda()}, &gen);
  const Tensor loss = relu(matmul(x, w)).sum();
  loss.backward();
  return loss.item<float>();
}

}  // namespace

// Runs without a device: the rounding rule is plain host code.
TEST_CASE("allocator/block sizes round requests up by at most 512 bytes or 1/8", "[allocator]") {
  REQUIRE(CachingAllocator::block_size(1) == 512);
  REQUIRE(CachingAllocator::block_size(512) == 512);
  REQUIRE(CachingAllocator::block_size(513) == 1024);
  REQUIRE(CachingAllocator::block_size(std::size_t{1} << 20) == std::size_t{1} << 20);
  REQUIRE(CachingAllocator::block_size((std::size_t{1} << 20) + 1) ==
          (std::size_t{1} << 20) + (std::size_t{1} << 17));
  for (std::size_t n : {std::size_t{3} << 20, std::size_t{1000000007}, std::size_t{1} << 33}) {
    const std::size_t block = CachingAllocator::block_size(n);
    REQUIRE(block >= n);
    REQUIRE(block - n <= n / 8);
    REQUIRE(block % 256 == 0);
  }
}

// Runs without a device too: the answer there is 0 devices and a clear error.
TEST_CASE("device/a missing GPU is a clear error naming the device and the count", "[device]") {
  const int count = cuda_device_count();
  REQUIRE(count >= 0);
  REQUIRE(cuda_device_count() == count);  // asked once, then cached
  const std::string name = fmt::format("cuda:{}", count);
  REQUIRE_THROWS_WITH(cuda_backend(count), Catch::Contains(name) && Catch::Contains(fmt::format(
                                                                        "{} CUDA device", count)));
  REQUIRE_THROWS_WITH(ones({2}, {DType::f32, Device::cuda(count)}), Catch::Contains(name));
  REQUIRE_THROWS_WITH(native_bf16(Device::cuda(count)), Catch::Contains(name));
}

TEST_CASE("cuda/native_bf16: bf16 tensor cores from compute capability 8.0, named in the reason",
          "[cuda]") {
  if (!cuda_available_or_skip()) return;
  cudaDeviceProp properties{};
  REQUIRE(cudaGetDeviceProperties(&properties, 0) == cudaSuccess);
  const NativeBf16 bf16 = native_bf16(Device::cuda());
  CHECK(bf16.native == (properties.major >= 8));
  CHECK_THAT(
      bf16.why,
      Catch::Contains(fmt::format("(sm_{}{})", properties.major, properties.minor)) &&
          Catch::Contains(bf16.native ? "has bf16 tensor cores" : "has no bf16 tensor cores"));
}

TEST_CASE("cuda/allocator: a steady-state training loop makes no new cudaMalloc", "[cuda]") {
  if (!cuda_available_or_skip()) return;
  CudaBackend& gpu = gpu_backend();
  Generator gen(1);
  const Tensor w =
      uniform({128, 32}, -1.0, 1.0, {DType::f32, Device::cuda()}, &gen).requires_grad_();
  training_step(w);  // the first step fills the cache
  w.set_grad(Tensor());
  training_step(w);
  const std::int64_t allocations = gpu.device_allocations();
  const std::size_t in_use = gpu.bytes_in_use();
  for (int step = 0; step < 20; ++step) {
    w.set_grad(Tensor());
    training_step(w);
  }
  REQUIRE(gpu.device_allocations() == allocations);
  REQUIRE(gpu.bytes_in_use() == in_use);
}

TEST_CASE("cuda/allocator: bytes in use and peak follow the live tensors", "[cuda]") {
  if (!cuda_available_or_skip()) return;
  CudaBackend& gpu = gpu_backend();
  const std::size_t before = gpu.bytes_in_use();
  {
    const Tensor a = empty({1000}, {DType::f32, Device::cuda()});
    REQUIRE(gpu.bytes_in_use() == before + 4000);
    const Tensor b = empty({10, 10}, {DType::f64, Device::cuda()});
    REQUIRE(gpu.bytes_in_use() == before + 4800);
    REQUIRE(gpu.peak_bytes_in_use() >= before + 4800);
    REQUIRE(gpu.bytes_reserved() >= gpu.bytes_in_use());
  }
  REQUIRE(gpu.bytes_in_use() == before);
  REQUIRE(gpu.peak_bytes_in_use() >= before + 4800);
}

TEST_CASE("cuda/allocator: empty_cache returns cached blocks to the driver", "[cuda]") {
  if (!cuda_available_or_skip()) return;
  CudaBackend& gpu = gpu_backend();
  const Shape big{64, 1024, 1024};  // 256 MiB of float32
  { const Tensor t = empty(big, {DType::f32, Device::cuda()}); }
  const std::size_t reserved = gpu.bytes_reserved();
  REQUIRE(reserved >= (std::size_t{256} << 20));
  const std::int64_t allocations = gpu.device_allocations();
  { const Tensor t = empty(big, {DType::f32, Device::cuda()}); }  // served from the cache
  REQUIRE(gpu.device_allocations() == allocations);
  gpu.empty_cache();
  REQUIRE(gpu.bytes_reserved() + (std::size_t{256} << 20) <= reserved);
  { const Tensor t = empty(big, {DType::f32, Device::cuda()}); }  // a fresh cudaMalloc
  REQUIRE(gpu.device_allocations() == allocations + 1);
}

TEST_CASE("cuda/poisoning fills every new block with NaN (float) or -1 (int64)", "[cuda]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  for (DType dtype : {DType::f32, DType::f64}) {
    const std::vector<double> values = empty({1000}, {dtype, Device::cuda()}).to_vector<double>();
    for (double v : values) REQUIRE(std::isnan(v));
  }
  for (std::int64_t v : empty({10}, {DType::i64, Device::cuda()}).to_vector<std::int64_t>())
    REQUIRE(v == -1);
}

TEST_CASE("cuda/to(Device) round-trips every dtype, layout and size exactly", "[cuda]") {
  if (!cuda_available_or_skip()) return;
  const PoisonScope poison;
  Generator gen(5);
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor x = uniform({7, 13}, -3.0, 3.0, {dtype}, &gen);
    const Tensor on_gpu = x.to(Device::cuda());
    REQUIRE(on_gpu.device() == Device::cuda(0));
    REQUIRE_EXACT(on_gpu.to(Device::cpu()), x);
    REQUIRE_EXACT(x.t().to(Device::cuda()).to(Device::cpu()), x.t());  // non-contiguous source
    REQUIRE_EXACT(on_gpu.t().to(Device::cpu()), x.t());                // non-contiguous on GPU
    REQUIRE_EXACT(on_gpu.slice(1, 1, 13, 3).contiguous().to(Device::cpu()),
                  x.slice(1, 1, 13, 3).contiguous());
  }
  const Tensor ids = arange(100003, {DType::i64});
  REQUIRE_EXACT(ids.to(Device::cuda()).to(Device::cpu()), ids);
  const Tensor none = empty({0, 3});
  REQUIRE(none.to(Device::cuda()).to(Device::cpu()).shape() == Shape{0, 3});
  const Tensor scalar = full({}, 2.5);
  REQUIRE(scalar.to(Device::cuda()).item<float>() == 2.5f);
}

TEST_CASE("cuda/to(Device) is differentiable both ways", "[cuda]") {
  if (!cuda_available_or_skip()) return;
  const Tensor x = ones({3, 2}).requires_grad_();
  const Tensor y = mul(x.to(Device::cuda()), 3.0).to(Device::cpu()).sum();
  y.backward();
  REQUIRE(x.grad().device().is_cpu());
  REQUIRE_EXACT(x.grad(), full({3, 2}, 3.0));
}

TEST_CASE("cuda/mixing devices in one op is a clear error", "[cuda]") {
  if (!cuda_available_or_skip()) return;
  const Tensor cpu = ones({3});
  const Tensor gpu = ones({3}, {DType::f32, Device::cuda()});
  REQUIRE_THROWS_WITH(add(cpu, gpu), Catch::Contains("different devices") &&
                                         Catch::Contains("cpu") && Catch::Contains("cuda:0"));
  REQUIRE_THROWS_WITH(matmul(ones({2, 3}), ones({3, 2}, {DType::f32, Device::cuda()})),
                      Catch::Contains("matmul:") && Catch::Contains("different devices"));
}
