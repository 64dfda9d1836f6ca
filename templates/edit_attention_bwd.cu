
// The edit-bias gradients from gS, for one (B, T). Layouts (spec): gS
// [B, 16, T, kLd], masks [B, T], grad_edit_region_bias [16, 1024, 1024]. Every
// sum runs in a fixed order, so the results do not change from run to run.
namespace ea {
constexpr long long kB = {{B}}, kT = {{T}}, kLd = {{GS_LD}}; // gS rows: kLd elements apart
constexpr int kHeads = 16, kPos = 1024;
// kInPlace (tile gs_direct=1, B = 1): gS is grad_edit_region_bias itself,
// written there by the attention pass ([16, 1024, 1024], zeros up to its last
// key block's end); the sums over the batch are then gS as it is, and only
// the columns past that are left to write.
constexpr bool kInPlace = {{IN_PLACE}};
constexpr long long kGsRows = kInPlace ? kPos : kT; // gS's rows per (b, h)
static_assert(!kInPlace || (kB == 1 && kLd == kPos), "gS in place is B = 1's, in the output's layout");
// gS's elements: fp32, or (GS_HALF) fp16 times a power of two per (b, h, 64
// keys) whose inverse is in gsinv (templates/attention_wg.cu's gs_exponent),
// or (GS_F16, tile gq_f16=1) fp16 with no scale.
constexpr bool kHalf = {{GS_HALF}}, kF16 = {{GS_F16}};
constexpr int kNJ = (int)((kT + 63) / 64);
typedef tc::gs_elem<kHalf || kF16>::t gs_t;
} // namespace ea

// grad_edit_region_bias[h, i, j] = sum over b of gS (0 outside [:T, :T]), and
// per row the partial sums of gS * m_i*m_j and gS * (m_i != m_j). The output
// is 64 MiB whatever T is; rows and columns past T are only written: rows past
// T here when `rows` is 1024, or, with rows = T (tile zero_early=1), by
// bias_zero_rows earlier. kInPlace: gs is unused (gS is read from the
// output, through its one pointer).
//
// A row is kCT threads (whole warps), each four adjacent columns as one
// 16-byte store, and a block kRows rows, so that small T still fills its
// threads; each thread then sums its columns over the batch in order, eight
// batch rows' loads in flight at a time (tc::bias_column_sums,
// templates/bias_rows.cu): the kernel is a stream of gS, bound by how many
// loads are in flight. Grid (ceil(rows / kRows), 16).
namespace ea {
constexpr int kCT = tc::bias_row_threads(kT), kRows = 256 / kCT, kUnroll = 8;
static_assert(kCT <= 256 && kCT % 32 == 0, "a row is whole warps of a block");
} // namespace ea
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_bias_grads(const ea::gs_t *__restrict__ gs, const float *__restrict__ edit_region_mask,
                      float *__restrict__ grad_edit_region_bias, float *__restrict__ partials, int rows,
                      const float *__restrict__ gsinv) {
    tc::pdl_enter();
    using namespace ea;
    __shared__ float warp_sums[2][8];
    const int ct = threadIdx.x % kCT, rr = threadIdx.x / kCT, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long h = blockIdx.y, i = (long long)blockIdx.x * kRows + rr;
    const bool mine = rr < kRows && i < rows; // threads past kRows * kCT only take part in the barrier
    const int j = 4 * ct;
    float s[4] = {0.f, 0.f, 0.f, 0.f}, within = 0.f, cross = 0.f;
    if (mine && i < kT && j < kT) {
        const gs_t *src = kInPlace ? reinterpret_cast<const gs_t *>(grad_edit_region_bias) : gs;
        tc::bias_column_sums<kB, kT, kLd, kGsRows, kHalf, kUnroll>(src + (h * kGsRows + i) * kLd + j,
                                                                          edit_region_mask, gsinv, h, i, j, s, within,
                                                                          cross);
    }
    if (mine) { // the whole row: the sums, then zeros up to 1024 columns
        float *out = grad_edit_region_bias + (h * kPos + i) * kPos;
        // In place, gS stands where it is, and the pass wrote zeros up to its
        // last key block's end: only the columns past that, which gQ (beside
        // this kernel) never reads.
        if (!kInPlace || i >= kT || j >= 64 * kNJ)
            *reinterpret_cast<float4 *>(out + j) = make_float4(s[0], s[1], s[2], s[3]);
        for (int c = j + 4 * kCT; c < kPos; c += 4 * kCT)
            *reinterpret_cast<float4 *>(out + c) = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    // The row's partials: its warps' sums, in order (bias_final reads rows < T only).
    within = tc::warp_tree_sum(within);
    cross = tc::warp_tree_sum(cross);
    if (lane == 0) warp_sums[0][warp] = within, warp_sums[1][warp] = cross;
    __syncthreads();
    if (mine && ct == 0 && i < kT) {
        float w = 0.f, c = 0.f;
        for (int x = rr * kCT / 32; x < (rr + 1) * kCT / 32; ++x) w += warp_sums[0][x], c += warp_sums[1][x];
        partials[2 * (h * kPos + i)] = w;
        partials[2 * (h * kPos + i) + 1] = c;
    }
}

// Rows T..1023 of every head of grad_edit_region_bias, zeros whatever gS is:
// written at the start of the plan on a side lane, where the products leave
// DRAM bandwidth unused, instead of after the attention pass. Grid (float4s
// of a head's rows past T / 256, 16).
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_bias_zero_rows(float *__restrict__ grad_edit_region_bias) {
    tc::pdl_enter();
    using namespace ea;
    const long long q = (long long)blockIdx.x * 256 + threadIdx.x;
    if (q >= (kPos - kT) * kPos / 4) return;
    float *head = grad_edit_region_bias + ((long long)blockIdx.y * kPos + kT) * kPos;
    reinterpret_cast<float4 *>(head)[q] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// (Tile att_wc=1: B = 1, gS in place, its within/cross sums made by the
// attention pass, no bias_grads launch.) The columns of rows < T past the
// pass's last key block, zeros; bias_zero_rows writes the rows past T. Grid
// (float4s of a head's such columns / 256, 16).
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_bias_zero_cols(float *__restrict__ grad_edit_region_bias) {
    tc::pdl_enter();
    using namespace ea;
    constexpr long long kQ = (kPos - 64 * kNJ) / 4; // float4s of a row
    if constexpr (kQ > 0) {
        const long long q = (long long)blockIdx.x * 256 + threadIdx.x;
        if (q >= kT * kQ) return;
        float *row = grad_edit_region_bias + ((long long)blockIdx.y * kPos + q / kQ) * kPos + 64 * kNJ;
        reinterpret_cast<float4 *>(row)[q % kQ] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

// One block per head: the partials of bias_grads, summed in a fixed order.
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_bias_final(const float *__restrict__ partials, float *__restrict__ grad_within_edit_bias,
                      float *__restrict__ grad_cross_edit_bias) {
    tc::pdl_enter();
    using namespace ea;
    __shared__ float scratch[8];
    const int h = blockIdx.x;
    float w = 0.f, c = 0.f;
    for (int p = threadIdx.x; p < kT; p += 256) { // one partial per row i < T
        w += partials[2 * ((long long)h * kPos + p)];
        c += partials[2 * ((long long)h * kPos + p) + 1];
    }
    w = tc::block_sum(w, scratch);
    c = tc::block_sum(c, scratch);
    if (threadIdx.x == 0) {
        grad_within_edit_bias[h] = w;
        grad_cross_edit_bias[h] = c;
    }
}
