// Masked softmax with attention dropout, backward: one kernel per shape.
// Rendered by lua/softmax_dropout.lua; every hole in double braces is a compile-time
// constant, so index arithmetic folds and loops unroll for this T.
//
//   grad_output, p_attn, grad_scores : fp32 [B, H, T, T]
//   mask                             : u8   [B, 1, T, T]  (shared by heads)
//   dropout_mask                     : u8   [B, H, T, T]  (read only when kDropout)
//
// Per row (b, h, i): g = grad_output * dropout_mask * keep_scale (or
// grad_output), s = sum_j p_attn*g over all T columns, out = mask ? p*(g-s) : 0.
// kTpr threads share a row; a block holds kRowsPerBlock rows. Rows are taken
// with the head index fastest (kHeadFastest), so the heads of one (b, i) run
// side by side and read their shared mask row from L1/L2 once.

typedef unsigned char u8;
typedef long long i64;

namespace {
constexpr i64 kB = {{B}}, kH = {{H}}, kT = {{T}};
constexpr int kVec = {{VEC}};              // elements per load: 4, 2 or 1 (T % kVec == 0)
constexpr int kTpr = {{THREADS_PER_ROW}};  // threads per row, a power of two
constexpr int kBlock = {{BLOCK}};          // threads per block
constexpr int kRowsPerBlock = kBlock / kTpr;
constexpr int kDropout = {{DROPOUT}};
constexpr int kInRegisters = {{IN_REGISTERS}}; // 1: the row stays in registers; 0: two passes
constexpr int kHeadFastest = {{HEAD_FASTEST}};
constexpr int kSplit = {{SPLIT}};          // 1: T % 4 != 0, rows split into scalars | 16-byte body | scalars
constexpr int kUnroll = {{UNROLL}};        // two-pass mode: vectors in flight per thread
constexpr int kStreaming = {{STREAMING}};  // 1: .cs loads and stores (evict first); 0: default caching
constexpr i64 kRows = kB * kH * kT;
constexpr int kNVec = (int)(kT / kVec);    // vectors per row (split rows: at most this many)
constexpr int kPerThread = (kNVec + kTpr - 1) / kTpr;
constexpr int kWarpsPerRow = kTpr > 32 ? kTpr / 32 : 1;
static_assert(kT % kVec == 0 || (kSplit && kVec == 4), "vector width must divide T");
static_assert((kTpr & (kTpr - 1)) == 0 && kTpr <= kBlock && kBlock % kTpr == 0, "bad tiles");

// The big tensors are read once and written once: the default cache policy
// (kStreaming 0, the heuristic's choice) or streaming (.cs, evict first).
template <typename T> __device__ __forceinline__ T load_big(const T *p) { return kStreaming ? __ldcs(p) : *p; }
template <typename T> __device__ __forceinline__ void store_big(T *p, T v) {
    if (kStreaming) __stcs(p, v); else *p = v;
}

// Loads of kVec floats.
template <int V> struct Vec;
template <> struct Vec<4> {
    float v[4];
    __device__ __forceinline__ void load(const float *p) {
        float4 t = load_big(reinterpret_cast<const float4 *>(p));
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    }
    __device__ __forceinline__ void store(float *p) const {
        store_big(reinterpret_cast<float4 *>(p), make_float4(v[0], v[1], v[2], v[3]));
    }
};
template <> struct Vec<2> {
    float v[2];
    __device__ __forceinline__ void load(const float *p) {
        float2 t = load_big(reinterpret_cast<const float2 *>(p));
        v[0] = t.x; v[1] = t.y;
    }
    __device__ __forceinline__ void store(float *p) const {
        store_big(reinterpret_cast<float2 *>(p), make_float2(v[0], v[1]));
    }
};
template <> struct Vec<1> {
    float v[1];
    __device__ __forceinline__ void load(const float *p) { v[0] = load_big(p); }
    __device__ __forceinline__ void store(float *p) const { store_big(p, v[0]); }
};

// kVec mask bytes as one word; the shared mask is cached (other heads reuse
// it), the dropout mask is streamed.
__device__ __forceinline__ unsigned load_mask(const u8 *p) {
    if (kVec == 4) return __ldg(reinterpret_cast<const unsigned *>(p));
    if (kVec == 2) return __ldg(reinterpret_cast<const unsigned short *>(p));
    return __ldg(p);
}
__device__ __forceinline__ unsigned load_dropout(const u8 *p) {
    if (kVec == 4) return load_big(reinterpret_cast<const unsigned *>(p));
    if (kVec == 2) return load_big(reinterpret_cast<const unsigned short *>(p));
    return load_big(p);
}
__device__ __forceinline__ bool byte_set(unsigned w, int e) { return (w >> (8 * e)) & 0xffu; }

// Sum over the kTpr threads of a row; every thread of the block must call it.
__device__ __forceinline__ float row_sum(float s, float *scratch) {
    constexpr int width = kTpr < 32 ? kTpr : 32;
#pragma unroll
    for (int o = width / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (kTpr > 32) {
        const int warp = threadIdx.x / 32, first = warp - warp % kWarpsPerRow;
        if (threadIdx.x % 32 == 0) scratch[warp] = s;
        __syncthreads();
        s = 0.f;
#pragma unroll
        for (int w = 0; w < kWarpsPerRow; ++w) s += scratch[first + w];
    }
    return s;
}
} // namespace

extern "C" __global__ void __launch_bounds__(kBlock)
{{KERNEL_NAME}}(const float *__restrict__ grad_output, const float *__restrict__ p_attn,
                const u8 *__restrict__ mask, const u8 *__restrict__ dropout_mask,
                float keep_scale, float *__restrict__ grad_scores) {
    __shared__ float scratch[kBlock / 32 > 0 ? kBlock / 32 : 1];
    const int lane = threadIdx.x % kTpr;
    const i64 L = (i64)blockIdx.x * kRowsPerBlock + threadIdx.x / kTpr;
    const bool live = L < kRows;
    i64 row, mask_row;  // row of [B*H*T, T]; row of the [B*T, T] mask
    if (kHeadFastest) { // L = (b*T + i)*H + h
        const i64 h = L % kH, bi = L / kH, b = bi / kT, i = bi % kT;
        row = (b * kH + h) * kT + i;
        mask_row = bi;
    } else {            // L = (b*H + h)*T + i
        row = L;
        mask_row = (L / (kH * kT)) * kT + L % kT;
    }
    const float *go = grad_output + row * kT, *pa = p_attn + row * kT;
    const u8 *dm = dropout_mask + row * kT, *mk = mask + mask_row * kT;
    float *out = grad_scores + row * kT;
    (void)keep_scale; (void)dm;

#if {{SPLIT}}
    // T % 4 != 0: a row starts 16-byte aligned only every fourth row. Up to 3
    // scalars before the first aligned element (`head`), 16-byte vectors, up
    // to 3 scalars after; the dropout mask shares the row's offsets, so its
    // 4-byte words line up with the vectors; the shared mask row does not,
    // and is read a byte at a time (from L1: neighbouring heads reuse it).
    const int head = (int)((4 - (row * kT) % 4) % 4);
    const int nbody = (int)((kT - head) / 4), tail0 = head + 4 * nbody, ntail = (int)kT - tail0;
    Vec<4> g[kPerThread], p[kPerThread];
    unsigned m[kPerThread];
    float gh = 0.f, ph = 0.f, gt = 0.f, pt = 0.f;
    bool mh = false, mt = false;
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
        const int v = k * kTpr + lane;
        const bool in = live && ((k + 1) * kTpr <= kNVec - 1 || v < nbody);
        m[k] = 0;
#pragma unroll
        for (int e = 0; e < 4; ++e) g[k].v[e] = p[k].v[e] = 0.f;
        if (in) {
            const i64 o = head + (i64)v * 4;
            g[k].load(go + o);
            p[k].load(pa + o);
#pragma unroll
            for (int e = 0; e < 4; ++e) m[k] |= (unsigned)(__ldg(mk + o + e) != 0) << (8 * e);
            if (kDropout) {
                const unsigned d = load_big(reinterpret_cast<const unsigned *>(dm + o));
#pragma unroll
                for (int e = 0; e < 4; ++e) g[k].v[e] = byte_set(d, e) ? g[k].v[e] * keep_scale : 0.f;
            }
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) s = fmaf(p[k].v[e], g[k].v[e], s);
    }
    if (live && lane < head) {
        gh = load_big(go + lane); ph = load_big(pa + lane); mh = __ldg(mk + lane) != 0;
        if (kDropout) gh = load_big(dm + lane) ? gh * keep_scale : 0.f;
    }
    if (live && lane < ntail) {
        const int j = tail0 + lane;
        gt = load_big(go + j); pt = load_big(pa + j); mt = __ldg(mk + j) != 0;
        if (kDropout) gt = load_big(dm + j) ? gt * keep_scale : 0.f;
    }
    s = fmaf(ph, gh, s);
    s = fmaf(pt, gt, s);
    s = row_sum(s, scratch);
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
        const int v = k * kTpr + lane;
        if (live && ((k + 1) * kTpr <= kNVec - 1 || v < nbody)) {
            Vec<4> o;
#pragma unroll
            for (int e = 0; e < 4; ++e) o.v[e] = byte_set(m[k], e) ? p[k].v[e] * (g[k].v[e] - s) : 0.f;
            o.store(out + head + (i64)v * 4);
        }
    }
    if (live && lane < head) store_big(out + lane, mh ? ph * (gh - s) : 0.f);
    if (live && lane < ntail) store_big(out + tail0 + lane, mt ? pt * (gt - s) : 0.f);
