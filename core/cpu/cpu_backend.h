// The CPU backend: Eigen (or OpenBLAS) GEMM, OpenMP loops with fixed partitions. Its kernels
// live in one file per family beside this header (memory, elementwise, reduce, gemm, rows,
// indexing, random, optim).
#pragma once

#include <atomic>

#include "core/backend.h"

namespace kiln {

class CpuBackend final : public Backend {
 public:
  void* allocate(std::size_t nbytes) override;
  void deallocate(void* ptr, std::size_t nbytes) override;
  void copy_from_host(void* dst, const void* src, std::size_t nbytes) override;
  void copy_to_host(void* dst, const void* src, std::size_t nbytes) override;
  std::size_t bytes_in_use() const override { return bytes_in_use_.load(); }
  std::size_t peak_bytes_in_use() const override { return peak_bytes_.load(); }
  // Restarts the peak at the bytes in use now (benchmarks and tests measure one region's peak).
  void reset_peak_bytes_in_use() { peak_bytes_.store(bytes_in_use_.load()); }
  // bf16 operands are converted a row or a block at a time (elementwise.cpp, rows.cpp, random.cpp).
  bool kernels_read_bf16() const override { return true; }
  bool gemm_rounds_operands() const override { return true; }

#define KILN_KERNEL(result, name, parameters) result name parameters override;
#include "core/backend_kernels.h"
#undef KILN_KERNEL

 private:
  std::atomic<std::size_t> bytes_in_use_{0};
  std::atomic<std::size_t> peak_bytes_{0};
};

CpuBackend& cpu_backend();

}  // namespace kiln
