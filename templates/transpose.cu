// dst [cols, ldd] = TF32(src [rows, cols])^T, dst's columns rows..ldd-1 zero:
// the wgmma products read B K-major from shared memory and pass it to the
// tensor cores as it is (templates/gemm_wg.cu), so it is rounded to TF32 here,
// once; a product over the batch*seq_len rows needs them contiguous, padded
// to a multiple of 4. A 64 x 64 tile through shared memory (one column of
// pad against bank conflicts); 256 threads with 16 loads each in flight.
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_transpose(const float *__restrict__ src, float *__restrict__ dst, long long rows, int cols,
                     long long ldd) {
    tc::pdl_enter();
    __shared__ float tile[64][65];
    const long long r0 = (long long)blockIdx.x * 64;
    const int c0 = blockIdx.y * 64, tx = threadIdx.x % 64, ty = threadIdx.x / 64;
#pragma unroll
    for (int i = ty; i < 64; i += 4) {
        const long long r = r0 + i;
        const float x = r < rows && c0 + tx < cols ? src[r * cols + c0 + tx] : 0.f;
        tile[i][tx] = __uint_as_float(tc::to_tf32(x) & 0xFFFFE000u); // rounded, low bits cleared
    }
    __syncthreads();
#pragma unroll
    for (int i = ty; i < 64; i += 4) {
        const int c = c0 + i;
        const long long r = r0 + tx;
        if (c < cols && r < ldd) dst[(long long)c * ldd + r] = tile[tx][i];
    }
}
