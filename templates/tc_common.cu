// Building blocks of the edit-attention backward's kernels (projection products,
// the fused attention pass, the bias sums): one warp's share of a product read
// from shared memory, cp.async copies, reductions into global memory, and a
// block-wide sum.
//
// warp_mma adds one k step of A[m, k] B[k, n] to a warp's FM x FN fragments of
// 16 x 8 outputs. a(m, k) and b(k, n) read the operands (warp-relative m and
// n); the caller's lambdas hide the layout, so one routine serves row-major and
// transposed tiles. MODE 1: m16n8k8 on TF32 (k step 8); MODE 2: m16n8k16 on
// fp16 (k step 16); MODE 0: exact fp32 FMAs over the same fragment ownership
// (k step 8). Accumulator c0..c3 of fragment (i, j) is (16i+g, 8j+2t),
// (16i+g, 8j+2t+1), (16i+g+8, 8j+2t), (16i+g+8, 8j+2t+1); g = lane/4, t = lane%4.
namespace tc {
typedef long long i64;

template <int MODE> struct kstep { static constexpr int value = MODE == 2 ? 16 : 8; };

// TF32 operand of x, rounded to nearest with ties away from zero: the tensor
// cores read only the top 19 bits, so adding half a TF32 unit to the bit
// pattern rounds. One integer add instead of cvt.rna.tf32.f32's two
// instructions, with the same result for every finite x (an infinity turns
// into a NaN, which an fp32 product of it would give anyway).
__device__ __forceinline__ unsigned to_tf32(float x) { return __float_as_uint(x) + 0x1000u; }

// Two floats as one f16x2 register, lo (the lower k index) in the low half,
// each rounded to nearest even, and fp16 back to fp32 (tests/emu/cuda_on_cpu.h
// has their CPU forms).
#ifndef TC_EMU
__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// fp16 (its bits) to fp32, exactly.
__device__ __forceinline__ float from_f16(unsigned short x) {
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(x));
    return r;
}
#endif

// Four fp16 (8 bytes, the first in the low half of h.x) to fp32, each times s.
__device__ __forceinline__ float4 f16x4_to_float4(uint2 h, float s) {
    return make_float4(s * from_f16((unsigned short)(h.x & 0xffffu)), s * from_f16((unsigned short)(h.x >> 16)),
                       s * from_f16((unsigned short)(h.y & 0xffffu)), s * from_f16((unsigned short)(h.y >> 16)));
}
// gS's element type in the workspace: fp32, or fp16 bits (tile gs_half=1).
template <bool HALF> struct gs_elem { typedef float t; };
template <> struct gs_elem<true> { typedef unsigned short t; };
// 2^e as a float, for -126 < e < 128.
__device__ __forceinline__ float pow2(int e) { return __uint_as_float((unsigned)(e + 127) << 23); }
// The least e with x < 2^e, for a positive normal x (its biased exponent
// less 126); 0 and subnormals give -126, infinities and NaNs 129.
__device__ __forceinline__ int ceil_log2(float x) { return (int)((__float_as_uint(x) >> 23) & 0xffu) - 126; }

