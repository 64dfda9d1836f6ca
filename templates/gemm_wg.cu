// Projection products on Hopper's warpgroup tensor cores (wgmma, sm_90a),
// TF32: C = alpha * op(A) @ B^T, op(A) [M, K] (TA: A stored [K, M]), B [N, K]
// row-major (K contiguous: TF32 wgmma reads B from shared memory only
// K-major, so the plan transposes B into the workspace first, rounded to TF32
// there, templates/transpose.cu), C [M, N] row-major (ldc).
//
// A block of BM/64 warpgroups computes BM x BN outputs over one slice of K
// (`split`, KSPLIT columns): warpgroup w owns rows 64w..64w+63 and all BN
// columns, one m64n128k8 wgmma per 128 columns and 8 k (BN = 64: one
// m64n64k8, twice the blocks where few would fill the GPU: gQ's). B tiles of 32 k (128
// bytes a row) sit in shared memory in the 128-byte swizzle the descriptor
// names: row r's 16-byte chunk c at chunk c ^ (r % 8), rows 128 bytes apart,
// so a k step of 8 is the descriptor's address plus 32 bytes. A tiles keep
// the padded layouts of gemm_tc.cu and go to the wgmmas from registers, each
// thread's fragment read and rounded to TF32 as mma.sync's: so A may be
// stored either way and needs no rounded copy. A STAGES-deep cp.async ring
// feeds both; one wgmma group stays in flight while the next tile's loads
// are issued, and its A registers are the other of two sets.
// Contract (the plan keeps it): A's contiguous dimension (K, or M with TA) and
// the leading dimensions multiples of 4, B's rows zero-padded past K to a
// multiple of 4 (the transpose writes them), pointers 16-byte aligned; rows
// past M or N and k past K read as zeros.
//
// B_RAW: B is raw fp32 (gS for gQ, not a rounded copy), rounded in place the
// same way. B_F16: B is fp16 (gS of tile gs_half=1) times a power of two per
// 64 k (bscale holds their inverses): each thread's 8-byte copies land in
// the swizzled fp32 tile's slots and are widened there, times the inverse
// (exact: 11 significant bits, which TF32 keeps). TC: C is stored transposed, C[n * ldc + m] (gQ^T = k^T gS^T
// computed as [64, T] and written as gQ [T, 64]: the keys are then A, stored
// [K, M], which the register path reads as they are, so no copy of them).
// RED_LD > 0: each B chunk a thread copies is also added into `red` by a
// float reduction as it lands (add_tile_sw128: gS into grad_edit_region_bias;
// none where red is null: gq_red=2's batch row 0, which the pass stored).
// PAIR = 2 (gQ, tile gq_pair=1): two matrices a block (two batch rows of a
// head), one per warpgroup of BM = 64, the second's A, B and C pa, pb and pc
// floats past the first's (two: it exists; B odd leaves the last block one).
// Every thread copies the same chunk slots of both B tiles, so the two
// batch rows' chunks it adds are summed first: one reduction for both
// (those of red_mask's bits), half of PAIR = 1's.
namespace tc {

// The descriptors, fences and wgmma instructions up to copy_tile_sw128 have
// no CPU form: tests/emu/cuda_on_cpu.h (TC_EMU) has its own.
#ifndef TC_EMU
// Shared-memory descriptor of a K-major tile in the 128-byte swizzle: start
// address, leading offset unused (1), 1024 bytes between groups of 8 rows.
__device__ __forceinline__ unsigned long long wg_desc(const float *tile) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(tile);
    return (unsigned long long)((addr >> 4) & 0x3FFF) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
#endif

// The descriptor of the tile `floats` (a multiple of 4) past the one of d:
// the start address is bits 0-13 in 16-byte units, and shared memory ends
// below 2^18 bytes, so the add never carries out of them. One add where
// wg_desc would take a conversion, shifts and masks per wgmma.
__device__ __forceinline__ unsigned long long wg_desc_at(unsigned long long d, int floats) {
    return d + (unsigned long long)(floats / 4);
}

#ifndef TC_EMU

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Makes this thread's writes to shared memory (cp.async's and its own) visible to wgmma (the async proxy).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// The fp32 accumulators of an m64nN wgmma, N/2 per thread, as asm operands
// %0.. (the text, and the operands bound to d): 16 for n32, 32 for n64, 64
// for n128, 128 for n256.
#define TC_WG_REGS16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define TC_WG_REGS32 TC_WG_REGS16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TC_WG_REGS64 TC_WG_REGS32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define TC_WG_ACC16(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define TC_WG_ACC32(d) TC_WG_ACC16(d), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TC_WG_ACC64(d) TC_WG_ACC32(d), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#define TC_WG_REGS128 TC_WG_REGS64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, " \
    "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, " \
    "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, " \
    "%118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define TC_WG_ACC128(d) TC_WG_ACC64(d), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), \
    "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), \
    "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), \
    "+f"(d[125]), "+f"(d[126]), "+f"(d[127])


