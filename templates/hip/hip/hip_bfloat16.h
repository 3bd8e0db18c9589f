/* kevolve's HIP-on-CUDA compatibility header: hip_bfloat16 as a 2-byte class over CUDA's
 * __nv_bfloat16 (same bits, round-to-nearest-even from float, exact widening to float),
 * the part of ROCm's hip/hip_bfloat16.h that kevolve's HIP template uses. */
#ifndef KEVOLVE_HIP_ON_CUDA_BFLOAT16_H
#define KEVOLVE_HIP_ON_CUDA_BFLOAT16_H

#include "hip_runtime.h"

struct hip_bfloat16 {
    __nv_bfloat16 data;
    hip_bfloat16() = default;
    explicit __host__ __device__ hip_bfloat16(float f) : data(__float2bfloat16(f)) {}
    __host__ __device__ operator float() const { return __bfloat162float(data); }
};
static_assert(sizeof(hip_bfloat16) == 2, "hip_bfloat16 must be 2 bytes");

#endif
