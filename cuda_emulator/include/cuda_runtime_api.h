// kiln's CUDA emulator (cuda_emulator/emulator.h): the part of the CUDA runtime API that kiln
// calls, with the real API's names, values and semantics, run on the CPU. On an include path only
// in KILN_CUDA=EMULATE builds. Every call is synchronous: a stream is a name, and work queued on it
// has finished when the call returns.
#pragma once

#include <cstddef>

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchFailure = 719,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

typedef struct CUstream_st* cudaStream_t;

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01

struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  std::size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int multiProcessorCount;
  int major;
  int minor;
};

extern "C" {

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total);
cudaError_t cudaDeviceSynchronize();

cudaError_t cudaMalloc(void** ptr, std::size_t size);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemset(void* ptr, int value, std::size_t count);
cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t count, cudaStream_t stream);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

// The calling thread's last error, reset to cudaSuccess (every emulated error is recoverable:
// a kernel fault stops the process instead of leaving a sticky error).
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
// CUDA's description; for the error the emulator last returned to this thread, followed by what
// exactly was wrong, e.g. "invalid argument (cudaMemcpyAsync: the destination ... is host memory)".
const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);

}  // extern "C"
