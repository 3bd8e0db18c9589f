/* kv_mtia.h: kevolve's MTIA-style intrinsics, emulated on the host in portable C++17.
 *
 * The machine: a grid of processing elements (PEs). Each PE runs programs of a kernel
 * (program ids kv_pe_id(), kv_pe_id() + kv_num_pes(), ...), owns a local memory (SRAM)
 * from which it allocates tiles, moves tiles between DRAM and local memory with its DMA
 * engine, streams over local tiles with a vector engine and multiplies tiles with a
 * dot-product engine. Kernels of one op are separated by a grid barrier (kv_run returns
 * when every PE has finished).
 *
 * Intrinsics (all used by the generated code, nothing else is):
 *   kv_pe_id(), kv_num_pes()                    this PE and the number of PEs
 *   kv_local_reset(), kv_local_alloc<T>(n, esize)  the PE's local-memory arena (per program)
 *   kv_dma_in_{1,2,3}d(dst, src, sizes.., src strides.., dst strides.., esize)
 *   kv_dma_out_{1,2,3}d(dst, src, sizes.., dst strides.., src strides.., esize)
 *   kv_dma_gather_2d(dst, src, idx, n0, n1, s0, s1, d0, esize, isize)  rows src[idx[a]]
 *   kv_dma_wait()                               wait for this PE's outstanding DMAs
 *   kv_ld(p, off), kv_st(p, off, v)             direct DRAM access (no DMA; slow)
 *   kv_atomic_add(p, off, v)                    p[off] += v, atomic (accumulating stores)
 *   kv_dot(C, ldc, A, sam, sak, B, sbk, sbn, m, n, k)   dot engine: C[m,n] += A[m,k] B[k,n]
 *   KV_VEC_FOR(v, n), KV_RED_FOR(op, acc, v, n) vector / reduce engine loops over a tile
 *   kv_run(...)                                 host side: run a kernel on every PE
 *
 * The header has two parts: the intrinsics (inline, C headers only, cheap to compile into
 * every kernel) and, under KV_MTIA_RUNTIME, the host runtime (PE threads, errors), which the
 * backend compiles once per version of this file and links into every kernel library.
 *
 * Sizes are element counts, strides are in elements, `esize` is the element's size on the
 * device (bf16 tiles are float on the host, 2 bytes on the device). The emulation checks
 * that tiles fit the modeled local memory and that DMAs land inside it, and counts the
 * traffic (kv_stats), so the backend's analytical estimate can be checked against it.
 * Counters are traffic counts, not times: the emulator says nothing about speed. */
#ifndef KV_MTIA_H
#define KV_MTIA_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Kernel libraries are compiled with -fvisibility=hidden (each links its own copy of the
 * runtime); only the module's entry points are exported. */
#define KV_EXPORT extern "C" __attribute__((visibility("default")))

/* -- per-PE state ----------------------------------------------------------------------- */

/* Counters, in this order (kv_stats() in the module exports them): the first ten add up
 * over PEs, the last two are maxima. */
enum {
    KV_PROGRAMS, KV_DMA_IN, KV_DMA_IN_BYTES, KV_DMA_OUT, KV_DMA_OUT_BYTES, KV_DMA_WAITS,
    KV_DIRECT_LOADS, KV_DIRECT_STORES, KV_DOT_CALLS, KV_DOT_FLOPS, KV_LOCAL_PEAK,
    KV_MAX_PROGRAMS, KV_NSTATS
};
struct kv_stats_t {
    int64_t v[KV_NSTATS];
};

struct kv_pe_t {
    int64_t id, num;
    unsigned char *local;     /* host storage of the local memory */
    int64_t host_capacity;    /* bytes of host storage (twice the modeled capacity) */
    int64_t capacity;         /* modeled local memory, device bytes */
    int64_t align;            /* DMA / allocation alignment, bytes */
    int64_t used, host_used;  /* device and host bytes allocated by the current program */
    int64_t programs;
    kv_stats_t stats;
};

/* Defined by the runtime part (KV_MTIA_RUNTIME, compiled once and linked into every
 * kernel library): the PE the calling host thread is emulating, and error reporting. */
extern thread_local kv_pe_t *kv_pe_;
[[noreturn]] void kv_fail(const char *what, int64_t a, int64_t b);

