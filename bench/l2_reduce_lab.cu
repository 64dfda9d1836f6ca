// What float reductions into global memory cost on the edit-attention shapes,
// against the gS stores they would replace (docs/benchmarks.md, "gQ and the
// bias sums inside the attention pass"): kernels that only move the bytes, in
// the attention pass's grid and per-thread pattern (pass_like) or in rows as
// the gQ product reads gS (rows_like); cold L2 (a 256 MiB memset) before each
// launch, median of 10 after 2 warm-ups, CUDA events.
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/l2_reduce_lab.cu -o build/l2_reduce_lab && build/l2_reduce_lab
#include <cstdio>
#include <cuda_runtime.h>
#include <vector>
#include <algorithm>
typedef long long i64;
__device__ __forceinline__ void red4(float *p, float a, float b, float c, float d) {
    asm volatile("red.global.add.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}
__device__ __forceinline__ void red1(float *p, float a) { asm volatile("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(a) : "memory"); }
// grid (NJ, B*16), 256 thr: like the attention pass: each step (64 rows i per block, 32 per warpgroup) a thread
// handles 16 gS values: j = j0 + 16q + g + 8hh, i = i0 + 32w + 8n + 2t + e.
template <int MODE> __global__ void pass_like(float *bias, float *gs, int B, int T, int GS_LD, float v) {
    int jb = blockIdx.x, bh = blockIdx.y, b = bh / 16, h = bh % 16;
    int tid = threadIdx.x, w = tid / 128, wt = tid % 128, q = wt / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    i64 j0 = (i64)jb * 64;
    for (int i0 = 0; i0 < T; i0 += 64) {
#pragma unroll
        for (int n = 0; n < 4; ++n)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                int hh = x / 2, e = x % 2;
                i64 i = i0 + 32 * w + 8 * n + 2 * t + e, j = j0 + 16 * q + g + 8 * hh;
                if (i < T && j < T) {
                    if (MODE == 0) gs[((i64)bh * T + i) * GS_LD + j] = v;                 // the gS store
                    else if (MODE == 1) red1(bias + ((i64)h * 1024 + i) * 1024 + j, v);   // scalar red to the bias
                }
            }
        if (MODE == 2) { // red.v4 after a transpose among 4 threads: thread holds 4 consecutive j of one i
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                i64 i = i0 + 32 * w + 8 * k + 2 * t + (g & 1), j = j0 + 16 * q + 4 * (g >> 1);
                if (i < T && j + 3 < T) red4(bias + ((i64)h * 1024 + i) * 1024 + j, v, v, v, v);
            }
        }
        if (MODE == 3) { // gQ partials: [32 i][64 d] per warpgroup and step into grad_qkv rows (b, i), cols h*64
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                int r = k * 8 + wt / 16, c = 4 * (wt % 16);
                i64 i = i0 + 32 * w + r;
                if (i < T) red4(gs + ((i64)b * T + i) * 3072 + h * 64 + c, v, v, v, v);
            }
        }
    }
}
// Like the gQ kernel reading gS rows: grid (ceil(T/128), 1, B*16), 256 threads; each thread red.v4 its chunks.
template <int MODE> __global__ void rows_like(float *bias, const float *gs, int B, int T, int GS_LD) {
    int bh = blockIdx.z, h = bh % 16;
    i64 r0 = (i64)blockIdx.x * 128;
    for (i64 x = threadIdx.x; x < 128 * (GS_LD / 4); x += blockDim.x) {
        i64 r = r0 + x / (GS_LD / 4), c = 4 * (x % (GS_LD / 4));
        if (r >= T) break;
        float4 val = *reinterpret_cast<const float4 *>(gs + ((i64)bh * T + r) * GS_LD + c);
        if (MODE == 0) { if (val.x == 12345.f) bias[0] = 1; } // read only
        else if (c + 3 < T) red4(bias + ((i64)h * 1024 + r) * 1024 + c, val.x, val.y, val.z, val.w);
    }
}
int main() {
    int shapes[][2] = {{32, 773}, {16, 691}, {4, 640}, {1, 373}};
    float *bias, *gs, *flush;
    size_t flushn = 256ull << 20;
    cudaMalloc(&bias, 64ull << 20);
    cudaMalloc(&gs, 32ull * 16 * 773 * 776 * 4 + (1 << 20));
    cudaMalloc(&flush, flushn);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (auto &s : shapes) {
        int B = s[0], T = s[1], GS_LD = (T + 3) / 4 * 4, NJ = (T + 63) / 64;
        double gsbytes = (double)B * 16 * T * T * 4;
        auto timeit = [&](const char *name, auto launch) {
            std::vector<float> ts;
            for (int it = 0; it < 12; ++it) {
                cudaMemsetAsync(flush, it, flushn);
                cudaEventRecord(e0);
                launch();
                cudaEventRecord(e1);
                cudaEventSynchronize(e1);
                float ms; cudaEventElapsedTime(&ms, e0, e1);
                if (it >= 2) ts.push_back(ms * 1000);
            }
            std::sort(ts.begin(), ts.end());
            float med = ts[ts.size() / 2];
            printf("B=%d T=%d %-28s %9.1f us  %7.2f TB/s of gS bytes  err=%s\n", B, T, name, med, gsbytes / med / 1e6,
                   cudaGetErrorString(cudaGetLastError()));
        };
        dim3 pg(NJ, B * 16), rg((T + 127) / 128, 1, B * 16);
        timeit("pass: gS st.global", [&] { pass_like<0><<<pg, 256>>>(bias, gs, B, T, GS_LD, 1.f); });
        timeit("pass: scalar red bias", [&] { pass_like<1><<<pg, 256>>>(bias, gs, B, T, GS_LD, 1.f); });
        timeit("pass: red.v4 bias", [&] { pass_like<2><<<pg, 256>>>(bias, gs, B, T, GS_LD, 1.f); });
        timeit("pass: red.v4 gQ partials", [&] { pass_like<3><<<pg, 256>>>(bias, gs, B, T, GS_LD, 1.f); });
        timeit("rows: read gS", [&] { rows_like<0><<<rg, 256>>>(bias, gs, B, T, GS_LD); });
        timeit("rows: read gS + red.v4 bias", [&] { rows_like<1><<<rg, 256>>>(bias, gs, B, T, GS_LD); });
    }
    return 0;
}
