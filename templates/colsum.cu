// Column sums of x [rows, ncols] (bias gradients) in two deterministic steps:
// grid (ceil(ncols/256), {{COL_SPLIT}}) partial sums over row slices, then one
// pass over those partials of each column.
extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_colsum_partial(const float *__restrict__ x, float *__restrict__ partials, long long rows, int ncols) {
    tc::pdl_enter();
    const int c = blockIdx.x * 256 + threadIdx.x;
    if (c >= ncols) return;
    const long long per = (rows + {{COL_SPLIT}} - 1) / {{COL_SPLIT}}, r0 = blockIdx.y * per;
    const long long r1 = r0 + per < rows ? r0 + per : rows;
    float s = 0.f;
    for (long long r = r0; r < r1; ++r) s += x[r * ncols + c];
    partials[(long long)blockIdx.y * ncols + c] = s;
}

extern "C" __global__ void __launch_bounds__(256)
{{PREFIX}}_colsum_final(const float *__restrict__ partials, float *__restrict__ out, int ncols) {
    tc::pdl_enter();
    const int c = blockIdx.x * 256 + threadIdx.x;
    if (c >= ncols) return;
    float s = 0.f;
    for (int p = 0; p < {{COL_SPLIT}}; ++p) s += partials[(long long)p * ncols + c];
    out[c] = s;
}