// d[64] += A (64 x 8, this warp's rows 16q..16q+15 in registers a, laid out
// as mma.sync m16n8k8's A fragment) @ B (8 x 128, descriptor b), TF32, fp32
// accumulation. d[4j..4j+3] of warp q, lane (g, t): rows 16q+g, 16q+g+8,
// columns 8j+2t, 8j+2t+1 (as mma.sync's m16n8 fragments).
__device__ __forceinline__ void wgmma_n128_tf32(float (&d)[64], const unsigned (&a)[4], unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" TC_WG_REGS64 "}, "
                 "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
                 : TC_WG_ACC64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// d[64] += A (64 x 8, descriptor a, K-major like B) @ B (8 x 128, descriptor b).
__device__ __forceinline__ void wgmma_n128_tf32_ss(float (&d)[64], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" TC_WG_REGS64 "}, "
                 "%64, %65, p, 1, 1;\n}\n"
                 : TC_WG_ACC64(d)
                 : "l"(a), "l"(b));
}

// d[128] += A (64 x 8, descriptor a) @ B (8 x 256, descriptor b), both K-major.
__device__ __forceinline__ void wgmma_n256_tf32_ss(float (&d)[128], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {" TC_WG_REGS128 "}, "
                 "%128, %129, p, 1, 1;\n}\n"
                 : TC_WG_ACC128(d)
                 : "l"(a), "l"(b));
}

// d[16] += A (64 x 8, descriptor a) @ B (8 x 32, descriptor b), both K-major.
__device__ __forceinline__ void wgmma_n32_tf32_ss(float (&d)[16], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {" TC_WG_REGS16 "}, %16, %17, p, 1, 1;\n}\n"
                 : TC_WG_ACC16(d)
                 : "l"(a), "l"(b));
}

// d[32] += A (64 x 8, descriptor a) @ B (8 x 64, descriptor b), both K-major.
__device__ __forceinline__ void wgmma_n64_tf32_ss(float (&d)[32], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {" TC_WG_REGS32 "}, %32, %33, p, 1, 1;\n}\n"
                 : TC_WG_ACC32(d)
                 : "l"(a), "l"(b));
}

// d[32] += A (64 x 8 in registers, as wgmma_n128_tf32's) @ B (8 x 64, descriptor b).
__device__ __forceinline__ void wgmma_n64_tf32(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {" TC_WG_REGS32 "}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
                 : TC_WG_ACC32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// fp16 operands, fp32 accumulation (k16: one instruction reads 32 bytes of
// each K-major row, as k8 TF32 does).
// d[16] += A (64 x 16, descriptor a) @ B (16 x 32, descriptor b), both K-major.
__device__ __forceinline__ void wgmma_n32_f16_ss(float (&d)[16], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {" TC_WG_REGS16 "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : TC_WG_ACC16(d)
                 : "l"(a), "l"(b));
}

// d[32] += A (64 x 16 in registers: this warp's rows 16q..16q+15 as
// mma.sync m16n8k16's A fragment, f16x2 words a0 (g, 2t..2t+1), a1 (g+8, 2t..),
// a2 (g, 2t+8..), a3 (g+8, 2t+8..)) @ B (16 x 64, descriptor b, K-major).
// That is the accumulator layout of an m64nN wgmma, two columns a word: 16
// columns of one product's accumulators are the A of the next, as they stand.
__device__ __forceinline__ void wgmma_n64_f16(float (&d)[32], const unsigned (&a)[4], unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" TC_WG_REGS32 "}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : TC_WG_ACC32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
#endif

// ROWS x 32 floats of a row-major matrix (from row r0, column k0) into a
// 128-byte-swizzled tile, 16 bytes per cp.async among NT threads. A thread
// keeps one chunk column, and its rows step by NT/8 (a multiple of 8), so its
// swizzled column is fixed too. E = unsigned short: fp16 (gS of tile
// gs_half=1), each 8-byte chunk (four k) into the first half of the 16-byte
// slot its four floats will take, for widen_tile_f16 to widen in place.
template <int ROWS, int NT, class E = float>
__device__ __forceinline__ void copy_tile_sw128(float *dst, const E *src, i64 ld, i64 r0, i64 k0, i64 rend, i64 kend) {
    constexpr int RS = NT / 8, PASSES = ROWS / RS;
    static_assert(RS % 8 == 0 && ROWS % RS == 0, "whole passes of 8-row groups");
    static_assert(sizeof(E) == 4 || sizeof(E) == 2, "fp32 or fp16");
    const int rt = threadIdx.x / 8, c = threadIdx.x % 8;
    const int col = 4 * (c ^ (rt % 8));
    const bool k_ok = k0 + 4 * c < kend;
    const E *s = src + (r0 + rt) * ld + k0 + 4 * c;
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
        const int r = rt + p * RS;
        const bool ok = k_ok && r0 + r < rend;
        if constexpr (sizeof(E) == 4) cp_async16(&dst[r * 32 + col], ok ? s + (i64)p * RS * ld : src, ok);
        else cp_async8(&dst[r * 32 + col], ok ? s + (i64)p * RS * ld : src, ok);
    }
}

