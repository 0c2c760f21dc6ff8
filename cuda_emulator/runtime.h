// What the runtime API (runtime.cpp) shares with the launcher and the stand-ins.
#pragma once

#include "cuda_emulator/include/cuda_runtime_api.h"

namespace kiln::emulator {

// True for 0 (the default stream) and for every stream created and not destroyed.
bool is_valid_stream(cudaStream_t stream);
// Makes `error` the calling thread's last error (what cudaGetLastError returns next).
void set_last_error(cudaError_t error);

}  // namespace kiln::emulator