__device__ __forceinline__ void mma_tf32(float c[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_f16(float c[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One m16n8k8 TF32 A fragment (PTX ISA): a0 (r, k) a1 (r+8, k) a2 (r, k+4)
// a3 (r+8, k+4), r = 16i + g, k = k0 + t, rounded; also wgmma's A from
// registers (templates/gemm_wg.cu), whose warps each hold such a fragment.
template <class FA> __device__ __forceinline__ void tf32_a_fragment(unsigned (&f)[4], int r, int k, FA a) {
    f[0] = to_tf32(a(r, k));
    f[1] = to_tf32(a(r + 8, k));
    f[2] = to_tf32(a(r, k + 4));
    f[3] = to_tf32(a(r + 8, k + 4));
}
// One m16n8k16 fp16 A fragment: pairs along k, a0 (r, k..k+1) a1 (r+8, k..)
// a2 (r, k+8..) a3 (r+8, k+8..), r = 16i + g, k = k0 + 2t; also wgmma's A
// from registers (templates/grad_query_wg16.cu).
template <class FA> __device__ __forceinline__ void f16_a_fragment(unsigned (&f)[4], int r, int k, FA a) {
    f[0] = pack_f16x2(a(r, k), a(r, k + 1));
    f[1] = pack_f16x2(a(r + 8, k), a(r + 8, k + 1));
    f[2] = pack_f16x2(a(r, k + 8), a(r, k + 9));
    f[3] = pack_f16x2(a(r + 8, k + 8), a(r + 8, k + 9));
}

template <int MODE, int FM, int FN, class FA, class FB>
__device__ __forceinline__ void warp_mma(float (&acc)[FM][FN][4], int k0, FA a, FB b) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    if constexpr (MODE == 1) {
        // m16n8k8 TF32: A as tf32_a_fragment; B b0 (k=t, n=g) b1 (k=t+4, n=g).
        unsigned af[FM][4], bf[FN][2];
#pragma unroll
        for (int i = 0; i < FM; ++i) tf32_a_fragment(af[i], 16 * i + g, k0 + t, a);
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            const int c = 8 * j + g;
            bf[j][0] = to_tf32(b(k0 + t, c));
            bf[j][1] = to_tf32(b(k0 + t + 4, c));
        }
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) mma_tf32(acc[i][j], af[i], bf[j]);
    } else if constexpr (MODE == 2) {
        // m16n8k16 f16: A as f16_a_fragment; B r0 (k=2t..2t+1, n=g) r1 (k=2t+8.., n=g).
        const int k = k0 + 2 * t;
        unsigned af[FM][4], bf[FN][2];
#pragma unroll
        for (int i = 0; i < FM; ++i) f16_a_fragment(af[i], 16 * i + g, k, a);
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            const int c = 8 * j + g;
            bf[j][0] = pack_f16x2(b(k, c), b(k + 1, c));
            bf[j][1] = pack_f16x2(b(k + 8, c), b(k + 9, c));
        }
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) mma_f16(acc[i][j], af[i], bf[j]);
    } else {
#pragma unroll
        for (int k = k0; k < k0 + 8; ++k)
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) {
                    const int r = 16 * i + g, c = 8 * j + 2 * t;
                    acc[i][j][0] = fmaf(a(r, k), b(k, c), acc[i][j][0]);
                    acc[i][j][1] = fmaf(a(r, k), b(k, c + 1), acc[i][j][1]);
                    acc[i][j][2] = fmaf(a(r + 8, k), b(k, c), acc[i][j][2]);
                    acc[i][j][3] = fmaf(a(r + 8, k), b(k, c + 1), acc[i][j][3]);
                }
    }
}

template <int FM, int FN> __device__ __forceinline__ void zero(float (&acc)[FM][FN][4]) {
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;
}

// The cp.async copies and the reductions into global memory below are
// instructions with no CPU form: tests/emu/cuda_on_cpu.h (TC_EMU) has its own.
#ifndef TC_EMU
// 16 bytes global -> shared without passing through registers, of which the
// first `bytes` (0, 4, 8, 12 or 16) are read and the rest filled with zeros;
// with 0 the address is never read.
__device__ __forceinline__ void cp_async16_bytes(void *smem, const void *gmem, int bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(bytes));
}
// 8 bytes global -> shared, or zeros for an invalid chunk (gS's fp16 rows).
__device__ __forceinline__ void cp_async8(void *smem, const void *gmem, bool valid) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(s), "l"(gmem), "r"(valid ? 8 : 0));
}
// The whole 16 bytes, or zeros for an invalid chunk.
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
    cp_async16_bytes(smem, gmem, valid ? 16 : 0);
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }
#endif

