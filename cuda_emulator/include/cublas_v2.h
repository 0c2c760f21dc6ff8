// kiln's CUDA emulator: cuBLAS's v2 API (see cublas_api.h).
#pragma once

#include "cuda_emulator/include/cublas_api.h"
