// The attention pass on wgmma's kernel (attention_wg.cu), tile att_kb={{KB}}:
//   1  a block a key block, its rows split between the warpgroups (rows_block,
//      attention_wg_rows.cu), grid (NJ, B*16);
//   2  a block two key blocks, one a warpgroup (keys_block, attention_wg_keys.cu),
//      of up to ITEMS (b, h) one after another, grid (ceil(ceil(NJ / 2) B*16 /
//      ITEMS)): where NJ is odd, each head's last pair has a warpgroup that
//      only stages;
//   3  both in one launch, grid (blocks, 1): for each of the first PAIR_HEADS
//      (b, h) its pairs of key blocks, then (NJ odd) its last key block in a
//      rows block of its own; then every key block of the other heads in rows
//      blocks, which are shorter and fill the last wave (lua/edit_attention_pass_blocks.lua
//      chooses PAIR_HEADS). A head's last key block comes right after its
//      pairs, which keeps the pass as fast as att_kb=2 where all heads' last
//      blocks at the end of the launch are not (docs/experiments.md).
extern "C" __global__ void __launch_bounds__(256, 1)
{{PREFIX}}_attention_wg(FW_PASS_PARAMS) {
    tc::pdl_enter();
#if {{KB}} == 1
    fw::rows_block(FW_PASS_ARGS, blockIdx.x, blockIdx.y);
#elif {{KB}} == 2
    fw::keys_block(FW_PASS_ARGS, blockIdx.x, gridDim.x);
#else
    constexpr int PAIRS = fw::NJ / 2, PER = PAIRS + fw::NJ % 2, PAIR_HEADS = {{PAIR_HEADS}};
    const int x = blockIdx.x;
    if (x < PAIR_HEADS * PER) {
        const int r = x % PER;
        if (r < PAIRS) fw::keys_block(FW_PASS_ARGS, r + x / PER * fw::keys_org::KX, (int)fw::keys_org::NI);
        else fw::rows_block(FW_PASS_ARGS, fw::NJ - 1, x / PER);
    } else {
        const int y = x - PAIR_HEADS * PER;
        fw::rows_block(FW_PASS_ARGS, y % fw::NJ, PAIR_HEADS + y / fw::NJ);
    }
#endif
}