static inline int64_t kv_pe_id() { return kv_pe_->id; }
static inline int64_t kv_num_pes() { return kv_pe_->num; }
static inline int64_t kv_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t kv_max(int64_t a, int64_t b) { return a > b ? a : b; }

/* bf16 values live as float on the host: round to the nearest bf16, ties to even. */
static inline float kv_round_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* -- local memory ----------------------------------------------------------------------- */

static inline int64_t kv_round_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

/* Start a program: its tiles are allocated afresh (local memory does not outlive it). */
static inline void kv_local_reset()
{
    kv_pe_->used = 0;
    kv_pe_->host_used = 0;
    kv_pe_->programs += 1;
}

template <class T>
static inline T *kv_local_alloc(int64_t n, int64_t esize)
{
    kv_pe_t *pe = kv_pe_;
    int64_t dev = kv_round_up(n * esize, pe->align);
    int64_t host = kv_round_up(n * (int64_t)sizeof(T), pe->align);
    if (pe->used + dev > pe->capacity || pe->host_used + host > pe->host_capacity)
        kv_fail("local memory overflow: bytes needed, bytes per PE", pe->used + dev,
                pe->capacity);
    T *p = (T *)(pe->local + pe->host_used);
    pe->used += dev;
    pe->host_used += host;
    if (pe->used > pe->stats.v[KV_LOCAL_PEAK]) pe->stats.v[KV_LOCAL_PEAK] = pe->used;
    return p;
}

static inline void kv_check_local(const void *p, int64_t host_bytes)
{
    const unsigned char *c = (const unsigned char *)p;
    if (host_bytes > 0 && (c < kv_pe_->local || c + host_bytes > kv_pe_->local + kv_pe_->host_used))
        kv_fail("DMA outside the PE's allocated local memory: offset, bytes",
                (int64_t)(c - kv_pe_->local), host_bytes);
}

/* -- DMA engine (strided boxes; the local side is a dense tile) ------------------------- */

template <class T>
static inline void kv_dma_in_3d(T *dst, const T *src, int64_t n0, int64_t n1, int64_t n2,
                                int64_t s0, int64_t s1, int64_t s2, int64_t d0, int64_t d1,
                                int64_t esize)
{
    if (n0 <= 0 || n1 <= 0 || n2 <= 0) return;
    kv_check_local(dst, ((n0 - 1) * d0 + (n1 - 1) * d1 + n2) * (int64_t)sizeof(T));
    for (int64_t a = 0; a < n0; ++a)
        for (int64_t b = 0; b < n1; ++b) {
            const T *s = src + a * s0 + b * s1;
            T *d = dst + a * d0 + b * d1;
            if (s2 == 1) memcpy(d, s, sizeof(T) * (size_t)n2);
            else for (int64_t c = 0; c < n2; ++c) d[c] = s[c * s2];
        }
    kv_pe_->stats.v[KV_DMA_IN] += 1;
    kv_pe_->stats.v[KV_DMA_IN_BYTES] += n0 * n1 * n2 * esize;
}

template <class T>
static inline void kv_dma_in_2d(T *dst, const T *src, int64_t n0, int64_t n1, int64_t s0,
                                int64_t s1, int64_t d0, int64_t esize)
{
    kv_dma_in_3d(dst, src, 1, n0, n1, 0, s0, s1, 0, d0, esize);
}

template <class T>
static inline void kv_dma_in_1d(T *dst, const T *src, int64_t n0, int64_t s0, int64_t esize)
{
    kv_dma_in_3d(dst, src, 1, 1, n0, 0, 0, s0, 0, 0, esize);
}

template <class T>
static inline void kv_dma_out_3d(T *dst, const T *src, int64_t n0, int64_t n1, int64_t n2,
                                 int64_t s0, int64_t s1, int64_t s2, int64_t d0, int64_t d1,
                                 int64_t esize)
{
    if (n0 <= 0 || n1 <= 0 || n2 <= 0) return;
    kv_check_local(src, ((n0 - 1) * d0 + (n1 - 1) * d1 + n2) * (int64_t)sizeof(T));
    for (int64_t a = 0; a < n0; ++a)
        for (int64_t b = 0; b < n1; ++b) {
            T *d = dst + a * s0 + b * s1;
            const T *s = src + a * d0 + b * d1;
            if (s2 == 1) memcpy(d, s, sizeof(T) * (size_t)n2);
            else for (int64_t c = 0; c < n2; ++c) d[c * s2] = s[c];
        }
    kv_pe_->stats.v[KV_DMA_OUT] += 1;
    kv_pe_->stats.v[KV_DMA_OUT_BYTES] += n0 * n1 * n2 * esize;
}

