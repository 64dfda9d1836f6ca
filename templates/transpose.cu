// dst [cols, ldd] = TF32(src [rows, cols])^T, dst's columns rows..ldd-1 zero:
// the wgmma products read B K-major from shared memory and pass it to the
// tensor cores as it is (templates/gemm_wg.cu), so it is rounded to TF32 here,
// once; a product over the batch*seq_len rows needs them contiguous, padded
// to a multiple of 4. A 64 x 64 tile through shared memory (one column of
// pad against bank conflicts), 256 threads. VEC 0: 4-byte loads and stores,
// 16 of each per thread; VEC 1 (tile tr_vec=1): 16-byte ones, 4 of each (cols
// and ldd are multiples of 4, the pointers 16-byte aligned: the plan's contract).
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_transpose(const float *__restrict__ src, float *__restrict__ dst, long long rows, int cols,
                     long long ldd) {
    tc::pdl_enter();
    __shared__ float tile[64][65];
    const long long r0 = (long long)blockIdx.x * 64;
    const int c0 = blockIdx.y * 64;
    auto rounded = [](float x) { return __uint_as_float(tc::to_tf32(x) & 0xFFFFE000u); }; // low bits cleared
#if {{VEC}}
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
    for (int i = ty; i < 64; i += 16) {
        const long long r = r0 + i;
        const int c = c0 + 4 * tx;
        const float4 x = r < rows && c < cols ? *reinterpret_cast<const float4 *>(&src[r * cols + c])
                                              : make_float4(0.f, 0.f, 0.f, 0.f);
        tile[i][4 * tx] = rounded(x.x);
        tile[i][4 * tx + 1] = rounded(x.y);
        tile[i][4 * tx + 2] = rounded(x.z);
        tile[i][4 * tx + 3] = rounded(x.w);
    }
    __syncthreads();
#pragma unroll
    for (int i = ty; i < 64; i += 16) {
        const int c = c0 + i;
        const long long r = r0 + 4 * tx;
        if (c < cols && r < ldd)
            *reinterpret_cast<float4 *>(&dst[(long long)c * ldd + r]) =
                make_float4(tile[4 * tx][i], tile[4 * tx + 1][i], tile[4 * tx + 2][i], tile[4 * tx + 3][i]);
    }
#else
    const int tx = threadIdx.x % 64, ty = threadIdx.x / 64;
#pragma unroll
    for (int i = ty; i < 64; i += 4) {
        const long long r = r0 + i;
        const float x = r < rows && c0 + tx < cols ? src[r * cols + c0 + tx] : 0.f;
        tile[i][tx] = rounded(x);
    }
    __syncthreads();
#pragma unroll
    for (int i = ty; i < 64; i += 4) {
        const int c = c0 + i;
        const long long r = r0 + tx;
        if (c < cols && r < ldd) dst[(long long)c * ldd + r] = tile[tx][i];
    }
#endif
}
