// {{NAME}}: two TMA-fed products in one launch (tile pair=1): the blocks of the first,
// {{NAME1}} ({{COMMENT1}}), then those of the second, {{NAME2}} ({{COMMENT2}}).
// Each alone leaves SMs idle on a small B*T (a wave or less of tiles), and the
// two, launched one after the other, ran one after the other; one grid lets
// the second's blocks take the SMs the first leaves. The first has the
// longer blocks, so the shorter ones fill the tail.
// Product 1: {{BM1}}x{{BN1}} tiles, {{STAGES1}} stages, K in {{SPLITS1}} slice(s) of {{KSPLIT1}}.
// Product 2: {{BM2}}x{{BN2}} tiles, {{STAGES2}} stages, K in {{SPLITS2}} slice(s) of {{KSPLIT2}}.
// This launch: product 1's slices [{{S01}}, +{{NS1}}) x tile rows [{{Y01}}, +{{NY1}}), product 2's
// slices [{{S02}}, +{{NS2}}) x rows [{{Y02}}, +{{NY2}}) (a part of each, with pair_kv; else all).
// Clusters of {{CLUSTER}} block(s) (pair_dsm=1): a product with CLUSTERn > 1 has its
// K slices added across the cluster of its tile (tc::gemm_tma's CLUSTER), its
// blocks a tile's slices in turn; each product's blocks start on a cluster's
// first, the ones past its count returning at once. A product with REDn has its
// K slices added into its output by float atomics (zeroed before the launch).
extern "C" __global__ void __launch_bounds__(tc::gemm_tma_threads(128), 1) {{CLUSTER_DIMS}}
{{NAME}}(const __grid_constant__ tc::tma_map map_a1, const __grid_constant__ tc::tma_map map_b1,
         float *__restrict__ C1, float *__restrict__ colsum1, const __grid_constant__ tc::tma_map map_a2,
         const __grid_constant__ tc::tma_map map_b2, float *__restrict__ C2, float *__restrict__ colsum2,
         float alpha) {
    tc::pdl_enter();
    static_assert({{BM1}} == 128 && {{BM2}} == 128, "one block size: a producer and two consumer warpgroups");
    constexpr int GX1 = ({{N1}} + {{BN1}} - 1) / {{BN1}}, GY1 = ({{M1}} + {{BM1}} - 1) / {{BM1}};
    constexpr int GX2 = ({{N2}} + {{BN2}} - 1) / {{BN2}}, GY2 = ({{M2}} + {{BM2}} - 1) / {{BM2}};
    static_assert({{Y01}} + {{NY1}} <= GY1 && {{S01}} + {{NS1}} <= {{SPLITS1}}, "product 1's part");
    static_assert({{Y02}} + {{NY2}} <= GY2 && {{S02}} + {{NS2}} <= {{SPLITS2}}, "product 2's part");
    constexpr int CLUSTER = {{CLUSTER}}, CLUSTER1 = {{CLUSTER1}}, CLUSTER2 = {{CLUSTER2}};
    constexpr bool RED1 = {{RED1}}, RED2 = {{RED2}};
    static_assert((CLUSTER1 == 1 || CLUSTER1 == {{NS1}}) && (CLUSTER2 == 1 || CLUSTER2 == {{NS2}}) &&
                  (CLUSTER1 == 1 || CLUSTER1 == CLUSTER) && (CLUSTER2 == 1 || CLUSTER2 == CLUSTER),
                  "a clustered product's slices are its cluster");
    constexpr int NB1 = GX1 * {{NY1}} * {{NS1}}, NB1_PADDED = (NB1 + CLUSTER - 1) / CLUSTER * CLUSTER;
    constexpr int NB2 = GX2 * {{NY2}} * {{NS2}};
    int id = blockIdx.x;
    if (id < NB1_PADDED) {
        if (id >= NB1) return;
        // Clustered: a tile's slices are consecutive blocks (the slice the rank).
        // tt = id / 1, not id: the same values, and the code NVVM makes of
        // them is the one tests/cubin_text.list holds (id alone moves the
        // clustered pair's schedule; its .text shrinks by 2 KB).
        const int tt = id / 1;
        const int split = {{S01}} + (CLUSTER1 > 1 ? id % {{NS1}} : tt / (GX1 * {{NY1}}));
        const int tile = CLUSTER1 > 1 ? id / {{NS1}} : tt; // bx, by from its tile's index (mod NY1)
        const int bx = tile % GX1, by = {{Y01}} + tile / GX1 % {{NY1}};
        constexpr bool APART = {{SPLITS1}} > 1 && CLUSTER1 == 1 && !RED1; // each K slice's C apart
        float *out = APART ? C1 + (long long)split * {{M1}} * {{N1}} : C1;
        tc::gemm_tma<{{M1}}, {{N1}}, {{K1}}, {{TA1}}, {{BM1}}, {{BN1}}, {{STAGES1}}, {{RAW1}}, {{KSPLIT1}}, {{COLSUM1}},
                     {{A_TRUNC1}}, false, false, CLUSTER1, (CLUSTER > 1), RED1, 0, tc::tma_operands::{{OPERANDS1}}>(
            &map_a1, &map_b1, out, APART ? {{N1}} : {{LDC1}}, APART ? 1.f : alpha, split, colsum1, bx, by);
    } else {
        id -= NB1_PADDED;
        if (CLUSTER > 1 && id >= NB2) return;
        const int tt = id / 1; // as above
        const int split = {{S02}} + (CLUSTER2 > 1 ? id % {{NS2}} : tt / (GX2 * {{NY2}}));
        const int tile = CLUSTER2 > 1 ? id / {{NS2}} : tt; // bx, by from its tile's index (mod NY2)
        const int bx = tile % GX2, by = {{Y02}} + tile / GX2 % {{NY2}};
        constexpr bool APART = {{SPLITS2}} > 1 && CLUSTER2 == 1 && !RED2; // each K slice's C apart
        float *out = APART ? C2 + (long long)split * {{M2}} * {{N2}} : C2;
        tc::gemm_tma<{{M2}}, {{N2}}, {{K2}}, {{TA2}}, {{BM2}}, {{BN2}}, {{STAGES2}}, {{RAW2}}, {{KSPLIT2}}, {{COLSUM2}},
                     {{A_TRUNC2}}, false, false, CLUSTER2, (CLUSTER > 1), RED2, 0, tc::tma_operands::{{OPERANDS2}}>(
            &map_a2, &map_b2, out, APART ? {{N2}} : {{LDC2}}, APART ? 1.f : alpha, split, colsum2, bx, by);
    }
}