template <class T>
static inline void kv_dma_out_2d(T *dst, const T *src, int64_t n0, int64_t n1, int64_t s0,
                                 int64_t s1, int64_t d0, int64_t esize)
{
    kv_dma_out_3d(dst, src, 1, n0, n1, 0, s0, s1, 0, d0, esize);
}

template <class T>
static inline void kv_dma_out_1d(T *dst, const T *src, int64_t n0, int64_t s0, int64_t esize)
{
    kv_dma_out_3d(dst, src, 1, 1, n0, 0, 0, s0, 0, 0, esize);
}

/* Gather: row a of the tile is src[idx[a] * s0 + b * s1] for b < n1 (embedding rows); the
 * DMA engine reads the n0 row indices (isize bytes each) from DRAM itself. */
template <class T, class I>
static inline void kv_dma_gather_2d(T *dst, const T *src, const I *idx, int64_t n0,
                                    int64_t n1, int64_t s0, int64_t s1, int64_t d0,
                                    int64_t esize, int64_t isize)
{
    if (n0 <= 0 || n1 <= 0) return;
    kv_check_local(dst, ((n0 - 1) * d0 + n1) * (int64_t)sizeof(T));
    for (int64_t a = 0; a < n0; ++a) {
        const T *s = src + (int64_t)idx[a] * s0;
        T *d = dst + a * d0;
        if (s1 == 1) memcpy(d, s, sizeof(T) * (size_t)n1);
        else for (int64_t b = 0; b < n1; ++b) d[b] = s[b * s1];
    }
    kv_pe_->stats.v[KV_DMA_IN] += 1;
    kv_pe_->stats.v[KV_DMA_IN_BYTES] += n0 * n1 * esize + n0 * isize;
}

/* The emulated DMA completes at issue; the wait marks where the program depends on it. */
static inline void kv_dma_wait() { kv_pe_->stats.v[KV_DMA_WAITS] += 1; }

/* -- direct DRAM access (gathers, irregular indices) ------------------------------------ */

template <class T>
static inline T kv_ld(const T *p, int64_t off)
{
    kv_pe_->stats.v[KV_DIRECT_LOADS] += 1;
    return p[off];
}

template <class T, class V>
static inline void kv_st(T *p, int64_t off, V v)
{
    kv_pe_->stats.v[KV_DIRECT_STORES] += 1;
    p[off] = (T)v;
}

/* An accumulating store: PEs may add into the same element, so the add is atomic (GCC's
 * builtins; a compare-and-swap loop for float). Counted as a direct store. */
