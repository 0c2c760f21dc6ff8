// The CPU threads kiln's kernels use (OpenMP, GEMM libraries; set in core/cpu/threads.cpp).
// Results are deterministic for a fixed count; most kernels give the same bits for any count.
#pragma once

namespace kiln {

// The most threads kiln runs. Far more than any CPU has, and well below where OpenMP's runtime
// itself breaks: libgomp overflows its stack starting a team of 100,000 threads (SIGSEGV) and
// cannot create 50,000. A count read from a flag or a checkpoint is checked against it.
inline constexpr int kMaxThreads = 1024;

// A kiln::Error unless 1 <= threads <= kMaxThreads.
void set_num_threads(int threads);
int num_threads();

}  // namespace kiln
