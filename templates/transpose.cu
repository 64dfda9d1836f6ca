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
    // W floats per load and store: a row of the tile is TX threads, a pass TY rows.
    constexpr int W = {{VEC}} ? 4 : 1, TX = 64 / W, TY = 256 / TX;
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
#pragma unroll
    for (int i = ty; i < 64; i += TY) {
        const long long r = r0 + i;
        const int c = c0 + W * tx;
        float x[W];
        if constexpr (W == 4) {
            const float4 v = r < rows && c < cols ? *reinterpret_cast<const float4 *>(&src[r * cols + c])
                                                  : make_float4(0.f, 0.f, 0.f, 0.f);
            x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
        } else {
            x[0] = r < rows && c < cols ? src[r * cols + c] : 0.f;
        }
#pragma unroll
        for (int e = 0; e < W; ++e) tile[i][W * tx + e] = rounded(x[e]);
    }
    __syncthreads();
#pragma unroll
    for (int i = ty; i < 64; i += TY) {
        const int c = c0 + i;
        const long long r = r0 + W * tx;
        if (c >= cols || r >= ldd) continue;
        if constexpr (W == 4)
            *reinterpret_cast<float4 *>(&dst[(long long)c * ldd + r]) =
                make_float4(tile[4 * tx][i], tile[4 * tx + 1][i], tile[4 * tx + 2][i], tile[4 * tx + 3][i]);
        else
            dst[(long long)c * ldd + r] = tile[tx][i];
    }
}