// The slots this thread filled with copy_tile_sw128<ROWS, NT, unsigned short>,
// widened to fp32 times `inv`.
template <int ROWS, int NT> __device__ __forceinline__ void widen_tile_f16(float *tile, float inv) {
    constexpr int RS = NT / 8, PASSES = ROWS / RS;
    const int rt = threadIdx.x / 8, c = threadIdx.x % 8;
    const int col = 4 * (c ^ (rt % 8));
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
        float *slot = &tile[(rt + p * RS) * 32 + col];
        *reinterpret_cast<float4 *>(slot) = f16x4_to_float4(*reinterpret_cast<const uint2 *>(slot), inv);
    }
}

// Rounds to TF32, in place, the chunks this thread copied with
// copy_tile_sw128<ROWS, NT> (zeros stay zeros to the tensor cores).
template <int ROWS, int NT> __device__ __forceinline__ void round_tile_sw128(float *tile) {
    constexpr int RS = NT / 8, PASSES = ROWS / RS;
    const int rt = threadIdx.x / 8, c = threadIdx.x % 8;
    const int col = 4 * (c ^ (rt % 8));
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
        uint4 *q = reinterpret_cast<uint4 *>(&tile[(rt + p * RS) * 32 + col]);
        const float4 v = *reinterpret_cast<const float4 *>(q);
        *q = make_uint4(to_tf32(v.x), to_tf32(v.y), to_tf32(v.z), to_tf32(v.w));
    }
}

// RED_LD > 0 (gQ, tile gq_red=1): the chunks this thread copied with
// copy_tile_sw128<ROWS, NT> (B's rows n0.., k0..) also added, as copied,
// into red[(n0 + row) * RED_LD + k] by float reductions where row < N and k
// < kend (k past kend counted as zeros); rounded in place too where ROUND.
// PAIR = 2: the same slots of a second tile `second` floats on, both rounded,
// the sum of those whose bit is set in mask added (none where red is null).
template <int ROWS, int NT, bool ROUND, i64 N, i64 RED_LD, int PAIR = 1>
__device__ __forceinline__ void add_tile_sw128(float *tile, float *__restrict__ red, i64 n0, i64 k0, i64 kend,
                                               int second = 0, unsigned mask = 1) {
    constexpr int RS = NT / 8, PASSES = ROWS / RS;
    const int rt = threadIdx.x / 8, c = threadIdx.x % 8;
    const int col = 4 * (c ^ (rt % 8));
    const i64 k = k0 + 4 * c;
    const int kleft = k < kend ? (int)(kend - k < 4 ? kend - k : 4) : 0; // this chunk's k inside
    const int rows = N - n0 - rt > ROWS ? ROWS : (int)(N - n0 - rt); // this thread's rows r < rows inside
    float *dst = red + (n0 + rt) * RED_LD + k;
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
        float4 v;
#pragma unroll
        for (int w = 0; w < PAIR; ++w) {
            float4 *q = reinterpret_cast<float4 *>(&tile[w * second + (rt + p * RS) * 32 + col]);
            const float4 x = *q;
            if constexpr (ROUND)
                *reinterpret_cast<uint4 *>(q) = make_uint4(to_tf32(x.x), to_tf32(x.y), to_tf32(x.z), to_tf32(x.w));
            if constexpr (PAIR == 1) v = x;
            else if (w == 0) v = mask & 1 ? x : make_float4(0.f, 0.f, 0.f, 0.f);
            else if (mask & 2) v = make_float4(v.x + x.x, v.y + x.y, v.z + x.z, v.w + x.w);
        }
        if (PAIR > 1 && !red) continue;
        if (kleft == 0 || p * RS >= rows) continue;
        if (kleft < 4) { // the row's last chunk: gS's padding past T is not the sum's
            if (kleft < 2) v.y = 0.f;
            if (kleft < 3) v.z = 0.f;
            v.w = 0.f;
        }
        red_add4(dst + (i64)p * RS * RED_LD, v);
    }
}