template <class T, class V>
static inline void kv_atomic_add(T *p, int64_t off, V v)
{
    kv_pe_->stats.v[KV_DIRECT_STORES] += 1;
    T add = (T)v, old, want;
    __atomic_load(p + off, &old, __ATOMIC_RELAXED);
    do {
        want = old + add;
    } while (!__atomic_compare_exchange(p + off, &old, &want, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
}

/* -- dot-product engine: C[i*ldc + j] += sum_k A[i*sam + k*sak] * B[k*sbk + j*sbn] ------ */

template <class TC, class TA, class TB>
static inline void kv_dot(TC *C, int64_t ldc, const TA *A, int64_t sam, int64_t sak,
                          const TB *B, int64_t sbk, int64_t sbn, int64_t m, int64_t n,
                          int64_t k)
{
    for (int64_t i = 0; i < m; ++i)
        for (int64_t kk = 0; kk < k; ++kk) {
            const TC a = (TC)A[i * sam + kk * sak];
            const TB *b = B + kk * sbk;
            TC *c = C + i * ldc;
            for (int64_t j = 0; j < n; ++j) c[j] += a * (TC)b[j * sbn];
        }
    kv_pe_->stats.v[KV_DOT_CALLS] += 1;
    kv_pe_->stats.v[KV_DOT_FLOPS] += 2 * m * n * (k > 0 ? k : 0);
}

/* -- vector and reduce engines: loops over local tiles (the host compiler vectorizes) --- */

#define KV_VEC_FOR(v, n) for (int64_t v = 0; v < (n); ++v)
#define KV_RED_FOR(op, acc, v, n) for (int64_t v = 0; v < (n); ++v)

/* DRAM scratch for an intermediate stage materialized between two kernels. */
template <class T>
struct kv_scratch {
    T *p;
    explicit kv_scratch(size_t n) : p((T *)calloc(n, sizeof(T))) {}
    kv_scratch(const kv_scratch &) = delete;
    kv_scratch &operator=(const kv_scratch &) = delete;
    ~kv_scratch() { free(p); }
};

/* -- host side: run a kernel on every PE ------------------------------------------------ */

/* Runs `fn(ctx)` once per PE (it loops over that PE's programs), emulating the PEs on
 * `threads` host threads. Returns 0, or -1 with the first error in `err`; adds the
 * counters to `total`. */
int kv_run_pes(int64_t num_pes, int64_t threads, int64_t local_bytes, int64_t align,
               kv_stats_t *total, void (*fn)(void *), void *ctx, char *err, int64_t errlen);

template <class F>
static inline int kv_run(int64_t num_pes, int64_t threads, int64_t local_bytes,
                         int64_t align, kv_stats_t *total, char *err, int64_t errlen, F &&f)
{
    return kv_run_pes(num_pes, threads, local_bytes, align, total,
                      [](void *c) { (*(F *)c)(); }, (void *)&f, err, errlen);
}

#endif /* KV_MTIA_H */

/* -- the runtime part: compiled once (with -DKV_MTIA_RUNTIME) per version of this file --- */
#if defined(KV_MTIA_RUNTIME) && !defined(KV_MTIA_RUNTIME_DONE)
#define KV_MTIA_RUNTIME_DONE
#include <stdio.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

thread_local kv_pe_t *kv_pe_ = nullptr;

struct kv_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void kv_fail(const char *what, int64_t a, int64_t b)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s (PE %lld): %lld, %lld", what,
             (long long)(kv_pe_ ? kv_pe_->id : -1), (long long)a, (long long)b);
    throw kv_error(buf);
}

static void kv_stats_add(kv_stats_t *to, const kv_stats_t *from)
{
    for (int i = 0; i < KV_LOCAL_PEAK; ++i) to->v[i] += from->v[i];
    for (int i = KV_LOCAL_PEAK; i < KV_NSTATS; ++i) to->v[i] = std::max(to->v[i], from->v[i]);
}

int kv_run_pes(int64_t num_pes, int64_t threads, int64_t local_bytes, int64_t align,
               kv_stats_t *total, void (*fn)(void *), void *ctx, char *err, int64_t errlen)
{
    threads = std::max<int64_t>(1, std::min(threads, num_pes));
    std::vector<kv_stats_t> stats((size_t)threads);
    std::vector<std::string> errors((size_t)threads);
    auto work = [&](int64_t t) {
        /* One local memory per host thread: the PEs it emulates run one after another. */
        std::vector<unsigned char> mem((size_t)(2 * local_bytes + 2 * align));
        unsigned char *base = mem.data();
        base += (align - (int64_t)((uintptr_t)base % (uintptr_t)align)) % align;
        kv_stats_t acc{};
        for (int64_t p = t; p < num_pes; p += threads) {
            kv_pe_t pe{};
            pe.id = p;
            pe.num = num_pes;
            pe.local = base;
            pe.host_capacity = 2 * local_bytes; /* bf16 tiles are float on the host */
            pe.capacity = local_bytes;
            pe.align = align;
            kv_pe_ = &pe;
            try {
                fn(ctx);
            } catch (const std::exception &e) {
                errors[(size_t)t] = e.what();
                kv_pe_ = nullptr;
                break;
            }
            kv_pe_ = nullptr;
            pe.stats.v[KV_PROGRAMS] = pe.programs;
            pe.stats.v[KV_MAX_PROGRAMS] = pe.programs;
            kv_stats_add(&acc, &pe.stats);
        }
        stats[(size_t)t] = acc;
    };
    if (threads == 1) {
        work(0);
    } else {
        std::vector<std::thread> pool;
        for (int64_t t = 0; t < threads; ++t) pool.emplace_back(work, t);
        for (auto &th : pool) th.join();
    }
    for (const kv_stats_t &s : stats) kv_stats_add(total, &s);
    for (const std::string &e : errors)
        if (!e.empty()) {
            snprintf(err, (size_t)errlen, "%s", e.c_str());
            return -1;
        }
    return 0;
}
#endif /* KV_MTIA_RUNTIME */