#elif {{IN_REGISTERS}}
    Vec<kVec> g[kPerThread], p[kPerThread];
    unsigned m[kPerThread];
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
        const int v = k * kTpr + lane;
        const bool in = live && ((k + 1) * kTpr <= kNVec || v < kNVec);
        m[k] = 0;
#pragma unroll
        for (int e = 0; e < kVec; ++e) g[k].v[e] = p[k].v[e] = 0.f;
        if (in) {
            g[k].load(go + (i64)v * kVec);
            p[k].load(pa + (i64)v * kVec);
            m[k] = load_mask(mk + (i64)v * kVec);
            if (kDropout) {
                const unsigned d = load_dropout(dm + (i64)v * kVec);
#pragma unroll
                for (int e = 0; e < kVec; ++e) g[k].v[e] = byte_set(d, e) ? g[k].v[e] * keep_scale : 0.f;
            }
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) s = fmaf(p[k].v[e], g[k].v[e], s);
    }
    s = row_sum(s, scratch);
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
        const int v = k * kTpr + lane;
        if (live && ((k + 1) * kTpr <= kNVec || v < kNVec)) {
            Vec<kVec> o;
#pragma unroll
            for (int e = 0; e < kVec; ++e) o.v[e] = byte_set(m[k], e) ? p[k].v[e] * (g[k].v[e] - s) : 0.f;
            o.store(out + (i64)v * kVec);
        }
    }
