// The CUDA backend's blocking calls, each counted: every place where the host waits for the
// device goes through these, so cuda_host_synchronizations() (core/cuda/cuda_backend.h) is the
// number of times the host stalled the GPU's queue. A training step between log intervals makes
// none (lm/trainer.h); a test holds it to that on the emulated device.
#pragma once

#include <cuda_runtime_api.h>

namespace kiln::gpu {

// cudaStreamSynchronize(stream), checked and counted.
void wait_for_stream(cudaStream_t stream);
// cudaDeviceSynchronize(), checked and counted.
void wait_for_device();
// cudaEventSynchronize(event), checked and counted.
void wait_for_event(cudaEvent_t event);

}  // namespace kiln::gpu
