// kiln's CUDA emulator: cuBLAS's v2 API (see cublas_api.h).
#pragma once

#include "core/cuda/emulator/include/cublas_api.h"
