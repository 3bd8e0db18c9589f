/* kevolve's HIP-on-CUDA compatibility header: HIP's __half API is CUDA's cuda_fp16.h. */
#ifndef KEVOLVE_HIP_ON_CUDA_FP16_H
#define KEVOLVE_HIP_ON_CUDA_FP16_H

#include "hip_runtime.h"

#endif