template <i64 M, i64 N, i64 K, i64 LDA, i64 LDB, bool TA, int BM, int BN, int STAGES, i64 KSPLIT,
          bool B_RAW = false, bool TC = false, class BE = float, i64 RED_LD = 0, int PAIR = 1>
__device__ __forceinline__ void gemm_wg(const float *__restrict__ A, const BE *__restrict__ B,
                                        float *__restrict__ C, i64 ldc, float alpha, int split,
                                        const float *__restrict__ bscale = nullptr, float *__restrict__ red = nullptr,
                                        i64 pa = 0, i64 pb = 0, i64 pc = 0, bool two = false, unsigned red_mask = 1) {
    constexpr bool B_F16 = sizeof(BE) == 2;
    constexpr int NT = BM / 64 * 128, WN = BN < 128 ? BN : 128, NH = BN / WN; // NH wgmmas of WN columns
    constexpr int NTB = NT * PAIR; // the block's threads: NT a matrix
    // B first in each stage: every tile size here is a multiple of 1024 bytes,
    // so each B tile starts where the swizzle pattern does.
    constexpr int A_LD = TA ? BM + 8 : 36, A_SIZE = TA ? 32 * A_LD : BM * A_LD;
    constexpr int B_SIZE = BN * 32, STAGE = A_SIZE + B_SIZE;
    static_assert(BM % 64 == 0 && (BN == 64 || BN % 128 == 0) && STAGES >= 3 && KSPLIT % 32 == 0, "wgmma tiles");
    static_assert(A_SIZE % 256 == 0, "stages of whole 1024-byte blocks");
    static_assert(RED_LD == 0 || (!B_F16 && RED_LD % 4 == 0), "reductions of fp32 B, 16-byte aligned");
    static_assert(PAIR == 1 || (PAIR == 2 && BM == 64 && TA && !B_F16 && RED_LD > 0),
                  "two matrices a block: gQ's, one warpgroup each");
    extern __shared__ float4 smem4[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smem4);
    float *smem = reinterpret_cast<float *>(smem4) + ((1024 - raw % 1024) % 1024) / 4; // launch asks 1 KiB more

    float *bsc = smem + STAGES * PAIR * STAGE; // B_F16: (K + 63) / 64 floats
    const i64 m0 = (i64)blockIdx.y * BM, n0 = (i64)blockIdx.x * BN;
    const i64 kbeg = (i64)split * KSPLIT, kend = kbeg + KSPLIT < K ? kbeg + KSPLIT : K;
    // Whole pairs of k tiles, the last one past K (zeros) where the count is
    // odd: an odd tile after the pairs, on the register set the pair before
    // had used, made ptxas serialize every wgmma of the kernel (warning C7513;
    // gQ's kernel had it at B=64,T=128 and five more public shapes).
    const int ktiles = (int)((kend - kbeg + 63) / 64) * 2;
    const int wg = threadIdx.x / 128, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int mat = PAIR == 1 ? 0 : wg; // PAIR = 2: this warpgroup's matrix; stage s's is tile s * PAIR + mat
    const int wrow = (PAIR == 1 ? wg : 0) * 64 + (threadIdx.x % 128) / 32 * 16; // this warp's 16 rows of its tile

    auto load = [&](int stage, int kt) {
        const i64 k0 = kbeg + (i64)kt * 32;
#pragma unroll
        for (int w = 0; w < PAIR; ++w) { // PAIR = 2: all threads copy both matrices' tiles
            float *Bs = smem + (stage * PAIR + w) * STAGE, *As = Bs + B_SIZE;
            copy_tile_sw128<BN, NTB>(Bs, B + w * pb, LDB, n0, k0, N, kend);
            if constexpr (TA) copy_tile<32, BM, NTB>(As, A_LD, A + w * pa, LDA, k0, m0, kend, M);
            else copy_tile<BM, 32, NTB>(As, A_LD, A, LDA, m0, k0, M, kend);
        }
    };

    float acc[NH][WN / 2];
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
        for (int i = 0; i < WN / 2; ++i) acc[h][i] = 0.f;
    unsigned af[2][4][4]; // A fragments of 4 k steps; the set of tile kt-1 may still be read

    // One k tile: tiles kt+1 .. kt+STAGES-2 load while its wgmmas run; the
    // stage of tile kt-1 is still being read by the group left in flight.
    auto step = [&](int kt, unsigned (&a)[4][4]) {
        cp_async_wait<STAGES - 3>();
        if constexpr (B_F16)
            widen_tile_f16<BN, NT>(smem + (kt % STAGES) * STAGE, bsc[(kbeg + (i64)kt * 32) / 64]);
        else if constexpr (PAIR == 2) // both batch rows' chunks this thread copied: rounded, summed, one reduction
            add_tile_sw128<BN, NTB, B_RAW, N, RED_LD, 2>(smem + (kt % STAGES) * PAIR * STAGE, red, n0,
                                                        kbeg + (i64)kt * 32, kend, STAGE, red_mask);
        else if constexpr (RED_LD > 0) {
            if (red) add_tile_sw128<BN, NT, B_RAW, N, RED_LD>(smem + (kt % STAGES) * STAGE, red, n0, kbeg + (i64)kt * 32, kend);
            else if constexpr (B_RAW) round_tile_sw128<BN, NT>(smem + (kt % STAGES) * STAGE);
        } else if constexpr (B_RAW) round_tile_sw128<BN, NT>(smem + (kt % STAGES) * STAGE);
        fence_async_shared();
        __syncthreads(); // tile kt is in place for everyone; tile kt-2's wgmmas are done in every warpgroup
        if (kt + STAGES - 2 < ktiles) load((kt + STAGES - 2) % STAGES, kt + STAGES - 2);
        cp_async_commit();
        const float *Bs = smem + ((kt % STAGES) * PAIR + mat) * STAGE, *As = Bs + B_SIZE;
        auto at = [&](int m, int k) { return TA ? As[k * A_LD + wrow + m] : As[(wrow + m) * A_LD + k]; };
#pragma unroll
        for (int s = 0; s < 4; ++s) tf32_a_fragment(a[s], g, 8 * s + t, at);
        // Pin the fragments before the fence: the compiler would otherwise sink
        // the rounding adds between the wgmmas, which makes ptxas serialize them.
#pragma unroll
        for (int s = 0; s < 4; ++s)
#pragma unroll
            for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[s][i])::"memory");
        wg_fence();
