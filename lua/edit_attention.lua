-- Problem 2, region-aware self-attention with edit bias, backward: the tile
-- choices of one (B, T) (the heuristic, what each key means and may be, the
-- candidates explore tries). The kernels and their order for a choice:
-- lua/edit_attention_plan.lua; the projection products' tiles:
-- lua/projection_tiles.lua; device limits: lua/edit_attention_limits.lua.
local render = require "render"
local limits = require "edit_attention_limits"
local plans = require "edit_attention_plan"

local M = {}

local H, POS, COL_SPLIT, SMS = limits.H, limits.POS, limits.COL_SPLIT, limits.SMS
local ceil_div, smem_limit, att_on_wg = limits.ceil_div, limits.smem_limit, limits.att_on_wg
local attention_smem, attention_wg_smem = limits.attention_smem, limits.attention_wg_smem
local wgmma_arch, pdl_arch = limits.wgmma_arch, limits.pdl_arch

function M.heuristic(shape, arch)
  -- 64 keys per attention block, P and Pd through a ring of two shared-memory
  -- buffers: measured on the 16 public workloads (2026-12-03, docs/
  -- benchmarks.md), bj=64 within 2% of the best everywhere, the ring 2-10%
  -- faster where T % 4 == 0 and, with rows copied from the 16-byte boundary
  -- before them, 0-5% faster at odd T. pdl=1 (third session): faster on all
  -- 16, 2-10% on the small ones; pdl=2 and a_smem=1 were not; gQ on wgmma
  -- (wg_gq) is 5-19% faster alone on 12 of 16 (docs/benchmarks.md).
  local t = { precision = shape.precision, col_split = COL_SPLIT, fused = 1, bj = 64, gs_store = 1,
              wg = (shape.precision == 0 and wgmma_arch(arch)) and 1 or 0, kv_split = 1, p_stages = 2,
              pdl = pdl_arch(arch) and 1 or 0, a_smem = 0 }
  t.wg_gq = t.wg -- gQ on wgmma wherever the products may be
  t.wg_att = t.wg -- the attention pass too
  t.tma = t.wg -- and the projection products fed by the TMA
  -- Their B transposed with 16-byte loads and stores (tr_vec=1): each
  -- transpose 2-35% faster alone; the whole backward 1.2% and 0.4% faster in
  -- geomean in two A/B runs, slower in both at B=1,T=373 and B=32,T=773 (1-4%)
  -- (docs/benchmarks.md, 2026-12-03, seventh session).
  t.tr_vec = 1
  -- P and Pd into the wgmma attention pass by the TMA where T % 4 ~= 0: there
  -- its 16-byte copies start before each row (p_shift) and the TMA was 0.8-2.4%
  -- faster on 6 of the 7 such public workloads (B=1,T=373 within the noise);
  -- where T % 4 == 0 it was slower on all 9, 1.1-4.0% on six (docs/benchmarks.md,
  -- 2026-12-03, sixth session).
  t.att_tma = (t.wg == 1 and shape.seq_len % 4 ~= 0) and 1 or 0
  t.zero_early = 1 -- grad_edit_region_bias's rows past T written at the start
  t.lane_pri = 0
  -- lane0=1: lane 0 on the caller's stream, so that its first kernel waits
  -- for no fork event. Measured (2026-12-04, A/B of the 16): where B*T <= 1152
  -- -5.8% to +5.7% (faster at B=4,T=288, B=2,T=449, B=2,T=352; slower at
  -- B=1,T=373, B=1,T=853, B=1,T=1024), and lane 0's first kernel still
  -- started 5-12 us after the side lanes' first; 1-7% slower on 9 of the other
  -- 10. So lane 0 keeps its stream of the greatest priority.
  t.lane0 = 0
  t.gs_pad = 4 -- gS rows padded to a multiple of this many floats
  -- The bias gradients' column sums made inside the TA products that read
  -- the same matrix (grad_qkv_weight's A is grad_qkv, grad_out_weight's is
  -- grad_output), where they are TMA-fed: no colsum_partial pass over it.
  -- 1: only where the product's K is split (or, pair > 0, it shares a
  -- launch). Measured (2026-12-04, A/B of the 16): 1.4-3.7% faster on three of the five with split products, 0.6-2.2%
  -- slower on most of the others, whose products leave SMs idle for the pass
  -- beside them (docs/benchmarks.md).
  t.gemm_bias = 1
  -- With att_tma=1: P and Pd asked for by another thread than the rows (0: the same).
  t.p_issuer = 0
  -- Two key blocks a block of the attention pass (att_kb=2, templates/
  -- attention_wg_keys.cu) where its blocks still fill the GPU twice over
  -- (B * 16 * ceil(NJ / 2) >= 256) with at least four key blocks a head, or
  -- where T >= 800. Measured (2026-12-04, A/B of the 16 in two runs, whole
  -- calls): 1.8-3.9% faster on the 8 workloads this picks, level at B=8,T=448,
  -- and slower on all the others (B=1,T=373 +20%, its pass on 48 SMs;
  -- B=2,T=768 +3%, 1.45 waves; B=16,T=176, NJ = 3, +4%) (docs/benchmarks.md).
  -- att_kb=3 (both kinds of block in one launch) is not a default: it won
  -- only at B=32,T=293 (-2.3%, a tuning entry), and was level or slower at
  -- the other odd NJ (2026-12-05, docs/benchmarks.md).
  local nj = ceil_div(shape.seq_len, 64)
  t.att_kb = ((nj >= 4 and shape.batch * 16 * ceil_div(nj, 2) >= 256) or shape.seq_len >= 800) and 2 or 1
  -- gQ's tiles (wg_gq): 64 rows of gS a block where 128 would give fewer
  -- blocks than two an SM (small B*T: a block then waits alone on its loads).
  t.gq_bn = ceil_div(shape.seq_len, 128) * shape.batch * H < 2 * SMS and 64 or 128
  -- gQ's k tiles in shared memory (wg_gq): STAGES - 2 of them loading ahead
  -- of the one its wgmmas read. Measured (2026-12-05, A/B of the 16): gQ
  -- alone 9-15% faster with 6 or 8 at B=1 (one block an SM) and 4% at
  -- B=4,T=640, 15-30% slower at large B (fewer blocks an SM); the calls
  -- 423.3 (6) and 425.8 (8) against 418.6 us, B=1,T=853 -1.5%. So 4.
  -- (3: gq_pair's 64-row blocks, two an SM; an H200 entry at B=16,T=691.)
  t.gq_stages = 4
  -- grad_hidden and grad_qkv_weight in one launch where B*T is small (each
  -- product a wave or two of tiles, which ran one after the other): 1.8-4.4%
  -- faster on 8 of the 11 public workloads with B*T <= 4096, 2.5-3.2% slower on
  -- two, geomean -1.0% (2026-12-04, docs/benchmarks.md).
  -- pair=2 (128x256 tiles only) measured the same (geomean of those 11 254.4
  -- against 254.7 us).
  t.pair = t.tma == 1 and shape.batch * shape.seq_len <= 4096 and 1 or 0
  -- gA TMA-fed where the model rates mma.sync faster (B*T < 1152 here):
  -- 0.7% slower over those 11, 4% at B=1,T=373 and B=2,T=352.
  t.ga_tma = 0
  -- grad_hidden, where TMA-fed, reads grad_qkv (its A) as stored, truncated
  -- to TF32 by the tensor cores, instead of its producer rounding each tile
  -- in shared memory. Measured (2026-12-04, A/B of the 16): geomean 455.0 ->
  -- 446.7 us, 2.3-5.1% faster on 8 of the 9 with B*T >= 2560; the checks of the
  -- 16 and of nine awkward shapes pass with match 1.000000 and the same worst
  -- errors. Rounding grad_qkv where it is written instead (the pass's gK and
  -- gV, gQ's epilogue) was as fast but put grad_qkv_bias, the sum of those
  -- rounded values over B*T rows, up to 0.16 off (99.7% within atol): removed.
  t.gh_trunc = 1
  t.pair_kv = 0 -- the pair in one launch after gQ
  -- pair_dsm=1: the pair's K slices added across a cluster of their tile's
  -- blocks (distributed shared memory) instead of by a reduce launch after it
  -- on the chain (5-10 us at B*T < 1200, the timelines); its tiles and splits
  -- chosen for that. Measured (2026-12-05, A/B of the 16, correct in every
  -- case): geomean 428.2 against 421.3 us; -2.1% at B=1,T=373 and -1.7% at
  -- B=2,T=449, +5-9% at B=64,T=128, B=8,T=448, B=16,T=211 (more splits in
  -- clusters of 3-4). Off; explore tries it.
  t.pair_dsm = 0
  -- gs_half=1: gS through the workspace in fp16 (scaled per (b, h, 64 keys)
  -- so that it cannot overflow, templates/attention_wg.cu's gs_exponent), its
  -- write and two reads halved (3.7 GB -> 1.8 GB at B=32,T=773). Correct
  -- (test_gpu_edit, also with grad_output times 2^16), but slower: measured
  -- (2026-12-04, A/B of the 16, whole calls) geomean 427.1 against 419.5 us,
  -- faster only at B=1,T=1024 (-2.5%). Alone, the bias sums ran 16-22%
  -- faster, gQ 8-24% slower (it widens each fp16 tile in shared memory,
  -- and was not bound by its reads: 2.7 TB/s in fp32) and the pass 7-12%
  -- slower but at B=32,T=773 (its prologue's maxima, and converts; its
  -- 16-bit stores are as many as the 32-bit ones). So gS stays fp32
  -- (docs/benchmarks.md).
  t.gs_half = 0
  -- gs_round=1: the wgmma pass stores gS rounded to TF32 and gQ reads it as
  -- stored. Measured (2026-12-04, seventeenth session): gQ alone 1-11% faster
  -- (geomean of the 16: 42.8 -> 40.8 us), whole calls level (421.9 / 421.5
  -- and 421.5 / 421.5 us in two A/B runs): gQ shares the GPU with the side
  -- lanes' transposes and bias sums, and on the small calls saves under a
  -- microsecond. So gS stays as computed; explore flips it.
  t.gs_round = 0
  -- gq_tma=1: gQ's product TMA-fed and persistent (templates/grad_query_tma.cu),
  -- gq_bn rows of gS a tile. Measured (2026-12-05): correct, but gQ alone
  -- 20-75% slower than the batched wgmma kernel (4-30% with gs_round=1;
  -- faster only at B=4,T=640: 52.1 against 56.3 us), the call's geomean 456.4
  -- (440.1 with gs_round=1) against 421.3 us: its producer's warps, which
  -- transpose k and round gS for every 64x32 box, hold it. Off; explore
  -- tries it with gs_round=1.
  t.gq_tma = 0
  -- gs_direct=1 (B = 1): gS written by the pass straight into
  -- grad_edit_region_bias, which it is there, instead of into the workspace
  -- and copied (67 MB read and 67 MB written at T = 1024, on the side lane
  -- that ends some B = 1 calls). Measured (2026-12-05, A/B of the 16, all
  -- its GPU cases pass): B=1,T=1024 235.6 -> 221.4 us (-6.0%), B=1,T=853
  -- 204.0 -> 198.8 (-2.5%), B=1,T=373 102.6 -> 101.0 (-1.6%). On: it
  -- applies at B = 1 only (the plans of B > 1 are unchanged).
  t.gs_direct = 1
  -- splitk_red=1: a split TMA-fed product (grad_hidden at small B*T,
  -- grad_out_weight and grad_qkv_weight at large) adds its K slices into its
  -- output with float atomics, zeroed by a launch before it, instead of
  -- writing them apart for a reduce launch; 2: the tile model's splits
  -- costed for that. Expected: the reduce gone from the end of the chain
  -- (5-10 us at B <= 2, the timelines) and at large B the slices' DRAM
  -- traffic, about 2% off the geomean. Measured (2026-12-05, two A/Bs of the
  -- 16, every GPU case passing): 417.7 (1) and 423.5 (2) against 421.1 us,
  -- then 417.4 (1) against 418.6; -2 to -3% at B=16,T=176, B=8,T=448,
  -- B=1,T=853, +2.5 to +3.7% at B=1,T=373 and B=1,T=1024 in both, the rest
  -- inside the noise. Not worth the outputs' last bits varying from run to
  -- run: off (the same bits every run); explore tries it.
  t.splitk_red = 0
  -- ga_rowdot=1: gA, where TMA-fed and unsplit, makes the attention pass's
  -- row dots from its accumulators (attention_output brought by its TMA warp),
  -- so no rowdot launch reads gA back on the chain (the same bits of D).
  -- Measured (2026-12-05, two A/Bs of the 16): 415.3 and 413.0 us against
  -- 419.7 and 417.1; -1 to -4% on seven of the nine workloads it changes,
  -- level on two; gA alone 5-10% longer (an L2 prefetch of attention_output
  -- at the start did not shorten it).
  t.ga_rowdot = 1
  -- gh_bias=1: the edit-bias sums made by grad_hidden's idle producer warps
  -- beside its tiles (where it is TMA-fed with A as stored, alone or in one
  -- pair launch) instead of by bias_grads after the pass (the same bits).
  -- Measured (2026-12-05, twenty-fourth session, an H100): correct, but the
  -- calls 19% slower in geomean, 2.7x at B=2,T=768 (three warps a block of
  -- grad_hidden's few blocks read gS far slower than bias_grads' whole GPU):
  -- off, and not among explore's candidates.
  t.gh_bias = 0
  -- mc=2: the TMA-fed products in clusters of two blocks along M, B's tile
  -- multicast by the TMA to both (L2 read once for two). Measured (same
  -- run): correct, but gA alone 68% slower at B=64,T=128 and B=32,T=293 (level
  -- at B = 2), the calls 28% slower in geomean: off, not among the candidates.
  t.mc = 1
  -- gA's tiles and K split: the model's. Forced ones (A/B of the seven calls
  -- with B*T <= 1536, 2026-12-05, an H100): none faster by more than 1.5%.
  t.ga_bm, t.ga_bn, t.ga_split = 0, 0, 0
  -- gA's K slices (mma.sync) added by a reduce launch. ga_dsm=1 (across a
  -- cluster) is correct on the GPU and 3 us shorter alone at B=1,T=373, but
  -- no call was faster by more than 1.2%, three 1-5% slower: off.
  t.ga_dsm = 0
  -- att_wc=1 (B = 1, gs_direct): the within/cross sums made by the attention
  -- pass on wgmma, one pair a key block, instead of by bias_grads reading gS
  -- (67 MB at T = 1024) back beside gQ and the pair; the columns past the
  -- pass's last key block then zeroed at the start. Measured (2026-12-05, an
  -- H100, the H200 plans, A/B of four rounds): B=1,T=373 110.8 -> 103.6 us
  -- (-6.5%), B=1,T=1024 252.1 -> 247.7 (-1.7%), B=1,T=853 220.5 -> 216.7
  -- (-1.7%); every B = 1 GPU case passes with it. On at B = 1 (elsewhere it
  -- changes nothing).
  t.att_wc = shape.batch == 1 and 1 or 0
  -- gq_red=1: the edit-bias sums over the batch made by gQ on wgmma, which
  -- adds each gS tile it reads into grad_edit_region_bias by float
  -- reductions (its blocks head by head, so that the rows it adds into stay
  -- in L2), the within/cross sums by the pass: no bias_grads launch reading
  -- gS back (1.22 GB at B=32,T=773); gq_red=2: gQ adds batch rows 1.. over
  -- row 0's gS, which the pass stores into the output, so that gQ waits on
  -- no zeroing. Measured (2026-12-05, thirty-first session, an H100, A/B of
  -- the 16 twice): -2.5 to -4.6% on the four DRAM-bound calls (B = 64,
  -- B=16,T=691, B=32,T=773), 3-13% slower at B = 2 to 16 on medium T (gQ,
  -- on the chain, 40-90% longer by the reductions). Off by default (H100
  -- table entries); the output's last bits vary from run to run.
  t.gq_red = 0
  -- gq_pair=1: gq_red's blocks take two batch rows, whose gS tiles they sum
  -- before one reduction. Measured (2026-12-05, thirty-second session, an
  -- H100, A/B of the 16 twice): gQ alone about half of gq_red's extra time
  -- at B=32,T=293 (107.0 -> 147.0 us with gq_red=1, 126.2 with both); whole
  -- calls -1 to -6% against gq_red alone at B=16,T=211, B=32,T=773 and
  -- B = 2 to 8 (where both still lose to no gq_red), +2 to +4% at
  -- B=64,T=256 and B=16,T=691. Off, as gq_red is; H100 table entries.
  t.gq_pair = 0
  -- att_items: the pass of two key blocks a block (att_kb=2) takes that many
  -- (pair, head) items a block one after another, each next item's loads
  -- beside the last step of the one before (0: as lua/edit_attention_plan.lua's
  -- attention_items models it). 1 until measured.
  t.att_items = 1
  t.side_start = 0 -- the side lanes after gA: mixed per workload (docs/lua-api.md; lua/tuning_h200.lua sets it on six)
  -- A device with less shared memory: no ring, then smaller key blocks, else the first sequence.
  local limit = smem_limit(arch)
  local function fits() return attention_smem(t.bj, 1, t.p_stages) + 8 * t.bj + 32 <= limit end
  if not fits() then t.p_stages = 0 end
  if not fits() then t.bj = 32 end
  if not fits() then t.fused, t.kv_split, t.p_stages = 0, 0, 0 end
  return t
end

-- The tile keys that take one of a few values, in the order they are
-- checked, each with what its values mean (the message of a bad one).
local CHOICES = {
  { "precision", { 0, 1, 2 }, "tf32, exact fp32, fp16 operands" },
  { "col_split", { COL_SPLIT }, "the bias column sums' row slices, fixed" },
  { "fused", { 0, 1 }, "one pass over P and Pd, or the first sequence" },
  { "bj", { 32, 64 }, "keys per attention block" },
  { "gs_store", { 0, 1 }, "gS through the workspace, or float atomics inside the pass" },
  { "wg", { 0, 1 }, "the products on wgmma where the model says so" },
  { "kv_split", { 0, 1 }, "gV and gK on separate warps" },
  { "p_stages", { 0, 2, 3 }, "P and Pd through registers, or a ring of 2 or 3 buffers in shared memory" },
  { "pdl", { 0, 1, 2 }, "none, placed as the kernel ahead ends, or placed early" },
  { "a_smem", { 0, 1 }, "wgmma's A from registers or from shared memory" },
  { "wg_gq", { 0, 1 }, "gQ on wgmma where wg=1 and gs_store=1" },
  { "wg_att", { 0, 1 }, "the attention pass on wgmma where wg=1, gs_store=1, bj=64 and p_stages=2" },
  { "zero_early", { 0, 1 }, "grad_edit_region_bias's rows past T written at the start, where gs_store=1" },
  { "tma", { 0, 1 }, "the wgmma products fed by the TMA, where wg=1" },
  { "tr_vec", { 0, 1 }, "the transposes of B with 16-byte loads and stores, where wg=1" },
  { "att_tma", { 0, 1 }, "P and Pd copied by the TMA in the attention pass on wgmma, where wg_att=1" },
  { "lane0", { 0, 1 }, "lane 0 on a stream of ours of the greatest priority, or on the caller's stream" },
  { "lane_pri", { 0, 1, 2 }, "lane 2's priority, grad_qkv_weight's: level with lane 1, halfway, the greatest" },
  { "gq_bn", { 64, 128 }, "rows of gS a block of gQ on wgmma takes" },
  { "gq_stages", { 3, 4, 6, 8 }, "k tiles in shared memory for gQ on wgmma (that many less 2 load ahead; 3 with "
                               .. "gq_pair=1 and gq_bn=64: two blocks an SM)" },
  { "p_issuer", { 0, 1 }, "with att_tma=1, P and Pd asked of the TMA by the thread that asks for the rows, "
                          .. "or by another warp's" },
  { "gemm_bias", { 0, 1, 2 }, "the bias gradients' column sums in a pass of their own, inside the TMA-fed TA "
                              .. "products where their K is split or they are paired, or inside them always" },
  { "gs_pad", { 4, 8, 32 }, "gS rows padded to a multiple of that many floats: 16, 32 or 128 bytes" },
  { "pair", { 0, 1, 2 }, "grad_hidden and grad_qkv_weight in one launch of TMA-fed blocks, where tma=1 "
                         .. "(2: 128x256 tiles only)" },
  { "ga_tma", { 0, 1, 2 }, "gA TMA-fed where the model rates it faster than mma.sync, wherever tma=1, or "
                         .. "wherever tma=1 as gA^T with grad_output read as it lies (no transpose of out_weight)" },
  { "gh_trunc", { 0, 1 }, "grad_hidden's TMA producer rounds its A (grad_qkv) to TF32, or the tensor cores "
                          .. "truncate it" },
  { "side_start", { 0, 1, 2 }, "the side lanes start with the call, once gA is done, or once gA's B is "
                               .. "transposed (where it is)" },
  { "att_kb", { 1, 2, 3 }, "key blocks a block of the attention pass on wgmma: one, its rows split between the "
                           .. "two warpgroups, two, one a warpgroup, their rows staged once, or (3) blocks of two "
                           .. "and, for a head's odd last key block and where they fill the last wave, of one" },
  { "pair_kv", { 0, 1 }, "the pair in one launch after gQ, or its k and v parts beside gQ and its q part after, "
                         .. "where pair > 0" },
  { "gs_half", { 0, 1 }, "gS in the workspace as fp32, or as fp16 times a power of two per (b, h, 64 keys), "
                         .. "where the attention pass and gQ run on wgmma" },
  { "pair_dsm", { 0, 1 }, "the pair's K slices added by a reduce launch, or across the cluster of their tile's "
                         .. "blocks, where pair > 0 and pair_kv = 0" },
  { "gs_direct", { 0, 1 }, "gS in the workspace, or (B = 1) straight into grad_edit_region_bias, where the "
                           .. "pass and gQ run on wgmma and gS is fp32" },
  { "gs_round", { 0, 1 }, "gS stored as computed, gQ's product rounding it to TF32, or stored rounded by the "
                         .. "attention pass on wgmma (fp32 gS), gQ on wgmma reading it as stored" },
  { "gq_tma", { 0, 1 }, "gQ's wgmma product with every thread copying, or TMA-fed and persistent, where tma=1, "
                        .. "wg_gq=1 and gS is fp32" },
  { "ga_rowdot", { 0, 1 }, "the row dots of the attention pass by a launch of their own after gA, or by gA's "
                           .. "blocks where it is TMA-fed and unsplit" },
  { "gh_bias", { 0, 1 }, "the edit-bias sums by a launch of their own after the attention pass, or by "
                         .. "grad_hidden's producer warps beside its tiles where it is TMA-fed with A as stored "
                         .. "(alone or in one pair launch) and B > 1" },
  { "mc", { 1, 2 }, "the TMA-fed products' blocks alone, or in clusters of two along M sharing B's tile by TMA "
                  .. "multicast (not pair_kv's parts, nor clusters of K slices)" },
  { "ga_bm", { 0, 64, 128, 256 }, "gA's block rows: the model's (0), or only tiles of that many" },
  { "ga_bn", { 0, 64, 128, 256 }, "gA's block columns: the model's (0), or only tiles of that many" },
  { "ga_split", { 0, 1, 2, 3, 4, 6, 8 }, "gA's K slices: the model's (0), or that many" },
  { "att_wc", { 0, 1 }, "the edit-bias within/cross sums by the bias sums' launch, or (B = 1, gS in place) by the "
                        .. "attention pass on wgmma, with no bias_grads launch" },
  { "ga_dsm", { 0, 1 }, "gA's K slices on mma.sync added by a reduce launch, or across the cluster of their tile's "
                       .. "blocks with the row dots (sm_90)" },
  { "gq_red", { 0, 1, 2 }, "the edit-bias sums over the batch by a launch reading gS back, or by gQ's batched "
                          .. "wgmma product adding each gS tile it reads into grad_edit_region_bias by float "
                          .. "reductions (fp32 gS in the workspace), the within/cross sums by the attention pass "
                          .. "on wgmma: into the output zeroed first (1), or (2) over batch row 0's gS, which the "
                          .. "pass stores there" },
  { "gq_pair", { 0, 1 }, "gq_red's gQ blocks of one batch row, or of two (one warpgroup each), their gS tiles summed "
                        .. "before one reduction: half the reductions" },
  { "att_items", { 0, 1, 2, 3, 4, 6, 8 }, "(pair of key blocks, head) items a block of the attention pass on wgmma "
                                         .. "takes one after another where it takes two key blocks (att_kb=2): "
                                         .. "that many at most, or (0) as many as the model says" },
  { "splitk_red", { 0, 1, 2 }, "a split TMA-fed product's K slices added by a reduce launch in slice order (the "
                               .. "same bits every run), or into its zeroed output by float atomics as its blocks "
                               .. "end (2: its tiles and splits chosen for that)" },
}

-- The choices that sum some outputs by float atomics in no fixed order (the
-- plan's unordered_outputs), and the value of each that does not.
local ORDERED = { { "gs_store", 1 }, { "gq_red", 0 }, { "splitk_red", 0 } }

-- A deterministic context's tiles (lua/plan.lua): those choices set to their
-- ordered value, or refused where the caller's override named them.
function M.deterministic(t, named)
  for _, c in ipairs(ORDERED) do
    local key, value = c[1], c[2]
    if t[key] ~= value then
      if named[key] ~= nil then
        return string.format("%s=%d sums outputs by float atomics, their last bits varying from run to run; this "
                             .. "context is deterministic (options.deterministic, ATTNBWD_DETERMINISTIC=1): %s=%d",
                             key, t[key], key, value)
      end
      t[key] = value
    end
  end
end

-- "a, b or c"
local function listed(values)
  local s = tostring(values[1])
  for i = 2, #values do s = s .. (i == #values and " or " or ", ") .. tostring(values[i]) end
  return s
end

function M.validate(shape, t, arch)
  if shape.seq_len > POS then
    return string.format("T=%d: longer than the 1024 positions of edit_region_bias (not supported yet)", shape.seq_len)
  end
  for _, c in ipairs(CHOICES) do
    local key, values, meaning = c[1], c[2], c[3]
    local ok = false
    for _, v in ipairs(values) do ok = ok or t[key] == v end
    if not ok then
      return string.format("%s must be %s (%s)", key, listed(values), meaning)
    end
  end
  if t.precision ~= shape.precision then -- e.g. a tuning entry of another precision: never the wrong kernel
    return string.format("precision=%d, but the shape asks for precision %d", t.precision,
                         shape.precision)
  end
  if t.kv_split == 1 and t.fused ~= 1 then return "kv_split=1 (gV and gK on separate warps) is for fused=1" end
  if t.p_stages ~= 0 and t.fused ~= 1 then return "p_stages is for fused=1" end
  if t.pdl ~= 0 and not pdl_arch(arch) then
    return "pdl=" .. t.pdl .. " (programmatic dependent launch) needs sm_90 or newer; " .. arch .. " has none"
  end
  if t.wg == 1 and (t.precision ~= 0 or t.fused ~= 1) then
    return "wg=1 (wgmma products) is for precision 0 (tf32) with fused=1"
  end
  if t.wg == 1 and not wgmma_arch(arch) then return "wg=1 needs sm_90 (wgmma); " .. arch .. " has none" end
  if t.a_smem == 1 and t.wg ~= 1 then return "a_smem=1 (wgmma's A from shared memory) is for wg=1" end
  local n = limits.arch_number(arch)
  if n and n < 80 then
    return arch .. ": the tensor-core instructions (mma.sync m16n8k8 TF32, m16n8k16 fp16) need sm_80 or newer"
  end
  if att_on_wg(t) then
    local multi = t.att_kb == 2 and t.att_items ~= 1 and 1 or 0 -- v of two items in shared memory
    local bytes = attention_wg_smem(t.p_stages, t.att_tma, t.att_kb, multi)
    if bytes > smem_limit(arch) then
      return string.format("the attention pass on wgmma needs %d bytes of shared memory; %s allows %d",
                           bytes, arch or "sm_90", smem_limit(arch))
    end
  elseif t.fused == 1 and attention_smem(t.bj, t.gs_store, t.p_stages) + 8 * t.bj + 32 > smem_limit(arch) then
    return string.format("the attention pass needs %d bytes of shared memory; %s allows %d "
                         .. "(try bj=32, fewer p_stages or fused=0)",
                         attention_smem(t.bj, t.gs_store, t.p_stages), arch or "sm_90", smem_limit(arch))
  end
  return nil
end

-- The heuristic's choice first (explore reports the others against it), then
-- the other key-block sizes, the float-atomic variant, and the first sequence.
function M.candidates(shape)
  local render_key = render.tiles_string
  local first = M.heuristic(shape)
  local out, seen = { first }, { [render_key(first)] = true }
  local function add(t)
    if not seen[render_key(t)] then
      seen[render_key(t)] = true
      out[#out + 1] = t
    end
  end
  for _, wg in ipairs { first.wg, 0 } do
    for _, store in ipairs { 1, 0 } do
      for _, bj in ipairs { 32, 64 } do
        local t = M.heuristic(shape)
        t.bj, t.gs_store, t.wg = bj, store, wg
        add(t)
      end
    end
  end
  for _, bj in ipairs { 32, 64 } do -- gV and gK on every warp (the default before 2026-12-03)
    local t = M.heuristic(shape)
    t.bj, t.kv_split = bj, 0
    add(t)
  end
  for _, stages in ipairs { 0, 2, 3 } do -- P and Pd through a ring in shared memory
    for _, bj in ipairs { 32, 64 } do
      local t = M.heuristic(shape)
      t.bj, t.p_stages = bj, stages
      if not M.validate(shape, t) then add(t) end
    end
  end
  if first.wg == 1 then -- wgmma's A (stored [M, K]) from registers or from shared memory; gQ on mma.sync
    local t = M.heuristic(shape)
    t.wg_att = 0 -- the attention pass on mma.sync
    add(t)
    t = M.heuristic(shape)
    t.a_smem = 1 - t.a_smem
    add(t)
    t = M.heuristic(shape)
    t.wg_gq = 0
    add(t)
    t = M.heuristic(shape)
    t.gq_bn = 192 - t.gq_bn -- gQ's blocks of 64 or 128 rows
    add(t)
    for _, stages in ipairs { 6, 8 } do -- gQ's k tiles loading ahead
      t = M.heuristic(shape)
      t.gq_stages = stages
      add(t)
    end
    t = M.heuristic(shape)
    t.tma = 0 -- the wgmma products with every thread copying (templates/gemm_wg.cu)
    add(t)
    t = M.heuristic(shape)
    t.tr_vec = 1 - t.tr_vec -- the transposes of B with 16-byte or 4-byte accesses
    add(t)
    t = M.heuristic(shape)
    t.att_tma = 1 - t.att_tma -- P and Pd by the TMA, or by every thread of the attention pass (cp.async)
    add(t)
    t = M.heuristic(shape)
    t.att_kb = 3 - t.att_kb -- one or two key blocks a block of the attention pass
    add(t)
    t = M.heuristic(shape)
    t.att_kb = 3 -- blocks of two key blocks and of one
    add(t)
    t = M.heuristic(shape)
    t.gs_half = 1 - t.gs_half -- gS through the workspace in fp32 or fp16
    add(t)
    if first.att_tma == 1 then
      t = M.heuristic(shape)
      t.p_issuer = 1 - t.p_issuer -- P's copies asked for beside the rows', by another warp
      add(t)
    end
  end
  local late = M.heuristic(shape) -- all of grad_edit_region_bias written after the attention pass
  late.zero_early = 0
  add(late)
  for _, level in ipairs { 0, 1, 2 } do -- lane 2's priority
    local pri = M.heuristic(shape)
    pri.lane_pri = level
    add(pri)
  end
  for _, pad in ipairs { 4, 8, 32 } do -- gS rows on 16-, 32- or 128-byte boundaries
    local t = M.heuristic(shape)
    t.gs_pad = pad
    add(t)
  end
  for _, pair in ipairs { 0, 1, 2 } do -- grad_hidden and grad_qkv_weight in one launch, or each in its own
    local t = M.heuristic(shape)
    t.pair = pair
    add(t)
  end
  local ga = M.heuristic(shape) -- gA on mma.sync where the model says so, or TMA-fed
  ga.ga_tma = 1 - ga.ga_tma
  add(ga)
  local side = M.heuristic(shape) -- the side lanes after gA
  side.side_start = 1 - side.side_start
  add(side)
  for _, n in ipairs { 0, 2, 4 } do -- items a block of two key blocks, one after another
    local t = M.heuristic(shape)
    t.att_kb, t.att_items = 2, n
    add(t)
  end
  local rounded = M.heuristic(shape) -- gS stored rounded to TF32, gQ reading it as stored
  rounded.gs_round = 1
  add(rounded)
  -- Run on the H200 since (2026-12-05, all their GPU cases pass): the pair's
  -- slices added in clusters, gA as gA^T, gQ TMA-fed (with gS stored rounded,
  -- its faster form), gS in the output at B = 1 or through the workspace.
  local dsm = M.heuristic(shape)
  dsm.pair_dsm = 1 - dsm.pair_dsm
  if dsm.pair > 0 then add(dsm) end
  local gat = M.heuristic(shape)
  gat.ga_tma = 2
  add(gat)
  local gqt = M.heuristic(shape)
  gqt.gq_tma, gqt.gs_round = 1, 1
  add(gqt)
  if shape.batch == 1 then
    local ws = M.heuristic(shape)
    ws.gs_direct = 1 - ws.gs_direct
    add(ws)
    local wc = M.heuristic(shape) -- the within/cross sums by the pass or by bias_grads (run 2026-12-05)
    wc.att_wc = 1 - wc.att_wc
    add(wc)
  end
  for _, red in ipairs { 0, 1, 2 } do -- the K slices added in a fixed order, or by float atomics
    local t = M.heuristic(shape)
    t.splitk_red = red
    add(t)
  end
  if shape.batch > 1 then -- the batch's bias sums by gQ's reductions, into the zeroed output or over row 0,
    for _, red in ipairs { 1, 2 } do -- in gQ blocks of one batch row or of two
      for _, pairs in ipairs { 0, 1 } do
        local t = M.heuristic(shape)
        t.gq_red, t.gq_pair = red, pairs
        add(t)
      end
    end
  end
  -- gh_bias=1 and mc=2 are not offered: 19% and 28% slower in geomean where
  -- measured (docs/benchmarks.md, twenty-fourth session); tiles can still ask for them.
  local kv = M.heuristic(shape) -- the pair's k and v parts beside gQ (where it pairs)
  kv.pair_kv = 1 - kv.pair_kv
  if kv.pair > 0 then add(kv) end
  for _, where in ipairs { 0, 1, 2 } do -- the bias gradients' column sums: own passes, in split products, in TA products
    local t = M.heuristic(shape)
    t.gemm_bias = where
    add(t)
  end
  local serial = M.heuristic(shape) -- each kernel placed only after the one before it ends
  serial.pdl = 0
  add(serial)
  local legacy = M.heuristic(shape)
  legacy.fused, legacy.wg, legacy.kv_split, legacy.p_stages = 0, 0, 0, 0
  add(legacy)
  return out
end

function M.plan(shape, t, arch) return plans.plan(shape, t, arch) end

return M
