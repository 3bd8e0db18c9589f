/* kevolve's HIP-on-CUDA compatibility header.
 *
 * The part of the HIP API that kevolve's HIP template (templates/hip/module.hip.j2) uses,
 * mapped onto CUDA, so that nvcc compiles kevolve's HIP source unchanged and it runs on an
 * NVIDIA GPU. Put templates/hip/ first on nvcc's include path (-I) and render the source
 * for a wavefront of 32. This is not a general HIP implementation: only what kevolve emits.
 *
 *   HIP                              CUDA
 *   hipLaunchKernelGGL(k, g, b, s, st, args...)   k<<<g, b, s, st>>>(args...)
 *   __shfl_xor(v, mask, width)       __shfl_xor_sync(0xffffffff, v, mask, width)
 *   hipStream_t, hipError_t, hipSuccess, hipMalloc, hipFree, hipGetLastError,
 *   hipDeviceSynchronize             their cuda* namesakes
 *   hip_bfloat16 (hip/hip_bfloat16.h)   a 2-byte class over __nv_bfloat16
 *   __half, __half2float, __float2half (hip/hip_fp16.h)   cuda_fp16.h
 *   float2/float4, int2/int4, longlong2, uint2/uint4, __half2 (the vector accesses of
 *   `vectorize`)                     CUDA's own types of the same names and layouts
 */
#ifndef KEVOLVE_HIP_ON_CUDA_RUNTIME_H
#define KEVOLVE_HIP_ON_CUDA_RUNTIME_H

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define KEVOLVE_HIP_ON_CUDA 1
#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif

typedef cudaStream_t hipStream_t;
typedef cudaError_t hipError_t;
#define hipSuccess cudaSuccess
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipGetLastError cudaGetLastError
#define hipDeviceSynchronize cudaDeviceSynchronize

#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
    kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)

/* HIP's shuffles take no mask: every lane of the wavefront takes part. CUDA's deprecated
 * mask-less __shfl_xor is not declared for sm_70+, and the headers above are already
 * parsed, so the macro only rewrites kevolve's own calls. */
#define __shfl_xor(var, lane_mask, width) \
    __shfl_xor_sync(0xffffffffu, (var), (lane_mask), (width))

#endif