#else
    // Rows too long for registers: one pass for s, a second that re-reads the
    // row (from L2 while it is still there) and writes.
    float s = 0.f;
    if (live) {
#pragma unroll kUnroll
        for (int v = lane; v < kNVec; v += kTpr) {
            Vec<kVec> g, p;
            g.load(go + (i64)v * kVec);
            p.load(pa + (i64)v * kVec);
            if (kDropout) {
                const unsigned d = load_dropout(dm + (i64)v * kVec);
#pragma unroll
                for (int e = 0; e < kVec; ++e) g.v[e] = byte_set(d, e) ? g.v[e] * keep_scale : 0.f;
            }
#pragma unroll
            for (int e = 0; e < kVec; ++e) s = fmaf(p.v[e], g.v[e], s);
        }
    }
    s = row_sum(s, scratch);
    if (live) {
#pragma unroll kUnroll
        for (int v = lane; v < kNVec; v += kTpr) {
            Vec<kVec> g, p, o;
            g.load(go + (i64)v * kVec);
            p.load(pa + (i64)v * kVec);
            const unsigned m = load_mask(mk + (i64)v * kVec);
            if (kDropout) {
                const unsigned d = load_dropout(dm + (i64)v * kVec);
#pragma unroll
                for (int e = 0; e < kVec; ++e) g.v[e] = byte_set(d, e) ? g.v[e] * keep_scale : 0.f;
            }
#pragma unroll
            for (int e = 0; e < kVec; ++e) o.v[e] = byte_set(m, e) ? p.v[e] * (g.v[e] - s) : 0.f;
            o.store(out + (i64)v * kVec);
        }
    }
#endif
}
