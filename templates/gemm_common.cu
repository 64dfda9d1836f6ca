// Matrix products of the edit-attention backward: one tile routine that every
// GEMM kernel of the module instantiates with its own compile-time shape.
//   C[z] = alpha * op(A[z]) @ op(B[z]),  op(A): [M, K], op(B): [K, N], row-major
// with lda/ldb/ldc and a two-level batch z = z1 * INNER + z0 (batch, head).
// A block is 4 warps as 2 x 2, each a 32 x 32 piece of the 64 x 64 tile, made
// of MMAs with fp32 accumulation: MODE 1 m16n8k8 on TF32 operands, MODE 2
// m16n8k16 on fp16 operands; MODE 0 exact fp32 FMAs over the same fragment
// ownership.
namespace gemm {
typedef long long i64;
constexpr int BM = 64, BN = 64, BK = 16, PAD = 8; // PAD: rows of shared memory land on distinct banks

using tc::mma_f16;  // the fragment helpers of templates/tc_common.cu, rendered first
using tc::mma_tf32;
using tc::pack_f16x2;
using tc::to_tf32;

template <i64 M, i64 N, i64 K, i64 LDA, i64 LDB, i64 LDC, bool TA, bool TB, int MODE, int INNER, i64 SA1,
          i64 SA0, i64 SB1, i64 SB0, i64 SC1, i64 SC0>
__device__ __forceinline__ void tile(const float *__restrict__ A, const float *__restrict__ B,
                                     float *__restrict__ C, float alpha) {
    __shared__ float As[BK][BM + PAD]; // k-major: fragments read along m
    __shared__ float Bs[BK][BN + PAD];
    const i64 z = blockIdx.z, z1 = z / INNER, z0 = z % INNER;
    A += z1 * SA1 + z0 * SA0;
    B += z1 * SB1 + z0 * SB0;
    C += z1 * SC1 + z0 * SC0;
    const i64 m0 = (i64)blockIdx.y * BM, n0 = (i64)blockIdx.x * BN;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

    for (i64 k0 = 0; k0 < K; k0 += BK) {
        // Consecutive threads take consecutive addresses of whichever layout A has.
        for (int e = tid; e < BM * BK; e += 128) {
            const int mm = TA ? e % BM : e / BK, kk = TA ? e / BM : e % BK;
            const i64 gm = m0 + mm, gk = k0 + kk;
            As[kk][mm] = (gm < M && gk < K) ? (TA ? A[gk * LDA + gm] : A[gm * LDA + gk]) : 0.f;
        }
        for (int e = tid; e < BN * BK; e += 128) {
            const int nn = TB ? e / BK : e % BN, kk = TB ? e % BK : e / BN;
            const i64 gn = n0 + nn, gk = k0 + kk;
            Bs[kk][nn] = (gn < N && gk < K) ? (TB ? B[gn * LDB + gk] : B[gk * LDB + gn]) : 0.f;
        }
        __syncthreads();
        if (MODE == 2) {
            // m16n8k16 f16 fragments (PTX ISA), pairs along k: A r0 (g, 2t..2t+1)
            // r1 (g+8, 2t..) r2 (g, 2t+8..) r3 (g+8, 2t+8..); B r0 (k=2t..2t+1, n=g)
            // r1 (k=2t+8.., n=g). BK = 16 is one step.
            const int k = 2 * t;
            unsigned a[2][4], b[4][2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int r = wm + i * 16 + g;
                a[i][0] = pack_f16x2(As[k][r], As[k + 1][r]);
                a[i][1] = pack_f16x2(As[k][r + 8], As[k + 1][r + 8]);
                a[i][2] = pack_f16x2(As[k + 8][r], As[k + 9][r]);
                a[i][3] = pack_f16x2(As[k + 8][r + 8], As[k + 9][r + 8]);
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int c = wn + j * 8 + g;
                b[j][0] = pack_f16x2(Bs[k][c], Bs[k + 1][c]);
                b[j][1] = pack_f16x2(Bs[k + 8][c], Bs[k + 9][c]);
            }
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) mma_f16(acc[i][j], a[i], b[j]);
        }
#pragma unroll
        for (int kk = 0; MODE != 2 && kk < BK; kk += 8) {
            if (MODE == 1) {
                // Fragments of m16n8k8 (PTX ISA): A a0 (g, t) a1 (g+8, t) a2 (g, t+4)
                // a3 (g+8, t+4); B b0 (k=t, n=g) b1 (k=t+4, n=g).
                unsigned a[2][4], b[4][2];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const int r = wm + i * 16 + g;
                    a[i][0] = to_tf32(As[kk + t][r]);
                    a[i][1] = to_tf32(As[kk + t][r + 8]);
                    a[i][2] = to_tf32(As[kk + t + 4][r]);
                    a[i][3] = to_tf32(As[kk + t + 4][r + 8]);
                }
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int c = wn + j * 8 + g;
                    b[j][0] = to_tf32(Bs[kk + t][c]);
                    b[j][1] = to_tf32(Bs[kk + t + 4][c]);
                }
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) mma_tf32(acc[i][j], a[i], b[j]);
            } else {
#pragma unroll
                for (int k = kk; k < kk + 8; ++k)
#pragma unroll
                    for (int i = 0; i < 2; ++i)
#pragma unroll
                        for (int j = 0; j < 4; ++j) {
                            const int r = wm + i * 16 + g, c = wn + j * 8 + 2 * t;
                            acc[i][j][0] = fmaf(As[k][r], Bs[k][c], acc[i][j][0]);
                            acc[i][j][1] = fmaf(As[k][r], Bs[k][c + 1], acc[i][j][1]);
                            acc[i][j][2] = fmaf(As[k][r + 8], Bs[k][c], acc[i][j][2]);
                            acc[i][j][3] = fmaf(As[k][r + 8], Bs[k][c + 1], acc[i][j][3]);
                        }
            }
        }
        __syncthreads();
    }
    // Accumulators: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1).
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const i64 r = m0 + wm + i * 16 + g, c = n0 + wn + j * 8 + 2 * t;
            if (r < M && c < N) C[r * LDC + c] = alpha * acc[i][j][0];
            if (r < M && c + 1 < N) C[r * LDC + c + 1] = alpha * acc[i][j][1];
            if (r + 8 < M && c < N) C[(r + 8) * LDC + c] = alpha * acc[i][j][2];
            if (r + 8 < M && c + 1 < N) C[(r + 8) * LDC + c + 1] = alpha * acc[i][j][3];
        }
}
} // namespace gemm
