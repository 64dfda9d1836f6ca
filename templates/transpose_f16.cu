// dst [cols, ldd] = fp16(src [rows, cols])^T, dst's columns rows..ldd-1 zero:
// B of the fp16 wgmma products (templates/gemm_tma.cu), K-major and in
// fp16 once, so their TMA reads half the bytes and no block converts it. Each
// float rounded to nearest even (cvt.rn, as the mma.sync path rounds its
// operands). A 64 x 64 tile through shared memory (one column of pad against
// bank conflicts), 256 threads, 16-byte loads and 8-byte stores (cols a
// multiple of 4 and ldd of 8, the pointers 16-byte aligned: the plan's
// contract).
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_transpose_f16(const float *__restrict__ src, unsigned short *__restrict__ dst, long long rows, int cols,
                         long long ldd) {
    tc::pdl_enter();
    __shared__ float tile[64][65];
    const long long r0 = (long long)blockIdx.x * 64;
    const int c0 = blockIdx.y * 64;
    constexpr int TX = 16, TY = 256 / TX; // a row of the tile is TX threads of 4 floats, a pass TY rows
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
#pragma unroll
    for (int i = ty; i < 64; i += TY) {
        const long long r = r0 + i;
        const int c = c0 + 4 * tx;
        const float4 v = r < rows && c < cols ? *reinterpret_cast<const float4 *>(&src[r * cols + c])
                                              : make_float4(0.f, 0.f, 0.f, 0.f);
        tile[i][4 * tx] = v.x, tile[i][4 * tx + 1] = v.y, tile[i][4 * tx + 2] = v.z, tile[i][4 * tx + 3] = v.w;
    }
    __syncthreads();
#pragma unroll
    for (int i = ty; i < 64; i += TY) {
        const int c = c0 + i;
        const long long r = r0 + 4 * tx;
        if (c >= cols || r >= ldd) continue;
        *reinterpret_cast<uint2 *>(&dst[(long long)c * ldd + r]) =
            make_uint2(tc::pack_f16x2(tile[4 * tx][i], tile[4 * tx + 1][i]),
                       tc::pack_f16x2(tile[4 * tx + 2][i], tile[4 * tx + 3][i]));
    }
}
