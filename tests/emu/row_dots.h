// The attention pass's row dots as the rowdot kernel sums them, for the
// emulation tests of gA's ROWDOT_T epilogue (test_emu_tma.cpp, test_emu_f16.cpp):
// D[b, h, i] = C[b*T+i, head h] . O[b*T+i, head h] over a [M = B*T, 1024] C,
// in tc::store_head_dot's order (32 lanes of a column pair each, a shuffle
// tree by 16, 8, 4, 2, 1).
#pragma once

#include <cstring>

#include "cuda_on_cpu.h"

// How many of the B * 16 * T row dots in D differ in any bit from that order's sums.
inline long long row_dots_unequal(const float *C, const float *O, const float *D, long long M, long long T) {
    constexpr long long N = 1024;
    long long unequal = 0;
    for (long long r = 0; r < M; ++r)
        for (int h = 0; h < 16; ++h) {
            const float *x = &C[r * N + 64 * h], *y = &O[r * N + 64 * h];
            float s[32], next[32];
            for (int l = 0; l < 32; ++l) s[l] = fmaf(x[2 * l], y[2 * l], x[2 * l + 1] * y[2 * l + 1]);
            for (int o = 16; o > 0; o >>= 1) {
                for (int l = 0; l < 32; ++l) next[l] = s[l] + s[l ^ o];
                memcpy(s, next, sizeof s);
            }
            unequal += __float_as_uint(s[0]) != __float_as_uint(D[((r / T) * 16 + h) * T + r % T]);
        }
    return unequal;
}
