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


} // namespace tc
