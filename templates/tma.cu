// The TMA (sm_90) from NVRTC code: tensor maps passed as kernel parameters,
// shared-memory mbarriers, and 2-D bulk tensor copies that complete on them;
// named barriers, for the warps of one role to meet without the others; and
// the cluster's barrier and shared memory (a K-split product's slices added
// across their cluster).
// Used by the products of templates/gemm_tma.cu and the attention pass of
// templates/attention_wg.cu (att_tma=1).
namespace tc {

// A CUtensorMap's 128 opaque bytes (cuda.h is not NVRTC's to include): the
// host encodes it and passes it as a __grid_constant__ parameter.
struct __align__(64) tma_map {
    unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned smem_u32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
// The block's dynamic shared memory from its first 1 KiB boundary, where the
// 128-byte swizzle's pattern starts (the launch asks 1 KiB more).
__device__ __forceinline__ float *smem_1k() {
    extern __shared__ float4 smem4[];
    return reinterpret_cast<float *>(smem4) + ((1024 - smem_u32(smem4) % 1024) % 1024) / 4;
}

__device__ __forceinline__ void mbar_init(unsigned long long *bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the TMA (async proxy) and the
// other threads; a __syncthreads must still follow before they are used.
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// One arrival that also announces `bytes` the TMA will complete on the barrier.
__device__ __forceinline__ void mbar_expect_tx(unsigned long long *bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// Waits until the barrier's phase of this parity has completed.
__device__ __forceinline__ void mbar_wait(unsigned long long *bar, unsigned parity) {
    asm volatile("{\n.reg .pred done;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n}\n" ::"r"(smem_u32(bar)),
                 "r"(parity)
                 : "memory");
}
// Barrier ID (1..15; 0 is __syncthreads') for N threads, whole warps.
template <int ID, int N> __device__ __forceinline__ void named_bar_sync() {
    asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"(N) : "memory");
}
// A barrier of every thread of the cluster (threads that have exited count as
// arrived): the writes before it, shared memory included, are seen after it
// by every block of the cluster.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
// The float4 at `local`'s offset in the shared memory of the cluster's block `rank`.
__device__ __forceinline__ float4 ld_dsmem_f4(const float *local, unsigned rank) {
    unsigned remote;
    float4 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(local)), "r"(rank));
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(remote)
                 : "memory");
    return v;
}
// The box of `map` at (c0 inner, c1 outer) into shared memory at dst.
__device__ __forceinline__ void tma_load_2d(void *dst, const tma_map *map, unsigned long long *bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
                 : "memory");
}

// The box of `map` at (c0, c1) into shared memory at dst's offset in every
// block of the cluster in `mask`, each block's bytes completing on the
// barrier at bar's offset in it (TMA multicast: one read of L2 for them all).
__device__ __forceinline__ void tma_load_2d_mc(void *dst, const tma_map *map, unsigned long long *bar, int c0, int c1,
                                               unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1),
                 "r"(smem_u32(bar)), "h"(mask)
                 : "memory");
}
// An arrival on the barrier at bar's offset in the cluster's block `rank`.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long *bar, unsigned rank) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(bar)), "r"(rank));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
// This block's rank in its cluster.
__device__ __forceinline__ unsigned cluster_ctarank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// The sum over a cluster of CLUSTER blocks of the BM x BN tiles each has
// parked in its shared memory at `tile` (rows LDT floats apart), times alpha,
// into C: rank `rank` adds rows [rank * RB, ...) in rank order (a split
// product's reduce launch adds its slices in that order: the same sums), a
// float4 a thread (`ct` of THREADS, whole warps). ROWDOT_T > 0 (gA: N = 1024
// columns, 16 heads of 64): with them the attention pass's row dots D of
// those rows, attention_output (O, [M, N]) read beside, a head's 16 float4s on
// the 16 lanes of a half-warp, added as the rowdot kernel adds them
// (head_dot4: the same bits). The caller syncs the cluster before (every tile
// parked) and after (every tile read).
template <i64 M, i64 N, int BM, int BN, int LDT, int CLUSTER, int THREADS, i64 ROWDOT_T>
__device__ __forceinline__ void cluster_sum_store(const float *tile, float *__restrict__ C, i64 ldc, float alpha,
                                                  int rank, i64 m0, i64 n0, int ct, const float *__restrict__ O,
                                                  float *__restrict__ rowdot) {
    constexpr int Q = BN / 4, RB = (BM + CLUSTER - 1) / CLUSTER;
    static_assert(CLUSTER <= 8 && THREADS % 32 == 0 && LDT % 4 == 0, "a portable cluster, whole warps, float4 rows");
    static_assert(ROWDOT_T == 0 || (N == 1024 && BN % 64 == 0), "row dots: whole heads of gA");
    const int r0 = rank * RB, rows = BM - r0 < RB ? BM - r0 : RB;
    const int items = (rows * Q + 31) / 32 * 32; // every lane of a warp through each pass: the shuffles
    for (int i = ct; i < items; i += THREADS) {
        const int row = r0 + i / Q, c4 = i % Q;
        const i64 rr = m0 + row, c = n0 + 4 * c4;
        const bool ok = i < rows * Q && rr < M;
        float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
        if (ok) {
            const float *src = tile + row * LDT + 4 * c4;
            s = ld_dsmem_f4(src, 0);
#pragma unroll
            for (int q = 1; q < CLUSTER; ++q) {
                const float4 v = ld_dsmem_f4(src, q);
                s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
            }
            s = make_float4(alpha * s.x, alpha * s.y, alpha * s.z, alpha * s.w);
            float *out = C + rr * ldc + c;
            if (c + 3 < N && ldc % 4 == 0) *reinterpret_cast<float4 *>(out) = s;
            else {
                const float o[4] = {s.x, s.y, s.z, s.w};
                for (int x = 0; x < 4 && c + x < N; ++x) out[x] = o[x];
            }
        }
        if constexpr (ROWDOT_T > 0) {
            const float4 o = ok ? *reinterpret_cast<const float4 *>(O + rr * N + c) : make_float4(0.f, 0.f, 0.f, 0.f);
            const float d = head_dot4(s, o);
            if (ok && c4 % 16 == 0) rowdot[((rr / ROWDOT_T) * 16 + c / 64) * ROWDOT_T + rr % ROWDOT_T] = d;
        }
    }
}

} // namespace tc
