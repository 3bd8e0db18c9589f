/* The runtime half of kevolve's CPU emulation of CUDA/HIP (see kv_emu.h): threads,
 * barriers and the shuffle exchange. Compiled once per cache into its own shared library
 * (a translation unit that defines KV_EMU_RUNTIME and includes this file), so that each
 * generated module only parses the light kv_emu.h. */
#ifndef KEVOLVE_KV_EMU_RT_H
#define KEVOLVE_KV_EMU_RT_H
#ifdef KV_EMU_RUNTIME

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
thread_local dim3 threadIdx(0, 0, 0);
thread_local dim3 blockIdx(0, 0, 0);
dim3 blockDim, gridDim;

namespace {

struct Barrier {
    std::mutex m;
    std::condition_variable cv;
    int n = 0, count = 0;
    long gen = 0;
    void wait(const char *what) {
        std::unique_lock<std::mutex> lock(m);
        long g = gen;
        if (++count == n) {
            count = 0;
            ++gen;
            cv.notify_all();
            return;
        }
        if (!cv.wait_for(lock, std::chrono::seconds(120), [&] { return gen != g; })) {
            fprintf(stderr, "kv_emu: %s timed out: some threads of block %u never reached "
                    "it (a barrier in divergent code?)\n", what, blockIdx.x);
            abort();
        }
    }
};

struct State {
    int wavefront;
    Barrier block;
    std::vector<Barrier> warps;
    std::vector<uint64_t> slots;
    State(int threads, int w) : wavefront(w), warps((threads + w - 1) / w), slots(threads) {
        block.n = threads;
        for (size_t i = 0; i < warps.size(); ++i) {
            int left = threads - (int)i * w;
            warps[i].n = left < w ? left : w;
        }
    }
};
State *state = nullptr;

}  // namespace

void kv_emu_sync_block() { state->block.wait("__syncthreads()"); }
void kv_emu_sync_warp() { state->warps[threadIdx.x / state->wavefront].wait("__syncwarp()"); }

uint64_t kv_emu_exchange(uint64_t bits, unsigned src) {
    state->slots[threadIdx.x] = bits;
    kv_emu_sync_warp();
    uint64_t out = state->slots[src];
    kv_emu_sync_warp();
    return out;
}

void kv_emu_launch(long long grid, int threads, int wavefront, void (*fn)(void *), void *arg) {
    static std::mutex one_at_a_time;
    std::lock_guard<std::mutex> guard(one_at_a_time);
    State st(threads, wavefront);
    state = &st;
    blockDim = dim3((unsigned)threads);
    gridDim = dim3((unsigned)grid);
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            threadIdx = dim3((unsigned)t, 0, 0);
            for (long long b = 0; b < grid; ++b) {
                blockIdx = dim3((unsigned)b, 0, 0);
                fn(arg);
                st.block.wait("the end of a block");
            }
        });
    for (auto &th : pool) th.join();
    state = nullptr;
}

#endif
#endif
