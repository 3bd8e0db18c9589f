/* kevolve's CPU emulation of the CUDA/HIP subset its generated kernels use.
 *
 * Compile a kevolve CUDA or HIP module with a C++17 compiler, -DKV_EMULATE and this folder
 * on the include path, and link it with kv_emu_rt.h compiled once with -DKV_EMU_RUNTIME
 * (kevolve's build does both): every thread of a block becomes a std::thread, blocks run one after
 * another (so `__shared__` can be a function-local static), __syncthreads() is a barrier
 * over the block, __syncwarp() one over the wavefront, and shuffles exchange values through
 * memory between two wavefront barriers. KV_WAVEFRONT (32 or 64) is set by the module.
 *
 * It checks what the source computes, its barriers and its lane arithmetic, on a machine
 * without a GPU; it says nothing about speed, and a barrier some threads never reach ends
 * the process with a message instead of hanging. WMMA fragments are emulated per thread.
 */
#ifndef KEVOLVE_KV_EMU_H
#define KEVOLVE_KV_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KV_WAVEFRONT
#define KV_WAVEFRONT 32
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
/* The runtime (kv_emu_rt.h, compiled once into its own library) owns the threads. */
extern thread_local dim3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
void kv_emu_sync_block();
void kv_emu_sync_warp();
uint64_t kv_emu_exchange(uint64_t bits, unsigned src_thread);
void kv_emu_launch(long long grid, int threads, int wavefront, void (*fn)(void *), void *arg);

inline void __syncthreads() { kv_emu_sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { kv_emu_sync_warp(); }

template <typename T>
inline T kv_emu_shfl_xor(T v, int lane_mask, int width) {
    static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
    const unsigned t = threadIdx.x;
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof(T));
    const unsigned lane = t % KV_WAVEFRONT, seg = lane - lane % (unsigned)width;
    const unsigned src = t - lane + seg + ((lane % (unsigned)width) ^ (unsigned)lane_mask);
    bits = kv_emu_exchange(bits, src);
    T out;
    memcpy(&out, &bits, sizeof(T));
    return out;
}
template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int lane_mask, int width = KV_WAVEFRONT) {
    return kv_emu_shfl_xor(v, lane_mask, width);
}
template <typename T>
inline T __shfl_xor(T v, int lane_mask, int width = KV_WAVEFRONT) {
    return kv_emu_shfl_xor(v, lane_mask, width);
}

/* atomicAdd on the emulator's CPU threads: GCC's atomic builtins (a compare-and-swap
 * loop for float), returning the old value as CUDA's does. */
inline float atomicAdd(float *p, float v) {
    float old, want;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do {
        want = old + v;
    } while (!__atomic_compare_exchange(p, &old, &want, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
    return old;
}
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

/* bf16 and f16: the storage types of CUDA and HIP, with their conversions. */
inline uint16_t kv_emu_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
inline float kv_emu_bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
struct __nv_bfloat16 { uint16_t x; };
inline float __bfloat162float(__nv_bfloat16 h) { return kv_emu_bf2f(h.x); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16{kv_emu_f2bf(f)}; }
struct hip_bfloat16 {
    uint16_t data;
    hip_bfloat16() = default;
    explicit hip_bfloat16(float f) : data(kv_emu_f2bf(f)) {}
    operator float() const { return kv_emu_bf2f(data); }
};
struct __half { _Float16 x; };
inline float __half2float(__half h) { return (float)h.x; }
inline __half __float2half(float f) { return __half{(_Float16)f}; }

/* The vector types of vectorized loads and stores: only their size and alignment matter
 * (the generated code copies whole vectors between memory and register arrays). */
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) longlong2 { long long x, y; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(4) __nv_bfloat162 { __nv_bfloat16 x, y; };
struct alignas(4) __half2 { __half x, y; };

/* WMMA (nvcuda::wmma) for 16x16x16 tiles: every thread holds the whole tile. */
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
    float x[16 * 16];
    static const int num_elements = 16 * 16;
};
template <typename Use, int M, int N, int K, typename T, typename L>
inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, float v) {
    for (int i = 0; i < 256; ++i) f.x[i] = v;
}
inline float kv_emu_wmma_f32(const __nv_bfloat16 &v) { return __bfloat162float(v); }
inline float kv_emu_wmma_f32(const __half &v) { return __half2float(v); }
inline float kv_emu_wmma_f32(const float &v) { return v; }
template <typename Use, int M, int N, int K, typename T, typename L, typename P>
inline void load_matrix_sync(fragment<Use, M, N, K, T, L> &f, const P *p, unsigned ldm) {
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = kv_emu_wmma_f32(p[r * ldm + c]);
    __syncwarp();
}
template <typename TA, typename TB, typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                     const fragment<matrix_a, 16, 16, 16, TA, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, TB, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c) {
    float out[256];
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) {
            float s = c.x[i * 16 + j];
            for (int k = 0; k < 16; ++k) s += a.x[i * 16 + k] * b.x[k * 16 + j];
            out[i * 16 + j] = s;
        }
    memcpy(d.x, out, sizeof(out));
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ldm, layout_t) {
    if (threadIdx.x % KV_WAVEFRONT == 0)
        for (int r = 0; r < 16; ++r)
            for (int c = 0; c < 16; ++c) p[r * ldm + c] = f.x[r * 16 + c];
    __syncwarp();
}
}  // namespace wmma
}  // namespace nvcuda

/* Launch: `threads` CPU threads each run every block in turn, a barrier between blocks. */
template <typename F>
inline void kv_emu_launch_fn(long long grid, int threads, F &&kernel) {
    kv_emu_launch(grid, threads, KV_WAVEFRONT, [](void *p) { (*static_cast<F *>(p))(); },
                  &kernel);
}

#define KV_LAUNCH(k, grid, threads, stream, ...) \
    kv_emu_launch_fn((grid), (threads), [&]() { k(__VA_ARGS__); })
#define KV_MALLOC(p, bytes) (((p) = (decltype(p))calloc(1, (bytes))) == nullptr)
#define KV_FREE(p) free(p)
#define KV_LAST_ERROR() 0

#endif
