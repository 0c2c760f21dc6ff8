// KILN_HOST_DEVICE marks functions compiled for both the CPU and CUDA, so per-element math is
// written once and shared by the two backends.
#pragma once

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif
