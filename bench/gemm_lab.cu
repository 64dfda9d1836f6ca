// Projection-product tiles of templates/gemm_tc.cu (mma.sync) and
// templates/gemm_wg.cu (wgmma) against cuBLAS, on the shapes of the
// edit-attention backward: each checked against cuBLAS in full fp32 and timed
// (cold L2 before every launch, median, device time).
//   sed 's/{{PREFIX}}/lab/' templates/transpose.cu > build/lab_transpose.inc
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Ibuild bench/gemm_lab.cu \
//        -L/usr/local/cuda/lib64/stubs -lcublas -lcuda -o build/gemm_lab
// Used to choose the tiles and fragment loads of the projection products
// (docs/benchmarks.md); not part of the library.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <vector>

#include "../templates/tc_common.cu"
#include "../templates/gemm_tc.cu"
#include "../templates/gemm_wg.cu"
#include "../templates/tma.cu"
#include "../templates/gemm_tma.cu"
#include "lab_transpose.inc" // templates/transpose.cu with {{PREFIX}} = lab (see the build line)

using tc::i64;
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

template <i64 M, i64 N, i64 K, bool TA, int BM, int BN, int WM, int WN, int ST, i64 KS>
__global__ void __launch_bounds__(WM *WN * 32) lab(const float *A, const float *B, float *C) {
    constexpr i64 LDA = TA ? M : K, LDB = N;
    constexpr int SPLITS = (int)((K + KS - 1) / KS);
    float *out = SPLITS > 1 ? C + (i64)blockIdx.z * M * N : C;
    tc::gemm<M, N, K, LDA, LDB, TA, false, 1, BM, BN, 32, WM, WN, ST, KS>(A, B, out, N, 1.f, blockIdx.z);
}

// wgmma: op(A) as stored, B [N, K] (K-major, as transposed by the plan).
template <i64 M, i64 N, i64 K, bool TA, int BM, int BN, int ST, i64 KS>
__global__ void __launch_bounds__(BM / 64 * 128, 1) lab_wg(const float *A, const float *B, float *C) {
    constexpr int SPLITS = (int)((K + KS - 1) / KS);
    float *out = SPLITS > 1 ? C + (i64)blockIdx.z * M * N : C;
    tc::gemm_wg<M, N, K, TA ? M : K, K, TA, BM, BN, ST, KS>(A, B, out, N, 1.f, blockIdx.z);
}

// TMA-fed wgmma (templates/gemm_tma.cu): the same operands through tensor maps.
template <i64 M, i64 N, i64 K, bool TA, int BM, int BN, int ST, int RAW, i64 KS>
__global__ void __launch_bounds__(tc::gemm_tma_threads(BM), 1)
    lab_tma(const __grid_constant__ tc::tma_map ma, const __grid_constant__ tc::tma_map mb, float *C) {
    constexpr int SPLITS = (int)((K + KS - 1) / KS);
    float *out = SPLITS > 1 ? C + (i64)blockIdx.z * M * N : C;
    tc::gemm_tma<M, N, K, TA, BM, BN, ST, RAW, KS>(&ma, &mb, out, N, 1.f, blockIdx.z);
}

// A 2-D tensor map over a row-major [rows, cols] fp32 matrix (leading
// dimension ld), box [box_rows, box_cols], 128-byte swizzle or none.
static tc::tma_map tensor_map(const float *p, i64 rows, i64 cols, i64 ld, int box_rows, int box_cols, bool swizzle) {
    tc::tma_map m;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)ld * 4};
    cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows}, estr[2] = {1, 1};
    CUresult r = cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap *>(&m), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2,
                                        (void *)p, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                        swizzle ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { printf("cuTensorMapEncodeTiled: %d\n", (int)r); exit(1); }
    return m;
}

static int smem_bytes(bool ta, int bm, int bn, int st) { // as lua/projection_tiles.lua's gemm_smem
    return st * ((ta ? 32 * (bm + 8) : bm * 36) + 32 * (bn + 8)) * 4;
}

struct Case { const char *name; int m, n, k; bool ta; };

static float *flush_buf;
static const size_t FLUSH = 256u << 20;

template <class F> static float time_median(F launch, int iters) {
    std::vector<float> ts;
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    for (int it = 0; it < iters + 5; ++it) {
        CK(cudaMemsetAsync(flush_buf, it & 0xff, FLUSH));
        cudaEventRecord(a);
        launch();
        cudaEventRecord(b);
        CK(cudaEventSynchronize(b));
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (it >= 5) ts.push_back(ms * 1000.f);
    }
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}

// C [m, n] = op(A) B in cuBLAS's column-major terms: C^T = B^T op(A)^T.
static void cublas_ref(cublasHandle_t h, const Case &c, const float *A, const float *B, float *C, bool tf32) {
    const float one = 1.f, zero = 0.f;
    cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH);
    // row-major A [m,k] is column-major A^T [k,m] (ld k); TA: stored [k,m] row-major = column-major [m,k] (ld m).
    cublasSgemm(h, CUBLAS_OP_N, c.ta ? CUBLAS_OP_T : CUBLAS_OP_N, c.n, c.m, c.k, &one, B, c.n, A, c.ta ? c.m : c.k,
                &zero, C, c.n);
}

__global__ void splitk_sum(const float *part, float *out, i64 n, int splits) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.f;
    for (int z = 0; z < splits; ++z) s += part[z * n + i];
    out[i] = s;
}

static cublasHandle_t handle;
static bool quick;
static float *dA, *dB, *dC, *dRef;

typedef void (*lab_kernel)(const float *, const float *, float *);

// Runs launch() once on a NaN-poisoned output, adds its K slices, compares
// with cuBLAS fp32 (dRef), times it, and prints one line.
template <class L>
static void measure_launch(const Case &c, const char *label, L launch, int splits, int regs, int smem, double ref_us) {
    const i64 mn = (i64)c.m * c.n;
    CK(cudaMemset(dC, 0xff, (size_t)splits * mn * 4)); // NaN poison
    launch();
    CK(cudaGetLastError());
    if (splits > 1) {
        splitk_sum<<<(unsigned)((mn + 255) / 256), 256>>>(dC, dC + splits * mn, mn, splits);
        CK(cudaMemcpy(dC, dC + splits * mn, (size_t)mn * 4, cudaMemcpyDeviceToDevice));
    }
    CK(cudaDeviceSynchronize());
    std::vector<float> got((size_t)mn), ref((size_t)mn);
    CK(cudaMemcpy(got.data(), dC, got.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ref.data(), dRef, ref.size() * 4, cudaMemcpyDeviceToHost));
    double maxref = 0, maxerr = 0, sumerr = 0;
    bool nan = false;
    for (size_t i = 0; i < got.size(); ++i) {
        maxref = std::max(maxref, (double)std::fabs(ref[i]));
        if (!std::isfinite(got[i])) nan = true;
        maxerr = std::max(maxerr, (double)std::fabs(got[i] - ref[i]));
        sumerr += (double)got[i] - ref[i];
    }
    const float us = quick ? 1.f : time_median(launch, 30);
    printf("%-16s %-26s split %d  regs %3d smem %6d  %8.1f us  %6.1f TFLOP/s  x%.2f of cuBLAS  err/max %.2e bias %.1e%s\n",
           c.name, label, splits, regs, smem, us, 2.0 * c.m * c.n * c.k / us * 1e-6, ref_us / us, maxerr / maxref,
           sumerr / got.size() / maxref, nan ? "  NaN!" : "");
    fflush(stdout);
}

static void measure(const Case &c, const char *label, lab_kernel kern, dim3 grid, int threads, int smem,
                    const float *B, double ref_us) {
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int regs = 0;
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, kern) == cudaSuccess) regs = fa.numRegs;
    measure_launch(c, label, [&] { kern<<<grid, threads, smem>>>(dA, B, dC); }, (int)grid.z, regs, smem, ref_us);
}

template <i64 M, i64 N, i64 K, bool TA, int BM, int BN, int WM, int WN, int ST, i64 KS>
static void run(const Case &c, double ref_us) {
    auto kern = lab<M, N, K, TA, BM, BN, WM, WN, ST, KS>;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    char label[64];
    snprintf(label, sizeof label, "mma.sync %dx%d %dx%d warps %d st", BM, BN, WM, WN, ST);
    measure(c, label, kern, dim3((N + BN - 1) / BN, (M + BM - 1) / BM, (K + KS - 1) / KS), WM * WN * 32,
            smem_bytes(TA, BM, BN, ST), dB, ref_us);
}

static float *dBt; // B K-major: B^T as [N, K], rounded to TF32

// The plan's transpose of B: times it (reported once per shape).
static float transpose_operands(const Case &c) {
    auto tr = [&] {
        dim3 grid((unsigned)((c.k + 63) / 64), (unsigned)((c.n + 63) / 64));
        lab_transpose<<<grid, 256>>>(dB, dBt, c.k, c.n, c.k);
    };
    tr();
    CK(cudaDeviceSynchronize());
    return quick ? 1.f : time_median(tr, 30);
}

template <i64 M, i64 N, i64 K, bool TA, int BM, int BN, int ST, i64 KS>
static void run_wg(const Case &c, double ref_us) {
    char label[64];
    snprintf(label, sizeof label, "wgmma %dx%d %d st", BM, BN, ST);
    measure(c, label, lab_wg<M, N, K, TA, BM, BN, ST, KS>,
            dim3((N + BN - 1) / BN, (M + BM - 1) / BM, (K + KS - 1) / KS), BM / 64 * 128,
            ST * ((TA ? 32 * (BM + 8) : BM * 36) + BN * 32) * 4 + 1024, dBt, ref_us);
}

template <i64 M, i64 N, i64 K, bool TA, int BM, int BN, int ST, int RAW, i64 KS>
static void run_tma(const Case &c, double ref_us) {
    char label[64];
    snprintf(label, sizeof label, "tma %dx%d %d st %d raw", BM, BN, ST, RAW);
    auto kern = lab_tma<M, N, K, TA, BM, BN, ST, RAW, KS>;
    const int smem = (ST * (BM + BN) * 32 + (TA ? RAW * BM * 32 : 0)) * 4 + (3 * ST + RAW) * 8 + 1024;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, kern));
    const tc::tma_map ma = TA ? tensor_map(dA, K, M, M, 32, BM, false) : tensor_map(dA, M, K, K, BM, 32, true);
    const tc::tma_map mb = tensor_map(dBt, N, K, K, BN, 32, true);
    const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM, (K + KS - 1) / KS);
    measure_launch(c, label, [&] { kern<<<grid, tc::gemm_tma_threads(BM), smem>>>(ma, mb, dC); }, (int)grid.z, fa.numRegs,
                   smem, ref_us);
}

template <i64 M, i64 N, i64 K, bool TA, i64 KS> static void shape(const char *name) {
    const Case c{name, (int)M, (int)N, (int)K, TA};
    cublas_ref(handle, c, dA, dB, dRef, false);
    const float cub = quick ? 1.f : time_median([&] { cublas_ref(handle, c, dA, dB, dC, true); }, 30);
    printf("%-16s cuBLAS TF32 %8.1f us  %6.1f TFLOP/s\n", name, cub, 2.0 * M * N * K / cub * 1e-6);
    run<M, N, K, TA, 128, 128, 2, 2, 3, KS>(c, cub);
    const float tr = transpose_operands(c);
    printf("%-16s transpose of B (TF32-rounded) %8.1f us\n", name, tr);
    run_wg<M, N, K, TA, 128, 256, 4, KS>(c, cub);
    if constexpr (TA) {
        run_tma<M, N, K, TA, 128, 256, 4, 2, KS>(c, cub);
        run_tma<M, N, K, TA, 128, 256, 4, 1, KS>(c, cub);
        run_tma<M, N, K, TA, 128, 128, 6, 2, KS>(c, cub);
    } else {
        run_tma<M, N, K, TA, 128, 256, 4, 0, KS>(c, cub);
        run_tma<M, N, K, TA, 128, 128, 6, 0, KS>(c, cub);
    }
}

int main(int argc, char **argv) {
    (void)argv;
    quick = argc > 1; // one shape, each kernel launched once (for the profiler)
    const size_t maxe = (size_t)24736 * 3072;
    CK(cudaMalloc(&dA, maxe * 4));
    CK(cudaMalloc(&dB, maxe * 4));
    CK(cudaMalloc(&dC, (size_t)4 * 3072 * 1024 * 4 + maxe * 4));
    CK(cudaMalloc(&dRef, maxe * 4));
    CK(cudaMalloc(&dBt, maxe * 4));
    CK(cudaMalloc(&flush_buf, FLUSH));
    std::vector<float> h(maxe);
    srand(1);
    for (auto &x : h) x = (float)rand() / RAND_MAX * 2.f - 1.f;
    CK(cudaMemcpy(dA, h.data(), maxe * 4, cudaMemcpyHostToDevice));
    for (auto &x : h) x = ((float)rand() / RAND_MAX * 2.f - 1.f) * 0.02f;
    CK(cudaMemcpy(dB, h.data(), maxe * 4, cudaMemcpyHostToDevice));
    cublasCreate(&handle);
    // B=64, T=128: BT = 8192.
    shape<8192, 1024, 1024, false, 1024>("grad_attn_out");
    if (quick) return 0;
    shape<8192, 1024, 3072, false, 3072>("grad_hidden");
    shape<3072, 1024, 8192, true, 2048>("grad_qkv_weight");
    shape<1024, 1024, 8192, true, 2048>("grad_out_weight");
    // B=32, T=773: BT = 24736.
    shape<24736, 1024, 3072, false, 3072>("grad_hidden_big");
    shape<3072, 1024, 24736, true, 6208>("grad_qkv_w_big");
    return 0;
}
