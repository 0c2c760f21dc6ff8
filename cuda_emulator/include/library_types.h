// kiln's CUDA emulator: the element types of CUDA's libraries (cudaDataType_t), those kiln
// passes to cublasGemmStridedBatchedEx. The values are CUDA's.
#pragma once

enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16BF = 14 };
typedef enum cudaDataType_t cudaDataType;
