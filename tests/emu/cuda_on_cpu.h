// CUDA on the CPU, as far as the wgmma templates need it
// (templates/gemm_tma.cu, grad_query_tma.cu, gemm_wg.cu's products, the
// attention pass of attention_wg*.cu; with
// templates/tc_common.cu, which the tests include after this file, TC_EMU
// leaving out its instructions that have no CPU form): one fiber (ucontext) per
// CUDA thread, all on the calling thread, switched only where a thread waits
// (barriers, mbarrier parities, the warp's meets), the waiters resumed in turn,
// each pass the other way round, so that a thread that reads what another has
// not yet written meets the poison whichever of the two comes first; blocks one
// after another, or a cluster's together (each block its
// own shared memory; the cluster's barrier; loads from another block's shared
// memory); mbarriers
// with phases, parity waits and transaction bytes; 2-D TMA boxes copied at
// once (zeros past the tensor, the 128-byte swizzle on shared-memory
// offsets); cp.async as a copy done at once (zeros past the bytes asked
// for); wgmma m64nNk8 TF32 and m64nNk16 fp16 (fp32 accumulation) with both operands K-major in
// that swizzle, read through its descriptor, or A from the warps' registers
// (mma.sync's A fragments, gathered from the warp), each thread computing its own
// accumulator fragment and reading operands as the tensor cores do (the low
// 13 bits dropped). wgmma's fence, commit and wait are .sync.aligned: a
// warp's lanes meet there; named barriers (bar.sync), the ballot and the
// shuffle likewise. A wait that can never end (every thread waiting, none
// released) is reported at once and aborts. The model is checked against
// templates/gemm_tma.cu (tests/test_emu_tma.cpp), gQ's default product of
// gemm_wg.cu (tests/test_emu_wg.cpp) and the attention pass
// (tests/test_emu_pass.cpp), whose kernels pass on the H200.
#pragma once
#define TC_EMU 1
#include <condition_variable>
#include <sys/mman.h>
#include <ucontext.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __cluster_dims__(x, y, z) // emu_launch's cluster argument
#define __restrict__
#define __shared__
struct dim3e { unsigned x = 0, y = 0, z = 0; };
inline thread_local dim3e threadIdx, blockIdx;
inline dim3e gridDim, blockDim;
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(8) uint2 { unsigned x, y; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline float2 make_float2(float a, float b) { return {a, b}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
typedef long long i64;

constexpr size_t EMU_SMEM = 232448;
// A block's shared memory outside a cluster: the symbol smem4, which the
// templates' block-scope `extern __shared__ float4 smem4[]` names in any
// namespace (a kernel's is extern "C"; tc's functions' is tc::smem4, given
// that symbol here). A cluster's blocks each have their own (tc::smem_1k).
alignas(1024) inline float4 smem4[EMU_SMEM / 16];
namespace tc { extern float4 smem4[EMU_SMEM / 16] __asm__("smem4"); }

namespace emu {
struct bar {
    unsigned expected = 0, pending = 0;
    long long tx = 0;
    unsigned long long done = 0;
    std::condition_variable cv; // its waiters only
};
inline std::mutex mu;
inline std::unordered_map<const void *, bar> bars;
inline void complete_if(bar &b) {
    if (b.pending == 0 && b.tx == 0) { b.done++; b.pending = b.expected; b.cv.notify_all(); }
}
// The fibers: the CUDA threads of the blocks running now, each with its own
// stack, all on the thread that called emu_launch. A thread runs until it
// waits; then the next one runs. No OS thread is made per CUDA thread and no
// lock is ever contended, so a block's barriers cost no system calls.
struct block_state;
struct cluster_state;
struct fiber {
    ucontext_t ctx;
    void *stack = nullptr;
    std::function<void()> body;
    bool finished = false;
    // Its CUDA thread's registers of place, kept while others run.
    dim3e thread, block;
    block_state *bs = nullptr;
    cluster_state *cs = nullptr;
    // While it waits: what for (the waiter's describe(), called only for a deadlock's report).
    std::string (*describe)(const void *) = nullptr;
    const void *describe_arg = nullptr;
};
constexpr size_t FIBER_STACK = 8u << 20; // as an OS thread's: the templates' block-scope arrays live there
inline std::vector<std::unique_ptr<fiber>> fibers;
inline fiber *running = nullptr;
inline ucontext_t scheduler_ctx;
inline bool progressed = false; // since the scheduler last looked: some thread got past a wait, or finished
inline void switch_to_scheduler();
// Waits (holding mu through l, which it lets go while others run) until
// done(). A wait while every other thread waits too and none is released is
// reported, with describe()'s words, and aborts (run_fibers).
template <class Done, class Describe>
void wait_or_abort(std::condition_variable &, std::unique_lock<std::mutex> &l, Done done, Describe describe) {
    if (done()) return;
    progressed = true; /* it ran up to here, so it may have released others */
    running->describe = +[](const void *d) -> std::string { return (*static_cast<const Describe *>(d))(); };
    running->describe_arg = &describe;
    while (!done()) {
        l.unlock();
        switch_to_scheduler();
        l.lock();
    }
    running->describe = nullptr;
    progressed = true;
}
// A barrier that n threads meet at, then go on together (bar.sync's kind).
struct meet { unsigned arrived = 0, gen = 0; std::condition_variable cv; };
inline void meet_at(meet &x, unsigned n, std::unique_lock<std::mutex> &l) {
    const unsigned gen = x.gen;
    if (++x.arrived == n) { x.arrived = 0; x.gen++; x.cv.notify_all(); }
    else wait_or_abort(x.cv, l, [&] { return x.gen != gen; }, [&] { return "at a barrier of " + std::to_string(n); });
}
// A block: its shared memory (1 KiB aligned, as the templates' smem_1k gives
// it: smem4, or its own in a cluster) and its __syncthreads.
struct alignas(1024) smem_bytes { unsigned char b[EMU_SMEM]; };
struct block_state {
    unsigned char *smem;
    std::unique_ptr<smem_bytes> own; // C++17's aligned new
    meet sync;
    unsigned live = 0; // once none of its threads runs, its shared memory is poisoned (another block's, on the GPU)
};
// A cluster: its blocks, which run together, and barrier.cluster, which
// every thread of them that has not exited meets at (an exit counts as an
// arrival, as on the GPU).
struct cluster_state {
    std::vector<std::unique_ptr<block_state>> blocks;
    unsigned live = 0, arrived = 0, gen = 0;
    std::condition_variable cv;
    void release_if_all() {
        if (arrived > 0 && arrived == live) { arrived = 0; gen++; cv.notify_all(); }
    }
};
inline thread_local block_state *this_block;
inline thread_local cluster_state *this_cluster;
}

inline void __syncthreads() {
    std::unique_lock<std::mutex> l(emu::mu);
    emu::meet_at(emu::this_block->sync, blockDim.x, l);
}
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
// A shared-memory address: its offset in the block's shared memory.
inline size_t __cvta_generic_to_shared(const void *p) {
    return (size_t)((const unsigned char *)p - emu::this_block->smem);
}

namespace tc {
struct tma_map { const float *base; long long rows, cols, ld; int box_rows, box_cols, swizzle; };
inline unsigned smem_u32(const void *p) { return (unsigned)((const unsigned char *)p - emu::this_block->smem); }
inline float *smem_1k() { return reinterpret_cast<float *>(emu::this_block->smem); }
inline void cluster_sync() {
    std::unique_lock<std::mutex> l(emu::mu);
    auto &c = *emu::this_cluster;
    const unsigned gen = c.gen;
    c.arrived++;
    c.release_if_all();
    emu::wait_or_abort(c.cv, l, [&] { return c.gen != gen; }, [] { return std::string("at the cluster barrier"); });
}
// mapa + ld.shared::cluster: the same offset in block `rank`'s shared memory.
inline float4 ld_dsmem_f4(const float *local, unsigned rank) {
    auto &c = *emu::this_cluster;
    if (rank >= c.blocks.size()) { fprintf(stderr, "DSMEM rank %u of a cluster of %zu\n", rank, c.blocks.size()); abort(); }
    float4 v;
    std::lock_guard<std::mutex> l(emu::mu);
    memcpy(&v, c.blocks[rank]->smem + smem_u32(local), 16);
    return v;
}
// red.global.add: one thread's add at a time (the emulation's threads share memory).
inline void red_add(float *p, float x) {
    std::lock_guard<std::mutex> l(emu::mu);
    *p += x;
}
inline void red_add2(float *p, float x, float y) {
    std::lock_guard<std::mutex> l(emu::mu);
    p[0] += x, p[1] += y;
}
inline void red_add4(float *p, float4 v) {
    std::lock_guard<std::mutex> l(emu::mu);
    p[0] += v.x, p[1] += v.y, p[2] += v.z, p[3] += v.w;
}
// cp.async: the copy done at once, the first `bytes` of 16 (or 8) read and the rest zeros;
// commit and wait have nothing left to do.
inline void cp_async16_bytes(void *smem, const void *gmem, int bytes) {
    memset(smem, 0, 16);
    if (bytes > 0) memcpy(smem, gmem, (size_t)bytes);
}
inline void cp_async8(void *smem, const void *gmem, bool valid) {
    memset(smem, 0, 8);
    if (valid) memcpy(smem, gmem, 8);
}
inline void cp_async16(void *smem, const void *gmem, bool valid) { cp_async16_bytes(smem, gmem, valid ? 16 : 0); }
inline void cp_async_commit() {}
template <int N> inline void cp_async_wait() {}
inline void mbar_init(unsigned long long *b, unsigned count) {
    std::lock_guard<std::mutex> l(emu::mu);
    auto &x = emu::bars[b];
    x.expected = x.pending = count;
    x.tx = 0;
    x.done = 0;
}
inline void mbar_init_fence() {}
inline void mbar_expect_tx(unsigned long long *b, unsigned bytes) {
    std::lock_guard<std::mutex> l(emu::mu);
    auto &x = emu::bars.at(b);
    x.tx += bytes; x.pending--; emu::complete_if(x);
}
// One arrival on the barrier at `b` (this block's or, mbar_arrive_cluster, another's).
inline void arrive_at(const void *b) {
    std::lock_guard<std::mutex> l(emu::mu);
    auto &x = emu::bars.at(b);
    if (x.pending == 0) { fprintf(stderr, "arrive past count\n"); abort(); }
    x.pending--; emu::complete_if(x);
}
inline void mbar_arrive(unsigned long long *b) { arrive_at(b); }
// try_wait.parity P: true once the phase of parity P has completed (the current phase's parity is not P).
inline void mbar_wait(unsigned long long *b, unsigned parity) {
    std::unique_lock<std::mutex> l(emu::mu);
    auto &x = emu::bars.at(b);
    emu::wait_or_abort(x.cv, l, [&] { return (x.done & 1) != (parity & 1); }, [&] {
        return "on barrier " + std::to_string(smem_u32(b)) + " parity " + std::to_string(parity) + " (done " +
               std::to_string(x.done) + ")";
    });
}
inline unsigned swz(unsigned off) { return off ^ ((off >> 3) & 0x70); } // the 128-byte swizzle, on smem offsets
// The box into the shared memory `smem` at offset `base`, its bytes completing on the barrier there at `bar`.
inline void tma_box_into(unsigned char *smem, unsigned base, const tma_map *m, unsigned bar, int c0, int c1) {
    if (m->swizzle && (base % 1024 || m->box_cols * 4 != 128)) { fprintf(stderr, "bad swizzled box\n"); abort(); }
    if (base % 16) { fprintf(stderr, "box not 16-byte aligned\n"); abort(); }
    for (int r = 0; r < m->box_rows; ++r)
        for (int c = 0; c < m->box_cols; ++c) {
            const long long R = (long long)c1 + r, C = (long long)c0 + c;
            const float v = R < m->rows && C < m->cols && R >= 0 && C >= 0 ? m->base[R * m->ld + C] : 0.f;
            unsigned off = (unsigned)((r * m->box_cols + c) * 4);
            if (m->swizzle) off = (base & ~1023u) + swz((base & 1023u) + off) - base;
            memcpy(smem + base + off, &v, 4);
        }
    std::lock_guard<std::mutex> l(emu::mu);
    auto &x = emu::bars.at(smem + bar);
    x.tx -= (long long)m->box_rows * m->box_cols * 4; emu::complete_if(x);
}
inline void tma_load_2d(void *dst, const tma_map *m, unsigned long long *b, int c0, int c1) {
    tma_box_into(emu::this_block->smem, smem_u32(dst), m, smem_u32(b), c0, c1);
}
// This block's rank in its cluster (emu_launch's consecutive blocks).
inline unsigned cluster_ctarank() {
    const auto &bs = emu::this_cluster->blocks;
    for (unsigned r = 0; r < bs.size(); ++r)
        if (bs[r].get() == emu::this_block) return r;
    abort();
}
inline unsigned char *cluster_smem(unsigned rank) {
    auto &c = *emu::this_cluster;
    if (rank >= c.blocks.size()) { fprintf(stderr, "rank %u of a cluster of %zu\n", rank, c.blocks.size()); abort(); }
    return c.blocks[rank]->smem;
}
// Multicast: the box into every block of the cluster in `mask`, at dst's and bar's offsets.
inline void tma_load_2d_mc(void *dst, const tma_map *m, unsigned long long *b, int c0, int c1, unsigned short mask) {
    for (unsigned r = 0; r < 16; ++r)
        if (mask >> r & 1) tma_box_into(cluster_smem(r), smem_u32(dst), m, smem_u32(b), c0, c1);
}
// An arrival on the barrier at bar's offset in block `rank` of the cluster.
inline void mbar_arrive_cluster(unsigned long long *b, unsigned rank) { arrive_at(cluster_smem(rank) + smem_u32(b)); }
inline void fence_async_shared() {}
// wgmma.fence / commit_group / wait_group are .sync.aligned: every lane of the
// warp reaches one before any goes on (so lane 0's arrivals after a wait
// follow the whole warp's waits, as on the GPU).
inline void warp_sync() {
    static std::unordered_map<unsigned, emu::meet> warps;
    std::unique_lock<std::mutex> l(emu::mu);
    emu::meet_at(warps[blockIdx.x * 64 + threadIdx.x / 32], 32, l);
}
// bar.sync ID, N: the first N threads to arrive at barrier ID go on together.
template <int ID, int N> inline void named_bar_sync() {
    static std::unordered_map<unsigned, emu::meet> bars;
    std::unique_lock<std::mutex> l(emu::mu);
    emu::meet_at(bars[blockIdx.x * 16 + ID], N, l);
}
inline void wg_fence() { warp_sync(); }
inline void wg_commit() { warp_sync(); }
template <int N> inline void wg_wait() { warp_sync(); }
inline unsigned long long wg_desc(const float *tile) {
    const unsigned addr = smem_u32(tile);
    return (unsigned long long)((addr >> 4) & 0x3FFF) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
inline float tf32_in(float x) { return __uint_as_float(__float_as_uint(x) & 0xFFFFE000u); } // what the tensor cores read
inline float smem_at(unsigned off) { float v; memcpy(&v, emu::this_block->smem + off, 4); return v; }
inline float tf32_smem_at(unsigned off) { return tf32_in(smem_at(off)); }
// fp16 (f16x2 registers, shared-memory halves) as the tensor cores take it:
// cvt.rn.f16x2.f32 rounds each float to nearest even (GCC's _Float16 does
// the same), lo in the low half.
inline unsigned short f16_bits(float x) {
    const _Float16 h = (_Float16)x;
    unsigned short u;
    memcpy(&u, &h, 2);
    return u;
}
inline float f16_value(unsigned short u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}
inline unsigned pack_f16x2(float lo, float hi) { return f16_bits(lo) | (unsigned)f16_bits(hi) << 16; }
inline float from_f16(unsigned short x) { return f16_value(x); }
inline float smem_f16_at(unsigned off) {
    unsigned short u;
    memcpy(&u, emu::this_block->smem + off, 2);
    return f16_value(u);
}
// m64nNkK, both operands K-major in the 128-byte swizzle (PTX ISA,
// "Asynchronous Warpgroup Level Matrix Shared Memory Layout": a row is 128
// bytes, its 16-byte chunk c at c ^ (row % 8); one instruction reads 32 bytes
// of each row from the descriptor's start: 8 TF32 k or 16 fp16 k): this
// thread's N/2 accumulators, each the float sum of K exact products of the
// values `read` gives for an element's offset, as the tensor cores see them.
template <int N, unsigned K, float (*read)(unsigned)>
inline void wgmma_ss(float *d, unsigned long long a, unsigned long long b) {
    for (unsigned long long x : {a, b})
        if ((x >> 16 & 0x3FFF) != 1 || (x >> 32 & 0x3FFF) != 64 || (x >> 62) != 1) { fprintf(stderr, "bad desc\n"); abort(); }
    const unsigned sa = (unsigned)(a & 0x3FFF) << 4, sb = (unsigned)(b & 0x3FFF) << 4, elem = 32 / K;
    const unsigned tid = threadIdx.x % 128, q = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    for (int j = 0; j < N / 8; ++j)
        for (int e = 0; e < 2; ++e)
            for (int x = 0; x < 2; ++x) {
                const unsigned m = 16 * q + g + 8 * e, n = 8 * j + 2 * t + x;
                float s = 0.f;
                for (unsigned kk = 0; kk < K; ++kk)
                    s += read(swz(sa + m * 128 + kk * elem)) * read(swz(sb + n * 128 + kk * elem));
                d[4 * j + 2 * e + x] += s;
            }
}
inline void wgmma_n128_f16_ss(float (&d)[64], unsigned long long a, unsigned long long b) { wgmma_ss<128, 16, smem_f16_at>(d, a, b); }
inline void wgmma_n256_f16_ss(float (&d)[128], unsigned long long a, unsigned long long b) { wgmma_ss<256, 16, smem_f16_at>(d, a, b); }
inline void wgmma_n32_f16_ss(float (&d)[16], unsigned long long a, unsigned long long b) { wgmma_ss<32, 16, smem_f16_at>(d, a, b); }
inline void wgmma_n32_tf32_ss(float (&d)[16], unsigned long long a, unsigned long long b) { wgmma_ss<32, 8, tf32_smem_at>(d, a, b); }
inline void wgmma_n64_tf32_ss(float (&d)[32], unsigned long long a, unsigned long long b) { wgmma_ss<64, 8, tf32_smem_at>(d, a, b); }
inline void wgmma_n128_tf32_ss(float (&d)[64], unsigned long long a, unsigned long long b) { wgmma_ss<128, 8, tf32_smem_at>(d, a, b); }
inline void wgmma_n256_tf32_ss(float (&d)[128], unsigned long long a, unsigned long long b) { wgmma_ss<256, 8, tf32_smem_at>(d, a, b); }
} // namespace tc

// __ballot_sync and __shfl_xor_sync, for whole warps: each lane leaves its
// value in the warp's slots, the warp meets, each reads, and the warp meets
// again before the slots are used once more.
inline std::vector<unsigned> emu_warp_values(unsigned mask, unsigned v) {
    if (mask != 0xffffffffu) { fprintf(stderr, "a warp-wide op of part of a warp\n"); abort(); }
    static std::unordered_map<unsigned, std::vector<unsigned>> slots;
    const unsigned key = blockIdx.x * 64 + threadIdx.x / 32;
    {
        std::lock_guard<std::mutex> l(emu::mu);
        auto &x = slots[key];
        x.resize(32);
        x[threadIdx.x % 32] = v;
    }
    tc::warp_sync();
    std::vector<unsigned> all;
    {
        std::lock_guard<std::mutex> l(emu::mu);
        all = slots[key];
    }
    tc::warp_sync();
    return all;
}
inline unsigned __ballot_sync(unsigned mask, bool pred) {
    const auto all = emu_warp_values(mask, pred);
    unsigned bits = 0;
    for (unsigned i = 0; i < 32; ++i) bits |= all[i] ? 1u << i : 0u;
    return bits;
}
inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
    return __uint_as_float(emu_warp_values(mask, __float_as_uint(v))[(threadIdx.x % 32) ^ (unsigned)lane_mask]);
}
inline int __shfl_sync(unsigned mask, int v, int src_lane) {
    return (int)emu_warp_values(mask, (unsigned)v)[(unsigned)src_lane % 32];
}
inline float __shfl_sync(unsigned mask, float v, int src_lane) {
    return __uint_as_float(emu_warp_values(mask, __float_as_uint(v))[(unsigned)src_lane % 32]);
}

namespace tc {
// m64nNk8 TF32 or (F16) m64nNk16 fp16 with A from registers: warp q's rows
// 16q..16q+15 of A as mma.sync's A fragment, gathered from the warp's lanes:
// TF32 (m16n8k8) a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4), one k a
// word; fp16 (m16n8k16) f16x2 words a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g,
// 2t+8..), a3 (g+8, 2t+8..), the lower k in the low half. B K-major through
// its descriptor.
template <int N, bool F16> inline void wgmma_rs(float *d, const unsigned (&a)[4], unsigned long long b) {
    if ((b >> 16 & 0x3FFF) != 1 || (b >> 32 & 0x3FFF) != 64 || (b >> 62) != 1) {
        fprintf(stderr, "bad desc\n");
        abort();
    }
    std::vector<unsigned> f[4];
    for (int r = 0; r < 4; ++r) f[r] = emu_warp_values(0xffffffffu, a[r]);
    const unsigned sb = (unsigned)(b & 0x3FFF) << 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    constexpr unsigned K = F16 ? 16 : 8, HALF_K = K / 2, PER_WORD = F16 ? 2 : 1;
    for (int j = 0; j < N / 8; ++j)
        for (int e = 0; e < 2; ++e)
            for (int x = 0; x < 2; ++x) {
                const unsigned m = g + 8 * e, n = 8 * j + 2 * t + x;
                float s = 0.f;
                for (unsigned kk = 0; kk < K; ++kk) {
                    const unsigned word = f[m / 8 + 2 * (kk / HALF_K)][(m % 8) * 4 + (kk % HALF_K) / PER_WORD];
                    const unsigned at = swz(sb + n * 128 + kk * (4 / PER_WORD));
                    s += F16 ? f16_value((unsigned short)(word >> 16 * (kk % 2))) * smem_f16_at(at)
                             : tf32_in(__uint_as_float(word)) * tf32_smem_at(at);
                }
                d[4 * j + 2 * e + x] += s;
            }
}
inline void wgmma_n64_tf32(float (&d)[32], const unsigned (&a)[4], unsigned long long b) { wgmma_rs<64, false>(d, a, b); }
inline void wgmma_n128_tf32(float (&d)[64], const unsigned (&a)[4], unsigned long long b) { wgmma_rs<128, false>(d, a, b); }
inline void wgmma_n64_f16(float (&d)[32], const unsigned (&a)[4], unsigned long long b) { wgmma_rs<64, true>(d, a, b); }
} // namespace tc

// bar.sync with a barrier id known at run time: the first n threads at barrier id go on together.
inline void emu_bar_sync(int id, unsigned n) {
    static std::unordered_map<unsigned, emu::meet> bars;
    std::unique_lock<std::mutex> l(emu::mu);
    emu::meet_at(bars[blockIdx.x * 16 + (unsigned)id], n, l);
}
// The attention pass's shared-memory accesses by shared-space address and its
// named barriers (templates/attention_wg*.cu, which leave out theirs under
// TC_EMU): its namespace fw takes them with `using namespace ::emu_pass`.
namespace emu_pass {
inline unsigned char *emu_shared(unsigned a) { return emu::this_block->smem + a; }
inline void sts32(unsigned a, unsigned v) { memcpy(emu_shared(a), &v, 4); }
inline void sts64(unsigned a, uint2 v) { memcpy(emu_shared(a), &v, 8); }
inline void sts128(unsigned a, uint4 v) { memcpy(emu_shared(a), &v, 16); }
inline float4 lds128(unsigned a) {
    float4 v;
    memcpy(&v, emu_shared(a), 16);
    return v;
}
inline float lds32(unsigned a) {
    float v;
    memcpy(&v, emu_shared(a), 4);
    return v;
}
inline void wg_bar(int id) { emu_bar_sync(id, 128); }                // a warpgroup's
inline void block_bar(int id) { emu_bar_sync(id, blockDim.x); }    // the block's
} // namespace emu_pass
// atomicAdd on global memory (the emulation's threads share it), and the
// loads the templates' side work makes (templates/bias_rows.cu).
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline float4 __ldcs(const float4 *p) { return *p; }
inline float __ldcs(const float *p) { return *p; }

namespace emu {
// AddressSanitizer is told of each switch of stacks (its fiber interface).
#if defined(__SANITIZE_ADDRESS__)
extern "C" void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
#else
inline void __sanitizer_start_switch_fiber(void **, const void *, size_t) {}
inline void __sanitizer_finish_switch_fiber(void *, const void **, size_t *) {}
#endif
inline const void *scheduler_stack_bottom = nullptr;
inline size_t scheduler_stack_size = 0;
inline void save_place(fiber &f) {
    f.thread = threadIdx, f.block = blockIdx, f.bs = this_block, f.cs = this_cluster;
}
inline void restore_place(const fiber &f) {
    threadIdx = f.thread, blockIdx = f.block, this_block = f.bs, this_cluster = f.cs;
}
inline void switch_to_scheduler() {
    fiber *self = running;
    save_place(*self);
    void *save = nullptr;
    __sanitizer_start_switch_fiber(&save, scheduler_stack_bottom, scheduler_stack_size);
    swapcontext(&self->ctx, &scheduler_ctx);
    __sanitizer_finish_switch_fiber(save, nullptr, nullptr);
    restore_place(*self);
}
inline void fiber_main() {
    __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack_bottom, &scheduler_stack_size);
    running->body();
    running->finished = true;
    progressed = true;
    __sanitizer_start_switch_fiber(nullptr, scheduler_stack_bottom, scheduler_stack_size); /* this stack is done */
    setcontext(&scheduler_ctx);
}
// At least n fibers, their stacks mapped once and kept for later launches.
inline void make_fibers(size_t n) {
    while (fibers.size() < n) {
        auto f = std::make_unique<fiber>();
        f->stack = mmap(nullptr, FIBER_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (f->stack == MAP_FAILED) { fprintf(stderr, "mmap of a fiber stack failed\n"); abort(); }
        fibers.push_back(std::move(f));
    }
}
// Runs the first n fibers' bodies to their ends: each pass resumes every one
// not finished, in index order on even passes and the other way round on odd
// ones (a thread reading what another has not yet written, with no wait
// between, then meets the poison whichever of the two is first). A pass in
// which none got past a wait or finished, with some left, is a deadlock:
// each waiter is named, and the test aborts.
// f's context made to start at fiber_main on its own stack. getcontext
// returns once here (the context is entered only at fiber_main), so no
// variable of the caller's loop is live across it.
__attribute__((noinline)) inline void start_at_main(fiber *f) {
    f->finished = false;
    f->describe = nullptr;
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = f->stack;
    f->ctx.uc_stack.ss_size = FIBER_STACK;
    f->ctx.uc_link = nullptr;
    makecontext(&f->ctx, fiber_main, 0);
}
inline void run_fibers(size_t n) {
    for (size_t i = 0; i < n; ++i) start_at_main(fibers[i].get());
    for (size_t pass = 0, left = n; left > 0; ++pass) {
        progressed = false;
        for (size_t k = 0; k < n; ++k) {
            fiber &f = *fibers[pass % 2 ? n - 1 - k : k];
            if (f.finished) continue;
            running = &f;
            void *save = nullptr;
            __sanitizer_start_switch_fiber(&save, f.stack, FIBER_STACK);
            swapcontext(&scheduler_ctx, &f.ctx);
            __sanitizer_finish_switch_fiber(save, nullptr, nullptr);
            running = nullptr;
            if (f.finished) --left;
        }
        if (left > 0 && !progressed) {
            for (size_t k = 0; k < n; ++k) {
                fiber &f = *fibers[k];
                if (f.finished || !f.describe) continue;
                restore_place(f);
                fprintf(stderr, "DEADLOCK: block %u thread %u waits %s\n", f.block.x, f.thread.x,
                        f.describe(f.describe_arg).c_str());
            }
            abort();
        }
    }
    for (size_t i = 0; i < n; ++i) fibers[i]->body = nullptr;
}
} // namespace emu

// Runs f (a kernel call) on the blocks of grid (x fastest, then y, then z)
// of block threads, a cluster of `cluster` consecutive blocks at a time (all
// of its threads together, as fibers).
template <class F> void emu_launch(dim3e grid3, unsigned block, F f, unsigned cluster = 1) {
    const unsigned grid = grid3.x * grid3.y * grid3.z;
    if (grid % cluster) { fprintf(stderr, "a grid of %u blocks in clusters of %u\n", grid, cluster); abort(); }
    gridDim = grid3;
    blockDim = {block, 1, 1};
    for (unsigned c0 = 0; c0 < grid; c0 += cluster) {
        emu::bars.clear();
        emu::cluster_state cs;
        for (unsigned r = 0; r < cluster; ++r) {
            auto b = std::make_unique<emu::block_state>();
            if (cluster > 1) b->own = std::make_unique<emu::smem_bytes>();
            b->smem = cluster > 1 ? b->own->b : (unsigned char *)smem4;
            if ((uintptr_t)b->smem % 1024) { fprintf(stderr, "shared memory not 1 KiB aligned\n"); abort(); }
            memset(b->smem, 0xff, EMU_SMEM); // poison: NaN bits
            b->live = block;
            cs.blocks.push_back(std::move(b));
        }
        cs.live = cluster * block;
        const size_t n = (size_t)cluster * block;
        emu::make_fibers(n);
        for (unsigned r = 0; r < cluster; ++r)
            for (unsigned tx = 0; tx < block; ++tx)
                emu::fibers[(size_t)r * block + tx]->body = [=, &cs] {
                    const unsigned nb = c0 + r;
                    blockIdx = {nb % grid3.x, nb / grid3.x % grid3.y, nb / (grid3.x * grid3.y)};
                    threadIdx = {tx, 0, 0};
                    emu::this_block = cs.blocks[r].get();
                    emu::this_cluster = &cs;
                    f();
                    std::lock_guard<std::mutex> l(emu::mu);
                    if (--emu::this_block->live == 0) memset(emu::this_block->smem, 0xff, EMU_SMEM);
                    cs.live--;
                    cs.release_if_all();
                };
        emu::run_fibers(n);
    }
}
template <class F> void emu_launch(unsigned grid, unsigned block, F f, unsigned cluster = 1) {
    emu_launch(dim3e{grid, 1, 1}, block, f, cluster);
}