// A ROWS x COLS tile of a row-major matrix (leading dimension ld) from row r0,
// column c0 into shared memory (row stride lds), 16 bytes per copy among NT
// threads; rows at or past rend and columns at or past cend read as zeros.
// COLS, c0 and cend are multiples of 4 (the caller's alignment contract).
// The passes are unrolled and each thread keeps one column (NT is a multiple
// of a row's chunks), so a copy costs a bound check and the cp.async: the
// address math is done once (a generic loop here cost more instructions than
// the products it fed).
template <int ROWS, int COLS, int NT>
__device__ __forceinline__ void copy_tile(float *dst, int lds, const float *src, i64 ld, i64 r0, i64 c0, i64 rend,
                                          i64 cend) {
    constexpr int CPR = COLS / 4, CHUNKS = ROWS * CPR, PASSES = (CHUNKS + NT - 1) / NT;
    static_assert(NT % CPR == 0, "threads must cover whole rows of 16-byte chunks");
    constexpr int RS = NT / CPR; // rows between one pass and the next
    const int rt = threadIdx.x / CPR, col = 4 * (threadIdx.x % CPR);
    const bool col_ok = c0 + col < cend;
    const float *s = src + (r0 + rt) * ld + c0 + col;
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
        const int r = rt + p * RS;
        if (CHUNKS % NT != 0 && r >= ROWS) break;
        const bool ok = col_ok && r0 + r < rend;
        cp_async16(&dst[r * lds + col], ok ? s + p * RS * ld : src, ok);
    }
}

#ifndef TC_EMU
// Two adjacent floats added into global memory in one reduction (sm_90).
__device__ __forceinline__ void red_add2(float *p, float x, float y) {
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(x), "f"(y) : "memory");
}
// Four, at a 16-byte boundary (sm_90).
__device__ __forceinline__ void red_add4(float *p, float4 v) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                 : "memory");
}
__device__ __forceinline__ void red_add(float *p, float x) {
    asm volatile("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(x) : "memory");
}
#endif

// D[b, h, i] = gA[b, i, h] . attention_output[b, i, h], the row dots of the
// attention pass, from warp w = (b * T + i) * 16 + h whose lanes hold two of
// the head's 64 columns each (x of gA, y of attention_output): one order of
// summation wherever the row dots are made.
__device__ __forceinline__ void store_head_dot(float2 x, float2 y, i64 w, i64 T, float *rowdot) {
    float s = fmaf(x.x, y.x, x.y * y.y);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const i64 b = w / (T * 16), i = (w / 16) % T, h = w % 16;
    if (threadIdx.x % 32 == 0) rowdot[(b * 16 + h) * T + i] = s;
}

// The same dot from 16 lanes of four columns each (x of gA, y of
// attention_output, lane l of its half-warp columns 4 l .. 4 l + 3): the sum
// store_head_dot's lanes 2 l and 2 l + 1 would hold, added in its order (its
// shuffle by 16 is one by 8 here, ..., by 2 one by 1, by 1 the add of the
// two). Bit for bit the same D; valid in lane 0 of each half-warp.
__device__ __forceinline__ float head_dot4(float4 x, float4 y) {
    float a = fmaf(x.x, y.x, x.y * y.y), c = fmaf(x.z, y.z, x.w * y.w);
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        c += __shfl_xor_sync(0xffffffffu, c, o);
    }
    return a + c;
}

// Sum over the 256 threads (8 warps) of a block; every thread gets it.
// scratch: 8 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float *scratch) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads(); // scratch may still be read from an earlier call
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < 8; ++w) s += scratch[w];
    return s;
}

// Programmatic dependent launch (sm_90; the plan's `pdl` launches): such a
// kernel may be placed on the SMs while the kernel ahead of it on its stream
// is still running, so each kernel of these plans starts with pdl_enter(): it
// waits until that kernel has finished and its writes are visible
// (griddepcontrol.wait; at once for a kernel launched the usual way). Every
// read and write comes after it. With ATTNBWD_PDL_EARLY (tile pdl=2) it then
// lets the kernel after it be placed at once, where it waits on SMs that
// other kernels could use; otherwise that happens as its blocks exit.
#ifndef ATTNBWD_PDL_EARLY
#define ATTNBWD_PDL_EARLY 0
#endif
__device__ __forceinline__ void pdl_enter() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (ATTNBWD_PDL_EARLY) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
} // namespace tc