#pragma unroll
        for (int s = 0; s < 4; ++s)
#pragma unroll
            for (int h = 0; h < NH; ++h) {
                const unsigned long long b = wg_desc(Bs + h * WN * 32 + 8 * s);
                if constexpr (WN == 64) wgmma_n64_tf32(acc[h], a[s], b);
                else wgmma_n128_tf32(acc[h], a[s], b);
            }
        wg_commit();
        wg_wait<1>();
    };

#pragma unroll
    for (int s = 0; s < STAGES - 2; ++s) {
        if (s < ktiles) load(s, s);
        cp_async_commit();
    }
    if constexpr (B_F16) { // the inverse scales of K's blocks of 64, after the stages
        for (int x = threadIdx.x; x < (K + 63) / 64; x += NT) bsc[x] = bscale[x];
        __syncthreads();
    }
    for (int kt = 0; kt < ktiles; kt += 2) { // ktiles is even
        step(kt, af[0]);
        step(kt + 1, af[1]);
    }
    wg_wait<0>();
    cp_async_wait<0>();
    if (mat == 1 && !two) return; // B odd: the last block's second warpgroup had a copy of the first's matrices
    C += mat * pc;

    const i64 r = m0 + wrow + g;
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
        for (int j = 0; j < WN / 8; ++j) {
            const i64 c = n0 + WN * h + 8 * j + 2 * t;
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const i64 rr = r + 8 * e;
                if (rr >= M) continue;
                const float x = alpha * acc[h][4 * j + 2 * e], y = alpha * acc[h][4 * j + 2 * e + 1];
                if constexpr (TC) {
                    if (c < N) C[c * ldc + rr] = x;
                    if (c + 1 < N) C[(c + 1) * ldc + rr] = y;
                } else if (c + 1 < N) *reinterpret_cast<float2 *>(&C[rr * ldc + c]) = make_float2(x, y);
                else if (c < N) C[rr * ldc + c] = x;
            }
        }
}
} // namespace tc
